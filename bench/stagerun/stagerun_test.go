package stagerun

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"dedup/bench/copyloop"
	"dedup/internal/testkit"
)

const (
	parts = 2
	in    = "in"
	out   = "out"
)

// broker is a kfake cluster whose input holds n records round-robin over
// the partitions, key i%(n/2) for record i (every key twice, both in the
// same partition when n/2 is a multiple of parts); ends are the input
// partitions' end offsets.
func broker(t *testing.T, n int) (brokers []string, ends []int64) {
	t.Helper()
	c := testkit.NewCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(parts, in, out))
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ends = make([]int64, parts)
	var recs []*kgo.Record
	for i := range n {
		recs = append(recs, &kgo.Record{Topic: in, Partition: int32(i % parts), Key: fmt.Appendf(nil, "k%d", i%(n/2)), Value: []byte("v")})
		ends[i%parts]++
	}
	if err := cl.ProduceSync(context.Background(), recs...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	return c.ListenAddrs(), ends
}

func copyLoop(brokers []string, ends []int64) copyloop.Options {
	return copyloop.Options{
		Brokers: brokers, InputTopic: in, OutputTopic: out, Ends: ends,
		FetchMinBytes: 1, FetchMaxBytes: 1 << 20, FetchMaxWait: 50 * time.Millisecond, QueueCapacity: 64,
		BatchSize: 10, BatchBytes: 1 << 20, BatchTimeout: time.Millisecond, MaxAttempts: 3,
	}
}

func output(t testing.TB, brokers []string) Output {
	return Output{Client: testkit.KafkaClient(t, brokers...), Topic: out, Partitions: parts}
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// TestCopyLoopRunsToEveryRecord: a stage without Counts is done when the
// output has grown by every input record, measured from the output's end
// when it started, so that runs one after the other on one output are
// each timed over their own records.
func TestCopyLoopRunsToEveryRecord(t *testing.T) {
	const n = 400
	brokers, ends := broker(t, n)
	ctx := ctxFor(t)
	for run := range 2 {
		r, err := Start(ctx, Options{Stage: CopyLoop(copyLoop(brokers, ends)), Output: output(t, brokers), Records: n})
		if err != nil {
			t.Fatal(err)
		}
		res, err := r.Finish(ctx)
		if err != nil {
			t.Fatalf("run %d: %v", run, err)
		}
		if res.In != n || res.Written != n || res.Elapsed() < 0 || res.Began.IsZero() {
			t.Fatalf("run %d: %+v, want %d records in and forwarded over a span from when it was ready", run, res, n)
		}
		if err := r.Stop(); err != nil {
			t.Fatalf("run %d: Stop: %v", run, err)
		}
		if err := r.Stop(); err != nil {
			t.Fatalf("run %d: second Stop: %v", run, err)
		}
		end, err := output(t, brokers).End(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if want := int64(n * (run + 1)); end != want {
			t.Fatalf("after run %d the output holds %d records, want %d", run, end, want)
		}
	}
}

// TestCountsEndTheRun: a stage that drops records is done when it has
// decided every record and the output holds what it forwarded, not when
// the output holds every input record (which would never come).
func TestCountsEndTheRun(t *testing.T) {
	const n = 400
	brokers, ends := broker(t, n)
	var read, forwarded atomic.Uint64
	o := copyLoop(brokers, ends)
	o.Seen = func(int) func([]byte, time.Time) bool {
		keys := map[string]bool{}
		return func(k []byte, _ time.Time) bool {
			seen := keys[string(k)]
			keys[string(k)] = true
			if !seen {
				forwarded.Add(1)
			}
			return seen
		}
	}
	o.Read = func() { read.Add(1) }
	counts := func() Counts { r := read.Load(); return Counts{In: r, Decided: r, Written: forwarded.Load()} }
	ctx := ctxFor(t)
	r, err := Start(ctx, Options{Stage: CopyLoop(o), Counts: counts, Output: output(t, brokers), Records: n})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Stop()
	res, err := r.Finish(ctx)
	if err != nil {
		t.Fatal(err)
	}
	end, err := output(t, brokers).End(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if res.In != n || res.Written != n/2 || end != n/2 {
		t.Fatalf("%+v with %d outputs, want %d in and %d forwarded and written", res, end, n, n/2)
	}
}

// stage is a Stage whose Run and Ready the test gives: the failures a
// real stage shows rarely and at random, on demand.
type stage struct {
	run   func(ctx context.Context) error
	ready atomic.Bool
}

func (s *stage) Run(ctx context.Context) error { return s.run(ctx) }
func (s *stage) Ready() bool                   { return s.ready.Load() }

var errBroken = errors.New("broken")

// TestStageReturningEarly: a stage whose Run returns before it is stopped
// fails the wait it interrupts, before or after it was ready, and Stop
// reports the same, whether Run returned an error or nil.
func TestStageReturningEarly(t *testing.T) {
	brokers, _ := broker(t, 2)
	for _, ret := range []error{errBroken, nil} {
		for _, ready := range []bool{false, true} {
			t.Run(fmt.Sprintf("return=%v/ready=%v", ret, ready), func(t *testing.T) {
				s := &stage{run: func(context.Context) error { return ret }}
				s.ready.Store(ready)
				ctx := ctxFor(t)
				r, err := Start(ctx, Options{Stage: s, Output: output(t, brokers), Records: 1})
				if err != nil {
					t.Fatal(err)
				}
				_, err = r.Finish(ctx)
				if !errors.Is(err, ErrReturnedEarly) || (ret != nil && !errors.Is(err, ret)) {
					t.Fatalf("Finish: %v, want %v wrapping %v", err, ErrReturnedEarly, ret)
				}
				if err := r.Stop(); !errors.Is(err, ErrReturnedEarly) || (ret != nil && !errors.Is(err, ret)) {
					t.Fatalf("Stop: %v, want %v wrapping %v", err, ErrReturnedEarly, ret)
				}
			})
		}
	}
}

// TestStopReportsTheStage: Stop is nil when the stage leaves cleanly on
// being cancelled (nil or context.Canceled) and the stage's error when it
// does not.
func TestStopReportsTheStage(t *testing.T) {
	brokers, _ := broker(t, 2)
	for _, ret := range []error{nil, context.Canceled, errBroken} {
		s := &stage{run: func(ctx context.Context) error { <-ctx.Done(); return ret }}
		r, err := Start(ctxFor(t), Options{Stage: s, Output: output(t, brokers), Records: 1})
		if err != nil {
			t.Fatal(err)
		}
		want := ret
		if errors.Is(ret, context.Canceled) {
			want = nil
		}
		if err := r.Stop(); !errors.Is(err, want) || (want == nil && err != nil) {
			t.Errorf("stage returning %v: Stop %v, want %v", ret, err, want)
		}
	}
}

// TestWaitsEndWithTheContext: a stage that never becomes ready, or never
// writes what it counts as forwarded, fails the wait when its context
// ends, with the cause.
func TestWaitsEndWithTheContext(t *testing.T) {
	brokers, _ := broker(t, 2)
	s := &stage{run: func(ctx context.Context) error { <-ctx.Done(); return nil }}
	counts := func() Counts { return Counts{In: 1, Decided: 1, Written: 1} }
	for _, ready := range []bool{false, true} {
		s.ready.Store(ready)
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		r, err := Start(ctx, Options{Stage: s, Counts: counts, Output: output(t, brokers), Records: 1})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := r.Finish(ctx); !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("ready %v: Finish %v, want %v", ready, err, context.DeadlineExceeded)
		}
		cancel()
		if err := r.Stop(); err != nil {
			t.Errorf("ready %v: Stop %v", ready, err)
		}
	}
}

// TestAlsoTopicsEndTheRun: a stage writing a second topic beside the
// output (Options.Also) is done when both have grown by what it wrote,
// not when the output alone holds its share.
func TestAlsoTopicsEndTheRun(t *testing.T) {
	const n = 400
	brokers, ends := broker(t, n)
	ctx := ctxFor(t)
	also := Output{Client: testkit.KafkaClient(t, brokers...), Topic: in, Partitions: parts}
	// The second copy loop writes the input topic itself, which Also
	// watches: it grows by n while the output grows by n.
	second := copyLoop(brokers, ends)
	second.OutputTopic = in
	both := &stage{run: func(ctx context.Context) error {
		errs := make(chan error, 2)
		for _, o := range []copyloop.Options{copyLoop(brokers, ends), second} {
			go func() { errs <- CopyLoop(o).Run(ctx) }()
		}
		return errors.Join(<-errs, <-errs)
	}}
	both.ready.Store(true)
	counts := func() Counts { return Counts{In: n, Decided: n, Written: 2 * n} }
	r, err := Start(ctx, Options{Stage: both, Counts: counts, Output: output(t, brokers), Also: []Output{also}, Records: n})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Stop()
	if _, err := r.Finish(ctx); err != nil {
		t.Fatal(err)
	}
	for _, o := range []Output{output(t, brokers), also} {
		end, err := o.End(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if want := int64(n); o.Topic == in && end != 2*want || o.Topic == out && end != want {
			t.Errorf("%s ends at %d when the run finished", o.Topic, end)
		}
	}
}
