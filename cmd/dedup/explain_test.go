package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"dedup/internal/testkit"
)

// explainRun runs `dedup explain args...` in-process.
func explainRun(t *testing.T, env testkit.Env, args ...string) (string, string, int) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), append([]string{"explain"}, args...), env.Lookup, &stdout, &stderr)
	return stdout.String(), stderr.String(), code
}

// explainLines runs `dedup explain --json args...`, wants exit 0 and
// decodes its lines, each of which must hold the documented fields.
func explainLines(t *testing.T, env testkit.Env, args ...string) []map[string]any {
	t.Helper()
	out, errs, code := explainRun(t, env, append([]string{"--json"}, args...)...)
	if code != exitOK {
		t.Fatalf("dedup explain --json %q: exit %d\n%s", args, code, errs)
	}
	var lines []map[string]any
	for _, l := range strings.Split(strings.TrimSuffix(out, "\n"), "\n") {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("line %q is not one JSON object: %v", l, err)
		}
		for _, f := range []string{"partition", "held", "generation", "windows", "false_positive"} {
			if _, ok := m[f]; !ok {
				t.Errorf("line %q lacks %q", l, f)
			}
		}
		if _, ok := m["partition"].(float64); !ok {
			t.Errorf("line %q: partition is not a number", l)
		}
		if _, ok := m["held"].(bool); !ok {
			t.Errorf("line %q: held is not a boolean", l)
		}
		lines = append(lines, m)
	}
	return lines
}

// stageThrough runs `dedup run` in-process with env until the output holds
// forwarded records after recs were produced, and stops it (exit 0): its
// final checkpoints cover every record.
func stageThrough(t *testing.T, env testkit.Env, recs []*kgo.Record, forwarded int) {
	t.Helper()
	client := []kgo.Opt{kgo.SeedBrokers(env["KAFKA_BROKERS"])}
	p := startInProcess(t, env, "run")
	waitReady(t, p, env["METRICS_ADDR"])
	testkit.Produce(t, manual(client), recs...)
	testkit.ConsumeN(t, client, "events-deduped", forwarded)
	if code := p.stop(t); code != exitOK {
		t.Fatalf("dedup run: exit %d", code)
	}
}

// TestExplainCompositeKey: with DEDUP_KEY=header:tenant,json:id the key is
// given as its parts, in order; the partition the record was decided on
// holds it in its current generation, at its checkpoint's offset, and the
// other does not. --json prints a line per partition (flags may follow
// the parts), --partition one; the parts in another order are another key.
// Arguments DEDUP_KEY cannot make are exit 2.
func TestExplainCompositeKey(t *testing.T) {
	cluster := testkit.Cluster(t, 2)
	env := clusterEnv(t, cluster, testkit.Env{"DEDUP_KEY": "header:tenant,json:id", "CHECKPOINT_STORE": "file", "LOG_LEVEL": "warn",
		"DEDUP_EXPECTED_KEYS": "1000"}) // small filters decode fast under the race detector
	rec := func(p int32, tenant string) *kgo.Record {
		return &kgo.Record{Topic: "events", Partition: p, Value: []byte(`{"id":42}`), Headers: []kgo.RecordHeader{{Key: "tenant", Value: []byte(tenant)}}}
	}
	stageThrough(t, env, []*kgo.Record{rec(1, "tenant-a"), rec(0, "tenant-b")}, 2)

	lines := explainLines(t, env, "tenant-a", "42")
	if len(lines) != 2 {
		t.Fatalf("%d lines, want one per partition", len(lines))
	}
	for _, l := range lines {
		p := l["partition"].(float64)
		if held := l["held"].(bool); held != (p == 1) {
			t.Errorf("partition %v: held %v; the key was decided on partition 1", p, held)
		}
		cp, _ := l["checkpoint"].(map[string]any)
		if cp == nil || cp["offset"] != 1.0 || cp["age_seconds"] == nil {
			t.Errorf("partition %v: checkpoint %v, want one at offset 1 with its age", p, l["checkpoint"])
		}
		if ws, _ := l["windows"].([]any); len(ws) != 2 {
			t.Errorf("partition %v: windows %v, want the current and previous generations'", p, l["windows"])
		}
		if fp, _ := l["false_positive"].(float64); fp <= 0 || fp > 1e-6 {
			t.Errorf("partition %v: false_positive %v, want in (0, DEDUP_FP_RATE]", p, l["false_positive"])
		}
	}
	if g := lines[1]["generation"]; g != "current" {
		t.Errorf("partition 1: generation %v, want current", g)
	}
	// --hex: the same parts in hexadecimal are the same key.
	for _, l := range explainLines(t, env, "--hex", hex.EncodeToString([]byte("tenant-a")), hex.EncodeToString([]byte("42"))) {
		if held := l["held"].(bool); held != (l["partition"] == 1.0) {
			t.Errorf("--hex: partition %v held %v, want the key as given in text", l["partition"], held)
		}
	}
	if l := explainLines(t, env, "tenant-b", "42", "--partition", "0"); len(l) != 1 || l[0]["partition"] != 0.0 || l[0]["held"] != true {
		t.Errorf("tenant-b 42 --partition 0: %v, want partition 0 alone, held", l)
	}
	for _, l := range explainLines(t, env, "42", "tenant-a") {
		if l["held"] == true {
			t.Errorf("the parts in another order are held by partition %v", l["partition"])
		}
	}

	out, errs, code := explainRun(t, env, "tenant-a", "42")
	if code != exitOK {
		t.Fatalf("exit %d\n%s", code, errs)
	}
	for _, want := range []string{`dedup explain: key "tenant-a" "42" (DEDUP_KEY=header:tenant,json:id), group dedup, events: 2 partition(s)`,
		"\nevents/0: not held; current ", "\nevents/1: HELD (current); current ", " holds it (p ", "checkpoint seq "} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "\n"); n != 3 {
		t.Errorf("%d lines, want a header and one per partition:\n%s", n, out)
	}

	for _, args := range [][]string{{}, {"tenant-a"}, {"tenant-a", "42", "x"}, {"tenant-a", ""}, {"--partition", "2", "tenant-a", "42"},
		{"--partition", "-2", "tenant-a", "42"}, {"--bogus", "tenant-a", "42"}, {"--hex", "74656e616e742d61", "4x"}} {
		if out, errs, code := explainRun(t, env, args...); code != exitConfig || out != "" || !strings.Contains(errs, "dedup explain: ") {
			t.Errorf("explain %q: exit %d, stdout %q, stderr %q; want exit 2 naming the problem", args, code, out, errs)
		}
	}
	bad := clusterEnv(t, cluster, testkit.Env{"DEDUP_WINDOW": "fortnight"})
	if _, errs, code := explainRun(t, bad, "k"); code != exitConfig || !strings.Contains(errs, "DEDUP_WINDOW") {
		t.Errorf("bad configuration: exit %d, stderr %q; want 2 naming DEDUP_WINDOW", code, errs)
	}
}

// TestExplainStoreUnreadable: the Kafka checkpoint store on brokers that
// do not answer is exit 1.
func TestExplainStoreUnreadable(t *testing.T) {
	env := testEnv(t)
	env["KAFKA_BROKERS"] = testkit.FreeAddr(t) // nothing listens there
	env["CHECKPOINT_STORE"] = "kafka"
	if _, errs, code := explainRun(t, env, "k"); code != exitFailure {
		t.Errorf("exit %d, want 1\n%s", code, errs)
	}
}

// TestExplainRepartitionPartition: with REPARTITION_TOPIC, explain names
// the repartition partition hop 1 routed each key to (as read back from
// that topic), that partition holds the key, and the others, answered
// too, are marked as not where it lives.
func TestExplainRepartitionPartition(t *testing.T) {
	const keys = 12
	cluster := testkit.Cluster(t, 2)
	env := clusterEnv(t, cluster, testkit.Env{"REPARTITION_TOPIC": reTopic, "REPARTITION_PARTITIONS": "3", "CHECKPOINT_STORE": "file",
		"LOG_LEVEL": "warn", "DEDUP_EXPECTED_KEYS": "1000"})
	var recs []*kgo.Record
	for i := range keys {
		recs = append(recs, &kgo.Record{Topic: "events", Partition: int32(i % 2), Key: fmt.Appendf(nil, "k%03d", i), Value: []byte("v")})
	}
	stageThrough(t, env, recs, keys)
	routed := map[string]int{}
	for _, r := range testkit.ConsumeN(t, []kgo.Opt{kgo.SeedBrokers(env["KAFKA_BROKERS"])}, reTopic, keys) {
		routed[string(r.Key)] = int(r.Partition)
	}
	spread := map[int]bool{}
	for _, p := range routed {
		spread[p] = true
	}
	if len(spread) < 2 {
		t.Fatalf("the keys all went to one repartition partition %v: nothing tells the partitions apart", routed)
	}
	for k, p := range routed {
		lines := explainLines(t, env, k)
		if len(lines) != 3 {
			t.Fatalf("%s: %d lines, want one per repartition partition", k, len(lines))
		}
		for _, l := range lines {
			here := int(l["partition"].(float64)) == p
			if l["key_partition"] != here || l["held"] != here {
				t.Errorf("%s, routed to %d: partition %v says key_partition %v, held %v", k, p, l["partition"], l["key_partition"], l["held"])
			}
		}
	}
	out, errs, code := explainRun(t, env, "k000")
	want := fmt.Sprintf("REPARTITION_TOPIC: hop 1 routes this key to %s/%d (murmur2 over 3 partitions)", reTopic, routed["k000"])
	if code != exitOK || !strings.Contains(out, want) || strings.Count(out, "[not the key's partition]") != 2 ||
		!strings.Contains(out, fmt.Sprintf("%s/%d: HELD (current) [the key's partition]", reTopic, routed["k000"])) {
		t.Errorf("exit %d; want %q and the partitions marked:\n%s%s", code, want, out, errs)
	}
}
