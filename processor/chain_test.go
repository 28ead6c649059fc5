package processor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"dedup/checkpoint"
)

// chainPoint is where TestChainCrashPoints kills a member: at the save of
// one piece of a chain, before the piece is durable, or after it is and
// before its commit.
type chainPoint struct {
	name string
	// at picks the save: its Meta, the partition's bases and increments
	// saved so far (this one included), and the input offset from which
	// the partition's records are of the second window.
	at    func(m checkpoint.Meta, bases, increments int, rotatedAt int64) bool
	after bool // the piece is made durable first
}

var chainPoints = []chainPoint{
	{name: "increment/before-save", at: func(m checkpoint.Meta, _, inc int, _ int64) bool { return m.Increment() && inc >= 3 }},
	{name: "increment/after-save", after: true, at: func(m checkpoint.Meta, _, inc int, _ int64) bool { return m.Increment() && inc >= 3 }},
	// The first base is the anchor at the start; the second folds a chain.
	{name: "compaction/before-save", at: func(m checkpoint.Meta, bases, _ int, _ int64) bool { return !m.Increment() && bases >= 2 }},
	{name: "compaction/after-save", after: true, at: func(m checkpoint.Meta, bases, _ int, _ int64) bool { return !m.Increment() && bases >= 2 }},
	// The first increment holding records of the next window: the pair
	// rotated since the piece before it.
	{name: "rotation/before-save", at: func(m checkpoint.Meta, _, _ int, rot int64) bool { return m.Increment() && m.Offset > rot }},
	{name: "rotation/after-save", after: true, at: func(m checkpoint.Meta, _, _ int, rot int64) bool { return m.Increment() && m.Offset > rot }},
}

// errCrashed is every save's answer once the member is dead.
var errCrashed = errors.New("member crashed")

// crashStore passes saves through until the crash point's, which it makes
// durable or not, then fails that save and every later one: as far as the
// store and the group can tell, the member died there.
type crashStore struct {
	Store
	point     chainPoint
	rotatedAt map[int]int64 // partition -> first offset of the second window

	mu                sync.Mutex
	bases, increments map[int]int
	dead              bool
	fired             chan checkpoint.Meta
}

func (s *crashStore) Save(ctx context.Context, m checkpoint.Meta, state io.WriterTo) (checkpoint.Meta, error) {
	s.mu.Lock()
	if s.dead {
		s.mu.Unlock()
		return checkpoint.Meta{}, errCrashed
	}
	if m.Increment() {
		s.increments[m.Partition]++
	} else {
		s.bases[m.Partition]++
	}
	hit := s.point.at(m, s.bases[m.Partition], s.increments[m.Partition], s.rotatedAt[m.Partition])
	s.dead = hit
	s.mu.Unlock()
	if !hit {
		return s.Store.Save(ctx, m, state)
	}
	if s.point.after {
		saved, err := s.Store.Save(ctx, m, state)
		if err != nil {
			return saved, err
		}
		m = saved
	}
	s.fired <- m
	return checkpoint.Meta{}, errCrashed
}

func (s *crashStore) saves() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for p := range s.bases {
		n += s.bases[p]
	}
	for p := range s.increments {
		n += s.increments[p]
	}
	return n
}

// TestChainCrashPoints kills a member at each step of a chain: before and
// after an increment is durable, before and after a base that folds a
// chain (compaction), and at the first increment after the filters
// rotated. The successor restores the chain up to the newest durable
// piece, replays from there and scans the output: every first occurrence
// is in the output exactly once. Both stores.
func TestChainCrashPoints(t *testing.T) {
	for _, pt := range chainPoints {
		t.Run(pt.name, func(t *testing.T) {
			stores(t, func(t *testing.T, e *testEnv, store func(string) Store) {
				chainCrash(t, e, store("chain"), pt)
			})
		})
	}
}

func chainCrash(t *testing.T, e *testEnv, inner Store, pt chainPoint) {
	const parts = 4
	// Two windows of new keys (the window is an hour), then, after the
	// crash, the second window's keys again with new ones.
	first := newWorkloadAt(parts, 0, 300, 2, 7, t0)
	second := newWorkloadAt(parts, 300, 300, 2, 8, t0.Add(time.Hour))
	after := newWorkloadAt(parts, 300, 500, 2, 8, t0.Add(90*time.Minute))
	rotatedAt := map[int]int64{}
	for _, r := range first.recs {
		rotatedAt[int(r.Partition)]++
	}
	store := &crashStore{Store: inner, point: pt, rotatedAt: rotatedAt,
		bases: map[int]int{}, increments: map[int]int{}, fired: make(chan checkpoint.Meta, 1)}

	o := e.options("chain")
	o.Store = store
	o.CheckpointInterval = 20 * time.Millisecond
	o.ChainRatio = 0.05 // a few increments, then a new base
	out := e.collect()
	a := start(t, o)
	a.waitReady(t)

	// Produce in small steps, each covered by a checkpoint before the
	// next, so that the chain grows piece by piece until the crash point.
	recs := append(append([]*kgo.Record(nil), first.recs...), second.recs...)
	var crashedAt checkpoint.Meta
	fired, next := false, 0
	for next < len(recs) && !fired {
		before := store.saves()
		step := recs[next:min(next+40, len(recs))]
		next += len(step)
		e.produce(step...)
		eventually(t, 20*time.Second, "a checkpoint after the step", func() bool {
			select {
			case crashedAt = <-store.fired:
				fired = true
			default:
			}
			return fired || store.saves() > before
		})
	}
	if !fired {
		select {
		case crashedAt = <-store.fired:
		case <-time.After(20 * time.Second):
			t.Fatalf("the crash point %s was never reached", pt.name)
		}
	}
	a.p.crashed.Store(true) // no final checkpoint, no commit
	if err := a.stop(t); err != nil && !errors.Is(err, errCrashed) {
		t.Logf("crashed member: %v", err)
	}
	t.Logf("crashed at %s: partition %d, offset %d, base %d", pt.name, crashedAt.Partition, crashedAt.Offset, crashedAt.Base)

	// Whatever of the two windows the crashed member had not read is
	// read by its successor.
	o.Store = inner
	b := startFresh(t, o)
	e.produce(recs[next:]...)
	e.produce(after.recs...)
	e.produce(sentinels(parts, t0.Add(2*time.Hour-time.Minute))...)
	got := out.untilSentinels(parts)
	checkExactlyOnce(t, union(parts, first, second, after), got)
	restored := metricValue(b.p.metrics.Restores.WithLabelValues("latest")) + metricValue(b.p.metrics.Restores.WithLabelValues("fallback"))
	if restored != parts {
		t.Errorf("%v partitions restored from the store, want %d", restored, parts)
	}
	if err := b.stop(t); err != nil {
		t.Fatal(err)
	}
	lister, ok := inner.(interface {
		List(context.Context) ([]checkpoint.Entry, error)
	})
	if !ok {
		return
	}
	entries, err := lister.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	increments := 0
	for _, en := range entries {
		if en.Meta.Increment() {
			increments++
		}
	}
	if increments == 0 {
		t.Errorf("the store holds no increment of %d pieces: the chain was never used", len(entries))
	}
}

// TestDamagedIncrement: the newest increment of every partition is
// damaged while the stage is down (a flipped byte in the file store, a
// garbage manifest in Kafka). The successor reports each by name and counts
// it, keeps it, restores the chain up to the piece before it
// (source="fallback"), replays the input from there and forwards every
// first occurrence exactly once.
func TestDamagedIncrement(t *testing.T) {
	type lister interface {
		Store
		List(context.Context) ([]checkpoint.Entry, error)
	}
	for _, kind := range []string{"file", "kafka"} {
		t.Run(kind, func(t *testing.T) {
			const parts = 2
			e := newTestEnv(t, parts, parts)
			var st lister
			var damage func(en checkpoint.Entry)
			if kind == "file" {
				st = fileStore(t, "inc")
				damage = func(en checkpoint.Entry) {
					raw, err := os.ReadFile(en.Where)
					if err != nil {
						t.Fatal(err)
					}
					raw[len(raw)/2] ^= 0xff
					if err := os.WriteFile(en.Where, raw, 0o600); err != nil {
						t.Fatal(err)
					}
				}
			} else {
				st = kafkaStore(t, e, "inc")
				damage = func(en checkpoint.Entry) {
					e.produce(&kgo.Record{Topic: "inc-state", Partition: 0, Key: []byte(en.Where), Value: []byte("not a manifest")})
				}
			}
			o := e.options("inc")
			o.Store = st
			o.CheckpointInterval = 20 * time.Millisecond
			o.ChainRatio = 100 // no new base: the newest piece is an increment
			out := e.collect()
			first := newWorkload(parts, 400, 2, 21)
			a := start(t, o)
			a.waitReady(t)
			for i := 0; i < len(first.recs); i += 100 {
				e.produce(first.recs[i:min(i+100, len(first.recs))]...)
				want := uint64(min(i+100, len(first.recs)))
				eventually(t, 20*time.Second, "the step read", func() bool { return a.p.Progress().In == want })
			}
			forwarded := a.p.Progress().Forwarded
			out.until("first member's outputs", func(rs []outRec) bool { return uint64(len(rs)) >= forwarded })
			if err := a.stop(t); err != nil { // the final checkpoints are increments
				t.Fatal(err)
			}
			entries, err := st.List(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			newest := map[int]checkpoint.Entry{}
			for _, en := range entries {
				if en.Meta.Seq > newest[en.Meta.Partition].Meta.Seq {
					newest[en.Meta.Partition] = en
				}
			}
			for p, en := range newest {
				if !en.Meta.Increment() {
					t.Fatalf("partition %d: the newest piece is a base, want an increment", p)
				}
			}
			if len(newest) != parts {
				t.Fatalf("partitions with pieces: %d, want %d", len(newest), parts)
			}
			for _, en := range newest {
				damage(en)
			}

			second := newWorkload(parts, 600, 2, 21) // the first's keys on the same partitions, and new ones
			e.produce(second.recs...)
			e.produce(sentinels(parts, t0.Add(time.Hour/2))...)
			b := startFresh(t, o)
			got := out.untilSentinels(parts)
			checkExactlyOnce(t, union(parts, first, second), got)
			for p := range parts {
				if n := metricValue(b.p.metrics.CheckpointDamaged.WithLabelValues(inTopic, strconv.Itoa(p))); n != 1 {
					t.Errorf("dedup_checkpoint_damaged_total{partition=%d} = %v, want 1", p, n)
				}
			}
			if n := metricValue(b.p.metrics.Restores.WithLabelValues("fallback")); n != parts {
				t.Errorf("dedup_restores_total{source=fallback} = %v, want %d", n, parts)
			}
			if err := b.stop(t); err != nil {
				t.Fatal(err)
			}
			after, err := st.List(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			kept := 0
			for _, en := range after {
				if en.Damaged && en.Meta.Increment() {
					kept++
				}
			}
			if kept != parts {
				t.Errorf("%d damaged increments kept, want %d", kept, parts)
			}
		})
	}
}

// refuseIncrements refuses every increment with a *checkpoint.ChainError
// once armed, as a store whose chain was cut under the stage would.
type refuseIncrements struct {
	Store
	armed atomic.Bool
}

func (s *refuseIncrements) Save(ctx context.Context, m checkpoint.Meta, state io.WriterTo) (checkpoint.Meta, error) {
	if s.armed.Load() && m.Increment() {
		return checkpoint.Meta{}, &checkpoint.ChainError{Topic: m.Topic, Partition: m.Partition, Base: m.Base, Prev: m.Prev, Reason: "test"}
	}
	return s.Store.Save(ctx, m, state)
}

// TestStopChainRefused: the store refuses the stop's increment (its chain
// cut under the stage). The stop saves the pair as a base instead: it
// succeeds, commits, and the successor restores that base exactly at the
// stop's position.
func TestStopChainRefused(t *testing.T) {
	const parts = 2
	e := newTestEnv(t, parts, parts)
	inner := fileStore(t, "refinc")
	st := &refuseIncrements{Store: inner}
	o := e.options("refinc")
	o.Store = st
	o.CheckpointInterval = time.Hour // the anchor base, then the stop's increment
	out := e.collect()
	first := newWorkload(parts, 300, 2, 31)
	a := e.startAfter(t, o, first, "first batch read")
	st.armed.Store(true)
	if err := a.stop(t); err != nil {
		t.Fatalf("stop: %v, want the increment replaced by a base", err)
	}
	entries, err := inner.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, en := range entries {
		if en.Meta.Increment() {
			t.Errorf("increment %d saved, want none", en.Meta.Seq)
		}
	}

	second := newWorkload(parts, 500, 2, 31)
	e.produce(second.recs...)
	e.produce(sentinels(parts, t0.Add(time.Hour/2))...)
	o.Store, o.Metrics = inner, NewMetrics(newRegistry())
	b := start(t, o)
	got := out.untilSentinels(parts)
	checkExactlyOnce(t, union(parts, first, second), got)
	if n := metricValue(b.p.metrics.Restores.WithLabelValues("latest")); n != parts {
		t.Errorf("dedup_restores_total{source=latest} = %v, want %d", n, parts)
	}
	if s := b.p.Progress().Suppressed; s != 0 {
		t.Errorf("successor suppressed %d records, want 0: the base is at the stop's position", s)
	}
}

// baseCounter counts the pieces a KafkaStore saves, by kind; embedding the
// store itself keeps its BaseMaxAge visible to the partitions.
type baseCounter struct {
	*checkpoint.KafkaStore
	bases, increments atomic.Int64
}

func (s *baseCounter) Save(ctx context.Context, m checkpoint.Meta, state io.WriterTo) (checkpoint.Meta, error) {
	saved, err := s.KafkaStore.Save(ctx, m, state)
	if err == nil && m.Increment() {
		s.increments.Add(1)
	} else if err == nil {
		s.bases.Add(1)
	}
	return saved, err
}

// TestBaseRewrittenWithinRetention: on a checkpoint topic that is not
// compacted (cleanup.policy=delete, retention.ms 2 s), retention would
// delete a chain's base while its increments still need it. The store
// bounds a base's age to half the retention, and the partition writes a
// new base once its base is that old, however small the increments stay:
// a trickle of records that never brings the increments near the chain
// ratio still gets new bases, one after another.
func TestBaseRewrittenWithinRetention(t *testing.T) {
	e := newTestEnv(t, 1, 1)
	if err := e.cluster.CreateTopic("aged-state", 1, map[string]string{"cleanup.policy": "delete", "retention.ms": "2000"}); err != nil {
		t.Fatal(err)
	}
	st := &baseCounter{KafkaStore: kafkaStoreOn(t, e, "aged", "aged-state")}
	if got := st.BaseMaxAge(); got != time.Second {
		t.Fatalf("BaseMaxAge %v, want half the retention: 1s", got)
	}
	o := e.options("aged")
	o.Store = st
	o.CheckpointInterval = 100 * time.Millisecond
	r := start(t, o)
	r.waitReady(t)
	done := make(chan struct{})
	defer close(done)
	go func() {
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			case <-time.After(20 * time.Millisecond): // a trickle, not a synchronisation
			}
			e.prod.Produce(context.Background(), rec(0, fmt.Sprintf("k%d", i), "v", t0), nil)
		}
	}()
	eventually(t, 30*time.Second, "three bases after the anchor, with increments between", func() bool {
		return st.bases.Load() >= 4 && st.increments.Load() >= 3
	})
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
}
