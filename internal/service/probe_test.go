package service

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"dedup/internal/buildinfo"
	"dedup/internal/config"
	"dedup/internal/testkit"
)

// startService runs the stage with env (plus a kfake cluster's brokers, a
// data directory and free listeners) until the test ends.
func startService(t *testing.T, env testkit.Env) (*Service, string) {
	t.Helper()
	cluster := testkit.Cluster(t, 2)
	addr := cluster.ListenAddrs()[0]
	full := testkit.Env{"KAFKA_BROKERS": addr, "DATA_DIR": t.TempDir(), "CHECKPOINT_STORE": "file",
		"CHECKPOINT_INTERVAL": "200ms", "KAFKA_SESSION_TIMEOUT": "2s", "METRICS_ADDR": "127.0.0.1:0"}
	for k, v := range env {
		full[k] = v
	}
	cfg, err := config.Load(full.Lookup)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ctx, cancel := context.WithCancel(context.Background())
	svc, err := Start(ctx, Options{Config: &cfg, Logger: log, Stdout: io.Discard, Build: buildinfo.Read("")})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("stage: %v", err)
		}
		if err := svc.Close(); err != nil {
			t.Errorf("close: %v", err)
		}
	})
	testkit.WaitFor(t, "/readyz 200", 30*time.Second, func() (bool, error) {
		code, err := testkit.HTTPStatus("http://" + svc.status.Addr() + "/readyz")
		return code == http.StatusOK, err
	})
	return svc, addr
}

// probeKey asks GET /probe with query q and decodes a 200 answer.
func probeKey(svc *Service, q url.Values) (probeAnswer, error) {
	code, body, err := testkit.Get("http://" + svc.probe.Addr() + "/probe?" + q.Encode())
	if err != nil || code != http.StatusOK {
		return probeAnswer{}, fmt.Errorf("GET /probe?%s: %d %v\n%s", q.Encode(), code, err, body)
	}
	var a probeAnswer
	if err := json.Unmarshal([]byte(body), &a); err != nil {
		return probeAnswer{}, fmt.Errorf("GET /probe?%s: %w\n%s", q.Encode(), err, body)
	}
	return a, nil
}

func mustProbe(t *testing.T, svc *Service, q url.Values) probeAnswer {
	t.Helper()
	a, err := probeKey(svc, q)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func parts(p ...string) url.Values { return url.Values{"part": p} }

// TestKeyProbeNeverChangesState: with a composite DEDUP_KEY, the probe
// answers for each partition of the member, from the live filters: a key
// asked before it was produced is not held, and when it is then produced
// it is forwarded; a key forwarded is held by the current generation of
// its partition only, and its next record is dropped. Probes asked while
// records flow in are answered (the race detector watches the filters).
func TestKeyProbeNeverChangesState(t *testing.T) {
	svc, addr := startService(t, testkit.Env{"DEDUP_KEY": "header:tenant,json:id", "PROBE_ADDR": "127.0.0.1:0"})
	prod := []kgo.Opt{kgo.SeedBrokers(addr), kgo.DefaultProduceTopic("events"), kgo.RecordPartitioner(kgo.ManualPartitioner())}
	record := func(tenant string, id int) *kgo.Record {
		return &kgo.Record{Partition: 0, Value: fmt.Appendf(nil, `{"id":%d}`, id),
			Headers: []kgo.RecordHeader{{Key: "tenant", Value: []byte(tenant)}}}
	}
	metrics := svc.status.Addr()
	outcome := func(o string) func() (bool, error) {
		return func() (bool, error) {
			n, err := testkit.MetricSum(metrics, "dedup_messages_total", `outcome="`+o+`"`)
			return n > 0, err
		}
	}

	a := mustProbe(t, svc, parts("t1", "42"))
	if len(a.Answers) != 2 || a.Partitions != 2 || a.Topic != "events" || a.DedupKey != "header:tenant,json:id" {
		t.Fatalf("answer %+v, want one per partition of events", a)
	}
	for _, p := range a.Answers {
		if p.Held || p.Generation != "none" || p.Position == nil || len(p.Windows) != 2 {
			t.Errorf("before the key was produced, partition %d answers %+v", p.Partition, p)
		}
	}
	testkit.Produce(t, prod, record("t1", 42))
	testkit.WaitFor(t, "the record forwarded", 20*time.Second, outcome("forwarded"))
	a = mustProbe(t, svc, parts("t1", "42"))
	for _, p := range a.Answers {
		if want := p.Partition == 0; p.Held != want || (want && p.Generation != "current") {
			t.Errorf("after the key was forwarded on partition 0, partition %d answers %+v", p.Partition, p)
		}
	}
	if p := a.Answers[0]; *p.Position != 1 || p.Windows[0].Start == nil || !p.Windows[0].Held || p.FalsePositive <= 0 {
		t.Errorf("partition 0: %+v, want position 1 and the current window holding the key", p)
	}

	// Asked many times, concurrently with records flowing in: the key
	// asked is never added.
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Go(func() {
			a, err := probeKey(svc, parts("t2", "7"))
			if err != nil {
				t.Error(err)
				return
			}
			for _, p := range a.Answers {
				if p.Held {
					t.Errorf("probe %d: (t2, 7) held by partition %d before it was produced", i, p.Partition)
				}
			}
		})
	}
	batch := make([]*kgo.Record, 200)
	for i := range batch {
		batch[i] = record("t3", i)
	}
	testkit.Produce(t, prod, batch...)
	wg.Wait()
	testkit.Produce(t, prod, record("t2", 7), record("t1", 42))
	testkit.WaitFor(t, "the repeated record dropped", 20*time.Second, outcome("duplicate"))
	for _, o := range []struct {
		outcome string
		want    float64
	}{{"forwarded", 202}, {"duplicate", 1}} {
		if n, err := testkit.MetricSum(metrics, "dedup_messages_total", `outcome="`+o.outcome+`"`); err != nil || n != o.want {
			t.Errorf(`dedup_messages_total{outcome=%q} = %v (%v), want %v: the probed key (t2, 7) was forwarded, (t1, 42) dropped`, o.outcome, n, err, o.want)
		}
	}
}

// TestKeyProbeRequests: a key given by other parts than DEDUP_KEY has, or
// both ways at once, is a 400 naming how to ask; only GET is served.
func TestKeyProbeRequests(t *testing.T) {
	svc, _ := startService(t, testkit.Env{"DEDUP_KEY": "header:tenant,json:id", "PROBE_ADDR": "127.0.0.1:0"})
	base := "http://" + svc.probe.Addr() + "/probe?"
	for _, q := range []url.Values{
		{"key": {"t1"}},
		{"part": {"t1"}},
		{"part": {"t1", "42", "x"}},
		{"part": {"t1", ""}},
		{"key": {"a"}, "part": {"t1", "42"}},
		{},
	} {
		code, body, err := testkit.Get(base + q.Encode())
		if err != nil || code != http.StatusBadRequest {
			t.Errorf("GET /probe?%s: %d %v, want 400\n%s", q.Encode(), code, err, body)
		}
	}
	resp, err := http.Post(base+parts("t1", "42").Encode(), "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("POST /probe: %d, want 405", resp.StatusCode)
	}
	if code, err := testkit.HTTPStatus("http://" + svc.probe.Addr() + "/metrics"); err != nil || code != http.StatusNotFound {
		t.Errorf("GET /metrics on PROBE_ADDR: %d %v, want 404: the probe's listener serves the probe only", code, err)
	}
	_, port, _ := net.SplitHostPort(svc.probe.Addr())
	code, page, err := testkit.Get("http://" + svc.status.Addr() + "/")
	if want := `action="http://127.0.0.1:` + port + `/probe"`; err != nil || code != http.StatusOK || !strings.Contains(page, want) {
		t.Errorf("status page: %d %v, want its probe form with %s", code, err, want)
	}
}

// TestKeyProbeOffByDefault: without PROBE_ADDR no probe listens, and the
// metrics listener does not answer /probe.
func TestKeyProbeOffByDefault(t *testing.T) {
	svc, _ := startService(t, nil)
	if svc.probe != nil {
		t.Fatalf("a key probe listens on %s without PROBE_ADDR", svc.probe.Addr())
	}
	if code, err := testkit.HTTPStatus("http://" + svc.status.Addr() + "/probe?key=a"); err != nil || code != http.StatusNotFound {
		t.Errorf("GET /probe on METRICS_ADDR: %d %v, want 404", code, err)
	}
	if code, page, err := testkit.Get("http://" + svc.status.Addr() + "/"); err != nil || code != http.StatusOK || strings.Contains(page, `id="probe-form"`) {
		t.Errorf("status page: %d %v, want it without a probe form", code, err)
	}
}
