package checkpoint

import (
	"context"
	"errors"
	"io"
	"os"
	"testing"
)

func genMeta(offset int64, epoch uint32, generation int32) Meta {
	m := testMeta("fence", 0, offset)
	m.Epoch, m.Generation = epoch, generation
	return m
}

func loadOffset(t *testing.T, s Store) Meta {
	t.Helper()
	var got []byte
	var meta Meta
	m, _, err := s.Load(context.Background(), "fence", 0, collect(&got, &meta))
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	return m
}

func wantStale(t *testing.T, err error, gen, held int32) {
	t.Helper()
	var serr *StaleError
	if !errors.As(err, &serr) || !errors.Is(err, ErrStale) {
		t.Fatalf("save of generation %d: %v, want a *StaleError", gen, err)
	}
	if serr.Generation != gen || serr.HeldGeneration != held || serr.Topic != "fence" || serr.Where == "" {
		t.Errorf("stale error %+v, want generation %d refused for held %d", *serr, gen, held)
	}
}

// checkGenerationFence: a save of an older generation is refused and never
// outranks a newer one; a new epoch (the group's numbering started over)
// outranks every generation of the old one.
func checkGenerationFence(t *testing.T, s Store) {
	t.Helper()
	ctx := context.Background()
	mustSave(t, s, genMeta(100, 0, 5), newState(1, 1000))
	_, err := s.Save(ctx, genMeta(200, 0, 4), newState(2, 1000))
	wantStale(t, err, 4, 5)
	if m := loadOffset(t, s); m.Offset != 100 || m.Generation != 5 {
		t.Errorf("loaded offset %d generation %d, want 100 of generation 5", m.Offset, m.Generation)
	}
	mustSave(t, s, genMeta(300, 0, 6), newState(3, 1000))
	mustSave(t, s, genMeta(310, 0, 6), newState(4, 1000))
	if m := loadOffset(t, s); m.Offset != 310 {
		t.Errorf("loaded offset %d, want 310 (same generation: the later save)", m.Offset)
	}
	mustSave(t, s, genMeta(400, 1, 1), newState(5, 1000))
	_, err = s.Save(ctx, genMeta(500, 0, 7), newState(6, 1000))
	wantStale(t, err, 7, 1)
	if m := loadOffset(t, s); m.Offset != 400 || m.Epoch != 1 {
		t.Errorf("loaded offset %d epoch %d, want 400 of epoch 1", m.Offset, m.Epoch)
	}
}

// gatedState writes half of itself, reports that it is under way and waits
// for release before writing the rest: a Save held between its start and
// its publication.
type gatedState struct {
	st       state
	started  chan struct{}
	released chan struct{}
}

func (g gatedState) WriteTo(w io.Writer) (int64, error) {
	n, err := w.Write(g.st[:len(g.st)/2])
	close(g.started)
	<-g.released
	if err != nil {
		return int64(n), err
	}
	m, err := w.Write(g.st[len(g.st)/2:])
	return int64(n + m), err
}

// checkLateStaleSave: a save of generation 5 that began before a save of
// generation 6 (by another instance) and finishes after it is refused, and
// Load picks generation 6.
func checkLateStaleSave(t *testing.T, stale, fresh Store) {
	t.Helper()
	ctx := context.Background()
	mustSave(t, fresh, genMeta(100, 0, 5), newState(1, 1000))
	g := gatedState{st: newState(2, 64<<10), started: make(chan struct{}), released: make(chan struct{})}
	errc := make(chan error, 1)
	go func() {
		_, err := stale.Save(ctx, genMeta(150, 0, 5), g)
		errc <- err
	}()
	<-g.started
	mustSave(t, fresh, genMeta(120, 0, 6), newState(3, 1000))
	close(g.released)
	wantStale(t, <-errc, 5, 6)
	if m := loadOffset(t, fresh); m.Offset != 120 || m.Generation != 6 {
		t.Errorf("loaded offset %d generation %d, want 120 of generation 6", m.Offset, m.Generation)
	}
	if m := loadOffset(t, stale); m.Offset != 120 || m.Generation != 6 {
		t.Errorf("the stale instance loads offset %d generation %d, want 120 of generation 6", m.Offset, m.Generation)
	}
}

func TestFileGenerationFence(t *testing.T) {
	checkGenerationFence(t, newFileStore(t, t.TempDir()))
}

func TestFileLateStaleSave(t *testing.T) {
	dir := t.TempDir()
	checkLateStaleSave(t, newFileStore(t, dir), newFileStore(t, dir))
}

func TestKafkaGenerationFence(t *testing.T) {
	checkGenerationFence(t, newKafkaStore(t, newCluster(t), KafkaOptions{}))
}

func TestKafkaLateStaleSave(t *testing.T) {
	brokers := newCluster(t)
	checkLateStaleSave(t, newKafkaStore(t, brokers, KafkaOptions{ChunkBytes: 4 << 10}), newKafkaStore(t, brokers, KafkaOptions{}))
}

// TestFileRankBeatsNumber: a stale generation's snapshot published
// with a higher number (copied in, as a writer that skipped the check
// would) neither wins Load nor pushes the newer generation's out.
func TestFileRankBeatsNumber(t *testing.T) {
	dir := t.TempDir()
	s := newFileStore(t, dir)
	other := newFileStore(t, t.TempDir())
	mustSave(t, s, genMeta(100, 0, 6), newState(1, 1000))
	old := mustSave(t, other, genMeta(500, 0, 5), newState(2, 1000))
	src := other.partitionDir("fence", 0) + "/" + fileName(old.Seq)
	dst := s.partitionDir("fence", 0) + "/" + fileName(9)
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if m := loadOffset(t, s); m.Offset != 100 || m.Generation != 6 {
		t.Errorf("loaded offset %d generation %d (seq %d), want 100 of generation 6", m.Offset, m.Generation, m.Seq)
	}
	for i := range 3 {
		mustSave(t, s, genMeta(int64(200+i), 0, 6), newState(uint64(3+i), 1000))
	}
	if m := loadOffset(t, s); m.Offset != 202 {
		t.Errorf("loaded offset %d, want 202", m.Offset)
	}
	snaps, err := ranked(s.partitionDir("fence", 0))
	if err != nil {
		t.Fatal(err)
	}
	for _, sn := range snaps {
		if sn.meta.Generation != 6 {
			t.Errorf("kept seq %d of generation %d: pruning kept a stale snapshot over newer ones", sn.meta.Seq, sn.meta.Generation)
		}
	}
}
