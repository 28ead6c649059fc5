package processor

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"dedup/checkpoint"
)

// TestAllSnapshotsRejected: a member forwards records and dies without a
// final checkpoint or commit; then every snapshot is damaged. Its
// successor rejects them all, starts with empty filters at the committed
// offset and scans the output from the end offsets recorded in the commit's
// metadata: no input is forwarded twice. Both stores.
func TestAllSnapshotsRejected(t *testing.T) {
	t.Run("file", func(t *testing.T) {
		e := newTestEnv(t, 2, 2)
		st := fileStore(t, "rejected")
		checkAllRejected(t, e, st, func(entries []checkpoint.Entry) {
			for _, en := range entries {
				if err := os.WriteFile(en.Where, []byte("not a checkpoint"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
		})
	})
	t.Run("kafka", func(t *testing.T) {
		e := newTestEnv(t, 2, 2)
		st := kafkaStore(t, e, "rejected")
		checkAllRejected(t, e, st, func(entries []checkpoint.Entry) {
			for _, en := range entries {
				e.produce(&kgo.Record{Topic: "rejected-state", Partition: 0, Key: []byte(en.Where), Value: []byte("not a manifest")})
			}
		})
	})
}

func checkAllRejected(t *testing.T, e *testEnv, st interface {
	Store
	List(context.Context) ([]checkpoint.Entry, error)
}, damage func([]checkpoint.Entry)) {
	const parts = 2
	o := e.options("rejected")
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
	damage(entries)
	perPart := map[int]int{}
	for _, en := range entries {
		perPart[en.Meta.Partition]++
	}

	second := newWorkload(parts, 300, 2, 6)
	e.produce(second.recs...)
	b := startFresh(t, o)
	e.produce(sentinels(parts, t0.Add(time.Hour/2))...)
	got := out.untilSentinels(parts)
	// Empty filters forget the keys seen before the committed offset, so a
	// key may be forwarded again; an input record never is.
	all := union(parts, first, second)
	checkNothingLost(t, all, got)
	// Each damaged snapshot counted once, on its partition's series.
	for p := range int(parts) {
		if n := metricValue(b.p.metrics.CheckpointDamaged.WithLabelValues(inTopic, strconv.Itoa(p))); n != float64(perPart[p]) {
			t.Errorf("dedup_checkpoint_damaged_total{partition=%d} = %v, want %d", p, n, perPart[p])
		}
	}
	b.stopSuppressed(t, forwarded)
	if n := restoresFrom(b, "empty"); n != parts {
		t.Errorf("dedup_restores_total{source=empty} = %v, want %d", n, parts)
	}
}
