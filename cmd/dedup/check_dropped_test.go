package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"

	"dedup/internal/testkit"
)

// TestCheckDroppedTopic: with DROPPED_TOPIC, dedup check fails naming a
// drop topic that does not exist, and once it does reports it, warning
// when it is compacted (keyless duplicates cannot be written there).
func TestCheckDroppedTopic(t *testing.T) {
	cluster := testkit.NewCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(2, "events", "events-deduped"))
	env := testEnv(t)
	env["KAFKA_BROKERS"] = cluster.ListenAddrs()[0]
	env["DROPPED_TOPIC"] = "events-dropped"
	check := func(want int) string {
		t.Helper()
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), []string{"check"}, env.Lookup, &stdout, &stderr); code != want {
			t.Fatalf("exit %d, want %d:\n%s%s", code, want, &stdout, &stderr)
		}
		return stdout.String()
	}
	out := check(exitFailure)
	wantCheck(t, out, "FAIL", "drop topic")
	if l := checkLine(out, "drop topic"); !strings.Contains(l, "events-dropped does not exist") || !strings.Contains(l, "DROPPED_TOPIC") {
		t.Errorf("missing drop topic: %q", l)
	}
	if err := cluster.CreateTopic("events-dropped", 2, map[string]string{"cleanup.policy": "compact"}); err != nil {
		t.Fatal(err)
	}
	out = check(exitOK)
	wantCheck(t, out, "ok", "drop topic")
	wantCheck(t, out, "warn", "drop topic cleanup.policy")
}
