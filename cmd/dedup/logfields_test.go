package main

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"dedup/internal/testkit"
)

// TestLogFields: the rules docs/operations.md states for log lines hold on
// every line of a stage's JSON log over a first start (nothing committed),
// a stop and a restart: every line is one JSON object; durations are
// numbers of seconds in fields named …_seconds; no field holds a Go
// duration string; offsets are never negative sentinels, and "committed"
// is absent exactly when nothing was committed.
func TestLogFields(t *testing.T) {
	cluster := testkit.Cluster(t, 2)
	addr := cluster.ListenAddrs()[0]
	client := []kgo.Opt{kgo.SeedBrokers(addr)}
	const keys = 20

	first, env := stageAgainst(t, cluster, testkit.Env{"LOG_FORMAT": "json"})
	testkit.Produce(t, client, keyedWithDuplicates("events", keys, 2)...)
	testkit.ConsumeN(t, client, "events-deduped", keys)
	first.stopOK(t, "first run")
	second := startBinary(t, env)
	waitReady(t, second, env["METRICS_ADDR"])
	second.stopOK(t, "second run")

	for run, log := range []string{first.stderr.String(), second.stderr.String()} {
		assigned := 0
		for _, line := range strings.Split(strings.TrimSpace(log), "\n") {
			var rec map[string]any
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				t.Fatalf("run %d: not one JSON object: %q: %v", run, line, err)
			}
			checkLogRecord(t, rec)
			switch rec["msg"] {
			case "partition assigned":
				assigned++
				_, has := rec["committed"]
				if run == 0 && has {
					t.Errorf("first start, nothing committed: %q has a committed field", line)
				}
				if run == 1 && !has {
					t.Errorf("restart after commits: %q lacks the committed offset", line)
				}
			case "dedup running":
				if rec["window_seconds"] != 3600.0 {
					t.Errorf("window_seconds = %v in %q, want 3600 (DEDUP_WINDOW=1h)", rec["window_seconds"], line)
				}
			case "stopping: flushing, checkpointing and leaving the group":
				if rec["timeout_seconds"] != 20.0 {
					t.Errorf("timeout_seconds = %v in %q, want 20 (SHUTDOWN_TIMEOUT=20s)", rec["timeout_seconds"], line)
				}
			}
		}
		if assigned == 0 {
			t.Errorf("run %d logged no partition assignment", run)
		}
	}
}

// offsetFields are the log fields that hold an input offset.
var offsetFields = []string{"committed", "start", "position", "offset", "kept_offset"}

func checkLogRecord(t *testing.T, rec map[string]any) {
	t.Helper()
	for k, v := range rec {
		switch v := v.(type) {
		case float64:
			for _, f := range offsetFields {
				if k == f && v < 0 {
					t.Errorf("%s=%v: a sentinel offset in %v", k, v, rec)
				}
			}
		case string:
			if k == "msg" || k == "err" {
				continue
			}
			if _, err := time.ParseDuration(v); err == nil && v != "0" {
				t.Errorf("%s=%q: a Go duration string, want %s_seconds as a number, in %v", k, v, k, rec)
			}
			if strings.HasSuffix(k, "_seconds") {
				t.Errorf("%s=%q: want a number of seconds", k, v)
			}
		}
	}
}
