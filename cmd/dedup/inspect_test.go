package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"

	"dedup/checkpoint"
	"dedup/internal/testkit"
	"dedup/rotation"
)

// TestInspectFileStore saves real snapshots, corrupts one, and checks what
// `dedup inspect` reports for each.
func TestInspectFileStore(t *testing.T) {
	dataDir := t.TempDir()
	store, err := checkpoint.NewFileStore(checkpoint.FileOptions{Dir: filepath.Join(dataDir, "checkpoints"), Keep: 3, Group: "dedup"})
	if err != nil {
		t.Fatal(err)
	}
	opts := rotation.Options{ExpectedKeys: 10000, FPRate: 0.001, Window: time.Hour, Mode: rotation.Counting}
	const keys = 500
	ts := time.Date(2030, 1, 1, 10, 15, 0, 0, time.UTC)
	for part, offset := range []int64{4242, 77} {
		pair, err := rotation.New(opts)
		if err != nil {
			t.Fatal(err)
		}
		for i := range keys {
			pair.TestAndAdd(fmt.Appendf(nil, "p%d-key-%d", part, i), ts)
		}
		_, err = store.Save(context.Background(), checkpoint.Meta{
			Group: "dedup", Topic: "events", Partition: part, Offset: offset, OutputTopic: "events-deduped",
		}, pair)
		if err != nil {
			t.Fatal(err)
		}
	}
	// Flip a byte in the middle of partition 1's snapshot.
	entries, err := store.List(context.Background())
	if err != nil || len(entries) != 2 {
		t.Fatalf("List: %v, %d entries", err, len(entries))
	}
	testkit.Corrupt(t, entries[1].Where)

	var stdout, stderr bytes.Buffer
	env := testkit.Env{"DATA_DIR": dataDir}
	if code := run(context.Background(), []string{"inspect"}, env.Lookup, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr.String())
	}
	out := stdout.String()
	sections := strings.Split(out, "\nevents/")
	if len(sections) != 3 {
		t.Fatalf("want a header and two snapshots:\n%s", out)
	}
	good, corrupt := sections[1], sections[2]
	for _, want := range []string{"0  seq ", "offset 4242", ": ok", "mode counting", "window 1h0m0s starting 2030-01-01T10:00:00Z", "current:", "previous:"} {
		if !strings.Contains(good, want) {
			t.Errorf("partition 0 section lacks %q:\n%s", want, good)
		}
	}
	m := regexp.MustCompile(`current: +fill +[0-9.e+-]+%  est\. keys (\d+)`).FindStringSubmatch(good)
	if m == nil {
		t.Fatalf("no estimated keys for the current generation:\n%s", good)
	}
	if est, _ := strconv.Atoi(m[1]); est < keys*9/10 || est > keys*11/10 {
		t.Errorf("estimated keys %d, want within 10%% of %d", est, keys)
	}
	if !strings.HasPrefix(corrupt, "1  seq ") || !strings.Contains(corrupt, "BAD") {
		t.Errorf("the corrupted snapshot is not reported as BAD:\n%s", corrupt)
	}

	// A restore finds it damaged and keeps it aside: inspect still shows
	// it, with its verdict and where it is now.
	if _, _, err := store.Load(context.Background(), "events", 1, func(checkpoint.Meta, io.Reader) error { return nil }); err == nil {
		t.Fatal("load of the damaged snapshot succeeded")
	}
	stdout.Reset()
	if code := run(context.Background(), []string{"inspect"}, env.Lookup, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr.String())
	}
	sections = strings.Split(stdout.String(), "\nevents/")
	if len(sections) != 3 || !strings.Contains(sections[2], "DAMAGED, kept aside: ") ||
		!strings.Contains(sections[2], "checksum mismatch") || !strings.Contains(sections[2], filepath.Join("1", "damaged")+string(filepath.Separator)) {
		t.Errorf("the snapshot kept aside is not shown as such:\n%s", stdout.String())
	}
}

// TestInspectNothingFound runs inspect where no store exists, with both
// stores: it says where it looked and which variables choose the store,
// exits 0, and creates nothing.
func TestInspectNothingFound(t *testing.T) {
	cluster := testkit.Cluster(t, 2)
	addr := cluster.ListenAddrs()[0]
	for _, c := range []struct {
		store string
		env   testkit.Env
		where string
	}{
		{"file", testkit.Env{}, "(directory "},
		{"kafka", testkit.Env{"KAFKA_BROKERS": addr}, "(topic dedup-dedup-state on " + addr + ")"},
	} {
		t.Run(c.store, func(t *testing.T) {
			dataDir := t.TempDir()
			env := testkit.Env{"DATA_DIR": dataDir}
			for k, v := range c.env {
				env[k] = v
			}
			var stdout, stderr bytes.Buffer
			if code := run(context.Background(), []string{"inspect"}, env.Lookup, &stdout, &stderr); code != exitOK {
				t.Fatalf("exit %d; stderr:\n%s", code, stderr.String())
			}
			out := stdout.String()
			for _, want := range []string{"checkpoint store: " + c.store + " " + c.where, "does not exist: 0 snapshot(s)",
				"CHECKPOINT_STORE", "CHECKPOINT_DIR", "CHECKPOINT_TOPIC", "KAFKA_BROKERS", "GROUP_ID"} {
				if !strings.Contains(out, want) {
					t.Errorf("output lacks %q:\n%s", want, out)
				}
			}
			if ents, err := os.ReadDir(dataDir); err != nil || len(ents) != 0 {
				t.Errorf("inspect created %v in DATA_DIR (%v)", ents, err)
			}
		})
	}
	// The Kafka store's topic is still absent: inspect never creates it.
	client := testkit.KafkaClient(t, addr)
	md, err := client.Metadata(context.Background(), &kafka.MetadataRequest{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tp := range md.Topics {
		if tp.Name == "dedup-dedup-state" {
			t.Errorf("inspect created the checkpoint topic")
		}
	}
	// An existing but empty directory holds no snapshot.
	dataDir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dataDir, "checkpoints", "dedup"), 0o755); err != nil {
		t.Fatal(err)
	}
	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"inspect"}, testkit.Env{"DATA_DIR": dataDir}.Lookup, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr.String())
	}
	if !strings.Contains(stdout.String(), "holds no snapshot: 0 snapshot(s)") {
		t.Errorf("empty directory:\n%s", stdout.String())
	}
}

// TestInspectKafkaStore reads snapshots from a compacted topic on a broker.
func TestInspectKafkaStore(t *testing.T) {
	cluster := testkit.Cluster(t, 2)
	addr := cluster.ListenAddrs()[0]
	ctx := context.Background()
	store, err := checkpoint.NewKafkaStore(ctx, checkpoint.KafkaOptions{
		Brokers: []string{addr}, Topic: "dedup-dedup-state", Group: "dedup", Keep: 3,
	})
	if err != nil {
		t.Fatal(err)
	}
	pair, err := rotation.New(rotation.Options{ExpectedKeys: 1000, FPRate: 0.01, Window: time.Minute, Mode: rotation.Plain})
	if err != nil {
		t.Fatal(err)
	}
	pair.TestAndAdd([]byte("k"), time.Now())
	if _, err := store.Save(ctx, checkpoint.Meta{Group: "dedup", Topic: "events", Partition: 1, Offset: 99, OutputTopic: "events-deduped"}, pair); err != nil {
		t.Fatal(err)
	}
	if err := store.Close(); err != nil {
		t.Fatal(err)
	}

	var stdout, stderr bytes.Buffer
	env := testkit.Env{"KAFKA_BROKERS": addr, "DATA_DIR": t.TempDir()}
	if code := run(ctx, []string{"inspect"}, env.Lookup, &stdout, &stderr); code != exitOK {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr.String())
	}
	out := stdout.String()
	for _, want := range []string{"checkpoint store: kafka (topic dedup-dedup-state", "1 snapshot(s)", "events/1  seq ", "offset 99", ": ok", "mode plain, window 1m0s"} {
		if !strings.Contains(out, want) {
			t.Errorf("inspect output lacks %q:\n%s", want, out)
		}
	}
}

// TestInspectShowsKeptFilters: after DEDUP_EXPECTED_KEYS changes, the
// stage's checkpoints carry the filters from before the change, and
// inspect shows them and when they are released.
func TestInspectShowsKeptFilters(t *testing.T) {
	cluster := testkit.Cluster(t, 2)
	addr := cluster.ListenAddrs()[0]
	env := clusterEnv(t, cluster, testkit.Env{"CHECKPOINT_STORE": "file", "DEDUP_WINDOW": "1m"})
	ts := time.Date(2026, 1, 1, 10, 15, 30, 0, time.UTC)
	client := []kgo.Opt{kgo.SeedBrokers(addr), kgo.RecordPartitioner(kgo.ManualPartitioner())}
	runOnce := func(expected string, produceFirst bool) {
		t.Helper()
		env["DEDUP_EXPECTED_KEYS"] = expected
		stage := startInProcess(t, env)
		waitReady(t, stage, env["METRICS_ADDR"])
		if produceFirst {
			testkit.Produce(t, client, &kgo.Record{Topic: "events", Partition: 0, Key: []byte("k"), Value: []byte("v"), Timestamp: ts})
			testkit.ConsumeN(t, client, "events-deduped", 1)
		}
		if code := stage.stop(t); code != exitOK {
			t.Fatalf("exit %d after stop, want 0", code)
		}
	}
	runOnce("1000", true)
	runOnce("2000", false)

	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"inspect"}, env.Lookup, &stdout, &stderr); code != exitOK {
		t.Fatalf("inspect: exit %d; stderr:\n%s", code, stderr.String())
	}
	newest := strings.Split(stdout.String(), "\nevents/0  seq ")[1] // newest first
	for _, want := range []string{
		"kept from before the filter options changed: mode fingerprint, window 1m0s starting 2026-01-01T10:15:00Z",
		"0 key(s) retracted since; released when event time reaches 2026-01-01T10:17:00Z",
	} {
		if !strings.Contains(newest, want) {
			t.Errorf("the newest snapshot of events/0 lacks %q:\n%s", want, newest)
		}
	}
	if strings.Contains(stdout.String(), "events/1  seq") && strings.Contains(strings.Split(stdout.String(), "\nevents/1  seq ")[1], "kept from before") {
		t.Errorf("events/1, which no record reached, keeps old filters:\n%s", stdout.String())
	}
}

// TestInspectShowsChain: a base and the increments on it, in either store,
// are shown as one chain: the base in full, a line per increment, and the
// state of the chain's head with every increment applied (its estimated
// keys count the keys the increments added).
func TestInspectShowsChain(t *testing.T) {
	for _, kind := range []string{"file", "kafka"} {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			dataDir := t.TempDir()
			env := testkit.Env{"DATA_DIR": dataDir}
			var store checkpoint.Store
			var err error
			if kind == "file" {
				store, err = checkpoint.NewFileStore(checkpoint.FileOptions{Dir: filepath.Join(dataDir, "checkpoints"), Keep: 3, Group: "dedup"})
			} else {
				addr := testkit.Cluster(t, 1).ListenAddrs()[0]
				env["KAFKA_BROKERS"] = addr
				store, err = checkpoint.NewKafkaStore(ctx, checkpoint.KafkaOptions{Brokers: []string{addr}, Topic: "dedup-dedup-state", Group: "dedup", Keep: 3})
			}
			if err != nil {
				t.Fatal(err)
			}
			pair, err := rotation.New(rotation.Options{ExpectedKeys: 20000, FPRate: 0.001, Window: time.Hour, Mode: rotation.Fingerprint})
			if err != nil {
				t.Fatal(err)
			}
			ts := time.Date(2030, 1, 1, 10, 15, 0, 0, time.UTC)
			add := func(from, n int) {
				for i := from; i < from+n; i++ {
					pair.TestAndAdd(fmt.Appendf(nil, "key-%d", i), ts)
				}
			}
			meta := checkpoint.Meta{Group: "dedup", Topic: "events", Partition: 2, OutputTopic: "events-deduped"}
			add(0, 1000)
			meta.Offset = 1000
			base, err := store.Save(ctx, meta, pair)
			if err != nil {
				t.Fatal(err)
			}
			pair.ResetDelta()
			prev := base.Seq
			var d rotation.Delta
			for i := range 3 {
				add(1000+1000*i, 1000)
				pair.TakeDelta(&d)
				m := meta
				m.Offset, m.Base, m.Prev = int64(2000+1000*i), base.Seq, prev
				if i == 2 {
					m.Owner = 7 // the partition moved: its new owner went on with the chain
				}
				saved, err := store.Save(ctx, m, &d)
				if err != nil {
					t.Fatal(err)
				}
				prev = saved.Seq
			}
			if err := store.Close(); err != nil {
				t.Fatal(err)
			}

			var stdout, stderr bytes.Buffer
			if code := run(ctx, []string{"inspect"}, env.Lookup, &stdout, &stderr); code != exitOK {
				t.Fatalf("exit %d; stderr:\n%s", code, stderr.String())
			}
			out := stdout.String()
			for _, want := range []string{"4 snapshot(s): 1 base(s), 3 increment(s)", "offset 1000", "mode fingerprint",
				fmt.Sprintf("chain head: seq %d, offset 4000: 3 increment(s)", prev)} {
				if !strings.Contains(out, want) {
					t.Errorf("inspect output lacks %q:\n%s", want, out)
				}
			}
			if n := len(regexp.MustCompile(`(?m)^  \+ increment seq \d+ \(after \d+\): offset \d+, .*  ok$`).FindAllString(out, -1)); n != 3 {
				t.Errorf("%d increments shown as applied, want 3:\n%s", n, out)
			}
			if n := len(regexp.MustCompile(`(?m)^  \+ increment seq \d+ \(after \d+\): offset 4000, .*, written by generation 7  ok$`).FindAllString(out, -1)); n != 1 {
				t.Errorf("%d increments shown as written by generation 7, want the one at offset 4000:\n%s", n, out)
			}
			head := out[strings.Index(out, "chain head:"):]
			m := regexp.MustCompile(`current: +fill +[0-9.e+-]+%  est\. keys (\d+)`).FindStringSubmatch(head)
			if m == nil {
				t.Fatalf("no estimated keys for the chain head's current generation:\n%s", out)
			}
			if est, _ := strconv.Atoi(m[1]); est < 3600 || est > 4400 {
				t.Errorf("chain head holds about %d keys, want about 4000 (the base's and every increment's)", est)
			}
		})
	}
}
