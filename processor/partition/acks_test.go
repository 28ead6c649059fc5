package partition

import (
	"context"
	"errors"
	"testing"
	"time"
)

func complete(t *ackTracker, s *ackSlot, err error) {
	t.mu.Lock()
	t.completeLocked(s, err)
	t.retireLocked()
	t.mu.Unlock()
}

func acknowledgedBelow(t *ackTracker, off int64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.acknowledgedBelowLocked(off)
}

// TestAckTrackerOutOfOrder: acknowledgements arriving out of order (outputs
// of one input partition spread over output partitions) only release the
// contiguous acknowledged prefix.
func TestAckTrackerOutOfOrder(t *testing.T) {
	tr := newAckTracker(0, 4)
	s10 := tr.reserve(10, time.Time{})
	s12 := tr.reserve(12, time.Time{})
	s15 := tr.reserve(15, time.Time{})
	if err := tr.publish(); err != nil {
		t.Fatal(err)
	}
	if !acknowledgedBelow(tr, 10) || acknowledgedBelow(tr, 11) {
		t.Fatal("nothing acknowledged yet: only offsets below 10 are settled")
	}
	complete(tr, s15, nil)
	complete(tr, s12, nil)
	if acknowledgedBelow(tr, 11) {
		t.Fatal("offset 10 is still in flight")
	}
	done := make(chan error, 1)
	go func() { done <- tr.waitAcknowledged(context.Background(), 16) }()
	complete(tr, s10, nil)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if !acknowledgedBelow(tr, 1<<40) {
		t.Fatal("everything is acknowledged")
	}
}

// TestAckTrackerRing: the ring refuses a slot when full and has room again
// once the oldest output is acknowledged.
func TestAckTrackerRing(t *testing.T) {
	tr := newAckTracker(0, 2)
	a := tr.reserve(1, time.Time{})
	tr.reserve(2, time.Time{})
	if tr.reserve(3, time.Time{}) != nil {
		t.Fatal("reserved beyond capacity")
	}
	if err := tr.publish(); err != nil {
		t.Fatal(err)
	}
	complete(tr, a, nil)
	if err := tr.waitRoom(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := tr.publish(); err != nil {
		t.Fatal(err)
	}
	if tr.reserve(3, time.Time{}) == nil {
		t.Fatal("no room after the oldest was acknowledged")
	}
}

// TestAckTrackerFailure: a failed output is never retired, so nothing at or
// after it counts as acknowledged, and waiters get a *ProduceError.
func TestAckTrackerFailure(t *testing.T) {
	tr := newAckTracker(3, 4)
	a := tr.reserve(7, time.Time{})
	b := tr.reserve(8, time.Time{})
	_ = tr.publish()
	boom := errors.New("boom")
	complete(tr, b, nil)
	complete(tr, a, boom)
	err := tr.waitAcknowledged(context.Background(), 9)
	var perr *ProduceError
	if !errors.As(err, &perr) || perr.Partition != 3 || perr.Offset != 7 || !errors.Is(err, boom) {
		t.Fatalf("got %v, want ProduceError for 3/7 wrapping boom", err)
	}
	if acknowledgedBelow(tr, 8) {
		t.Fatal("the failed output counts as acknowledged")
	}
	if tr.publish() == nil {
		t.Fatal("publish hides the failure")
	}
}
