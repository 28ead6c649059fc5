// Package stagerun starts a stream stage for a benchmark and times it by
// one rule, so that every benchmark that compares the stage with something
// else (a copy loop, another produce path, another checkpoint interval)
// measures each side alike:
//
//   - the clock starts when the stage reports every assigned partition
//     consuming (Stage.Ready); the input is on the broker before the run
//     starts, so reading starts then;
//   - it stops when the output topic's end offsets last moved, once the
//     stage has decided every input record and the output has grown by
//     every record the stage wrote.
//
// A stage that does not count its decisions (a copy loop) is taken to
// forward every record it reads. The package knows nothing of the
// processor: a Stage is anything with Run and Ready.
package stagerun

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"

	"dedup/offsets"
)

// How often a run looks for the stage to be ready and at the output's end
// offsets: they bound the error of the measured elapsed time.
const (
	readyPoll = 250 * time.Microsecond
	endPoll   = 5 * time.Millisecond
)

// ErrReturnedEarly is a stage's Run returning before Stop asked it to.
var ErrReturnedEarly = errors.New("stage returned before it was stopped")

// Stage is what a run needs of the stage under measurement.
type Stage interface {
	// Run runs the stage until ctx is cancelled.
	Run(ctx context.Context) error
	// Ready reports that every assigned partition is consuming.
	Ready() bool
}

// Counts are a stage's decisions so far.
type Counts struct {
	In      uint64 // records read
	Decided uint64 // records forwarded, dropped or otherwise decided
	Written uint64 // records handed to the output
}

// Output is the topic the stage writes.
type Output struct {
	Client     *kafka.Client
	Topic      string
	Partitions int
}

// End is the sum of the output partitions' end offsets.
func (o Output) End(ctx context.Context) (int64, error) {
	return offsets.EndSum(ctx, o.Client, o.Topic, o.Partitions)
}

// Options describe one run.
type Options struct {
	Stage Stage
	// Counts reads the stage's decisions. Nil: the stage forwards every
	// record it reads, and it is done when the output has grown by Records.
	Counts func() Counts
	Output Output
	// Also are other topics the stage writes beside the output (a drop
	// topic): their growth counts with the output's, so Counts.Written
	// counts their records too.
	Also []Output
	// Records is how many input records the stage must decide.
	Records uint64
}

// Result is one timed run.
type Result struct {
	In, Written uint64
	// Began is when the stage was seen ready, Ended when the output's end
	// offsets were last seen to move.
	Began, Ended time.Time
}

// Elapsed is the timed span.
func (r Result) Elapsed() time.Duration { return r.Ended.Sub(r.Began) }

// Run is one started stage.
type Run struct {
	o      Options
	base   int64 // the output's end before the stage started
	began  time.Time
	cancel context.CancelFunc
	done   chan error // Stage.Run's return, once
	// exited is set once Stage.Run's return is received into err;
	// stopped when that was Stop's doing.
	exited, stopped bool
	err             error
}

// Start reads the output's end offsets and starts the stage.
func Start(ctx context.Context, o Options) (*Run, error) {
	if o.Stage == nil || o.Output.Client == nil || o.Output.Partitions < 1 {
		return nil, errors.New("start stage: options need a stage and an output")
	}
	base, err := o.end(ctx)
	if err != nil {
		return nil, fmt.Errorf("start stage: %w", err)
	}
	runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	r := &Run{o: o, base: base, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- o.Stage.Run(runCtx) }()
	return r, nil
}

// Ready waits until the stage reports it is consuming and returns when
// that was seen: the start of the timed span.
func (r *Run) Ready(ctx context.Context) (time.Time, error) {
	if !r.began.IsZero() {
		return r.began, nil
	}
	t := time.NewTicker(readyPoll)
	defer t.Stop()
	for !r.o.Stage.Ready() {
		if err := r.wait(ctx, t.C); err != nil {
			return time.Time{}, fmt.Errorf("wait for the stage to consume: %w", err)
		}
	}
	r.began = time.Now()
	return r.began, nil
}

// Finish waits until the stage has decided every record and the output
// holds every record it forwarded, and returns the timed run.
func (r *Run) Finish(ctx context.Context) (Result, error) {
	began, err := r.Ready(ctx)
	if err != nil {
		return Result{}, err
	}
	t := time.NewTicker(endPoll)
	defer t.Stop()
	var (
		end   int64
		moved time.Time
		c     Counts
	)
	for {
		sum, err := r.o.end(ctx)
		if err != nil && ctxEnded(ctx) != nil {
			// The client reports a deadline it took from ctx as its own
			// i/o timeout: name the cause.
			return Result{}, fmt.Errorf("read the output's end: %w (%v)", ctxEnded(ctx), err)
		}
		if err != nil {
			return Result{}, fmt.Errorf("read the output's end: %w", err)
		}
		if sum != end || moved.IsZero() {
			end, moved = sum, time.Now()
		}
		grown := uint64(max(0, end-r.base))
		c = r.counts(grown)
		if c.In >= r.o.Records && c.Decided >= r.o.Records && grown >= c.Written {
			return Result{In: c.In, Written: c.Written, Began: began, Ended: moved}, nil
		}
		if err := r.wait(ctx, t.C); err != nil {
			return Result{}, fmt.Errorf("stage decided %d of %d records, output grew by %d of %d: %w",
				c.Decided, r.o.Records, grown, c.Written, err)
		}
	}
}

// end is the sum of the end offsets of the output and the Also topics.
func (o Options) end(ctx context.Context) (int64, error) {
	sum, err := o.Output.End(ctx)
	for _, a := range o.Also {
		if err != nil {
			break
		}
		var n int64
		n, err = a.End(ctx)
		sum += n
	}
	return sum, err
}

func (r *Run) counts(grown uint64) Counts {
	if r.o.Counts != nil {
		return r.o.Counts()
	}
	n := min(grown, r.o.Records)
	return Counts{In: n, Decided: n, Written: n}
}

// ctxEnded is ctx's error, or DeadlineExceeded once its deadline has
// passed: a socket deadline taken from ctx can fire before ctx's own timer.
func ctxEnded(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok && !time.Now().Before(dl) {
		return context.DeadlineExceeded
	}
	return nil
}

// wait waits for the next tick; it fails when ctx ends or the stage
// returns.
func (r *Run) wait(ctx context.Context, tick <-chan time.Time) error {
	select {
	case <-tick:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	case err := <-r.done:
		r.exited, r.err = true, err
		return r.early()
	}
}

func (r *Run) early() error {
	if r.err == nil {
		return ErrReturnedEarly
	}
	return fmt.Errorf("%w: %w", ErrReturnedEarly, r.err)
}

// Stop cancels the stage and returns what its Run returned: nil when it
// left cleanly on being stopped.
// A second Stop returns the same.
func (r *Run) Stop() error {
	if !r.exited {
		r.cancel()
		r.exited, r.stopped, r.err = true, true, <-r.done
		if errors.Is(r.err, context.Canceled) {
			r.err = nil
		}
	}
	if !r.stopped {
		return r.early()
	}
	return r.err
}
