package statuspage

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// stage is a registry with the stage's families, as processor/metrics
// names and labels them, set by the test.
type stage struct {
	reg                                        *prometheus.Registry
	messages, falseDrops, checkpointFails      *prometheus.CounterVec
	restores                                   *prometheus.CounterVec
	position, committed, lag, elapsed, waiting *prometheus.GaugeVec
	fill, keys, fp                             *prometheus.GaugeVec
	last, base, increments, size, source       *prometheus.GaugeVec
	window, assigned, connected                prometheus.Gauge
}

func newStage() *stage {
	reg := prometheus.NewRegistry()
	pt, ptg := []string{"topic", "partition"}, []string{"topic", "partition", "generation"}
	cv := func(name string, labels ...string) *prometheus.CounterVec {
		c := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: name}, labels)
		reg.MustRegister(c)
		return c
	}
	gv := func(name string, labels ...string) *prometheus.GaugeVec {
		g := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: name}, labels)
		reg.MustRegister(g)
		return g
	}
	g := func(name string) prometheus.Gauge {
		g := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: name})
		reg.MustRegister(g)
		return g
	}
	return &stage{
		reg:             reg,
		messages:        cv("dedup_messages_total", "topic", "partition", "outcome"),
		falseDrops:      cv("dedup_expected_false_drops_total", pt...),
		checkpointFails: cv("dedup_checkpoint_failures_total", pt...),
		restores:        cv("dedup_restores_total", "source"),
		position:        gv("dedup_consumer_position", pt...),
		committed:       gv("dedup_committed_offset", pt...),
		lag:             gv("dedup_consumer_lag", pt...),
		elapsed:         gv("dedup_filter_window_elapsed_ratio", pt...),
		waiting:         gv("dedup_key_waiting", pt...),
		fill:            gv("dedup_filter_fill_ratio", ptg...),
		keys:            gv("dedup_filter_estimated_keys", ptg...),
		fp:              gv("dedup_filter_false_positive_rate", ptg...),
		last:            gv("dedup_checkpoint_last_success_timestamp_seconds", pt...),
		base:            gv("dedup_checkpoint_chain_base_timestamp_seconds", pt...),
		increments:      gv("dedup_checkpoint_chain_increments", pt...),
		size:            gv("dedup_checkpoint_size_bytes", "topic", "partition", "kind"),
		source:          gv("dedup_restore_source", "topic", "partition", "source"),
		window:          g("dedup_filter_window_seconds"),
		assigned:        g("dedup_assigned_partitions"),
		connected:       g("dedup_broker_connected"),
	}
}

// partition gives partition p of events series as a running stage has
// them, its counts scaled by n.
func (s *stage) partition(p string, n float64, now time.Time) {
	s.messages.WithLabelValues("events", p, "forwarded").Add(700 * n)
	s.messages.WithLabelValues("events", p, "duplicate").Add(250 * n)
	s.messages.WithLabelValues("events", p, "retraction").Add(20 * n)
	s.messages.WithLabelValues("events", p, "unkeyed").Add(30 * n)
	s.falseDrops.WithLabelValues("events", p).Add(0.000123 * n)
	s.checkpointFails.WithLabelValues("events", p)
	s.position.WithLabelValues("events", p).Set(1000 * n)
	s.committed.WithLabelValues("events", p).Set(990 * n)
	s.lag.WithLabelValues("events", p).Set(12)
	s.elapsed.WithLabelValues("events", p).Set(0.25)
	s.waiting.WithLabelValues("events", p).Set(0)
	for _, g := range []string{"current", "previous"} {
		s.fill.WithLabelValues("events", p, g).Set(0.0421)
		s.keys.WithLabelValues("events", p, g).Set(1234.4 * n)
		s.fp.WithLabelValues("events", p, g).Set(3.14e-9)
	}
	s.last.WithLabelValues("events", p).Set(float64(now.Add(-4*time.Second).UnixNano()) / 1e9)
	s.base.WithLabelValues("events", p).Set(float64(now.Add(-95*time.Second).UnixNano()) / 1e9)
	s.increments.WithLabelValues("events", p).Set(7)
	s.size.WithLabelValues("events", p, "stored").Set(3.5 * 1024 * 1024)
	s.size.WithLabelValues("events", p, "raw").Set(9 * 1024 * 1024)
	for _, src := range []string{"memory", "latest", "fallback", "empty"} {
		v := 0.0
		if src == "latest" {
			v = 1
		}
		s.source.WithLabelValues("events", p, src).Set(v)
	}
}

func (s *stage) running(now time.Time) *stage {
	s.partition("2", 1, now)
	s.partition("10", 3, now)
	s.window.Set(3600)
	s.assigned.Set(2)
	s.connected.Set(1)
	for _, src := range []string{"memory", "latest", "fallback", "empty"} {
		s.restores.WithLabelValues(src)
	}
	s.restores.WithLabelValues("latest").Add(2)
	return s
}

// get serves GET / from p and parses it.
func get(t *testing.T, p *Page) (*http.Response, string, dom) {
	t.Helper()
	rec := httptest.NewRecorder()
	p.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	resp := rec.Result()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /: %s\n%s", resp.Status, body)
	}
	return resp, string(body), parseDOM(t, string(body))
}

// scrapeOf is what /metrics serves from reg.
func scrapeOf(t *testing.T, reg *prometheus.Registry) scrape {
	t.Helper()
	rec := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	return parseScrape(t, rec.Body.String())
}

// TestPageShowsTheRegistry: every figure on the page is the sum of the
// series it names, as /metrics serves them from the same registry, and
// shows it as its format says; the partitions' rows come in partition
// order (2 before 10), one per partition in each table.
func TestPageShowsTheRegistry(t *testing.T) {
	now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	s := newStage().running(now)
	p := New(Options{Gatherer: s.reg, Now: func() time.Time { return now }})
	resp, _, d := get(t, p)
	if ct := resp.Header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
		t.Errorf("Content-Type %q", ct)
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("Content-Security-Policy %q does not refuse what the page does not need", csp)
	}
	for _, msg := range figureErrors(d, scrapeOf(t, s.reg)) {
		t.Error(msg)
	}
	for _, part := range []string{"2", "10"} {
		for _, what := range []string{"position", "committed", "lag", "in", "forwarded", "duplicate", "retraction", "unkeyed",
			"expected-false-drops", "window-elapsed", "current-fill", "current-keys", "current-fp", "previous-fill",
			"previous-keys", "previous-fp", "checkpoint-last", "chain-base", "chain-increments", "checkpoint-stored",
			"checkpoint-failures", "restore-source"} {
			if d.byID("p-events-"+part+"-"+what) == nil {
				t.Errorf("no figure p-events-%s-%s", part, what)
			}
		}
	}
	want := map[string]string{
		"total-in":                     "4\u202f000",
		"total-duplicate":              "1\u202f000",
		"total-dedup-rate":             "25.0%",
		"p-events-10-position":         "3000",
		"p-events-10-current-keys":     "3\u202f703",
		"p-events-2-current-fill":      "4.2%",
		"p-events-2-current-fp":        "3.14e-09",
		"p-events-2-checkpoint-last":   "4s ago",
		"p-events-2-chain-base":        "1m 35s ago",
		"p-events-2-checkpoint-stored": "3.5 MiB",
		"p-events-2-restore-source":    "latest",
		"window":                       "1h 0m",
	}
	for id, text := range want {
		if e := d.byID(id); e == nil || strings.TrimSpace(e.Text) != text {
			t.Errorf("#%s shows %q, want %q", id, textOf(e), text)
		}
	}
	for _, table := range []string{"offsets", "filters", "checkpoints"} {
		if got := firstCells(d, table); !slices.Equal(got, []string{"events / 2", "events / 10"}) {
			t.Errorf("table #%s rows %q, want events / 2 then events / 10", table, got)
		}
	}
	if e := d.byID("p-events-2-window-elapsed"); e == nil || !strings.Contains(parentText(d, e), "15m 0s in, 45m 0s to rotation") {
		t.Errorf("the window's elapsed time and time to rotation are not shown beside its share")
	}
}

func textOf(e *element) string {
	if e == nil {
		return "(none)"
	}
	return strings.TrimSpace(e.Text)
}

// parentText is the text of the element just before e that contains it
// (its table cell).
func parentText(d dom, e *element) string {
	i := slices.Index(d, e)
	for j := i - 1; j >= 0; j-- {
		if d[j].Name == "td" {
			return d[j].Text
		}
	}
	return ""
}

// firstCells are the first cells' texts of table id's body rows.
func firstCells(d dom, id string) []string {
	var out []string
	in, body := false, false
	for i, e := range d {
		switch {
		case e.Attr["id"] == id:
			in = true
		case in && e.Name == "table":
			return out
		case in && e.Name == "tbody":
			body = true
		case in && body && e.Name == "tr" && i+1 < len(d):
			out = append(out, strings.TrimSpace(d[i+1].Text))
		}
	}
	return out
}

// TestPageIsSelfContained: no script, no event handler, nothing loaded
// or linked from elsewhere: links and the form are relative, the CSS
// imports nothing; so the page works without JavaScript and offline.
func TestPageIsSelfContained(t *testing.T) {
	now := time.Now()
	s := newStage().running(now)
	p := New(Options{Gatherer: s.reg, Probe: func(*http.Request) string { return "probe" }, Readiness: func() error { return nil }})
	p.Sample(now.Add(-time.Minute))
	s.messages.WithLabelValues("events", "2", "duplicate").Add(10)
	p.Sample(now)
	_, body, d := get(t, p)
	if len(d.all("script")) > 0 || strings.Contains(strings.ToLower(body), "<script") {
		t.Error("the page has a script element")
	}
	if addr := regexp.MustCompile(`\S*://\S*`).FindString(body); addr != "" {
		t.Errorf("the page names an absolute address: %q", addr)
	}
	for _, e := range d {
		for name, v := range e.Attr {
			switch {
			case strings.HasPrefix(name, "on"):
				t.Errorf("<%s %s=%q>: an event handler", e.Name, name, v)
			case name == "src" || name == "srcset" || name == "poster" || name == "data" && e.Name == "object":
				t.Errorf("<%s %s=%q>: loads something", e.Name, name, v)
			case name == "href" || name == "action":
				if strings.Contains(v, ":") || strings.HasPrefix(v, "//") || strings.HasPrefix(v, "/") {
					t.Errorf("<%s %s=%q>: not relative to the page", e.Name, name, v)
				}
			}
		}
		if e.Name == "link" || e.Name == "iframe" || e.Name == "img" || e.Name == "embed" {
			t.Errorf("<%s>: loads something", e.Name)
		}
	}
	for _, st := range d.all("style") {
		if strings.Contains(st.Text, "url(") || strings.Contains(st.Text, "@import") {
			t.Error("the style sheet loads something")
		}
	}
	if len(d.all("svg")) != 1 || len(d.all("path")) != 1 {
		t.Errorf("want the chart as one inline svg with its line, got %d svg, %d path", len(d.all("svg")), len(d.all("path")))
	}
}

// TestPageProbeForm: the probe's form (GET with key=...) is on the page
// exactly when Options.Probe gives it an action: a path on this listener,
// or (ProbeOn) the probe's own port at the host the browser reached the
// page by, which the page's Content-Security-Policy lets the form go to.
func TestPageProbeForm(t *testing.T) {
	s := newStage().running(time.Now())
	for _, c := range []struct {
		name   string
		probe  func(*http.Request) string
		host   string
		action string
		csp    string
	}{
		{"off", nil, "", "", "form-action 'self';"},
		{"empty", func(*http.Request) string { return "" }, "", "", "form-action 'self';"},
		{"path", func(*http.Request) string { return "probe" }, "", "probe", "form-action 'self';"},
		{"any interface", ProbeOn(":9465"), "stage.example:9464", "http://stage.example:9465/probe", "form-action 'self' http://stage.example:9465;"},
		{"loopback", ProbeOn("127.0.0.1:9465"), "localhost:9464", "http://localhost:9465/probe", "form-action 'self' http://localhost:9465;"},
		{"ipv6", ProbeOn("[::1]:9465"), "[::1]:9464", "http://[::1]:9465/probe", "form-action 'self' http://[::1]:9465;"},
	} {
		t.Run(c.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			req := httptest.NewRequest(http.MethodGet, "/", nil)
			if c.host != "" {
				req.Host = c.host
			}
			New(Options{Gatherer: s.reg, Probe: c.probe}).ServeHTTP(rec, req)
			d := parseDOM(t, rec.Body.String())
			if csp := rec.Header().Get("Content-Security-Policy"); !strings.Contains(csp, c.csp) {
				t.Errorf("Content-Security-Policy %q, want %q", csp, c.csp)
			}
			form := d.byID("probe-form")
			if c.action == "" {
				if form != nil || len(d.all("form")) > 0 {
					t.Error("a probe form without a probe")
				}
				return
			}
			if form == nil {
				t.Fatal("no probe form")
			}
			if form.Attr["method"] != "get" || form.Attr["action"] != c.action {
				t.Errorf("form %v, want method get, action %s", form.Attr, c.action)
			}
			inputs := d.all("input")
			if len(inputs) != 1 || inputs[0].Attr["name"] != "key" {
				t.Errorf("form inputs %v, want one named key", inputs)
			}
		})
	}
	if ProbeOn("") != nil {
		t.Error("ProbeOn of no address gives a form")
	}
	// A composite DEDUP_KEY: one field per source, named part, in order,
	// each labelled with its source.
	rec := httptest.NewRecorder()
	New(Options{Gatherer: s.reg, Probe: func(*http.Request) string { return "probe" }, KeyParts: []string{"header:tenant", "json:id"}}).
		ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/", nil))
	d := parseDOM(t, rec.Body.String())
	inputs := d.all("input")
	if len(inputs) != 2 || inputs[0].Attr["name"] != "part" || inputs[1].Attr["name"] != "part" {
		t.Fatalf("form inputs %v, want two named part", inputs)
	}
	for i, want := range []string{"header:tenant", "json:id"} {
		label := d.all("label")[i]
		if label.Attr["for"] != inputs[i].Attr["id"] || strings.TrimSpace(label.Text) != want {
			t.Errorf("field %d labelled %q for %q, want %q for %q", i, label.Text, label.Attr["for"], want, inputs[i].Attr["id"])
		}
	}
}

// TestPageReadiness: the page says what /readyz says, its reason too;
// without a Readiness it says nothing of it.
func TestPageReadiness(t *testing.T) {
	s := newStage().running(time.Now())
	for _, c := range []struct {
		err  error
		want string
	}{{nil, "ready"}, {errors.New("partitions restoring: events/2"), "not ready: partitions restoring: events/2"}} {
		_, _, d := get(t, New(Options{Gatherer: s.reg, Readiness: func() error { return c.err }}))
		if got := textOf(d.byID("readiness")); got != c.want {
			t.Errorf("readiness shows %q, want %q", got, c.want)
		}
	}
	if _, _, d := get(t, New(Options{Gatherer: s.reg})); d.byID("readiness") != nil {
		t.Error("readiness shown without a Readiness")
	}
}

// TestPageNoPartitions: a member holding no partition says so, and
// shows no partition table.
func TestPageNoPartitions(t *testing.T) {
	s := newStage()
	s.assigned.Set(0)
	_, _, d := get(t, New(Options{Gatherer: s.reg}))
	if d.byID("no-partitions") == nil || d.byID("offsets") != nil {
		t.Error("want the no-partition note instead of the tables")
	}
	if got := textOf(d.byID("total-in")); got != "—" {
		t.Errorf("records read %q with no series, want —", got)
	}
}

// TestChart: each point is a step between two samples, at the later
// one's time, its rate the share of the step's records dropped as
// duplicates; a step without records or with counters gone down (a
// partition moved away) is a gap; samples older than the span are
// dropped; before two samples the chart says it is collecting.
func TestChart(t *testing.T) {
	s := newStage()
	t0 := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	clock := t0
	p := New(Options{Gatherer: s.reg, Every: 10 * time.Second, Span: time.Minute, Now: func() time.Time { return clock }})
	_, _, d := get(t, p)
	if e := d.byID("rate-empty"); e == nil || !strings.HasPrefix(e.Text, "Collecting samples") {
		t.Errorf("before any sample: %q, want Collecting samples", textOf(e))
	}
	fwd, dup := s.messages.WithLabelValues("events", "0", "forwarded"), s.messages.WithLabelValues("events", "0", "duplicate")
	steps := []struct{ fwd, dup float64 }{
		{0, 0},             // the first sample
		{30, 10}, {30, 10}, // 25%
		{0, 0},   // no records: a gap
		{40, 60}, // 60%
		{16, 4},  // 20%
		{-1, -1}, // the partition moved away: a gap
		{8, 2},   // 20%
	}
	for i, st := range steps {
		clock = t0.Add(time.Duration(i) * 10 * time.Second)
		if st.fwd < 0 {
			s.messages.DeleteLabelValues("events", "0", "forwarded")
			s.messages.DeleteLabelValues("events", "0", "duplicate")
			fwd, dup = s.messages.WithLabelValues("events", "0", "forwarded"), s.messages.WithLabelValues("events", "0", "duplicate")
		} else {
			fwd.Add(st.fwd)
			dup.Add(st.dup)
		}
		p.Sample(clock)
	}
	_, _, d = get(t, p)
	// The span is a minute: the sample at 0 s is dropped (the ring keeps
	// 7), the first step kept ends at 20 s.
	var rates []string
	for _, c := range d.all("circle") {
		rates = append(rates, c.Attr["data-rate"])
	}
	if want := []string{"0.25", "0.6", "0.2", "0.2"}; !slices.Equal(rates, want) {
		t.Errorf("points %q, want %q", rates, want)
	}
	line := d.byID("rate-line").Attr["d"]
	if n := strings.Count(line, "M"); n != 3 {
		t.Errorf("line %q has %d runs, want 3 (gaps for the empty step and the moved partition)", line, n)
	}
	if got := textOf(d.byID("rate-latest")); got != "20.0%" {
		t.Errorf("newest step %q, want 20.0%%", got)
	}
	// The newest point at now is at the right edge, the scale tops at 60%.
	last := d.all("circle")[3]
	if last.Attr["cx"] != coord(plotR) || last.Attr["data-at"] != clock.Format(time.RFC3339) {
		t.Errorf("newest point at x %s, %s; want %s (now), %s", last.Attr["cx"], last.Attr["data-at"], coord(plotR), clock.Format(time.RFC3339))
	}
	if !strings.Contains(body(d), "60.0%") || strings.Contains(body(d), "80.0%") {
		t.Error("the rate scale does not top at 60.0% for a 60% step")
	}
}

func body(d dom) string {
	if len(d) == 0 {
		return ""
	}
	return d[0].Text
}

func TestFormats(t *testing.T) {
	now := time.Unix(100000, 0)
	for _, c := range []struct {
		v      float64
		format string
		want   string
	}{
		{0, formatCount, "0"}, {999, formatCount, "999"}, {1000, formatCount, "1\u202f000"}, {1234567.4, formatCount, "1\u202f234\u202f567"},
		{1234567, formatOffset, "1234567"}, {0.4216, formatPercent, "42.2%"}, {1, formatPercent, "100.0%"},
		{3.14159e-7, formatFloat, "3.14e-07"}, {0, formatFloat, "0"}, {512, formatBytes, "512 B"}, {1536, formatBytes, "1.5 KiB"},
		{0, formatAge, "never"}, {99990, formatAge, "10s ago"}, {100000 - 3*3600 - 120, formatAge, "3h 2m ago"},
		{3600, formatSpan, "1h 0m"}, {90, formatSpan, "1m 30s"},
	} {
		if got := show(c.v, c.format, now); got != c.want {
			t.Errorf("show(%v, %s) = %q, want %q", c.v, c.format, got, c.want)
		}
	}
}
