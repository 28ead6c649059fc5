package main

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"dedup/internal/buildinfo"
	"dedup/internal/config"
	"dedup/internal/testkit"
	"dedup/processor"
)

// checkForwarded asserts the output holds exactly one record per key,
// the first occurrence, carrying the source headers.
func checkForwarded(t *testing.T, out []*kgo.Record, keys int) {
	t.Helper()
	seen := make(map[string]bool)
	for _, r := range out {
		k := string(r.Key)
		if seen[k] {
			t.Errorf("key %s forwarded twice", k)
		}
		seen[k] = true
		if !bytes.HasSuffix(r.Value, []byte("-copy0")) {
			t.Errorf("key %s: forwarded %q, want the first occurrence (copy0)", k, r.Value)
		}
		if v, _ := testkit.HeaderValue(r, processor.HeaderSourceTopic); v != "events" {
			t.Errorf("key %s: source topic header %q, want events", k, v)
		}
		for _, h := range []string{processor.HeaderSourcePartition, processor.HeaderSourceOffset} {
			v, ok := testkit.HeaderValue(r, h)
			if _, err := strconv.ParseInt(v, 10, 64); !ok || err != nil {
				t.Errorf("key %s: header %s = %q, want an integer", k, h, v)
			}
		}
	}
	if len(seen) != keys {
		t.Errorf("forwarded %d distinct keys, want %d", len(seen), keys)
	}
}

// TestEmbeddedDefault runs the binary as a new user would: no KAFKA_BROKERS,
// so it starts its own broker; a franz-go client produces duplicates; the
// output, /metrics and /readyz show the stage at work; SIGTERM ends it with
// exit 0 after a checkpoint that `dedup inspect` then shows.
func TestEmbeddedDefault(t *testing.T) {
	env := embeddedEnv(t, nil)
	brokerAddr, metrics := env["EMBEDDED_BROKER_ADDR"], env["METRICS_ADDR"]
	bin := startBinary(t, env)

	waitReady(t, bin, metrics)
	if code, err := testkit.HTTPStatus("http://" + metrics + "/healthz"); code != http.StatusOK {
		t.Fatalf("/healthz = %d (%v), want 200", code, err)
	}
	for _, want := range []string{"kcat -P -b " + brokerAddr + " -t events -K:", "kcat -C -b " + brokerAddr + " -t events-deduped -e -q -f '%k %s %h\\n'"} {
		if !strings.Contains(bin.stdout.String(), want) {
			t.Errorf("stdout lacks the kcat hint %q:\n%s", want, bin.stdout)
		}
	}

	const keys, copies = 20, 3
	client := []kgo.Opt{kgo.SeedBrokers(brokerAddr)}
	testkit.Produce(t, client, keyedWithDuplicates("events", keys, copies)...)

	testkit.WaitFor(t, "every input record decided", 60*time.Second, func() (bool, error) {
		dup, err := testkit.MetricSum(metrics, "dedup_messages_total", `outcome="duplicate"`)
		if err != nil {
			return false, err
		}
		fwd, err := testkit.MetricSum(metrics, "dedup_messages_total", `outcome="forwarded"`)
		return dup == keys*(copies-1) && fwd == keys, err
	})
	out := testkit.ConsumeN(t, client, "events-deduped", keys)
	checkForwarded(t, out, keys)
	if n := testkit.EndOffsets(t, brokerAddr, "events-deduped", 2); n != keys {
		t.Errorf("output holds %d records, want %d", n, keys)
	}
	if n, err := testkit.MetricSum(metrics, "dedup_embedded_broker"); err != nil || n != 1 {
		t.Errorf("dedup_embedded_broker = %v (%v), want 1", n, err)
	}
	b := buildinfo.Read("")
	mode := ""
	for _, d := range config.Docs() {
		if d.Name == "DEDUP_MODE" {
			mode = d.Default // the stage runs on the default mode here
		}
	}
	build := []string{`version="` + b.Version + `"`, `commit="` + b.Commit + `"`, `goversion="` + b.GoVersion + `"`, `mode="` + mode + `"`}
	if n, err := testkit.MetricSum(metrics, "dedup_build_info", build...); err != nil || n != 1 {
		t.Errorf("dedup_build_info%v = %v (%v), want 1", build, n, err)
	}
	if !strings.Contains(bin.stderr.String(), "KAFKA_BROKERS is empty: starting the embedded single-node broker") {
		t.Errorf("no warning that the broker is the embedded one:\n%s", bin.stderr)
	}
	if dup, err := testkit.MetricSum(metrics, "dedup_messages_total", `outcome="duplicate"`); err != nil || dup <= 0 {
		t.Errorf(`dedup_messages_total{outcome="duplicate"} = %v (%v), want > 0`, dup, err)
	}

	bin.stopOK(t, "")
	if _, err := os.Stat(env["DATA_DIR"] + "/broker"); err != nil {
		t.Errorf("embedded broker kept no data under DATA_DIR: %v", err)
	}

	// The stop wrote a checkpoint of every partition that saw records.
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"inspect"}, env.Lookup, &stdout, &stderr); code != exitOK {
		t.Fatalf("dedup inspect: exit %d\n%s", code, stderr.String())
	}
	report := stdout.String()
	for _, want := range []string{"events/", "checksum", ": ok", "est. keys"} {
		if !strings.Contains(report, want) {
			t.Errorf("inspect output lacks %q:\n%s", want, report)
		}
	}
}
