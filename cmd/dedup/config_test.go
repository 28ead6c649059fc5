package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"dedup/internal/config"
	"dedup/internal/testkit"
)

func TestRunConfigErrorExits2BeforeKafka(t *testing.T) {
	// KAFKA_BROKERS points at a port nobody listens on: a run that got past
	// validation would fail to connect with exit 1 (or hang), not exit 2.
	env := testkit.Env{
		"KAFKA_BROKERS": "127.0.0.1:1",
		"DEDUP_WINDOW":  "forever",
		"DEDUP_MODE":    "fancy",
		"METRICS_ADDR":  "",
	}
	for _, args := range [][]string{nil, {"run"}, {"demo"}, {"inspect"}} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), args, env.Lookup, &stdout, &stderr)
		if code != exitConfig {
			t.Errorf("run %q: exit %d, want %d; stderr:\n%s", args, code, exitConfig, stderr.String())
		}
		for _, name := range []string{"DEDUP_WINDOW", "DEDUP_MODE"} {
			if !strings.Contains(stderr.String(), name) {
				t.Errorf("run %q: stderr does not name %s:\n%s", args, name, stderr.String())
			}
		}
	}
}

func TestRunUnknownSubcommandExits2(t *testing.T) {
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"frobnicate"}, testkit.Env{}.Lookup, &stdout, &stderr); code != exitConfig {
		t.Fatalf("exit %d, want %d", code, exitConfig)
	}
	if !strings.Contains(stderr.String(), "frobnicate") {
		t.Errorf("stderr does not name the subcommand: %s", stderr.String())
	}
}

func TestDemoGenerateOnlyNeedsBrokers(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"demo", "--generate-only"}, testkit.Env{}.Lookup, &stdout, &stderr)
	if code != exitConfig || !strings.Contains(stderr.String(), "KAFKA_BROKERS") {
		t.Fatalf("exit %d, stderr %q; want exit 2 naming KAFKA_BROKERS", code, stderr.String())
	}
}

func TestRunRefusesBeforeStarting(t *testing.T) {
	env := testkit.Env{
		"DATA_DIR":             t.TempDir(),
		"DEDUP_EXPECTED_KEYS":  "100000000000",
		"DEDUP_FP_RATE":        "0.9",
		"METRICS_ADDR":         ":99999",
		"EMBEDDED_BROKER_ADDR": "127.0.0.1:99999",
		"KAFKA_START_OFFSET":   "Latest", // accepted: case-insensitive
	}
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), nil, env.Lookup, &stdout, &stderr); code != exitConfig {
		t.Fatalf("exit %d, want %d; stderr:\n%s", code, exitConfig, stderr.String())
	}
	for _, name := range []string{"DEDUP_EXPECTED_KEYS", "DEDUP_FP_RATE", "METRICS_ADDR", "EMBEDDED_BROKER_ADDR"} {
		if !strings.Contains(stderr.String(), "  "+name+": ") {
			t.Errorf("stderr does not name %s:\n%s", name, stderr.String())
		}
	}
	if strings.Contains(stderr.String(), "KAFKA_START_OFFSET") || stdout.Len() > 0 {
		t.Errorf("unexpected output; stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	}
	if _, err := os.Stat(filepath.Join(env["DATA_DIR"], "broker")); err == nil {
		t.Error("the embedded broker started despite the configuration errors")
	}
}

func TestRequireBrokers(t *testing.T) {
	var stdout, stderr bytes.Buffer
	env := testkit.Env{"DEDUP_REQUIRE_BROKERS": "true", "DATA_DIR": t.TempDir()}
	if code := run(context.Background(), nil, env.Lookup, &stdout, &stderr); code != exitConfig {
		t.Fatalf("exit %d, want %d", code, exitConfig)
	}
	if !strings.Contains(stderr.String(), "KAFKA_BROKERS: must be set") {
		t.Errorf("stderr:\n%s", stderr.String())
	}
	env["KAFKA_BROKERS"] = "k:9092"
	if _, err := config.Load(env.Lookup); err != nil {
		t.Errorf("with KAFKA_BROKERS set: %v", err)
	}
}
