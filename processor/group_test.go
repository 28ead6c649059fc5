package processor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"dedup/checkpoint"
	"dedup/rotation"
)

func fileStore(t testing.TB, group string) *checkpoint.FileStore {
	t.Helper()
	s, err := checkpoint.NewFileStore(checkpoint.FileOptions{Dir: t.TempDir(), Keep: 3, Group: group})
	if err != nil {
		t.Fatalf("file store: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// workload is input with duplicates: every key occurs dup times, spread
// over the stream, each key on one partition (dedup is per partition).
type workload struct {
	parts int32
	recs  []*kgo.Record
	keys  map[string]int32 // key -> partition
}

// union returns a workload whose keys are those of ws (records are not
// kept): what to check an output against when ws were produced in turn.
func union(parts int32, ws ...*workload) *workload {
	all := &workload{parts: parts, keys: map[string]int32{}}
	for _, w := range ws {
		maps.Copy(all.keys, w.keys)
	}
	return all
}

func newWorkload(parts int32, keys, dup int, seed uint64) *workload {
	return newWorkloadAt(parts, 0, keys, dup, seed, t0)
}

// newWorkloadAt is newWorkload with keys first..first+keys-1, stamped from
// at on.
func newWorkloadAt(parts int32, first, keys, dup int, seed uint64, at time.Time) *workload {
	w := &workload{parts: parts, keys: map[string]int32{}}
	rng := rand.New(rand.NewPCG(seed, 1))
	var order []string
	for k := first; k < first+keys; k++ {
		key := fmt.Sprintf("key-%05d", k)
		w.keys[key] = int32(rng.IntN(int(parts)))
		for range dup {
			order = append(order, key)
		}
	}
	// Shuffle, then stamp event times in stream order so that they only
	// grow within a partition (all inside one window).
	rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	for i, key := range order {
		w.recs = append(w.recs, rec(w.keys[key], key, fmt.Sprintf("%s#%d", key, i), at.Add(time.Duration(i)*time.Millisecond)))
	}
	return w
}

// checkExactlyOnce asserts that every key of w is in the output exactly
// once and no input record was forwarded twice.
func checkExactlyOnce(t testing.TB, w *workload, out []outRec) {
	t.Helper()
	seen := map[string]int{}
	src := map[[2]int64]bool{}
	for _, r := range withoutSentinels(out) {
		seen[r.Key]++
		s := [2]int64{int64(r.SrcPart), r.SrcOffset}
		if src[s] {
			t.Errorf("input %d/%d forwarded twice", s[0], s[1])
		}
		src[s] = true
	}
	missing, twice := 0, 0
	for k := range w.keys {
		switch n := seen[k]; {
		case n == 0:
			missing++
		case n > 1:
			twice++
		}
	}
	if missing > 0 || twice > 0 || len(seen) != len(w.keys) {
		t.Fatalf("of %d keys: %d missing, %d forwarded more than once, %d unknown", len(w.keys), missing, twice, len(seen)-len(w.keys)+missing)
	}
}

// checkNothingLost asserts every key is in the output at least once and no
// input record was forwarded twice (at-least-once without checkpoints).
func checkNothingLost(t *testing.T, w *workload, out []outRec) {
	t.Helper()
	seen := map[string]bool{}
	src := map[[2]int64]bool{}
	for _, r := range withoutSentinels(out) {
		seen[r.Key] = true
		s := [2]int64{int64(r.SrcPart), r.SrcOffset}
		if src[s] {
			t.Errorf("input %d/%d forwarded twice", s[0], s[1])
		}
		src[s] = true
	}
	for k := range w.keys {
		if !seen[k] {
			t.Fatalf("key %s lost", k)
		}
	}
}

// produceInBackground produces recs in chunks and closes the returned
// channel when done.
func produceInBackground(t *testing.T, e *testEnv, recs []*kgo.Record, chunk int) <-chan struct{} {
	var sent atomic.Int64
	return producePaced(t, e, recs, chunk, 0, &sent)
}

func assignedTo(r *running) float64 { return metricValue(r.p.metrics.Assigned) }

// TestTwoMembersSplitPartitions: two members of one group share the
// partitions, and together forward every key exactly once.
func TestTwoMembersSplitPartitions(t *testing.T) {
	const parts = 4
	e := newTestEnv(t, parts, parts)
	o := e.storedOptions(t, "pair")
	a := start(t, o)
	b := startFresh(t, o)
	out := e.collect()
	eventually(t, 20*time.Second, "both members assigned", func() bool {
		return a.p.Ready() && b.p.Ready() && assignedTo(a) > 0 && assignedTo(b) > 0 && assignedTo(a)+assignedTo(b) == parts
	})

	w := newWorkload(parts, 300, 3, 1)
	e.produce(w.recs...)
	e.produce(sentinels(parts, t0.Add(time.Hour/2))...)
	checkExactlyOnce(t, w, out.untilSentinels(parts))
	for _, r := range []*running{a, b} {
		if err := r.stop(t); err != nil {
			t.Errorf("Run: %v", err)
		}
	}
	if a.p.Progress().In == 0 || b.p.Progress().In == 0 {
		t.Errorf("one member did nothing: a %+v, b %+v", a.p.Progress(), b.p.Progress())
	}
}

// TestRebalanceWhileFlowing: a second member joins while records flow; the
// partitions it takes over continue from the first member's revocation
// checkpoint, so every key is still forwarded exactly once.
func TestRebalanceWhileFlowing(t *testing.T) {
	const parts = 4
	e := newTestEnv(t, parts, parts)
	o := e.storedOptions(t, "rebalance")
	a := start(t, o)
	out := e.collect()
	a.waitReady(t)

	w := newWorkload(parts, 1000, 3, 2)
	produced := produceInBackground(t, e, w.recs, 100)
	eventually(t, 20*time.Second, "records flowing", func() bool { return a.p.Progress().In > 1000 })
	b := startFresh(t, o)
	<-produced
	eventually(t, 20*time.Second, "both members assigned", func() bool {
		return a.p.Ready() && b.p.Ready() && assignedTo(a) > 0 && assignedTo(b) > 0
	})
	e.produce(sentinels(parts, t0.Add(time.Hour/2))...)
	checkExactlyOnce(t, w, out.untilSentinels(parts))
	for _, r := range []*running{a, b} {
		if err := r.stop(t); err != nil {
			t.Errorf("Run: %v", err)
		}
	}
}

// TestShutdownMidStream: cancelling Run (SIGTERM) while records flow loses
// nothing: a successor forwards the rest, and with checkpoints each key is
// still forwarded exactly once. Without checkpoints nothing is lost either
// (at-least-once: filters start empty, so keys may repeat, but no input
// record is forwarded twice).
func TestShutdownMidStream(t *testing.T) {
	for _, withStore := range []bool{true, false} {
		name := map[bool]string{true: "checkpoints", false: "no-checkpoints"}[withStore]
		t.Run(name, func(t *testing.T) {
			const parts = 2
			e := newTestEnv(t, parts, parts)
			o := e.options("shutdown")
			if withStore {
				o.Store = fileStore(t, "shutdown")
			}
			w := newWorkload(parts, 3000, 2, 3)
			a := start(t, o)
			out := e.collect()
			// Records keep flowing in while the first member is cancelled.
			produced := produceInBackground(t, e, w.recs, 100)
			eventually(t, 20*time.Second, "some input processed", func() bool { return a.p.Progress().In > 500 })
			if err := a.stop(t); err != nil {
				t.Fatalf("Run after cancel: %v", err)
			}
			t.Logf("first member read %d of %d records before the cancel", a.p.Progress().In, len(w.recs))
			<-produced
			b := startFresh(t, o)
			e.produce(sentinels(parts, t0.Add(time.Hour/2))...)
			got := out.untilSentinels(parts)
			if withStore {
				checkExactlyOnce(t, w, got)
			} else {
				checkNothingLost(t, w, got)
			}
			if err := b.stop(t); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// TestCrashReplaySuppressed: a member forwards records and dies without a
// final checkpoint or commit (as after SIGKILL). Its successor restores the
// older checkpoint, replays the inputs after it, finds their outputs in the
// output topic (ScanOutput) and does not forward them again.
func TestCrashReplaySuppressed(t *testing.T) {
	const parts = 2
	e := newTestEnv(t, parts, parts)
	o := e.storedOptions(t, "crash")
	out := e.collect()

	first := newWorkload(parts, 200, 2, 4)
	e.checkpointAfter(t, o, first, "first batch read") // checkpoint at the end of the first batch

	// The second batch repeats the first batch's keys and adds new ones.
	second := newWorkload(parts, 400, 2, 4)
	e.produce(second.recs...)
	o.Metrics = NewMetrics(newRegistry())
	o.CheckpointInterval = time.Hour // no checkpoint after the restore...
	b := start(t, o)
	b.waitRead(t, "second batch read", len(second.recs))
	forwardedByB := b.p.Progress().Written()
	if forwardedByB == 0 {
		t.Fatal("second member forwarded nothing; the test would prove nothing")
	}
	out.until("second member's outputs", func(rs []outRec) bool { return uint64(len(rs)) >= uint64(len(first.keys))+forwardedByB })
	b.crash(t) // ...and none at the end, nor a commit

	c := startFresh(t, o)
	e.produce(sentinels(parts, t0.Add(time.Hour/2))...)
	got := out.untilSentinels(parts)
	all := union(parts, first, second)
	checkExactlyOnce(t, all, got)
	// Read while the partitions are assigned: their series are deleted
	// when the member stops.
	suppressed := func() float64 {
		var n float64
		for p := range parts {
			n += metricValue(c.p.metrics.ReplaySuppressed.WithLabelValues(inTopic, fmt.Sprint(p)))
		}
		return n
	}
	eventually(t, 10*time.Second, "dedup_replay_suppressed_total published", func() bool {
		return suppressed() >= float64(forwardedByB)
	})
	if n := suppressed(); n != float64(forwardedByB) {
		t.Errorf("dedup_replay_suppressed_total = %v, want %d", n, forwardedByB)
	}
	c.stopSuppressed(t, forwardedByB)
	if n := restoresFrom(c, "latest"); n != parts {
		t.Errorf("dedup_restores_total{source=latest} = %v, want %d", n, parts)
	}
}

// TestRestoreOptionsChanged: a snapshot built with other filter options
// cannot be used as the pair (a filter cannot be resized). The partition
// starts with empty filters at the snapshot's offset, so nothing before it
// is forwarded again, and keeps the snapshot's pair read-only: keys seen
// before the change are still dropped, a key retracted after it is
// forwarded as new, the old pair survives a restart in the new snapshots,
// its memory shows in dedup_filter_bytes, and once its window has passed it
// drops nothing and is released. Both stores; the change is a size (the
// same mode) or a mode.
func TestRestoreOptionsChanged(t *testing.T) {
	for _, store := range []string{"file", "kafka"} {
		for _, change := range []string{"size", "mode"} {
			t.Run(store+"/"+change, func(t *testing.T) { restoreOptionsChanged(t, store, change) })
		}
	}
}

// TestRestoreOptionsBackAndForth: during a rolling deploy that changes the
// filter options, a partition can move from a member with the new options
// back to one with the old. That member resumes with the pair it finds
// kept as legacy (the old options), retractions since applied, and keeps
// the snapshot's pair as legacy: keys seen under either options are
// dropped, a key retracted meanwhile is forwarded, and the restore is not
// an empty start. Both stores.
func TestRestoreOptionsBackAndForth(t *testing.T) {
	for _, store := range []string{"file", "kafka"} {
		t.Run(store, func(t *testing.T) {
			e := newTestEnv(t, 1, 1)
			group := "pingpong-" + store
			o := e.options(group)
			switch store {
			case "file":
				o.Store = fileStore(t, group)
			case "kafka":
				o.Store = kafkaStore(t, e, group)
			}
			out := e.collect()
			del := kgo.RecordHeader{Key: retract}
			oldOptions, newOptions := o.Filter, o.Filter
			newOptions.ExpectedKeys *= 2
			member := func(f rotation.Options, recs ...*kgo.Record) *running {
				t.Helper()
				o.Filter = f
				return e.runMember(t, out, o, recs...)
			}
			// k0 is seen only under the old options, k1 under both, k2 only
			// under the new ones; kr is retracted under the new ones.
			member(oldOptions, rec(0, "k0", "k0-1", t0), rec(0, "k1", "k1-1", t0), rec(0, "kr", "kr-1", t0),
				rec(0, "mark-a", "mark-a", t0))
			member(newOptions, rec(0, "k2", "k2-1", t0.Add(5*time.Second)), rec(0, "k1", "k1-2", t0.Add(5*time.Second)),
				rec(0, "kr", "kr-retraction", t0.Add(6*time.Second), del), rec(0, "mark-b", "mark-b", t0.Add(7*time.Second)))
			c := member(oldOptions, rec(0, "k0", "k0-2", t0.Add(10*time.Second)), rec(0, "k1", "k1-3", t0.Add(10*time.Second)),
				rec(0, "k2", "k2-2", t0.Add(11*time.Second)), rec(0, "kr", "kr-2", t0.Add(12*time.Second)),
				rec(0, "mark-c", "mark-c", t0.Add(13*time.Second)))
			got := values(out.untilValue("mark-c"))
			want := []string{"k0-1", "k1-1", "kr-1", "mark-a", "k2-1", "kr-retraction", "mark-b", "kr-2", "mark-c"}
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("got %q, want %q", got, want)
			}
			if n := metricValue(c.p.metrics.Restores.WithLabelValues("empty")); n != 0 {
				t.Errorf("dedup_restores_total{source=empty} = %v, want 0: the member resumed with its options' pair", n)
			}
		})
	}
}

// TestRestoreLegacyAtStreamTime: a restored legacy pair, and a legacy
// pair resumed as the partition's pair after a rolling deploy moved the
// partition back, answer at the stream's event time from the first record
// on. The first member (old options) sees k0 in window 0 and kA in window
// 1; the second (new options) moves the stream to window 2, where k0 is
// rotated out of the old pair and kA still held. The third then reads k0
// and kA late (window 1): k0 is new, kA a duplicate. Asked at the late
// record's own time, or resumed where the old pair stopped, the old pair
// still holds k0 and drops it.
func TestRestoreLegacyAtStreamTime(t *testing.T) {
	for name, back := range map[string]bool{"same options": false, "back to the old options": true} {
		t.Run(name, func(t *testing.T) {
			e := newTestEnv(t, 1, 1)
			group := "legacy-time"
			if back {
				group += "-back"
			}
			o := e.storedOptions(t, group)
			o.Filter.Window = time.Minute // t0 is a window boundary
			out := e.collect()
			oldOptions, newOptions := o.Filter, o.Filter
			newOptions.ExpectedKeys *= 2
			member := func(f rotation.Options, recs ...*kgo.Record) {
				t.Helper()
				o.Filter = f
				e.runMember(t, out, o, recs...)
			}
			member(oldOptions, rec(0, "k0", "k0-1", t0.Add(time.Second)), rec(0, "kA", "kA-1", t0.Add(time.Minute+time.Second)),
				rec(0, "mark-a", "mark-a", t0.Add(time.Minute+time.Second)))
			member(newOptions, rec(0, "x", "x-1", t0.Add(2*time.Minute+time.Second)),
				rec(0, "mark-b", "mark-b", t0.Add(2*time.Minute+time.Second)))
			third := newOptions
			if back {
				third = oldOptions
			}
			late := t0.Add(time.Minute + 30*time.Second)
			member(third, rec(0, "k0", "k0-2", late), rec(0, "kA", "kA-2", late), rec(0, "mark-c", "mark-c", late))
			got := values(out.untilValue("mark-c"))
			want := []string{"k0-1", "kA-1", "mark-a", "x-1", "mark-b", "k0-2", "mark-c"}
			slices.Sort(got)
			slices.Sort(want)
			if !slices.Equal(got, want) {
				t.Fatalf("got %q, want %q", got, want)
			}
		})
	}
}

// rejectingStore decodes every snapshot (the restore reads it) and then
// rejects them all, as a store does whose snapshot fails after decoding.
type rejectingStore struct{ Store }

func (s rejectingStore) Load(ctx context.Context, topic string, partition int, decode func(checkpoint.Meta, io.Reader) error) (checkpoint.Meta, checkpoint.Source, error) {
	m, _, err := s.Store.Load(ctx, topic, partition, decode)
	if err != nil {
		return checkpoint.Meta{}, "", err
	}
	return checkpoint.Meta{}, "", &checkpoint.LoadError{Topic: topic, Partition: partition,
		Rejected: []checkpoint.Rejection{{Seq: m.Seq, Where: "test", Err: errors.New("rejected after decoding")}}}
}

// TestRejectedSnapshotKeepsNoLegacy: when every snapshot is rejected the
// partition starts with empty filters, without the legacy pair a rejected
// snapshot carried (decoded before it was rejected): a key only that pair
// held is new.
func TestRejectedSnapshotKeepsNoLegacy(t *testing.T) {
	e := newTestEnv(t, 1, 1)
	group := "rejected-legacy"
	o := e.options(group)
	store := fileStore(t, group)
	o.Store = store
	out := e.collect()
	oldOptions, newOptions := o.Filter, o.Filter
	newOptions.ExpectedKeys *= 2
	member := func(f rotation.Options, st Store, recs ...*kgo.Record) *running {
		t.Helper()
		o.Filter, o.Store = f, st
		return e.runMember(t, out, o, recs...)
	}
	member(oldOptions, store, rec(0, "k0", "k0-1", t0), rec(0, "mark-a", "mark-a", t0))
	member(newOptions, store, rec(0, "x", "x-1", t0.Add(time.Second)), rec(0, "mark-b", "mark-b", t0.Add(time.Second)))
	c := member(newOptions, rejectingStore{store}, rec(0, "k0", "k0-2", t0.Add(2*time.Second)),
		rec(0, "mark-c", "mark-c", t0.Add(2*time.Second)))
	if n := metricValue(c.p.metrics.Restores.WithLabelValues("empty")); n != 1 {
		t.Fatalf("dedup_restores_total{source=empty} = %v, want 1: every snapshot rejected", n)
	}
	got := values(out.untilValue("mark-c"))
	want := []string{"k0-1", "mark-a", "x-1", "mark-b", "k0-2", "mark-c"}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func restoreOptionsChanged(t *testing.T, store, change string) {
	e := newTestEnv(t, 1, 1)
	group := "resized-" + store + "-" + change
	o := e.options(group)
	o.Filter.Window = time.Minute
	switch store {
	case "file":
		o.Store = fileStore(t, group)
	case "kafka":
		o.Store = kafkaStore(t, e, group)
	}
	before := o.Filter
	out := e.collect()
	del := kgo.RecordHeader{Key: retract}
	filterBytes := func(r *running) float64 {
		return metricValue(r.p.metrics.FilterBytes.WithLabelValues(inTopic, "0"))
	}
	sizeOf := func(fo rotation.Options) float64 {
		p, err := rotation.New(fo)
		if err != nil {
			t.Fatal(err)
		}
		return float64(p.SizeBytes())
	}

	a := start(t, o)
	a.waitReady(t)
	e.produce(rec(0, "old", "old-1", t0), rec(0, "old", "old-dup", t0), rec(0, "ret", "ret-1", t0),
		rec(0, "mark-a", "mark-a", t0))
	out.untilValue("mark-a")
	if err := a.stop(t); err != nil {
		t.Fatal(err)
	}

	switch change {
	case "size":
		o.Filter.ExpectedKeys *= 2
	case "mode":
		o.Filter.Mode = rotation.Fingerprint
	}
	b := startFresh(t, o)
	b.waitReady(t)
	e.produce(rec(0, "old", "old-2", t0.Add(10*time.Second)),
		rec(0, "ret", "ret-retraction", t0.Add(11*time.Second), del),
		rec(0, "new", "new-1", t0.Add(12*time.Second)), rec(0, "new", "new-dup", t0.Add(12*time.Second)),
		rec(0, "mark-b", "mark-b", t0.Add(13*time.Second)))
	out.untilValue("mark-b")
	if n := metricValue(b.p.metrics.Restores.WithLabelValues("empty")); n != 1 {
		t.Errorf("dedup_restores_total{source=empty} = %v, want 1", n)
	}
	both := sizeOf(before) + sizeOf(o.Filter)
	eventually(t, 10*time.Second, "dedup_filter_bytes counting both pairs", func() bool { return filterBytes(b) == both })
	if err := b.stop(t); err != nil { // its final checkpoint holds the old pair too
		t.Fatal(err)
	}

	c := startFresh(t, o)
	c.waitReady(t)
	e.produce(rec(0, "old", "old-3", t0.Add(20*time.Second)), rec(0, "ret", "ret-2", t0.Add(21*time.Second)),
		rec(0, "mark-c", "mark-c", t0.Add(22*time.Second)))
	out.untilValue("mark-c")
	eventually(t, 10*time.Second, "dedup_filter_bytes counting both pairs after a restart", func() bool { return filterBytes(c) == both })
	// Two windows on, the old pair would have rotated every key out.
	later := t0.Add(3 * time.Minute)
	e.produce(rec(0, "old", "old-4", later), rec(0, "mark-d", "mark-d", later))
	out.untilValue("mark-d")
	eventually(t, 10*time.Second, "the old pair released", func() bool { return filterBytes(c) == sizeOf(o.Filter) })

	got := values(out.untilValue("mark-d"))
	want := []string{"old-1", "ret-1", "mark-a", "ret-retraction", "new-1", "mark-b", "ret-2", "mark-c", "mark-d", "old-4"}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}
