package processor

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"dedup/checkpoint"
	"dedup/rotation"
)

// skewClock is the lease's monotonic clock with an offset a test moves:
// advancing it is, for the lease, a stall of that length.
type skewClock struct {
	base time.Time
	skew atomic.Int64
}

func newSkewClock() *skewClock { return &skewClock{base: time.Now()} }

func (c *skewClock) now() time.Duration {
	return time.Since(c.base) + time.Duration(c.skew.Load())
}

func (c *skewClock) advance(d time.Duration) { c.skew.Add(int64(d)) }

// kafkaStore returns a Kafka checkpoint store on the test broker.
func kafkaStore(t testing.TB, e *testEnv, group string) *checkpoint.KafkaStore {
	t.Helper()
	return kafkaStoreOn(t, e, group, group+"-state")
}

// kafkaStoreOn is group's Kafka store on topic.
func kafkaStoreOn(t testing.TB, e *testEnv, group, topic string) *checkpoint.KafkaStore {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := checkpoint.NewKafkaStore(ctx, checkpoint.KafkaOptions{Brokers: e.brokers, Topic: topic, Group: group})
	if err != nil {
		t.Fatalf("kafka store: %v", err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// stores runs f with each checkpoint store.
func stores(t *testing.T, f func(t *testing.T, e *testEnv, store func(group string) Store)) {
	t.Run("file", func(t *testing.T) {
		f(t, newTestEnv(t, 4, 4), func(group string) Store { return fileStore(t, group) })
	})
	t.Run("kafka", func(t *testing.T) {
		e := newTestEnv(t, 4, 4)
		f(t, e, func(group string) Store { return kafkaStore(t, e, group) })
	})
}

// TestLeaseExpiresWithoutConfirmation: a member whose clock jumps past its
// lease (a stall, as the lease sees one) may neither produce nor save; the
// produce fails unsent, the generation ends, the partitions restore and
// the output still holds every first occurrence exactly once. The stall is
// injected at several points of the stream.
func TestLeaseExpiresWithoutConfirmation(t *testing.T) {
	stores(t, func(t *testing.T, e *testEnv, store func(string) Store) {
		o := e.options("lease")
		o.Store = store("lease")
		clock := newSkewClock()
		p := mustNew(t, o)
		p.clock = clock.now
		out := e.collect()
		ctx, cancel := context.WithCancel(context.Background())
		a := &running{p: p, cancel: cancel, done: make(chan error, 1)}
		go func() { a.done <- p.Run(ctx) }()
		t.Cleanup(func() { a.stop(t) })
		a.waitReady(t)

		w := newWorkload(4, 3000, 2, 13)
		var sent atomic.Int64
		produced := producePaced(t, e, w.recs, 50, 5*time.Millisecond, &sent)
		n := int64(len(w.recs))
		for i, at := range []int64{n / 5, n / 2, 4 * n / 5} {
			eventually(t, 30*time.Second, fmt.Sprintf("stall %d", i+1), func() bool {
				return sent.Load() >= at && p.Ready() && p.lease.Load() != nil
			})
			l := p.lease.Load()
			replaced := p.out.Replaced()
			clock.advance(l.Window())
			if err := l.Fence(); !errors.Is(err, ErrFenced) {
				t.Fatalf("lease after a stall of its window: %v, want ErrFenced", err)
			}
			if err := p.fenceProduce(); !errors.Is(err, ErrFenced) {
				t.Fatalf("produce after a stall: %v, want ErrFenced", err)
			}
			// The next produce fails unsent and the writer is replaced; or
			// the lease is renewed first (then nothing was refused).
			eventually(t, 30*time.Second, "the member fenced or renewed", func() bool {
				return p.out.Replaced() > replaced || l.Fence() == nil
			})
		}
		<-produced
		e.produce(sentinels(4, t0.Add(time.Hour/2))...)
		checkExactlyOnce(t, w, out.untilSentinels(4))
		if err := a.stop(t); err != nil {
			t.Fatalf("Run: %v", err)
		}
	})
}

// TestPausedMemberDoesNotWriteBehindOwner: two members share four
// partitions; the broker holds every heartbeat of member A (its own and
// its lease's), as if A were frozen, until the coordinator has evicted it
// and B owns every partition; then A's heartbeats go through again. A
// keeps reading meanwhile, so it tries to produce and save behind B's
// back. Nothing is forwarded twice, and no snapshot A saves after losing
// the partitions outranks B's. Done at two points of the stream.
func TestPausedMemberDoesNotWriteBehindOwner(t *testing.T) {
	stores(t, func(t *testing.T, e *testEnv, store func(string) Store) {
		const parts = 4
		st := store("paused")
		out := e.collect()
		oa := e.options("paused")
		// A's saves that began while A's lease did not hold and succeeded.
		// (A save that began under the lease may end after it: it then
		// ranks below the new owner's, checked below.)
		var fencedSaves atomic.Int32
		var aProc atomic.Pointer[Processor]
		oa.Store = savesWatched{Store: st, fenced: func() bool {
			p := aProc.Load()
			return p != nil && p.fenceProduce() != nil
		}, count: &fencedSaves}
		a := start(t, oa)
		aProc.Store(a.p)
		a.waitReady(t)
		ob := e.options("paused")
		ob.Store = st
		b := start(t, ob)
		eventually(t, 30*time.Second, "both members consuming", func() bool {
			return a.p.Ready() && b.p.Ready() && assignedTo(a) > 0 && assignedTo(b) > 0
		})

		w := newWorkload(parts, 3000, 2, 17)
		var sent atomic.Int64
		// Paced so that input still flows after each pause.
		produced := producePaced(t, e, w.recs, 20, 20*time.Millisecond, &sent)
		n := int64(len(w.recs))
		var lastGen int32
		for i, at := range []int64{n / 4, 3 * n / 5} {
			eventually(t, 30*time.Second, fmt.Sprintf("pause %d", i+1), func() bool {
				return sent.Load() >= at && a.p.Ready() && b.p.Ready() && assignedTo(a) > 0 && a.p.lease.Load() != nil
			})
			member := a.p.lease.Load().Member()
			fails, refused := checkpointFailures(a), produceErrors(a)
			release := make(chan struct{})
			var held atomic.Int32
			e.cluster.ControlKey(int16(kmsg.Heartbeat), func(kr kmsg.Request) (kmsg.Response, error, bool) {
				e.cluster.KeepControl()
				if kr.(*kmsg.HeartbeatRequest).MemberID != member {
					return nil, nil, false
				}
				select {
				case <-release:
					e.cluster.DropControl()
					return nil, nil, false
				default:
				}
				held.Add(1)
				e.cluster.SleepControl(func() { <-release })
				return nil, nil, false
			})
			eventually(t, 30*time.Second, "B owns every partition", func() bool {
				return held.Load() > 0 && assignedTo(b) == parts && b.p.Ready()
			})
			bGen := b.p.lease.Load().Generation()
			eventually(t, 30*time.Second, "A fenced", func() bool { return a.p.fenceProduce() != nil })
			close(release)
			eventually(t, 30*time.Second, "both members consuming again", func() bool {
				return a.p.Ready() && b.p.Ready() && assignedTo(a) > 0 && assignedTo(b) > 0
			})
			if n := fencedSaves.Load(); n > 0 {
				t.Errorf("pause %d: %d checkpoints begun and saved by A while fenced", i+1, n)
			}
			if checkpointFailures(a) == fails && produceErrors(a) == refused {
				t.Errorf("pause %d: A refused neither a produce nor a save: the pause exercised nothing", i+1)
			}
			lastGen = bGen
		}
		<-produced
		e.produce(sentinels(parts, t0.Add(time.Hour/2))...)
		checkExactlyOnce(t, w, out.untilSentinels(parts))
		// Once checkpoints were taken after the sentinels, every
		// partition's restored head was written in the last takeover's
		// generation or later (an increment of a continued chain carries
		// its writer's as Owner): nothing A saved before or after it
		// outranks them or extends their chain.
		eventually(t, 30*time.Second, "every partition checkpointed after the last takeover", func() bool {
			for part := range parts {
				m, _, err := st.Load(context.Background(), inTopic, part, func(checkpoint.Meta, io.Reader) error { return nil })
				if err != nil || max(m.Generation, m.Owner) < lastGen {
					return false
				}
			}
			return true
		})
	})
}

// produceErrors is r's dedup_produce_errors_total.
func produceErrors(r *running) float64 {
	return metricValue(r.p.metrics.ProduceErrors.WithLabelValues(outTopic))
}

// checkpointFailures sums dedup_checkpoint_failures_total over r's partitions.
func checkpointFailures(r *running) float64 {
	var sum float64
	for part := range 4 {
		sum += metricValue(r.p.metrics.CheckpointFails.WithLabelValues(inTopic, fmt.Sprint(part)))
	}
	return sum
}

// savesWatched counts the successful Saves that began while fenced
// reported true.
type savesWatched struct {
	Store
	fenced func() bool
	count  *atomic.Int32
}

func (s savesWatched) Save(ctx context.Context, m checkpoint.Meta, state io.WriterTo) (checkpoint.Meta, error) {
	fenced := s.fenced()
	m, err := s.Store.Save(ctx, m, state)
	if err == nil && fenced {
		s.count.Add(1)
	}
	return m, err
}

// TestGroupStartedOver: the store holds snapshots of generation 50, the
// group (deleted and created again, or a broker that lost its state) is at
// generation 1. The member's saves are refused as stale, it confirms that
// generation 1 is current and starts a new epoch: it keeps checkpointing
// and forwards every first occurrence exactly once.
func TestGroupStartedOver(t *testing.T) {
	stores(t, func(t *testing.T, e *testEnv, store func(string) Store) {
		const parts = 4
		o := e.options("over")
		st := store("over")
		o.Store = st
		for part := range parts {
			pair, err := rotation.New(o.Filter)
			if err != nil {
				t.Fatal(err)
			}
			m := checkpoint.Meta{Group: "over", Topic: inTopic, Partition: part, OutputTopic: outTopic,
				OutputEnds: map[int]int64{}, Generation: 50}
			if _, err := st.Save(context.Background(), m, pair); err != nil {
				t.Fatalf("seed snapshot: %v", err)
			}
		}
		out := e.collect()
		a := start(t, o)
		a.waitReady(t)
		w := newWorkload(parts, 1000, 2, 23)
		<-produceInBackground(t, e, w.recs, 100)
		e.produce(sentinels(parts, t0.Add(time.Hour/2))...)
		checkExactlyOnce(t, w, out.untilSentinels(parts))
		eventually(t, 30*time.Second, "checkpoints of the new epoch", func() bool {
			for part := range parts {
				m, _, err := st.Load(context.Background(), inTopic, part, func(checkpoint.Meta, io.Reader) error { return nil })
				if err != nil || m.Epoch != 1 || m.Offset == 0 {
					return false
				}
			}
			return true
		})
	})
}
