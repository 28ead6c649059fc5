package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"

	"dedup/internal/testkit"
)

// repartitionCheckEnv starts a one-broker cluster holding topics, two
// partitions each, and returns it with the environment of a check against
// it with REPARTITION_TOPIC events-by-id.
func repartitionCheckEnv(t *testing.T, topics ...string) (*kfake.Cluster, testkit.Env) {
	t.Helper()
	cluster := testkit.NewCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(2, topics...))
	return cluster, clusterEnv(t, cluster, testkit.Env{"REPARTITION_TOPIC": "events-by-id"})
}

// TestCheckRepartitionTopic: with REPARTITION_TOPIC, dedup check says a
// missing repartition topic will be created (warn), and fails a compacted
// one, warning about a partition count other than the output's and a
// retention shorter than a day.
func TestCheckRepartitionTopic(t *testing.T) {
	cluster, env := repartitionCheckEnv(t, "events", "events-deduped")

	var stdout, stderr bytes.Buffer
	run(context.Background(), []string{"check"}, env.Lookup, &stdout, &stderr)
	out := stdout.String()
	wantCheck(t, out, "warn", "repartition topic")
	if l := checkLine(out, "repartition topic"); !strings.Contains(l, "the stage creates it") || !strings.Contains(l, "cleanup.policy=delete") {
		t.Errorf("missing repartition topic: %q", l)
	}

	if err := cluster.CreateTopic("events-by-id", 3, map[string]string{"cleanup.policy": "compact", "retention.ms": "3600000"}); err != nil {
		t.Fatal(err)
	}
	stdout.Reset()
	if code := run(context.Background(), []string{"check"}, env.Lookup, &stdout, &stderr); code != exitFailure {
		t.Fatalf("exit %d, want 1:\n%s%s", code, &stdout, &stderr)
	}
	out = stdout.String()
	wantCheck(t, out, "warn", "repartition topic")
	wantCheck(t, out, "FAIL", "repartition cleanup.policy")
	wantCheck(t, out, "warn", "repartition retention")
	if want := "repartition cleanup.policy"; !strings.Contains(lastLine(out), want) {
		t.Errorf("verdict %q, want it to name %q", lastLine(out), want)
	}
}

// TestCheckHopRoles: dedup check checks what REPARTITION_HOPS's role uses.
// Against a cluster with the input alone, rekey holds (input and
// repartition topic checked, hop 1's group's offsets; no output,
// checkpoint topic, store or sizing), and dedup fails naming the output.
func TestCheckHopRoles(t *testing.T) {
	_, env := repartitionCheckEnv(t, "events", "events-by-id")

	env["REPARTITION_HOPS"] = "rekey"
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"check"}, env.Lookup, &stdout, &stderr); code != exitOK {
		t.Fatalf("rekey: exit %d, want 0:\n%s%s", code, &stdout, &stderr)
	}
	out := stdout.String()
	wantCheck(t, out, "ok", "input topic")
	wantCheck(t, out, "ok", "repartition topic")
	if l := checkLine(out, "committed offsets"); !strings.Contains(l, "dedup-repartition") {
		t.Errorf("rekey: committed offsets %q, want hop 1's group dedup-repartition", l)
	}
	for _, name := range []string{"output topic", "checkpoint topic", "checkpoint store", "checkpoint cleanup.policy", "sizing"} {
		if l := checkLine(out, name); l != "" {
			t.Errorf("rekey checked %s: %q", name, l)
		}
	}

	env["REPARTITION_HOPS"] = "dedup"
	stdout.Reset()
	if code := run(context.Background(), []string{"check"}, env.Lookup, &stdout, &stderr); code != exitFailure {
		t.Fatalf("dedup: exit %d, want 1:\n%s%s", code, &stdout, &stderr)
	}
	wantCheck(t, stdout.String(), "FAIL", "output topic")
}
