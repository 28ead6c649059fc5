package processor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"dedup/checkpoint"
	"dedup/processor/partition"
	"dedup/rotation"
)

// movesRun is one run of movesScenario: a group of members sharing a
// checkpoint store, with every member ever started (stopped ones keep
// their metrics).
type movesRun struct {
	t       testing.TB
	e       *testEnv
	o       Options
	members []*running
	live    []*running
}

func (r *movesRun) start() *running {
	o := r.o
	o.Metrics = NewMetrics(newRegistry())
	m := start(r.t, o)
	r.members = append(r.members, m)
	r.live = append(r.live, m)
	return m
}

// written sums what every member ever started wrote to the store, by
// piece (dedup_checkpoint_instance_written_bytes_total).
func (r *movesRun) written() (base, increment float64) {
	for _, m := range r.members {
		base += metricValue(m.p.metrics.CheckpointInstanceWritten.WithLabelValues(partition.PieceLabels[0]))
		increment += metricValue(m.p.metrics.CheckpointInstanceWritten.WithLabelValues(partition.PieceLabels[1]))
	}
	return base, increment
}

// settled waits until the live members own every partition between them
// and are ready.
func (r *movesRun) settled(parts int) {
	eventually(r.t, 60*time.Second, "the group settled", func() bool {
		n := 0
		for _, m := range r.live {
			if !m.p.Ready() {
				return false
			}
			n += int(assignedTo(m))
		}
		return n == parts
	})
}

// remove stops m (crash: like SIGKILL, else SIGTERM) and forgets it as live.
func (r *movesRun) remove(m *running, crash bool) {
	if crash {
		m.crash(r.t)
	} else if err := m.stop(r.t); err != nil {
		r.t.Fatalf("stop member: %v", err)
	}
	for i, l := range r.live {
		if l == m {
			r.live = append(r.live[:i], r.live[i+1:]...)
			break
		}
	}
}

// committedSum is group's committed offsets of topic summed over its
// partitions (none committed: 0).
func committedSum(t testing.TB, e *testEnv, group, topic string, parts int) int64 {
	t.Helper()
	ps := make([]int, parts)
	for i := range ps {
		ps[i] = i
	}
	var sum int64
	for _, off := range committedOffsets(t, e, group, topic, ps...) {
		sum += max(off, 0)
	}
	return sum
}

// movesOptions is what movesScenario varies.
type movesOptions struct {
	parts       int
	keysPer     int           // distinct keys per partition loaded before the moves
	perSecond   int           // new keys per second while measuring (each produced twice)
	steady      time.Duration // the steady period measured
	settle      time.Duration // measured on after the last move's group settled
	store       func(e *testEnv, group string) Store
	interval    time.Duration // CHECKPOINT_INTERVAL
	collectWait time.Duration
}

// movesResult is what movesScenario measured.
type movesResult struct {
	steadyBytes, movedBytes   float64 // checkpoint bytes written, per second
	movedBases, steadyBases   float64 // base bytes written in each period
	steadyWindow, movedWindow time.Duration
	moves                     []string
}

// movesScenario loads keysPer distinct keys into each partition of a
// group of two members, then, with new keys arriving at perSecond,
// measures the checkpoint bytes of a steady period and of a period of
// moves of every kind: a rolling restart (each member stopped with
// SIGTERM and replaced, one after the other), a member killed (SIGKILL)
// and replaced, a member added (scale out) and stopped again (scale in).
// Every one of those is a rebalance in which the partitions that stay
// are kept in memory (kafka-go's groups are eager: they are given up and
// handed back). The output holds every key exactly once.
func movesScenario(t testing.TB, mo movesOptions) movesResult {
	parts := mo.parts
	e := newTestEnv(t, int32(parts), int32(parts))
	o := e.options("moves")
	o.Store = mo.store(e, "moves")
	// Sessions long enough that a member busy restoring or replaying on a
	// loaded machine is not evicted: an eviction is a failure, after
	// which a base is due, and this is about moves.
	o.SessionTimeout, o.RebalanceTimeout, o.HeartbeatInterval = 4*time.Second, 8*time.Second, 200*time.Millisecond
	// At 1e-9 a false positive among millions of keys, which the
	// exactly-once check would count as lost, is not to be expected.
	o.Filter = rotation.Options{ExpectedKeys: uint64(mo.keysPer) * 5 / 4, FPRate: 1e-9, Window: 24 * time.Hour, Mode: rotation.Fingerprint}
	o.CheckpointInterval = mo.interval
	// Long chains: no base folds a chain within the run, so every base
	// written in the measured periods is one a move wrote.
	o.ChainRatio = 1000
	r := &movesRun{t: t, e: e, o: o}
	out := e.collect()
	out.wait = mo.collectWait
	r.start()
	r.start()
	r.settled(parts)

	// The large state: keysPer keys per partition, once each.
	bulk := newWorkloadAt(int32(parts), 0, mo.keysPer*parts, 1, 1, t0)
	for i := 0; i < len(bulk.recs); i += 20000 {
		e.produce(bulk.recs[i:min(i+20000, len(bulk.recs))]...)
	}
	eventually(t, 10*time.Minute, "the load checkpointed and committed", func() bool {
		return committedSum(t, e, "moves", inTopic, parts) >= int64(len(bulk.recs))
	})
	bulk.recs = nil

	// New keys from here on, each twice, at perSecond.
	secs := int((mo.steady+mo.settle)/time.Second)*3 + 60
	steady := newWorkloadAt(int32(parts), mo.keysPer*parts, mo.perSecond*secs, 2, 2, t0.Add(time.Hour))
	var sent atomic.Int64
	stopProducing := make(chan struct{})
	produced := make(chan struct{})
	go func() {
		defer close(produced)
		const tick = 50 * time.Millisecond
		chunk := max(1, 2*mo.perSecond*int(tick)/int(time.Second))
		next := time.Now()
		for i := 0; i < len(steady.recs); i += chunk {
			select {
			case <-stopProducing:
				return
			case <-time.After(time.Until(next)):
			}
			next = next.Add(tick)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			err := e.prod.ProduceSync(ctx, steady.recs[i:min(i+chunk, len(steady.recs))]...).FirstErr()
			cancel()
			if err != nil {
				t.Errorf("produce: %v", err)
				return
			}
			sent.Store(int64(min(i+chunk, len(steady.recs))))
		}
	}()
	// A few intervals of the steady stream first, so that the bases of
	// the load are behind the measured period.
	from := committedSum(t, e, "moves", inTopic, parts)
	eventually(t, 60*time.Second, "checkpoints of the steady stream", func() bool {
		return committedSum(t, e, "moves", inTopic, parts) > from+int64(4*mo.perSecond*int(mo.interval)/int(time.Second))
	})

	var res movesResult
	b0, i0 := r.written()
	began := time.Now()
	time.Sleep(mo.steady) // the period measured: wall time is what it is about
	b1, i1 := r.written()
	res.steadyWindow = time.Since(began)
	res.steadyBytes = (b1 - b0 + i1 - i0) / res.steadyWindow.Seconds()
	res.steadyBases = b1 - b0

	movesBegan := time.Now()
	for i := range 2 {
		m := r.live[0]
		r.remove(m, false)
		r.start()
		r.settled(parts)
		res.moves = append(res.moves, fmt.Sprintf("SIGTERM restart %d", i+1))
	}
	r.remove(r.live[0], true)
	r.start()
	r.settled(parts)
	res.moves = append(res.moves, "SIGKILL restart")
	c := r.start()
	r.settled(parts)
	r.remove(c, false)
	r.settled(parts)
	res.moves = append(res.moves, "scale out and in")
	time.Sleep(mo.settle) // measured on after the moves, as long as asked
	b2, i2 := r.written()
	res.movedWindow = time.Since(movesBegan)
	res.movedBytes = (b2 - b1 + i2 - i1) / res.movedWindow.Seconds()
	res.movedBases = b2 - b1

	close(stopProducing)
	<-produced
	n := int(sent.Load())
	steady.recs = steady.recs[:n]
	e.produce(sentinels(int32(parts), t0.Add(2*time.Hour))...)
	got := out.untilSentinels(int32(parts))
	t.Logf("steady %.0f B/s over %s; moves (%v) %.0f B/s over %s, %.0f bytes of bases", res.steadyBytes, res.steadyWindow.Round(time.Millisecond),
		res.moves, res.movedBytes, res.movedWindow.Round(time.Millisecond), res.movedBases)
	checkExactlyOnce(t, union(int32(parts), bulk, producedKeys(steady)), got)
	return res
}

// producedKeys is w reduced to the keys of its records.
func producedKeys(w *workload) *workload {
	out := &workload{parts: w.parts, keys: map[string]int32{}}
	for _, r := range w.recs {
		out.keys[string(r.Key)] = r.Partition
	}
	return out
}

// TestMovesWriteNoBase: through a rolling restart, a SIGKILL restart and
// a scale out and in, no partition writes a base (its chain goes on with
// the new owner or the member that kept it), the checkpoint bytes per
// second stay within twice the steady rate, and the output holds every key
// exactly once. Both stores.
func TestMovesWriteNoBase(t *testing.T) {
	for _, kind := range []string{"file", "kafka"} {
		t.Run(kind, func(t *testing.T) {
			res := movesScenario(t, movesOptions{
				parts: 4, keysPer: 20000, perSecond: 400, steady: 3 * time.Second, settle: time.Second,
				interval: 200 * time.Millisecond, store: storeOf(kind),
			})
			if res.movedBases != 0 {
				t.Errorf("%.0f bytes of bases written during the moves, want none", res.movedBases)
			}
			if res.movedBytes > 2*res.steadyBytes {
				t.Errorf("checkpoints wrote %.0f B/s during the moves, more than twice the steady %.0f B/s", res.movedBytes, res.steadyBytes)
			}
		})
	}
}

// storeOf is the store of kind for a scenario's environment.
func storeOf(kind string) func(e *testEnv, group string) Store {
	return func(e *testEnv, group string) Store {
		if kind == "file" {
			return fileStore(e.t, group)
		}
		return kafkaStore(e.t, e, group)
	}
}

// BenchmarkMovesLargeState is movesScenario at scale: 1M keys per
// partition (MOVES_KEYS to change), 2,000 new keys a second, 20 s
// measured steady and 20 s on after the last move, a checkpoint every 2
// s. It reports the checkpoint bytes per second during the moves over the
// steady rate (moved/steady) and the base bytes the moves wrote. Run with
// -benchtime 1x.
func BenchmarkMovesLargeState(b *testing.B) {
	keys := 1_000_000
	if v := os.Getenv("MOVES_KEYS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			b.Fatalf("MOVES_KEYS: %v", err)
		}
		keys = n
	}
	for _, kind := range []string{"file", "kafka"} {
		b.Run(kind, func(b *testing.B) {
			for range b.N {
				res := movesScenario(b, movesOptions{
					parts: 4, keysPer: keys, perSecond: 2000, steady: 20 * time.Second, settle: 20 * time.Second,
					interval: 2 * time.Second, store: storeOf(kind), collectWait: 5 * time.Minute,
				})
				b.ReportMetric(res.movedBytes/res.steadyBytes, "moved/steady")
				b.ReportMetric(res.movedBases, "base-bytes-moved")
				b.ReportMetric(res.steadyBytes, "steady-B/s")
			}
		})
	}
}

// TestHop2MovesWriteNoBase: hop 2 of REPARTITION_TOPIC (its partitions
// keep high-water marks beside their filters, and are never kept in
// memory through a rebalance) through a SIGTERM restart and a SIGKILL
// restart of one of its two members, input flowing before, between and
// after: no base is written from the first move on, and every id is
// forwarded exactly once.
func TestHop2MovesWriteNoBase(t *testing.T) {
	const inParts, reParts = 3, 4
	e, k := twoHopEnv(t, inParts, reParts)
	o := e.options("hop2moves")
	o.SessionTimeout, o.RebalanceTimeout, o.HeartbeatInterval = 4*time.Second, 8*time.Second, 200*time.Millisecond
	o.InputTopic, o.Repartitioned, o.Key = reTopic, true, k
	o.Store = fileStore(t, "hop2moves")
	o.ChainRatio = 1000
	r := &movesRun{t: t, e: e, o: o}
	out := e.collect()
	r.start()
	r.start()
	r.settled(reParts)
	h := startHop1(t, e, "hop2moves", k, smallBatches)
	in := newTwoHopInput(inParts, 900, 3, 60, 41)
	third := len(in.recs) / 3
	produce := func(recs []*kgo.Record) {
		for i := 0; i < len(recs); i += 30 {
			e.produce(recs[i:min(i+30, len(recs))]...)
		}
	}
	produce(in.recs[:third])
	// Every hop-2 partition checkpointed what came so far: committed
	// past the records hop 1 wrote to it.
	eventually(t, 60*time.Second, "hop 2 checkpointed the first third", func() bool {
		for _, m := range r.live {
			if m.p.Progress().In == 0 {
				return false
			}
		}
		return h.caughtUp(inParts, endsOf(in.recs[:third])) && committedSum(t, e, "hop2moves", reTopic, reParts) > 0
	})
	base0, _ := r.written()
	r.remove(r.live[0], false)
	r.start()
	r.settled(reParts)
	produce(in.recs[third : 2*third])
	r.remove(r.live[0], true)
	r.start()
	r.settled(reParts)
	produce(in.recs[2*third:])
	eventually(t, 60*time.Second, "hop 1 caught up", func() bool { return h.caughtUp(inParts, endsOf(in.recs)) })
	repartitionSentinels(e, reParts)
	in.check(t, out.untilSentinels(reParts))
	if base1, inc := r.written(); base1 != base0 || inc == 0 {
		t.Errorf("hop 2 wrote %.0f bytes of bases from the first move on (increments %.0f bytes), want none", base1-base0, inc)
	}
}

// endsOf is the input partitions' end offsets after recs.
func endsOf(recs []*kgo.Record) map[int32]int64 {
	ends := map[int32]int64{}
	for _, r := range recs {
		ends[r.Partition] = max(ends[r.Partition], r.Offset+1)
	}
	return ends
}

// movePoints are where TestMoveCrashPoints kills the new owner of moved
// partitions: before and after its claim (the empty increment of its
// generation that continues the chain it restored) is durable, and
// before and after its first increment with records.
var movePoints = []chainPoint{
	{name: "claim/before-save", at: func(m checkpoint.Meta, _, inc int, _ int64) bool { return m.Owner != 0 && inc == 1 }},
	{name: "claim/after-save", after: true, at: func(m checkpoint.Meta, _, inc int, _ int64) bool { return m.Owner != 0 && inc == 1 }},
	{name: "first-increment/before-save", at: func(m checkpoint.Meta, _, inc int, _ int64) bool { return m.Owner != 0 && inc == 2 }},
	{name: "first-increment/after-save", after: true, at: func(m checkpoint.Meta, _, inc int, _ int64) bool { return m.Owner != 0 && inc == 2 }},
}

// TestMoveCrashPoints: member A checkpoints and stops (SIGTERM, or killed
// while it writes an increment); member B takes the partitions over,
// continues their chains, and is killed at each point of movePoints while
// records flow; member C restores from what is durable. C goes on with
// the chains too (it writes no base), and every key is in the output
// exactly once. Both stores.
func TestMoveCrashPoints(t *testing.T) {
	for _, oldKilled := range []bool{false, true} {
		for _, pt := range movePoints {
			name := pt.name
			if oldKilled {
				name = "old-owner-killed-writing/" + name
			}
			t.Run(name, func(t *testing.T) {
				stores(t, func(t *testing.T, e *testEnv, store func(string) Store) {
					moveCrash(t, e, store("mv"), pt, oldKilled)
				})
			})
		}
	}
}

func moveCrash(t *testing.T, e *testEnv, inner Store, pt chainPoint, oldKilled bool) {
	const parts = 4
	first := newWorkloadAt(parts, 0, 300, 2, 7, t0)
	second := newWorkloadAt(parts, 300, 300, 2, 8, t0.Add(time.Minute))
	third := newWorkloadAt(parts, 600, 300, 2, 9, t0.Add(2*time.Minute))
	o := e.options("mv")
	o.SessionTimeout, o.RebalanceTimeout, o.HeartbeatInterval = 4*time.Second, 8*time.Second, 200*time.Millisecond
	o.CheckpointInterval = 20 * time.Millisecond
	o.ChainRatio = 1000
	out := e.collect()

	// A: the chains' first owner.
	oa := o
	oa.Metrics = NewMetrics(newRegistry())
	var aStore *crashStore
	oa.Store = inner
	if oldKilled {
		aStore = &crashStore{Store: inner, bases: map[int]int{}, increments: map[int]int{}, fired: make(chan checkpoint.Meta, 1),
			point: chainPoint{at: func(m checkpoint.Meta, _, inc int, _ int64) bool { return m.Increment() && inc >= 3 }}}
		oa.Store = aStore
	}
	a := start(t, oa)
	a.waitReady(t)
	for i := 0; i < len(first.recs); i += 60 {
		e.produce(first.recs[i:min(i+60, len(first.recs))]...)
		want := uint64(min(i+60, len(first.recs)))
		eventually(t, 30*time.Second, "the step read", func() bool { return a.p.Progress().In >= want })
	}
	if oldKilled {
		select {
		case <-aStore.fired:
		case <-time.After(20 * time.Second):
			t.Fatal("A never reached its third increment")
		}
		a.crash(t)
	} else if err := a.stop(t); err != nil {
		t.Fatal(err)
	}

	// B: takes every partition over, continues the chains, dies at pt.
	ob := o
	ob.Metrics = NewMetrics(newRegistry())
	bStore := &crashStore{Store: inner, point: pt, bases: map[int]int{}, increments: map[int]int{}, fired: make(chan checkpoint.Meta, 1)}
	ob.Store = bStore
	b := start(t, ob)
	next := 0
	fired := false
	for next < len(second.recs) && !fired {
		step := second.recs[next:min(next+40, len(second.recs))]
		next += len(step)
		e.produce(step...)
		eventually(t, 20*time.Second, "B checkpointed the step or reached the point", func() bool {
			select {
			case <-bStore.fired:
				fired = true
			default:
			}
			return fired || bStore.saves() > 0 && b.p.Progress().In >= uint64(next)
		})
	}
	if !fired {
		select {
		case <-bStore.fired:
		case <-time.After(20 * time.Second):
			t.Fatalf("B never reached %s", pt.name)
		}
	}
	bStore.mu.Lock()
	if len(bStore.bases) != 0 {
		t.Errorf("B wrote bases of partitions %v: a move continues the chain", bStore.bases)
	}
	bStore.mu.Unlock()
	b.p.crashed.Store(true)
	if err := b.stop(t); err != nil && !errors.Is(err, errCrashed) {
		t.Logf("crashed member: %v", err)
	}

	// C: restores what is durable, and goes on with the chains.
	oc := o
	oc.Metrics = NewMetrics(newRegistry())
	oc.Store = inner
	c := start(t, oc)
	e.produce(second.recs[next:]...)
	e.produce(third.recs...)
	e.produce(sentinels(parts, t0.Add(time.Hour-time.Minute))...)
	checkExactlyOnce(t, union(parts, first, second, third), out.untilSentinels(parts))
	if n := metricValue(c.p.metrics.Restores.WithLabelValues("latest")); n != parts {
		t.Errorf("C restored %v partitions from their newest chains whole, want %d", n, parts)
	}
	if err := c.stop(t); err != nil {
		t.Fatal(err)
	}
	if n := metricValue(c.p.metrics.CheckpointInstanceWritten.WithLabelValues(partition.PieceLabels[0])); n != 0 {
		t.Errorf("C wrote %.0f bytes of bases, want none", n)
	}
}

// midSaveStore holds one increment Save of partition 0 in the middle of
// writing its payload, after the store's checks before the write, once
// armed: a member descheduled in the middle of a save.
type midSaveStore struct {
	Store
	armed    atomic.Bool
	held     chan checkpoint.Meta // the held save's metadata, once
	release  chan struct{}
	answered chan error // the held save's result
}

func (s *midSaveStore) Save(ctx context.Context, m checkpoint.Meta, state io.WriterTo) (checkpoint.Meta, error) {
	if m.Partition != 0 || !m.Increment() || !s.armed.CompareAndSwap(true, false) {
		return s.Store.Save(ctx, m, state)
	}
	saved, err := s.Store.Save(ctx, m, heldWriter{WriterTo: state, held: func() { s.held <- m; <-s.release }})
	s.answered <- err
	return saved, err
}

// heldWriter calls held once before writing what it wraps.
type heldWriter struct {
	io.WriterTo
	held func()
}

func (h heldWriter) WriteTo(w io.Writer) (int64, error) {
	h.held()
	return h.WriterTo.WriteTo(w)
}

// TestZombieMidSave: member A is held in the middle of saving an
// increment of partition 0 (past the store's checks, before it
// publishes) while member B joins; A cannot finish the rebalance and is
// removed from the group, B takes every partition, continues partition 0's
// chain and claims it. Then A's save goes on: the store refuses it, B's
// chain goes on without it, and every key is in the output exactly once.
// Both stores.
func TestZombieMidSave(t *testing.T) {
	stores(t, func(t *testing.T, e *testEnv, store func(string) Store) {
		const parts = 4
		inner := store("zombie")
		o := e.options("zombie")
		o.CheckpointInterval = 20 * time.Millisecond
		o.ChainRatio = 1000
		out := e.collect()
		oa := o
		oa.Metrics = NewMetrics(newRegistry())
		ms := &midSaveStore{Store: inner, held: make(chan checkpoint.Meta, 1), release: make(chan struct{}), answered: make(chan error, 1)}
		oa.Store = ms
		a := start(t, oa)
		a.waitReady(t)
		first := newWorkloadAt(parts, 0, 400, 2, 31, t0)
		second := newWorkloadAt(parts, 400, 400, 2, 32, t0.Add(time.Minute))
		e.produce(first.recs[:len(first.recs)/2]...)
		eventually(t, 20*time.Second, "A read the first half", func() bool { return a.p.Progress().In >= uint64(len(first.recs)/2) })
		ms.armed.Store(true)
		e.produce(first.recs[len(first.recs)/2:]...)
		var zombie checkpoint.Meta
		select {
		case zombie = <-ms.held:
		case <-time.After(20 * time.Second):
			t.Fatal("A never saved an increment of partition 0")
		}

		ob := o
		ob.Metrics = NewMetrics(newRegistry())
		// B's store is its own, as another process's is: a KafkaStore
		// serialises its own saves per checkpoint partition, so sharing
		// A's would hold B behind A's held save. (The file store is the
		// directory, shared already.)
		ob.Store = inner
		if _, ok := inner.(*checkpoint.KafkaStore); ok {
			ob.Store = store("zombie")
		}
		b := start(t, ob)
		eventually(t, 30*time.Second, "B owns every partition", func() bool { return b.p.Ready() && assignedTo(b) == parts })
		bGen := b.p.lease.Load().Generation()
		claimed := func() bool {
			m, _, err := ob.Store.Load(context.Background(), inTopic, 0, func(checkpoint.Meta, io.Reader) error { return nil })
			return err == nil && m.Owner >= bGen
		}
		eventually(t, 20*time.Second, "B's claim of partition 0", claimed)
		close(ms.release)
		if err := <-ms.answered; !errors.Is(err, checkpoint.ErrStale) && !errors.Is(err, checkpoint.ErrChainBroken) {
			t.Errorf("A's save of %+v, finished after B claimed the chain: %v, want it refused", zombie, err)
		}
		e.produce(second.recs...)
		e.produce(sentinels(parts, t0.Add(time.Hour-time.Minute))...)
		checkExactlyOnce(t, union(parts, first, second), out.untilSentinels(parts))
		if !claimed() {
			t.Error("partition 0's newest chain is no longer B's")
		}
		if err := b.stop(t); err != nil {
			t.Fatal(err)
		}
		_ = a.stop(t)
	})
}
