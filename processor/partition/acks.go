package partition

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/segmentio/kafka-go"
)

// ackTracker follows the outputs of one input partition from the worker to
// the writer's Completion (Completion.Settle), and answers the question a commit asks: below
// which input offset is every output acknowledged?
//
// Slots form a ring in input-offset order. The worker reserves slots
// without locking (it alone owns the tail), publishes them to the writer in
// batches under the lock, and the Completion callback marks them done and
// retires the done prefix. One worker goroutine; any number of Completion
// goroutines.
type ackTracker struct {
	partition int // input partition, for errors
	slots     []ackSlot
	mask      uint64

	mu        sync.Mutex
	head      uint64 // first slot not retired
	published uint64 // slots [head, published) are with the writer
	err       error  // first produce failure; sticky
	wake      chan struct{}

	// worker-owned
	tail  uint64 // next slot to reserve
	limit uint64 // tail may not reach this (head+len at the last publish)
}

// ackSlot is one output in flight. Its address rides in
// kafka.Message.WriterData, so reserving a slot allocates nothing.
type ackSlot struct {
	t      *ackTracker
	offset int64     // input offset
	ts     time.Time // input timestamp, for the end-to-end latency
	done   bool
	drop   bool // a drop (Deps.Drops), not an output
}

// ProduceError is a forwarded record the writer failed to deliver.
type ProduceError struct {
	Partition int   // input partition
	Offset    int64 // input offset
	Err       error
	// Dropped: the record was a duplicate written to the drop topic
	// (Deps.Drops), not an output.
	Dropped bool
}

func (e *ProduceError) Error() string {
	what := "output"
	if e.Dropped {
		what = "drop"
	}
	return fmt.Sprintf("produce %s of input partition %d offset %d: %v", what, e.Partition, e.Offset, e.Err)
}

func (e *ProduceError) Unwrap() error { return e.Err }

func newAckTracker(partition, capacity int) *ackTracker {
	n := 1
	for n < capacity {
		n <<= 1
	}
	t := &ackTracker{partition: partition, slots: make([]ackSlot, n), mask: uint64(n - 1)}
	for i := range t.slots {
		t.slots[i].t = t
	}
	t.limit = uint64(n)
	return t
}

// reserve returns a slot for the output of input offset, or nil when the
// ring is full as of the last publish (then publish and wait for room).
func (t *ackTracker) reserve(offset int64, ts time.Time) *ackSlot {
	if t.tail >= t.limit {
		return nil
	}
	s := &t.slots[t.tail&t.mask]
	s.offset, s.ts, s.done, s.drop = offset, ts, false, false
	t.tail++
	return s
}

// publish marks every reserved slot as handed to the writer and refreshes
// the worker's view of free room. It returns the sticky produce error.
func (t *ackTracker) publish() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.published = t.tail
	t.retireLocked() // Completion may have marked slots before they were published
	t.limit = t.head + uint64(len(t.slots))
	return t.err
}

// retired returns the retired prefix (slots below it are acknowledged) as
// of the last publish, without locking. Worker goroutine.
func (t *ackTracker) retired() uint64 { return t.limit - uint64(len(t.slots)) }

// complete records the writer's verdict on one slot; the caller holds t.mu.
func (t *ackTracker) completeLocked(s *ackSlot, err error) {
	if err != nil {
		if t.err == nil {
			t.err = &ProduceError{Partition: t.partition, Offset: s.offset, Err: err, Dropped: s.drop}
		}
		return // never retired: nothing at or after it is committed
	}
	s.done = true
}

// retireLocked drops the acknowledged prefix and wakes a waiter.
func (t *ackTracker) retireLocked() {
	moved := false
	for t.head < t.published && t.slots[t.head&t.mask].done {
		t.head++
		moved = true
	}
	if (moved || t.err != nil) && t.wake != nil {
		close(t.wake)
		t.wake = nil
	}
}

// acknowledgedBelow reports whether every published output of an input
// offset below off is acknowledged.
func (t *ackTracker) acknowledgedBelowLocked(off int64) bool {
	return t.head == t.published || t.slots[t.head&t.mask].offset >= off
}

// settledBelow reports whether every published output of an input offset
// below off is acknowledged and none failed.
func (t *ackTracker) settledBelow(off int64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err == nil && t.acknowledgedBelowLocked(off)
}

// waitAcknowledged blocks until every published output of an input offset
// below off is acknowledged, a produce failed, or ctx ends.
func (t *ackTracker) waitAcknowledged(ctx context.Context, off int64) error {
	return t.waitFor(ctx, func() bool { return t.acknowledgedBelowLocked(off) })
}

// waitRoom blocks until at least one slot is free.
func (t *ackTracker) waitRoom(ctx context.Context) error {
	return t.waitFor(ctx, func() bool { return t.published-t.head < uint64(len(t.slots)) })
}

// waitFor blocks until cond (called with t.mu held) holds, a produce
// failed, or ctx ends.
func (t *ackTracker) waitFor(ctx context.Context, cond func() bool) error {
	for {
		t.mu.Lock()
		if t.err != nil {
			err := t.err
			t.mu.Unlock()
			return err
		}
		if cond() {
			t.mu.Unlock()
			return nil
		}
		if t.wake == nil {
			t.wake = make(chan struct{})
		}
		wake := t.wake
		t.mu.Unlock()
		select {
		case <-wake:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// fail records a failure the writer did not report through Completion
// (it refused the messages outright).
func (t *ackTracker) fail(offset int64, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err == nil {
		t.err = &ProduceError{Partition: t.partition, Offset: offset, Err: err}
	}
	t.retireLocked()
}

// failed returns the sticky produce error.
func (t *ackTracker) failed() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err
}

// Completion settles the ack slots of the outputs a writer reports on.
type Completion struct {
	// NotSent marks outputs never sent by design (a writer aborted after
	// another failure): they settle as failed but are not counted.
	NotSent error
	// Latency observes the end-to-end latency of each acknowledged output
	// (nil: not observed).
	Latency func(time.Duration)
}

// Settle is the writer's Completion callback: it settles each record's ack
// slot and returns how many outputs failed. Write errors are checked record
// by record (kafka.WriteErrors) when the writer reports them so, else the
// batch error applies to all. Messages without an ack slot are ignored.
func (c Completion) Settle(msgs []kafka.Message, err error) (failed int) {
	now := time.Now()
	var werrs kafka.WriteErrors
	errors.As(err, &werrs)
	var t *ackTracker
	for i := range msgs {
		s, ok := msgs[i].WriterData.(*ackSlot)
		if !ok {
			continue
		}
		e := err
		if werrs != nil {
			e = nil
			if i < len(werrs) {
				e = werrs[i]
			}
		}
		if s.t != t {
			if t != nil {
				t.retireLocked()
				t.mu.Unlock()
			}
			t = s.t
			t.mu.Lock()
		}
		switch {
		case c.NotSent != nil && errors.Is(e, c.NotSent):
			// Never sent, by design: not a produce error of its own (the
			// one that broke the writer was counted).
		case e != nil:
			failed++
		case !s.ts.IsZero() && c.Latency != nil:
			c.Latency(now.Sub(s.ts))
		}
		t.completeLocked(s, e)
	}
	if t != nil {
		t.retireLocked()
		t.mu.Unlock()
	}
	return failed
}
