package processor

import (
	"context"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"dedup/checkpoint"
	"dedup/rotation"
)

// spareStore passes saves through to a file store and watches those that
// write the instance's spare pair: how many run at once, for which
// partitions, and it holds the first one until released.
type spareStore struct {
	Store
	spare *rotation.Pair

	inflight, maxInflight atomic.Int32
	held                  chan int // partition of the first spare save, sent when it starts
	release               chan struct{}

	mu    sync.Mutex
	saved map[int]int // partition -> spare saves
}

func (s *spareStore) Save(ctx context.Context, m checkpoint.Meta, state io.WriterTo) (checkpoint.Meta, error) {
	if state != s.spare {
		return s.Store.Save(ctx, m, state) // the anchor or a final checkpoint: the partition's own pair
	}
	n := s.inflight.Add(1)
	defer s.inflight.Add(-1)
	for {
		old := s.maxInflight.Load()
		if n <= old || s.maxInflight.CompareAndSwap(old, n) {
			break
		}
	}
	select {
	case s.held <- m.Partition: // only the first: held has room for one
		<-s.release
	default:
	}
	s.mu.Lock()
	s.saved[m.Partition]++
	s.mu.Unlock()
	return s.Store.Save(ctx, m, state)
}

func (s *spareStore) savedBy(partition int) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.saved[partition]
}

// TestSharedSpare: two partitions checkpoint with the instance's single
// spare pair, one at a time. While one partition's save holds the spare,
// the other partition keeps consuming and forwarding (its saver waits in
// the background), and takes its turn once the spare is given back; after
// Run the spare is back in its place.
func TestSharedSpare(t *testing.T) {
	const parts = 2
	e := newTestEnv(t, parts, parts)
	o := e.options("spare")
	o.CheckpointInterval = 20 * time.Millisecond
	o.ChainRatio = -1 // every checkpoint a base: the spare's use
	store := &spareStore{Store: fileStore(t, "spare"), held: make(chan int, 1), release: make(chan struct{}), saved: map[int]int{}}
	o.Store = store
	p := mustNew(t, o)
	store.spare = p.spare // Run warms it and hands it to the savers
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{p: p, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- p.Run(ctx) }()
	t.Cleanup(func() { r.stop(t) })
	var releaseOnce sync.Once
	release := func() { releaseOnce.Do(func() { close(store.release) }) }
	t.Cleanup(release) // runs before the stop above, should the test fail while a save is held
	out := e.collect()
	r.waitReady(t)

	w := newWorkload(parts, 200, 1, 11)
	e.produce(w.recs...)
	var first int
	select {
	case first = <-store.held:
	case <-time.After(20 * time.Second):
		t.Fatal("no checkpoint took the spare")
	}
	other := int32(1 - first)
	// The first save holds the spare: the other partition still forwards.
	e.produce(rec(other, "while-held", "while-held", t0))
	out.untilValue("while-held")
	if n := store.savedBy(int(other)); n != 0 {
		t.Fatalf("partition %d saved with the spare while partition %d held it", other, first)
	}
	release()
	eventually(t, 20*time.Second, "both partitions to checkpoint with the spare", func() bool {
		return store.savedBy(0) > 0 && store.savedBy(1) > 0
	})
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if m := store.maxInflight.Load(); m != 1 {
		t.Errorf("%d saves of the spare ran at once, want 1", m)
	}
	select {
	case sp := <-p.spares:
		if sp != store.spare {
			t.Error("a different pair came back as the spare")
		}
	default:
		t.Error("the spare was not given back after Run")
	}
}
