package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"dedup/internal/testkit"
	"dedup/offsets"
)

// TestDamagedNewestSnapshotBinary: the real binary with the file store
// runs, stops, and the newest piece of partition 0 is damaged on disk
// before it runs again: a base (full snapshots only,
// CHECKPOINT_CHAIN_RATIO=0) or an increment (the default: the stop's
// checkpoint). The second run names the file in a warning, counts it, keeps
// it under the partition's damaged/ directory, restores what is before it,
// and the output still holds every first occurrence exactly once.
func TestDamagedNewestSnapshotBinary(t *testing.T) {
	for _, tc := range []struct {
		piece, ratio, ext string
	}{{"base", "0", ".ckpt"}, {"increment", "", ".inc"}} {
		t.Run(tc.piece, func(t *testing.T) { damagedNewest(t, tc.ratio, tc.ext) })
	}
}

func damagedNewest(t *testing.T, ratio, ext string) {
	cluster := testkit.Cluster(t, 2)
	env := clusterEnv(t, cluster, testkit.Env{"CHECKPOINT_STORE": "file", "LOG_LEVEL": "info"})
	if ratio != "" {
		env["CHECKPOINT_CHAIN_RATIO"] = ratio
	}
	metrics := env["METRICS_ADDR"]
	client := []kgo.Opt{kgo.SeedBrokers(cluster.ListenAddrs()[0])}

	const keys = 30
	all := keyedWithDuplicates("events", keys, 2) // copy0 of every key, then copy1
	before, after := all[:20], all[20:]
	runOnce(t, cluster, env, before, len(before))

	dir := partitionDirs(env["DATA_DIR"])[0]
	names, err := filepath.Glob(filepath.Join(dir, "*.*"))
	if err != nil || len(names) < 2 {
		t.Fatalf("partition 0 holds %d pieces (%v), want at least 2: the test needs an older one to fall back to", len(names), err)
	}
	slices.Sort(names) // names start with zero-padded sequence numbers
	newest := names[len(names)-1]
	if filepath.Ext(newest) != ext {
		t.Fatalf("the newest piece is %s, want a %s file", filepath.Base(newest), ext)
	}
	raw := testkit.Corrupt(t, newest)

	second := startBinary(t, env)
	waitReady(t, second, metrics)
	waitLog(t, second, "level=WARN", "checkpoint damaged", "path="+newest, "checksum mismatch")
	waitMetric(t, metrics, "dedup_checkpoint_damaged_total", 1, `partition="0"`)
	waitMetric(t, metrics, "dedup_checkpoint_damaged_total", 1)
	waitMetric(t, metrics, "dedup_restores_total", 1, `source="fallback"`)
	if _, err := os.Stat(newest); !os.IsNotExist(err) {
		t.Errorf("damaged snapshot still at %s (%v), want it moved aside", newest, err)
	}
	kept, err := filepath.Glob(filepath.Join(dir, "damaged", "*"+ext))
	if err != nil || len(kept) != 1 || !strings.HasSuffix(kept[0], "-"+filepath.Base(newest)) {
		t.Errorf("kept aside %v (%v), want the damaged %s", kept, err, filepath.Base(newest))
	} else if got, err := os.ReadFile(kept[0]); err != nil || string(got) != string(raw) {
		t.Errorf("kept file differs from the damaged one (%v)", err)
	}
	if lines := logLines(second.stderr.String(), "checkpoint damaged"); len(lines) != 1 || !strings.Contains(lines[0], "kept_at="+kept[0]) {
		t.Errorf("%d `checkpoint damaged` lines, want one naming where it was kept:\n%s", len(lines), strings.Join(lines, "\n"))
	}

	testkit.Produce(t, client, after...)
	waitCommitted(t, cluster, int64(len(all)))
	checkExactlyOnce(t, cluster.ListenAddrs()[0], client, keys)
	second.stopOK(t, "second run")
}

// ranOnceOnFiles runs the real binary with the file store over 20 keys and
// stops it gracefully: every partition has its snapshots and its commit.
func ranOnceOnFiles(t *testing.T) (*kfake.Cluster, testkit.Env) {
	t.Helper()
	cluster := testkit.Cluster(t, 2)
	env := clusterEnv(t, cluster, testkit.Env{"CHECKPOINT_STORE": "file", "LOG_LEVEL": "info"})
	recs := keyedWithDuplicates("events", 20, 1)
	runOnce(t, cluster, env, recs, len(recs))
	return cluster, env
}

// TestCheckpointsMissingBinary: between two runs of the real binary the
// file store loses partition 0's directory while the group keeps its
// committed offsets. The second run says so at error naming the
// partition, counts dedup_checkpoint_missing_total for it alone, and
// starts it empty; partition 1 restores from its snapshot.
func TestCheckpointsMissingBinary(t *testing.T) {
	_, env := ranOnceOnFiles(t)
	metrics := env["METRICS_ADDR"]
	if err := os.RemoveAll(partitionDirs(env["DATA_DIR"])[0]); err != nil {
		t.Fatal(err)
	}

	second := startBinary(t, env)
	waitReady(t, second, metrics)
	waitLog(t, second, "level=ERROR", "no checkpoint of events/0 although the group committed an offset")
	waitMetric(t, metrics, "dedup_checkpoint_missing_total", 1, `partition="0"`)
	waitMetric(t, metrics, "dedup_checkpoint_missing_total", 1)
	waitMetric(t, metrics, "dedup_restores_total", 1, `source="empty"`)
	waitMetric(t, metrics, "dedup_restores_total", 1, `source="latest"`)
	if lines := logLines(second.stderr.String(), "no checkpoint of events/1"); len(lines) != 0 {
		t.Errorf("partition 1 kept its snapshots, yet:\n%s", strings.Join(lines, "\n"))
	}
	second.stopOK(t, "second run")
}

// TestOutputTruncatedWhileStopped: the output topic is deleted and created
// again between two runs of the real binary, so each output partition ends
// below the end the checkpoints recorded. The second run's restores name
// each such partition at error and count it once (input partition p
// writes to output partition p when the counts are equal).
func TestOutputTruncatedWhileStopped(t *testing.T) {
	cluster, env := ranOnceOnFiles(t)
	metrics := env["METRICS_ADDR"]
	ends, err := offsets.List(context.Background(), testkit.KafkaClient(t, cluster.ListenAddrs()[0]), "events-deduped", []int{0, 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := cluster.DeleteTopic("events-deduped"); err != nil {
		t.Fatal(err)
	}
	if err := cluster.CreateTopic("events-deduped", 2, nil); err != nil {
		t.Fatal(err)
	}

	second := startBinary(t, env)
	waitReady(t, second, metrics)
	for p, r := range ends {
		end := r.End
		if end == 0 {
			t.Fatalf("output partition %d was never written: the test would prove nothing", p)
		}
		waitLog(t, second, "level=ERROR", "output partition truncated", fmt.Sprintf("partition=%d ", p),
			fmt.Sprintf("checkpoint_end_offset=%d ", end), "end_offset=0 ")
		waitMetric(t, metrics, "dedup_output_truncations_total", 1, `topic="events-deduped"`, fmt.Sprintf(`partition="%d"`, p))
	}
	second.stopOK(t, "second run")
}

// TestAllSnapshotsDamagedRefuseBinary: every snapshot of partition 0 is
// damaged between two runs of the real binary, with
// CHECKPOINT_ON_DAMAGE=refuse. The second run says so at error level
// naming each file, does not start partition 0 (/readyz 503 naming it,
// /healthz 200) while partition 1 runs, and starts it once the damaged
// files are removed; the output holds every first occurrence exactly once.
func TestAllSnapshotsDamagedRefuseBinary(t *testing.T) {
	cluster := testkit.Cluster(t, 2)
	env := clusterEnv(t, cluster, testkit.Env{"CHECKPOINT_STORE": "file", "CHECKPOINT_ON_DAMAGE": "refuse", "LOG_LEVEL": "info"})
	metrics := env["METRICS_ADDR"]
	client := []kgo.Opt{kgo.SeedBrokers(cluster.ListenAddrs()[0])}

	const keys = 30
	all := keyedWithDuplicates("events", keys, 1)
	before, after := all[:20], all[20:]
	runOnce(t, cluster, env, before, len(before))

	dir := partitionDirs(env["DATA_DIR"])[0]
	names, err := filepath.Glob(filepath.Join(dir, "*.ckpt"))
	if err != nil || len(names) == 0 {
		t.Fatalf("partition 0 holds no snapshot (%v)", err)
	}
	for _, n := range names {
		if err := os.Truncate(n, 10); err != nil {
			t.Fatal(err)
		}
	}

	second := startBinary(t, env)
	waitNotReadyNaming(t, metrics, "partitions [0] not started")
	waitLog(t, second, "level=ERROR", "every checkpoint of events/0 damaged")
	waitMetric(t, metrics, "dedup_checkpoint_damaged_total", float64(len(names)), `partition="0"`)
	checkHealthy(t, metrics)
	lines := logLines(second.stderr.String(), "level=ERROR", "every checkpoint of events/0 damaged")
	for _, n := range names {
		if !strings.Contains(lines[0], filepath.Join(dir, "damaged")) || len(logLines(second.stderr.String(), "checkpoint damaged", "path="+n)) != 1 {
			t.Errorf("the damaged snapshot %s is not named once by a warning, and kept under damaged/ by the error line:\n%s", n, lines[0])
		}
	}

	// The operator removes the damaged files; the retry starts the partition.
	if err := os.RemoveAll(filepath.Join(dir, "damaged")); err != nil {
		t.Fatal(err)
	}
	waitReady(t, second, metrics)
	testkit.Produce(t, client, after...)
	waitCommitted(t, cluster, int64(len(all)))
	checkExactlyOnce(t, cluster.ListenAddrs()[0], client, keys)
	second.stopOK(t, "second run")
}
