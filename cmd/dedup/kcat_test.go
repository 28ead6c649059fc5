package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"dedup/internal/config"
	"dedup/internal/embedded"
	"dedup/internal/testkit"
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
	env := embeddedEnv(t, testkit.Env{"LOG_LEVEL": "info"})
	brokerAddr, metrics := env["EMBEDDED_BROKER_ADDR"], env["METRICS_ADDR"]
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

	testkit.WaitFor(t, "every input record decided", 60*time.Second, func() (bool, error) {
		n, err := testkit.MetricSum(metrics, "dedup_messages_total")
		return n == keys*copies, err
	})
	testkit.WaitFor(t, "every first occurrence written", 30*time.Second, func() (bool, error) {
		n, err := testkit.SumEndOffsets(brokerAddr, "events-deduped", 2)
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

// walkthrough returns the fenced blocks of the README's "Walkthrough with
// kcat" subsection.
func walkthrough(t *testing.T) [][]string {
	t.Helper()
	_, sec, ok := strings.Cut(readmeSection(t, "Quick start"), "\n### Walkthrough with kcat\n")
	if !ok {
		t.Fatal("README.md: no '### Walkthrough with kcat' under Quick start")
	}
	if i := strings.Index(sec, "\n### "); i >= 0 {
		sec = sec[:i]
	}
	return fencedBlocks(sec)
}

// TestREADMEKcatWalkthrough runs the README's kcat commands, as written
// (only the broker address replaced), against the stage with the embedded
// broker and the defaults a new user has (three partitions), and compares
// what kcat prints with the output the README shows. The record without a
// key goes to a random partition: its partition and offset are not compared.
func TestREADMEKcatWalkthrough(t *testing.T) {
	kcatPath(t)
	blocks := walkthrough(t)
	if len(blocks) != 4 {
		t.Fatalf("walkthrough: %d code blocks, want 4 (produce, consume, its output, retract)", len(blocks))
	}
	const readmeAddr = "127.0.0.1:9092"
	produceCmd, consumeCmd, shown, retractCmd := blocks[0][0], blocks[1][0], blocks[2], blocks[3][0]
	for _, c := range []string{produceCmd, consumeCmd, retractCmd} {
		if !strings.Contains(c, "kcat ") || !strings.Contains(c, "-b "+readmeAddr) {
			t.Fatalf("walkthrough command %q: want kcat against %s", c, readmeAddr)
		}
	}
	if !strings.Contains(consumeCmd, " -e") {
		t.Errorf("walkthrough consume command %q lacks -e: it would wait for ever", consumeCmd)
	}

	env := embeddedEnv(t, testkit.Env{"LOG_LEVEL": "info"})
	delete(env, "EMBEDDED_PARTITIONS") // a new user's default
	brokerAddr, metrics := env["EMBEDDED_BROKER_ADDR"], env["METRICS_ADDR"]
	stage := startInProcess(t, env)
	waitReady(t, stage, metrics)

	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	sh := func(cmd string) string {
		t.Helper()
		c := exec.CommandContext(ctx, "sh", "-c", strings.ReplaceAll(cmd, readmeAddr, brokerAddr))
		var stderr bytes.Buffer
		c.Stderr = &stderr
		out, err := c.Output()
		if err != nil {
			t.Fatalf("%s: %v\n%s", cmd, err, stderr.String())
		}
		if stderr.Len() > 0 {
			t.Errorf("%s printed on stderr (a new user sees it):\n%s", cmd, stderr.String())
		}
		return string(out)
	}
	sh(produceCmd)
	inputs := strings.Count(produceCmd, `\n`)
	testkit.WaitFor(t, "every input record decided", 30*time.Second, func() (bool, error) {
		n, err := testkit.MetricSum(metrics, "dedup_messages_total")
		return n == float64(inputs), err
	})
	unkeyed := regexp.MustCompile(`^( .*dedup-source-partition=)\d+(,dedup-source-offset=)\d+$`)
	normalise := func(lines []string) []string {
		var out []string
		for _, l := range lines {
			if l = strings.TrimRight(l, "\r"); l != "" {
				out = append(out, unkeyed.ReplaceAllString(l, "${1}P${2}O"))
			}
		}
		slices.Sort(out)
		return out
	}
	want := normalise(shown)
	var got []string
	testkit.WaitFor(t, "the README's output", 30*time.Second, func() (bool, error) {
		got = normalise(strings.Split(sh(consumeCmd), "\n"))
		return len(got) >= len(want), nil
	})
	if !slices.Equal(got, want) {
		t.Errorf("the README's consume command prints (sorted, unkeyed partition and offset masked)\n%s\nthe README shows\n%s",
			strings.Join(got, "\n"), strings.Join(want, "\n"))
	}

	// The retraction is forwarded: one more record, key a, empty value.
	sh(retractCmd)
	testkit.WaitFor(t, "the retraction forwarded", 30*time.Second, func() (bool, error) {
		for _, l := range strings.Split(sh(consumeCmd), "\n") {
			if strings.HasPrefix(l, "a  ") && strings.Contains(l, "dedup-retract=1") && strings.Contains(l, "dedup-source-topic=events") {
				return true, nil
			}
		}
		return false, nil
	})
	if code := stage.stop(t); code != exitOK {
		t.Fatalf("exit code after stop = %d, want 0", code)
	}
}

// TestKcatHintExits: the start-up hint's consume command ends at the end
// of the topic, as the README's does.
func TestKcatHintExits(t *testing.T) {
	var b bytes.Buffer
	embedded.PrintKcatHelp(&b, "127.0.0.1:9092", &config.Config{InputTopic: "events", OutputTopic: "events-deduped", DataDir: "data", RetractHeader: "dedup-retract"})
	for _, line := range strings.Split(b.String(), "\n") {
		if strings.Contains(line, "kcat -C") && !strings.Contains(line, " -e") {
			t.Errorf("start-up hint %q lacks -e: kcat would wait for ever", line)
		}
	}
}
