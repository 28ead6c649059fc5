package statuspage

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"log/slog"
	"maps"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"dedup/checkpoint"
	"dedup/internal/buildinfo"
	"dedup/internal/testkit"
	"dedup/key"
	"dedup/processor"
	"dedup/rotation"
)

// screenshotEnv names the file TestStatusPageInBrowser writes its
// screenshot to (docs/status-page.png); unset, it goes to a temporary
// directory.
const screenshotEnv = "DEDUP_STATUS_SCREENSHOT"

// chromium is the headless browser, Debian's chromium package: skipped
// without it outside CI, a failure in CI, which installs it.
func chromium(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("chromium not found (CI installs Debian's chromium package): %v", err)
		}
		t.Skipf("chromium not found (apt-get install chromium): %v", err)
	}
	return path
}

// browse runs headless chromium on url with args (--dump-dom,
// --screenshot) and returns its standard output.
func browse(t *testing.T, bin, url string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	args = append([]string{"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir=" + t.TempDir()}, append(args, url)...)
	cmd := exec.CommandContext(ctx, bin, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Dir = t.TempDir()
	if err := cmd.Run(); err != nil {
		t.Fatalf("chromium %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String()
}

// wave is the records of one step of the chart: fresh keys, and
// duplicates of keys sent before on the same partition.
type wave struct{ fresh, dups int }

// waves are the steps the test sends, a 10 s sample after each: a
// duplicate share that rises and falls between about 10% and 40%.
func waves(n int) []wave {
	out := make([]wave, n)
	for i := range out {
		const size = 40
		share := 0.25 + 0.12*math.Sin(float64(i)/5) + 0.04*math.Sin(float64(i)*1.7)
		dups := int(math.Round(size * share))
		out[i] = wave{fresh: size - dups, dups: dups}
	}
	return out
}

// TestStatusPageInBrowser runs the stage against kfake with a file
// checkpoint store, sends records with duplicates in waves (the page's
// chart sampled after each), loads the page in headless chromium once
// the counts have settled, and checks every figure it shows against
// /metrics scraped at the same moment (both scrapes around the load
// equal): the values it carries and the text it shows. The records read
// and dropped are those sent; the chart has a point per wave, its rate
// the wave's share of duplicates. The screenshot is docs/status-page.png
// when DEDUP_STATUS_SCREENSHOT names it.
func TestStatusPageInBrowser(t *testing.T) {
	browser := chromium(t)
	if testing.Short() {
		t.Skip("runs the stage and a browser")
	}
	const partitions = 3
	cluster := testkit.Cluster(t, partitions)
	brokers := cluster.ListenAddrs()
	reg := prometheus.NewRegistry()
	build := buildinfo.Read("")
	info := prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "dedup_build_info", Help: "The build."}, []string{"version", "commit", "goversion", "mode"})
	info.WithLabelValues(build.Version, build.Commit, build.GoVersion, "counting").Set(1)
	reg.MustRegister(info)
	store, err := checkpoint.NewFileStore(checkpoint.FileOptions{Dir: t.TempDir(), Keep: 3, Group: "status"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	keys, err := key.Parse("key")
	if err != nil {
		t.Fatal(err)
	}
	proc, err := processor.New(processor.Options{
		Brokers: brokers, Transport: testkit.KafkaTransport(t), GroupID: "status",
		InputTopic: "events", OutputTopic: "events-deduped", StartOffset: kafka.FirstOffset,
		SessionTimeout: time.Second, RebalanceTimeout: 2 * time.Second, HeartbeatInterval: 100 * time.Millisecond,
		Key: keys, RetractHeader: "dedup-retract",
		Filter:       rotation.Options{ExpectedKeys: 100000, FPRate: 1e-6, Window: time.Hour, Mode: rotation.Counting},
		BatchTimeout: 2 * time.Millisecond, FetchMaxWait: 50 * time.Millisecond,
		CheckpointInterval: 200 * time.Millisecond, Store: store,
		Metrics: processor.NewMetrics(reg), Logger: slog.New(slog.DiscardHandler),
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- proc.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})

	page := New(Options{Gatherer: reg, Readiness: proc.Readiness, Probe: ProbeOn("127.0.0.1:9465")})
	mux := http.NewServeMux()
	mux.Handle("GET /{$}", page)
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	testkit.WaitFor(t, "the stage ready", 30*time.Second, func() (bool, error) { return proc.Readiness() == nil, proc.Readiness() })

	producer, err := kgo.NewClient(kgo.SeedBrokers(brokers...), kgo.DefaultProduceTopic("events"),
		kgo.RecordPartitioner(kgo.ManualPartitioner()), kgo.ProducerLinger(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(producer.Close)

	// The samples are dated a step apart ending at the test's start, as
	// the sampler would have taken them over the minutes before: the
	// chart shows them all while the test takes less than the minute the
	// waves leave of its span, and the newest ones after that.
	ws := waves(55)
	began := time.Now()
	page.Sample(began.Add(-time.Duration(len(ws)) * DefaultEvery))
	var sent, dropped int
	for i, w := range ws {
		var recs []*kgo.Record
		for j := range w.fresh {
			n := sent + j
			recs = append(recs, &kgo.Record{Key: []byte("k" + strconv.Itoa(n)), Value: []byte("v"), Partition: int32(n % partitions)})
		}
		for j := range w.dups {
			n := (j*7919 + i*104729) % (sent + w.fresh) // a key sent before it, on its partition
			recs = append(recs, &kgo.Record{Key: []byte("k" + strconv.Itoa(n)), Value: []byte("dup"), Partition: int32(n % partitions)})
		}
		if err := producer.ProduceSync(ctx, recs...).FirstErr(); err != nil {
			t.Fatal(err)
		}
		sent, dropped = sent+w.fresh, dropped+w.dups
		decided := sent + dropped
		testkit.WaitFor(t, fmt.Sprintf("wave %d decided", i), 30*time.Second, func() (bool, error) {
			in, _ := gathered(t, reg).sum("dedup_messages_total", nil)
			return in == float64(decided), nil
		})
		page.Sample(began.Add(-time.Duration(len(ws)-1-i) * DefaultEvery))
	}
	total := sent + dropped

	// Settled: every partition's gauges (set every second) at its end,
	// checkpointed and committed there.
	testkit.WaitFor(t, "every partition at its end, committed", 30*time.Second, func() (bool, error) {
		f := gathered(t, reg)
		position, _ := f.sum("dedup_consumer_position", nil)
		committed, _ := f.sum("dedup_committed_offset", nil)
		lag, _ := f.sum("dedup_consumer_lag", nil)
		return position == float64(total) && committed == float64(total) && lag == 0,
			fmt.Errorf("position %v, committed %v of %d, lag %v", position, committed, total, lag)
	})

	// The page against /metrics scraped just before and just after it
	// loaded: a figure that moved in between (a checkpoint's time) is
	// loaded again.
	var d dom
	testkit.WaitFor(t, "the page showing what /metrics shows", 30*time.Second, func() (bool, error) {
		before := getMetrics(t, srv.URL+"/metrics")
		d = parseDOM(t, browse(t, browser, srv.URL+"/", "--dump-dom"))
		errs := append(figureErrors(d, before), figureErrors(d, getMetrics(t, srv.URL+"/metrics"))...)
		return len(errs) == 0, errors.New(strings.Join(errs, "; "))
	})

	for id, want := range map[string]float64{"total-in": float64(total), "total-duplicate": float64(dropped), "assigned": partitions} {
		if e := d.byID(id); e == nil || e.Attr["data-value"] != strconv.Itoa(int(want)) {
			t.Errorf("#%s: %v, want %v", id, attrOf(e, "data-value"), want)
		}
	}
	if e := d.byID("total-dedup-rate"); e == nil || !near(mustFloat(t, e.Attr["data-value"]), float64(dropped)/float64(total), 1e-12) {
		t.Errorf("dedup rate %v, want %v", attrOf(e, "data-value"), float64(dropped)/float64(total))
	}
	for p := range partitions {
		for _, what := range []string{"position", "committed", "lag", "in", "forwarded", "duplicate", "current-fill", "current-keys",
			"current-fp", "previous-fill", "window-elapsed", "checkpoint-last", "chain-base", "chain-increments", "checkpoint-stored", "restore-source"} {
			id := fmt.Sprintf("p-events-%d-%s", p, what)
			if e := d.byID(id); e == nil || e.Attr["data-value"] == "" {
				t.Errorf("#%s: no value shown", id)
			}
		}
		if got := textOf(d.byID(fmt.Sprintf("p-events-%d-restore-source", p))); got != "empty" {
			t.Errorf("partition %d restored from %q, want empty (a new group)", p, got)
		}
	}
	if got := textOf(d.byID("readiness")); got != "ready" {
		t.Errorf("readiness %q, want ready", got)
	}
	if d.byID("probe-form") == nil {
		t.Error("no probe form with Options.Probe set")
	}
	var rates []float64
	for _, c := range d.all("circle") {
		rates = append(rates, mustFloat(t, c.Attr["data-rate"]))
	}
	var want []float64
	for _, w := range ws {
		want = append(want, float64(w.dups)/float64(w.fresh+w.dups))
	}
	if len(rates) < len(want)/2 || !slices.EqualFunc(rates, want[len(want)-len(rates):], func(a, b float64) bool { return near(a, b, 1e-12) }) {
		t.Errorf("chart points %v, want the waves' shares of duplicates %v (the newest at least)", rates, want)
	}

	shot := filepath.Join(t.TempDir(), "status-page.png")
	browse(t, browser, srv.URL+"/", "--screenshot="+shot, "--window-size=1280,1600", "--hide-scrollbars")
	img := decodePNG(t, shot)
	if b := img.Bounds(); b.Dx() != 1280 || b.Dy() != 1600 {
		t.Errorf("screenshot %v, want 1280x1600", b)
	}
	if out := os.Getenv(screenshotEnv); out != "" {
		writePNG(t, out, img)
		t.Logf("screenshot written to %s", out)
	}
}

// gathered is reg's families now.
func gathered(t *testing.T, reg *prometheus.Registry) familyIndex {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	return families(mfs)
}

func attrOf(e *element, name string) string {
	if e == nil {
		return "(no element)"
	}
	return e.Attr[name]
}

func mustFloat(t *testing.T, s string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func decodePNG(t *testing.T, path string) image.Image {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatalf("no screenshot: %v", err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	return img
}

// writePNG writes img to path in its 256 most frequent colours (the
// page's flat colours and most of the text's antialiasing; the rest
// mapped to the nearest), compressed hardest: the file is committed, at
// a third of the size of chromium's.
func writePNG(t *testing.T, path string, img image.Image) {
	t.Helper()
	b := img.Bounds()
	count := map[color.Color]int{}
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			count[img.At(x, y)]++
		}
	}
	colors := slices.Collect(maps.Keys(count))
	slices.SortFunc(colors, func(a, b color.Color) int { return count[b] - count[a] })
	palette := color.Palette(colors[:min(len(colors), 256)])
	paletted := image.NewPaletted(b, palette)
	index := map[color.Color]uint8{}
	for y := b.Min.Y; y < b.Max.Y; y++ {
		for x := b.Min.X; x < b.Max.X; x++ {
			c := img.At(x, y)
			i, ok := index[c]
			if !ok {
				i = uint8(palette.Index(c))
				index[c] = i
			}
			paletted.SetColorIndex(x, y, i)
		}
	}
	var buf bytes.Buffer
	if err := (&png.Encoder{CompressionLevel: png.BestCompression}).Encode(&buf, paletted); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
}
