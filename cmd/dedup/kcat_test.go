package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"dedup/processor"
)

// kcatPath finds kcat; without it the test is skipped on a workstation and
// fails in CI (CI=true), where .ci/run installs it.
func kcatPath(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("kcat")
	if err == nil {
		return path
	}
	if os.Getenv("CI") != "" && os.Getenv("CI") != "false" {
		t.Fatalf("kcat is required in CI: %v", err)
	}
	t.Skipf("kcat not installed: %v", err)
	return ""
}

// TestKcatInterop drives the stage with librdkafka's kcat: keyed records
// with duplicates in, the deduplicated topic out, source headers on it.
func TestKcatInterop(t *testing.T) {
	kcat := kcatPath(t)
	env := testEnv(t)
	brokerAddr := freeAddr(t)
	env["EMBEDDED_BROKER_ADDR"] = brokerAddr
	env["LOG_LEVEL"] = "info"
	metrics := env["METRICS_ADDR"]
	stage := startInProcess(t, env)
	waitReady(t, stage, metrics)

	// 15 keys, each three times, interleaved; values name the copy.
	const keys, copies = 15, 3
	var in bytes.Buffer
	for c := range copies {
		for k := range keys {
			fmt.Fprintf(&in, "user-%02d:event-%02d-copy%d\n", k, k, c)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	produce := exec.CommandContext(ctx, kcat, "-P", "-b", brokerAddr, "-t", "events", "-K:")
	produce.Stdin = &in
	if out, err := produce.CombinedOutput(); err != nil {
		t.Fatalf("kcat -P: %v\n%s", err, out)
	}

	waitFor(t, "every input record decided", 60*time.Second, func() (bool, error) {
		n, err := metricSum(metrics, "dedup_messages_total")
		return n == keys*copies, err
	})
	waitFor(t, "every first occurrence written", 30*time.Second, func() (bool, error) {
		n, err := sumEndOffsets(brokerAddr, "events-deduped", 2)
		return n == keys, err
	})
	consume := exec.CommandContext(ctx, kcat, "-C", "-b", brokerAddr, "-t", "events-deduped", "-e", "-o", "beginning",
		"-f", "%k|%s|%h\n")
	var stderr bytes.Buffer
	consume.Stderr = &stderr
	out, err := consume.Output()
	if err != nil {
		t.Fatalf("kcat -C: %v\n%s", err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != keys {
		t.Fatalf("kcat read %d records from events-deduped, want %d:\n%s", len(lines), keys, out)
	}
	seen := make(map[string]bool)
	for _, line := range lines {
		parts := strings.SplitN(line, "|", 3)
		if len(parts) != 3 {
			t.Fatalf("unexpected kcat line %q", line)
		}
		key, value, headers := parts[0], parts[1], parts[2]
		if seen[key] {
			t.Errorf("key %s forwarded twice", key)
		}
		seen[key] = true
		if !strings.HasSuffix(value, "-copy0") {
			t.Errorf("key %s: value %q, want the first occurrence", key, value)
		}
		for _, h := range []string{processor.HeaderSourceTopic + "=events", processor.HeaderSourcePartition + "=", processor.HeaderSourceOffset + "="} {
			if !strings.Contains(headers, h) {
				t.Errorf("key %s: headers %q lack %q", key, headers, h)
			}
		}
	}
	if code := stage.stop(t); code != exitOK {
		t.Fatalf("exit code after stop = %d, want 0", code)
	}
}
