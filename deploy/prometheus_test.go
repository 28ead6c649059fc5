package deploy_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"gopkg.in/yaml.v3"

	"dedup/deploy/k8scheck"
	"dedup/internal/testkit"
)

// TestPrometheusAgainstBinary runs the real binary (embedded broker) and the
// real Prometheus with the shipped scrape config and alert rules, then
// evaluates every dashboard query and alert expression through Prometheus's
// HTTP API. It fails on an expression that does not parse, on a series name
// (with its label matchers) that the binary does not expose, on a dashboard
// query that returns nothing, and on a rule Prometheus cannot evaluate.
func TestPrometheusAgainstBinary(t *testing.T) {
	promBin, err := exec.LookPath("prometheus")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("prometheus not found (CI installs Debian's prometheus package): %v", err)
		}
		t.Skipf("prometheus not found (apt-get install prometheus): %v", err)
	}
	if testing.Short() {
		t.Skip("starts the binary and Prometheus")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	tmp := t.TempDir()
	vars := configVarSet(t)

	bin, err := testkit.BuildBinary(tmp)
	if err != nil {
		t.Fatal(err)
	}

	brokerAddr, metricsAddr, promAddr := testkit.FreeAddr(t), testkit.FreeAddr(t), testkit.FreeAddr(t)
	const inputTopic, partitions = "events", 3
	dedupEnv := map[string]string{
		"KAFKA_BROKERS":        "",
		"EMBEDDED_BROKER_ADDR": brokerAddr,
		"EMBEDDED_PARTITIONS":  strconv.Itoa(partitions),
		"INPUT_TOPIC":          inputTopic,
		// Two hops: the re-key hop's families get series too, and every
		// other family is the same as with one hop.
		"REPARTITION_TOPIC":     inputTopic + "-by-key",
		"DATA_DIR":              filepath.Join(tmp, "data"),
		"METRICS_ADDR":          metricsAddr,
		"CHECKPOINT_INTERVAL":   "1s",
		"KAFKA_SESSION_TIMEOUT": "6s",
		"LOG_LEVEL":             "info",
	}
	for k := range dedupEnv {
		if _, ok := vars[k]; !ok {
			t.Fatalf("test sets %s, which the binary does not read", k)
		}
	}
	dedupLog := startProcess(t, "dedup", bin, nil, processEnv(vars, dedupEnv))
	waitFor(ctx, t, "dedup /healthz", dedupLog, func() error { return httpOK("http://" + metricsAddr + "/healthz") })

	if cmdStringLiterals(t)["healthcheck"] {
		t.Run("healthcheck subcommand", func(t *testing.T) {
			hc := exec.CommandContext(ctx, bin, "healthcheck")
			hc.Env = processEnv(vars, map[string]string{"METRICS_ADDR": metricsAddr})
			if out, err := hc.CombinedOutput(); err != nil {
				t.Errorf("dedup healthcheck against a healthy binary: %v\n%s", err, out)
			}
			hc = exec.CommandContext(ctx, bin, "healthcheck")
			hc.Env = processEnv(vars, map[string]string{"METRICS_ADDR": testkit.FreeAddr(t)})
			if err := hc.Run(); err == nil {
				t.Errorf("dedup healthcheck against a closed port succeeded")
			}
		})
	}

	// Prometheus with the shipped config, pointed at the local binary.
	promDir := filepath.Join(tmp, "prometheus")
	if err := os.MkdirAll(promDir, 0o755); err != nil {
		t.Fatal(err)
	}
	promCfg := filepath.Join(promDir, "prometheus.yml")
	writeLocalPromConfig(t, promCfg, metricsAddr, promAddr)
	promLog := startProcess(t, "prometheus", promBin, []string{
		"--config.file=" + promCfg,
		"--storage.tsdb.path=" + filepath.Join(promDir, "data"),
		"--web.listen-address=" + promAddr,
		"--log.level=warn",
	}, os.Environ())
	prom := promAPI{base: "http://" + promAddr}
	waitFor(ctx, t, "prometheus /-/ready", promLog, func() error { return httpOK(prom.base + "/-/ready") })

	// Traffic on every partition: first occurrences, duplicates, a retraction
	// and an unkeyed record, so that every outcome's series exists.
	produced := produce(ctx, t, brokerAddr, inputTopic, partitions)
	waitFor(ctx, t, fmt.Sprintf("dedup to count %d input records", produced), dedupLog, func() error {
		n, err := countInputs("http://" + metricsAddr + "/metrics")
		if err != nil {
			return err
		}
		if n < float64(produced) {
			return fmt.Errorf("dedup_messages_total sums to %v", n)
		}
		return nil
	})
	counted := time.Now()

	// A scrape after the records were counted, and every rule evaluated after it.
	waitFor(ctx, t, "a scrape of the dedup target after the records were counted", promLog, func() error {
		return prom.targetScrapedAfter("dedup", counted)
	})
	rules := loadRules(t)
	waitFor(ctx, t, "every alert rule evaluated by Prometheus", promLog, func() error {
		return prom.rulesEvaluatedAfter(rules, counted)
	})

	exposed := prom.labelValues(t, "__name__")
	t.Logf("the binary exposes %d series names", len(exposed))

	// The exposition itself passes promtool's lint (names, units, help,
	// counters ending in _total), every family with series by now.
	t.Run("promtool check metrics", func(t *testing.T) {
		_, text, err := testkit.Get("http://" + metricsAddr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		lint := exec.CommandContext(ctx, promtool(t), "check", "metrics")
		lint.Stdin = strings.NewReader(text)
		if out, err := lint.CombinedOutput(); err != nil || len(out) > 0 {
			t.Errorf("promtool check metrics: %v\n%s", err, out)
		}
	})

	// Every alert expression: parses, evaluates, names only exposed series.
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			name := r.Alert + r.Record
			t.Run("alert "+name, func(t *testing.T) {
				if _, err := prom.query(r.Expr); err != nil {
					t.Fatalf("%s: %v\nexpr: %s", name, err, r.Expr)
				}
				prom.checkSelectors(t, r.Expr, exposed)
			})
		}
	}

	// Every dashboard query, with Grafana's variables replaced: parses,
	// names only exposed series, and returns data.
	d := loadDashboard(t)
	for _, p := range allPanels(d.Panels) {
		for _, tg := range p.Targets {
			name := fmt.Sprintf("panel %s/%s", p.Title, tg.RefID)
			t.Run(name, func(t *testing.T) {
				expr, err := grafanaExpand(tg.Expr)
				if err != nil {
					t.Fatal(err)
				}
				prom.checkSelectors(t, expr, exposed)
				if t.Failed() {
					return // no data to wait for
				}
				err = pollUntil(ctx, 30*time.Second, func() error {
					n, err := prom.query(expr)
					if err != nil {
						return backoffStop{err}
					}
					if n == 0 {
						return fmt.Errorf("no data")
					}
					return nil
				})
				if err != nil {
					t.Errorf("%v\nexpr: %s", err, expr)
				}
			})
		}
	}
	// Template variables: label_values(selector, label).
	labelValuesRE := regexp.MustCompile(`^label_values\((.*),\s*([a-zA-Z_][a-zA-Z0-9_]*)\)$`)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		q := fmt.Sprint(v.Query)
		if m, ok := v.Query.(map[string]any); ok {
			q = fmt.Sprint(m["query"])
		}
		t.Run("variable "+v.Name, func(t *testing.T) {
			m := labelValuesRE.FindStringSubmatch(q)
			if m == nil {
				t.Fatalf("variable %s: query %q: want label_values(selector, label)", v.Name, q)
			}
			sel, err := grafanaExpand(m[1])
			if err != nil {
				t.Fatal(err)
			}
			series := prom.series(t, sel)
			if len(series) == 0 {
				t.Fatalf("variable %s: no series match %s", v.Name, sel)
			}
			if series[0][m[2]] == "" {
				t.Errorf("variable %s: series %v have no label %s", v.Name, series[0], m[2])
			}
		})
	}
}

// grafanaVars are concrete values for the variables the dashboard uses.
var grafanaVars = map[string]string{
	"job":             "dedup",
	"topic":           ".*",
	"partition":       ".*",
	"instance":        ".*",
	"__rate_interval": "1m",
	"__interval":      "15s",
	"__range":         "5m",
}

var grafanaVarRE = regexp.MustCompile(`\$\{?([A-Za-z_][A-Za-z0-9_]*)(?::[a-z]+)?\}?`)

func grafanaExpand(expr string) (string, error) {
	var unknown []string
	out := grafanaVarRE.ReplaceAllStringFunc(expr, func(m string) string {
		name := grafanaVarRE.FindStringSubmatch(m)[1]
		v, ok := grafanaVars[name]
		if !ok {
			unknown = append(unknown, m)
		}
		return v
	})
	if len(unknown) > 0 {
		return "", fmt.Errorf("unknown Grafana variables %v in %q", unknown, expr)
	}
	return out, nil
}

// ---------------------------------------------------------------------------
// Series names in a PromQL expression.

var groupingKeywords = map[string]bool{"by": true, "without": true, "on": true, "ignoring": true, "group_left": true, "group_right": true}
var aggregators = map[string]bool{"sum": true, "min": true, "max": true, "avg": true, "group": true, "stddev": true, "stdvar": true,
	"count": true, "count_values": true, "bottomk": true, "topk": true, "quantile": true, "limitk": true, "limit_ratio": true}
var otherKeywords = map[string]bool{"bool": true, "and": true, "or": true, "unless": true, "offset": true, "atan2": true, "inf": true, "nan": true}

// selectors returns the vector selectors of a PromQL expression, each as
// written (name with its {matchers}, if any). It is a lexer, not a parser:
// Prometheus itself judges the syntax; this finds what the expression reads.
func selectors(expr string) []string {
	var out []string
	s := expr
	i := 0
	skipTo := func(open, close byte) { // s[i] == open; leaves i after the matching close
		depth := 0
		for i < len(s) {
			switch c := s[i]; {
			case c == '"' || c == '\'' || c == '`':
				skipString(s, &i)
				continue
			case c == open:
				depth++
			case c == close:
				depth--
				if depth == 0 {
					i++
					return
				}
			}
			i++
		}
	}
	for i < len(s) {
		c := s[i]
		switch {
		case c == '"' || c == '\'' || c == '`':
			skipString(s, &i)
		case c == '#':
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case c == '[':
			skipTo('[', ']')
		case c == '{':
			start := i
			skipTo('{', '}')
			out = append(out, s[start:i])
		case c >= '0' && c <= '9' || c == '.':
			for i < len(s) && (isIdent(s[i]) || s[i] == '.') {
				i++
			}
		case isIdentStart(c):
			start := i
			for i < len(s) && isIdent(s[i]) {
				i++
			}
			ident := s[start:i]
			j := i
			for j < len(s) && (s[j] == ' ' || s[j] == '\t' || s[j] == '\n' || s[j] == '\r') {
				j++
			}
			switch {
			case groupingKeywords[ident] && j < len(s) && s[j] == '(':
				i = j
				skipTo('(', ')')
			case j < len(s) && s[j] == '(': // a function or aggregation
				i = j
			case aggregators[ident] && (strings.HasPrefix(s[j:], "by") || strings.HasPrefix(s[j:], "without")): // sum by (x) (...)
			case otherKeywords[strings.ToLower(ident)]:
			case j < len(s) && s[j] == '{':
				i = j
				skipTo('{', '}')
				out = append(out, ident+s[j:i])
			default:
				out = append(out, ident)
			}
		default:
			i++
		}
	}
	return out
}

func skipString(s string, i *int) {
	q := s[*i]
	*i++
	for *i < len(s) {
		switch s[*i] {
		case '\\':
			if q != '`' {
				*i++
			}
		case q:
			*i++
			return
		}
		*i++
	}
}

func isIdentStart(c byte) bool {
	return c == '_' || c == ':' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func isIdent(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' }

func metricName(selector string) string {
	name, _, _ := strings.Cut(selector, "{")
	return name
}

func TestSelectors(t *testing.T) {
	for _, tc := range []struct {
		expr string
		want []string
	}{
		{`up{job="dedup"} == 0`, []string{`up{job="dedup"}`}},
		{`sum by (topic, partition) (rate(dedup_messages_total{outcome="duplicate"}[5m])) / sum without (le) (rate(dedup_messages_total[5m]))`,
			[]string{`dedup_messages_total{outcome="duplicate"}`, `dedup_messages_total`}},
		{`histogram_quantile(0.99, sum by (le) (rate(dedup_end_to_end_latency_seconds_bucket[1m])))`, []string{`dedup_end_to_end_latency_seconds_bucket`}},
		{`a > on (instance, job) group_left () b and ignoring (generation) c{x="}{"} > 0.25 offset 5m`, []string{`a`, `b`, `c{x="}{"}`}},
		{`time() - x{y=~"a|b"} > 300 or vector(1) unless bool z # comment with_name`, []string{`x{y=~"a|b"}`, `z`}},
		{`max(foo) by (bar) * 1e-3 + count_values("value", baz)`, []string{`foo`, `baz`}},
		{`{__name__="up"}`, []string{`{__name__="up"}`}},
	} {
		if got := selectors(tc.expr); !slices.Equal(got, tc.want) {
			t.Errorf("selectors(%q) = %q, want %q", tc.expr, got, tc.want)
		}
	}
}

// ---------------------------------------------------------------------------
// Prometheus HTTP API.

type promAPI struct {
	base string
}

type apiResponse struct {
	Status    string          `json:"status"`
	ErrorType string          `json:"errorType"`
	Error     string          `json:"error"`
	Data      json.RawMessage `json:"data"`
}

func (p promAPI) get(path string, params url.Values) (json.RawMessage, error) {
	resp, err := http.Get(p.base + path + "?" + params.Encode())
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	var r apiResponse
	if err := json.Unmarshal(body, &r); err != nil {
		return nil, fmt.Errorf("%s: HTTP %d: %s", path, resp.StatusCode, body)
	}
	if r.Status != "success" {
		return nil, fmt.Errorf("%s: %s: %s", path, r.ErrorType, r.Error)
	}
	return r.Data, nil
}

// query evaluates expr now and returns the number of result samples.
func (p promAPI) query(expr string) (int, error) {
	data, err := p.get("/api/v1/query", url.Values{"query": {expr}})
	if err != nil {
		return 0, err
	}
	var res struct {
		ResultType string          `json:"resultType"`
		Result     json.RawMessage `json:"result"`
	}
	if err := json.Unmarshal(data, &res); err != nil {
		return 0, err
	}
	if res.ResultType == "scalar" || res.ResultType == "string" {
		return 1, nil
	}
	var samples []json.RawMessage
	if err := json.Unmarshal(res.Result, &samples); err != nil {
		return 0, err
	}
	return len(samples), nil
}

func (p promAPI) series(t *testing.T, selector string) []map[string]string {
	t.Helper()
	data, err := p.get("/api/v1/series", url.Values{"match[]": {selector}, "start": {strconv.FormatInt(time.Now().Add(-time.Hour).Unix(), 10)}})
	if err != nil {
		t.Fatalf("series %s: %v", selector, err)
	}
	var out []map[string]string
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func (p promAPI) labelValues(t *testing.T, label string) map[string]bool {
	t.Helper()
	resp, err := http.Get(p.base + "/api/v1/label/" + label + "/values")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Data []string `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil {
		t.Fatal(err)
	}
	set := make(map[string]bool, len(r.Data))
	for _, v := range r.Data {
		set[v] = true
	}
	return set
}

// checkSelectors fails the test for every selector in expr whose metric
// Prometheus never scraped, or whose label matchers select nothing.
func (p promAPI) checkSelectors(t *testing.T, expr string, exposed map[string]bool) {
	t.Helper()
	sels := selectors(expr)
	if len(sels) == 0 {
		t.Errorf("no series selector found in %q", expr)
	}
	for _, sel := range sels {
		if name := metricName(sel); name != "" && !exposed[name] {
			t.Errorf("%s: the binary does not expose %s", sel, name)
			continue
		}
		if len(p.series(t, sel)) == 0 {
			t.Errorf("%s: no series of the binary match these labels", sel)
		}
	}
}

func (p promAPI) targetScrapedAfter(job string, after time.Time) error {
	data, err := p.get("/api/v1/targets", url.Values{"state": {"active"}})
	if err != nil {
		return err
	}
	var res struct {
		ActiveTargets []struct {
			Labels     map[string]string `json:"labels"`
			Health     string            `json:"health"`
			LastError  string            `json:"lastError"`
			LastScrape time.Time         `json:"lastScrape"`
		} `json:"activeTargets"`
	}
	if err := json.Unmarshal(data, &res); err != nil {
		return err
	}
	for _, tg := range res.ActiveTargets {
		if tg.Labels["job"] != job {
			continue
		}
		if tg.Health != "up" || tg.LastScrape.Before(after) {
			return fmt.Errorf("target %s: health %s, last scrape %s, error %q", tg.Labels["instance"], tg.Health, tg.LastScrape, tg.LastError)
		}
		return nil
	}
	return fmt.Errorf("no active target of job %s", job)
}

func (p promAPI) rulesEvaluatedAfter(rules ruleFile, after time.Time) error {
	data, err := p.get("/api/v1/rules", nil)
	if err != nil {
		return err
	}
	var res struct {
		Groups []struct {
			Rules []struct {
				Name           string    `json:"name"`
				Health         string    `json:"health"`
				LastError      string    `json:"lastError"`
				LastEvaluation time.Time `json:"lastEvaluation"`
			} `json:"rules"`
		} `json:"groups"`
	}
	if err := json.Unmarshal(data, &res); err != nil {
		return err
	}
	seen := map[string]bool{}
	for _, g := range res.Groups {
		for _, r := range g.Rules {
			if r.Health == "err" {
				return backoffStop{fmt.Errorf("rule %s: %s", r.Name, r.LastError)}
			}
			if r.LastEvaluation.Before(after) {
				return fmt.Errorf("rule %s not evaluated since %s", r.Name, after)
			}
			seen[r.Name] = true
		}
	}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			if !seen[r.Alert+r.Record] {
				return fmt.Errorf("Prometheus has not loaded rule %s", r.Alert+r.Record)
			}
		}
	}
	return nil
}

// writeLocalPromConfig writes the shipped prometheus.yml with the dedup
// target replaced by the local binary, a 1 s scrape and evaluation interval,
// and the rule files made absolute.
func writeLocalPromConfig(t *testing.T, file, metricsAddr, promAddr string) {
	t.Helper()
	cfg := loadYAML(t, path("deploy", "prometheus", "prometheus.yml"))
	global, _ := cfg["global"].(map[string]any)
	if global == nil {
		global = map[string]any{}
		cfg["global"] = global
	}
	global["scrape_interval"], global["scrape_timeout"], global["evaluation_interval"] = "1s", "1s", "1s"
	var ruleFiles []any
	for _, rf := range cfg["rule_files"].([]any) {
		abs, err := filepath.Abs(path("deploy", "prometheus", rf.(string)))
		if err != nil {
			t.Fatal(err)
		}
		ruleFiles = append(ruleFiles, abs)
	}
	cfg["rule_files"] = ruleFiles
	replaced := false
	for _, sc := range cfg["scrape_configs"].([]any) {
		sc := sc.(map[string]any)
		delete(sc, "scrape_interval")
		delete(sc, "scrape_timeout")
		target := promAddr
		if sc["job_name"] == "dedup" {
			target = metricsAddr
			replaced = true
		}
		sc["static_configs"] = []any{map[string]any{"targets": []any{target}}}
	}
	if !replaced {
		t.Fatalf("prometheus.yml has no job dedup")
	}
	out, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, out, 0o644); err != nil {
		t.Fatal(err)
	}
}

// ---------------------------------------------------------------------------
// Processes, traffic and polling.

// tail is the end of a process's output, for a failure message.
func tail(out *testkit.SyncBuffer) string {
	s := out.String()
	if len(s) > 4000 {
		s = "..." + s[len(s)-4000:]
	}
	return s
}

// startProcess starts a process and stops it (SIGTERM, then SIGKILL after
// 30 s) when the test ends.
func startProcess(t *testing.T, name, bin string, args, env []string) *testkit.SyncBuffer {
	t.Helper()
	out := &testkit.SyncBuffer{}
	p := testkit.StartProcessEnv(t, bin, args, env, out, out, func() string { return tail(out) })
	// Cleanups run last first: this SIGTERM comes before StartProcessEnv's
	// SIGKILL, which then finds the process gone.
	t.Cleanup(func() {
		_ = p.Cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-p.Done():
			if code, _ := p.Exited(); code != 0 {
				t.Logf("%s exited: %s", name, p.Status())
			}
		case <-time.After(30 * time.Second):
			t.Errorf("%s did not exit within 30s of SIGTERM", name)
		}
	})
	return out
}

// processEnv is this process's environment without any of the binary's
// variables, plus set.
func processEnv(vars map[string]k8scheck.ConfigVar, set map[string]string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if _, ok := vars[k]; !ok {
			env = append(env, kv)
		}
	}
	return append(env, testkit.Vars(set)...)
}

func httpOK(u string) error {
	resp, err := http.Get(u)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: HTTP %d", u, resp.StatusCode)
	}
	return nil
}

// produce writes, to each partition: 10 keys twice (10 first occurrences, 10
// duplicates), one retraction and one record without a key.
func produce(ctx context.Context, t *testing.T, broker, topic string, partitions int) int {
	t.Helper()
	cl, err := kgo.NewClient(kgo.SeedBrokers(broker), kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.DefaultProduceTopic(topic))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	now := time.Now()
	var recs []*kgo.Record
	for p := range partitions {
		for round := range 2 {
			for i := range 10 {
				recs = append(recs, &kgo.Record{Partition: int32(p), Key: fmt.Appendf(nil, "key-%d-%d", p, i),
					Value: fmt.Appendf(nil, "value %d", round), Timestamp: now})
			}
		}
		recs = append(recs,
			&kgo.Record{Partition: int32(p), Key: fmt.Appendf(nil, "key-%d-0", p), Timestamp: now,
				Headers: []kgo.RecordHeader{{Key: "dedup-retract", Value: []byte("1")}}},
			&kgo.Record{Partition: int32(p), Value: []byte("no key"), Timestamp: now})
	}
	err = pollUntil(ctx, time.Minute, func() error { // the topic appears when the binary has created it
		return cl.ProduceSync(ctx, recs...).FirstErr()
	})
	if err != nil {
		t.Fatalf("produce to the embedded broker: %v", err)
	}
	return len(recs)
}

// countInputs sums dedup_messages_total over every series on /metrics.
func countInputs(u string) (float64, error) {
	resp, err := http.Get(u)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var sum float64
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "dedup_messages_total{") {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			return 0, fmt.Errorf("parse %q: %w", line, err)
		}
		sum += v
	}
	return sum, sc.Err()
}

// backoffStop ends a poll at once: the condition can no longer come true.
type backoffStop struct{ error }

// pollUntil calls f until it returns nil, a backoffStop, or the timeout passes.
func pollUntil(ctx context.Context, timeout time.Duration, f func() error) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		err := f()
		if err == nil {
			return nil
		}
		if stop, ok := err.(backoffStop); ok {
			return stop.error
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("gave up after %s: %w", timeout, err)
		case <-tick.C:
		}
	}
}

func waitFor(ctx context.Context, t *testing.T, what string, log *testkit.SyncBuffer, f func() error) {
	t.Helper()
	if err := pollUntil(ctx, 90*time.Second, f); err != nil {
		t.Fatalf("waiting for %s: %v\nlog:\n%s", what, err, tail(log))
	}
}
