package processor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"dedup/checkpoint"
	"dedup/processor/partition"
)

// TestCheckpointDamagedRefuse: with CHECKPOINT_ON_DAMAGE=refuse, a
// partition whose every snapshot is damaged is not started: nothing of it
// is consumed, readiness names it, health does not, the damaged snapshots
// are counted and kept. Once an operator removes them the retry starts the
// partition empty at the committed offset with the replay scan: no input is
// forwarded twice. Both stores.
func TestCheckpointDamagedRefuse(t *testing.T) {
	t.Run("file", func(t *testing.T) {
		e := newTestEnv(t, 2, 2)
		dir := t.TempDir()
		st, err := checkpoint.NewFileStore(checkpoint.FileOptions{Dir: dir, Keep: 3, Group: "refuse"})
		if err != nil {
			t.Fatal(err)
		}
		aside := func(p int) string { return filepath.Join(dir, "refuse", inTopic, strconv.Itoa(p), "damaged") }
		checkRefused(t, e, st, func(entries []checkpoint.Entry) {
			for _, en := range entries {
				if err := os.WriteFile(en.Where, []byte("not a checkpoint"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}, func(perPart map[int]int) {
			for p, n := range perPart {
				if kept, err := os.ReadDir(aside(p)); err != nil || len(kept) != n {
					t.Errorf("partition %d: %d files kept aside (%v), want %d", p, len(kept), err, n)
				}
			}
		}, func(entries []checkpoint.Entry) {
			for p := range 2 {
				if err := os.RemoveAll(aside(p)); err != nil {
					t.Fatal(err)
				}
			}
		})
	})
	t.Run("kafka", func(t *testing.T) {
		e := newTestEnv(t, 2, 2)
		st := kafkaStore(t, e, "refuse")
		write := func(entries []checkpoint.Entry, value []byte) {
			for _, en := range entries {
				e.produce(&kgo.Record{Topic: "refuse-state", Partition: 0, Key: []byte(en.Where), Value: value})
			}
		}
		checkRefused(t, e, st, func(entries []checkpoint.Entry) {
			write(entries, []byte("not a manifest"))
		}, func(perPart map[int]int) {
			entries, err := kafkaStore(t, e, "refuse").List(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			kept := map[int]int{}
			for _, en := range entries {
				if en.Damaged {
					kept[en.Meta.Partition]++
				}
			}
			for p, n := range perPart {
				if kept[p] != n {
					t.Errorf("partition %d: %d damaged manifests left in place, want %d", p, kept[p], n)
				}
			}
		}, func(entries []checkpoint.Entry) {
			write(entries, nil) // the operator's tombstones
		})
	})
}

func checkRefused(t *testing.T, e *testEnv, st interface {
	Store
	List(context.Context) ([]checkpoint.Entry, error)
}, damage func([]checkpoint.Entry), checkKept func(perPart map[int]int), repair func([]checkpoint.Entry)) {
	const parts = 2
	o := e.options("refuse")
	o.Store = st
	o.OnDamage = partition.OnDamageRefuse
	o.CheckpointInterval = time.Hour // only the anchor checkpoint and its commit
	out := e.collect()

	first := newWorkload(parts, 300, 2, 5)
	a := e.startAfter(t, o, first, "first batch read")
	forwarded := a.p.Progress().Forwarded
	out.until("first member's outputs", func(rs []outRec) bool { return uint64(len(rs)) >= forwarded })
	a.crash(t) // no final checkpoint, no final commit
	entries, err := st.List(context.Background())
	if err != nil || len(entries) < parts {
		t.Fatalf("list: %d entries, %v", len(entries), err)
	}
	perPart := map[int]int{}
	for _, en := range entries {
		perPart[en.Meta.Partition]++
	}
	damage(entries)

	second := newWorkload(parts, 300, 2, 6)
	e.produce(second.recs...)
	b := startFresh(t, o)
	eventually(t, 20*time.Second, "both partitions refused", func() bool {
		err := b.p.Readiness()
		return errors.Is(err, ErrCheckpointDamaged) && strings.Contains(err.Error(), "[0 1]")
	})
	if err := b.p.Healthy(); err != nil {
		t.Errorf("healthy: %v, want nil (a restart would not help)", err)
	}
	if n := b.p.Progress().In; n != 0 {
		t.Errorf("refused partitions consumed %d records", n)
	}
	for p := range parts {
		if n := metricValue(b.p.metrics.CheckpointDamaged.WithLabelValues(inTopic, strconv.Itoa(p))); n != float64(perPart[p]) {
			t.Errorf("dedup_checkpoint_damaged_total{partition=%d} = %v, want %d", p, n, perPart[p])
		}
	}
	checkKept(perPart)

	// The operator removes the damaged snapshots; the retries pick it up.
	repair(entries)
	b.waitReady(t)
	e.produce(sentinels(parts, t0.Add(time.Hour/2))...)
	got := out.untilSentinels(parts)
	checkNothingLost(t, union(parts, first, second), got)
	// Counted once each, however often the start was retried.
	for p := range parts {
		if n := metricValue(b.p.metrics.CheckpointDamaged.WithLabelValues(inTopic, strconv.Itoa(p))); n != float64(perPart[p]) {
			t.Errorf("after the repair: dedup_checkpoint_damaged_total{partition=%d} = %v, want %d", p, n, perPart[p])
		}
	}
	b.stopSuppressed(t, forwarded)
}

// TestAllSnapshotsRejected: a member forwards records and dies without a
// final checkpoint or commit; then every snapshot is damaged. Its
// successor rejects them all, starts with empty filters at the committed
// offset and scans the output from the end offsets recorded in the commit's
// metadata: no input is forwarded twice. Both stores.
func TestAllSnapshotsRejected(t *testing.T) {
	check := func(r restarted) {
		// Each damaged snapshot counted once, on its partition's series.
		for p := range 2 {
			if n := metricValue(r.b.p.metrics.CheckpointDamaged.WithLabelValues(inTopic, strconv.Itoa(p))); n != float64(r.perPart[p]) {
				r.t.Errorf("dedup_checkpoint_damaged_total{partition=%d} = %v, want %d", p, n, r.perPart[p])
			}
			if n := metricValue(r.b.p.metrics.CheckpointMissing.WithLabelValues(inTopic, strconv.Itoa(p))); n != 0 {
				r.t.Errorf("dedup_checkpoint_missing_total{partition=%d} = %v, want 0: the snapshots were there", p, n)
			}
		}
	}
	t.Run("file", func(t *testing.T) {
		e := newTestEnv(t, 2, 2)
		st := fileStore(t, "rejected")
		restartWithout(t, e, "rejected", st, check, func(entries []checkpoint.Entry) listStore {
			for _, en := range entries {
				if err := os.WriteFile(en.Where, []byte("not a checkpoint"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			return st
		})
	})
	t.Run("kafka", func(t *testing.T) {
		e := newTestEnv(t, 2, 2)
		st := kafkaStore(t, e, "rejected")
		restartWithout(t, e, "rejected", st, check, func(entries []checkpoint.Entry) listStore {
			for _, en := range entries {
				e.produce(&kgo.Record{Topic: "rejected-state", Partition: 0, Key: []byte(en.Where), Value: []byte("not a manifest")})
			}
			return st
		})
	})
}

// TestCheckpointsMissing: a member forwards records and dies without a
// final checkpoint or commit; then the checkpoint store loses everything
// (another directory or topic: a lost volume, a deleted or renamed
// topic). Its successor finds no snapshot although the group committed
// offsets: it says so at error, counts dedup_checkpoint_missing_total,
// and starts with empty filters at the committed offset with the replay
// scan from the commit's output end offsets, so no input is forwarded
// twice. Both stores.
func TestCheckpointsMissing(t *testing.T) {
	check := func(r restarted) {
		for p := range 2 {
			if n := metricValue(r.b.p.metrics.CheckpointMissing.WithLabelValues(inTopic, strconv.Itoa(p))); n != 1 {
				r.t.Errorf("dedup_checkpoint_missing_total{partition=%d} = %v, want 1", p, n)
			}
			if l := r.logs.lines("level=ERROR", fmt.Sprintf("no checkpoint of %s/%d although the group committed an offset", inTopic, p)); len(l) != 1 {
				r.t.Errorf("%d error lines name the missing checkpoint of partition %d, want 1; log:\n%s", len(l), p, r.logs.String())
			}
		}
	}
	t.Run("file", func(t *testing.T) {
		e := newTestEnv(t, 2, 2)
		restartWithout(t, e, "missing", fileStore(t, "missing"), check, func([]checkpoint.Entry) listStore {
			return fileStore(t, "missing") // another, empty directory
		})
	})
	t.Run("kafka", func(t *testing.T) {
		e := newTestEnv(t, 2, 2)
		restartWithout(t, e, "missing", kafkaStore(t, e, "missing"), check, func([]checkpoint.Entry) listStore {
			return kafkaStoreOn(t, e, "missing", "missing-state-new") // another, empty topic
		})
	})
}

// restarted is restartWithout's successor (running), how many snapshots
// each partition had, and the successor's log.
type restarted struct {
	t       *testing.T
	b       *running
	perPart map[int]int
	logs    *lockedBuffer
}

type listStore interface {
	Store
	List(context.Context) ([]checkpoint.Entry, error)
}

// restartWithout runs a member over a workload until it has checkpointed
// and committed once (the anchor) and forwarded records, crashes it (no
// final checkpoint, no final commit), lets lose do away with its
// snapshots and starts a successor on the store lose returns. Whatever
// happened to the snapshots, no first occurrence is lost, the successor's
// replay scan suppresses exactly what the crashed member forwarded, and
// every partition starts empty; check runs before the successor stops.
func restartWithout(t *testing.T, e *testEnv, group string, st listStore, check func(restarted), lose func([]checkpoint.Entry) listStore) {
	const parts = 2
	o := e.options(group)
	o.Store = st
	o.CheckpointInterval = time.Hour // only the anchor checkpoint and its commit
	out := e.collect()

	first := newWorkload(parts, 300, 2, 5)
	a := e.startAfter(t, o, first, "first batch read")
	forwarded := a.p.Progress().Forwarded
	if forwarded == 0 {
		t.Fatal("nothing forwarded: the test would prove nothing")
	}
	out.until("first member's outputs", func(rs []outRec) bool { return uint64(len(rs)) >= forwarded })
	a.crash(t) // no final checkpoint, no final commit
	entries, err := st.List(context.Background())
	if err != nil || len(entries) < parts {
		t.Fatalf("list: %d entries, %v", len(entries), err)
	}
	o.Store = lose(entries)
	perPart := map[int]int{}
	for _, en := range entries {
		perPart[en.Meta.Partition]++
	}

	second := newWorkload(parts, 300, 2, 6)
	e.produce(second.recs...)
	logger, log := capturedLogger()
	o.Logger = logger
	b := startFresh(t, o)
	e.produce(sentinels(parts, t0.Add(time.Hour/2))...)
	got := out.untilSentinels(parts)
	// Empty filters forget the keys seen before the committed offset, so a
	// key may be forwarded again; an input record never is.
	checkNothingLost(t, union(parts, first, second), got)
	check(restarted{t: t, b: b, perPart: perPart, logs: log})
	b.stopSuppressed(t, forwarded)
	if n := restoresFrom(b, "empty"); n != parts {
		t.Errorf("dedup_restores_total{source=empty} = %v, want %d", n, parts)
	}
}
