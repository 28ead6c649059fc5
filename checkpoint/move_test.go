package checkpoint

import (
	"context"
	"errors"
	"slices"
	"testing"
)

// owned is an increment of base after prev written by a member of
// generation owner: a chain continued after the partition moved.
func owned(base, prev Meta, offset int64, owner int32) Meta {
	m := incMeta(base, prev, offset)
	m.Owner = owner
	return m
}

// wantRefused fails unless err is Save's refusal of a piece a fenced
// writer offered: stale, or no longer continuing its chain.
func wantRefused(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, ErrStale) && !errors.Is(err, ErrChainBroken) {
		t.Errorf("%s: %v, want a *StaleError or a *ChainError", what, err)
	}
}

// checkChainMove: the old owner (generation 5) wrote a base and two
// increments; the new owner (generation 6, another instance on the same
// data) restores them and continues the chain (Owner 6) instead of
// writing a base. Afterwards the old owner can add nothing: neither an
// increment on the head it knows nor a base, and a fresh Load applies
// the new owner's increments on the old base.
func checkChainMove(t *testing.T, old, owner Store, fresh func(t *testing.T) Store) {
	t.Helper()
	ctx := context.Background()
	gen := func(m Meta, g int32) Meta { m.Generation = g; return m }
	base := mustSave(t, old, gen(testMeta("in", 1, 10), 5), newState(1, 4000))
	i1 := mustSave(t, old, incMeta(base, base, 11), newState(2, 100))
	i2 := mustSave(t, old, incMeta(base, i1, 12), newState(3, 100))

	var a applied
	head, src, err := owner.Load(ctx, "in", 1, a.decode)
	if err != nil || head.Seq != i2.Seq || src != SourceLatest {
		t.Fatalf("new owner's load: head %d (%s) %v, want %d", head.Seq, src, err, i2.Seq)
	}
	claim := mustSave(t, owner, owned(base, head, 12, 6), newState(4, 10))
	if claim.Owner != 6 || claim.Generation != 5 || claim.Base != base.Seq || claim.ChainBytes != i2.ChainBytes+claim.StoredBytes {
		t.Errorf("claim %+v: want owner 6, the base's generation 5, base %d, chain bytes %d", claim, base.Seq, i2.ChainBytes+claim.StoredBytes)
	}
	i4 := mustSave(t, owner, owned(base, claim, 13, 6), newState(5, 100))

	_, err = old.Save(ctx, incMeta(base, i2, 13), newState(6, 100))
	wantRefused(t, "the old owner's increment on its head", err)
	_, err = old.Save(ctx, incMeta(base, i4, 14), newState(7, 100))
	wantRefused(t, "the old owner's increment on the new head", err)
	_, err = old.Save(ctx, gen(testMeta("in", 1, 14), 5), newState(8, 4000))
	wantRefused(t, "the old owner's base", err)
	var se *StaleError
	if errors.As(err, &se) && se.HeldGeneration != 6 {
		t.Errorf("stale error names generation %d held, want 6", se.HeldGeneration)
	}

	var b applied
	head, src, err = fresh(t).Load(ctx, "in", 1, b.decode)
	want := []uint64{base.Seq, i1.Seq, i2.Seq, claim.Seq, i4.Seq}
	if err != nil || src != SourceLatest || !slices.Equal(b.seqs(), want) || head.Owner != 6 || head.Offset != 13 {
		t.Errorf("load after the move: %v (%s, head owner %d offset %d) %v, want %v owned by 6 at 13", b.seqs(), src, head.Owner, head.Offset, err, want)
	}
	// The next owner (generation 7) continues from there; generation 6
	// is then fenced in turn.
	mustSave(t, old, owned(base, i4, 14, 7), newState(9, 100))
	_, err = owner.Save(ctx, owned(base, i4, 14, 6), newState(10, 100))
	wantRefused(t, "generation 6 after generation 7 continued", err)
}

// checkChainMoveNewerBase: a base written after the new owner's restore
// (by a writer the store did not fence yet) ends the chain's continuation:
// the new owner's claim is refused and it writes a base of its own.
func checkChainMoveNewerBase(t *testing.T, old, owner Store) {
	t.Helper()
	ctx := context.Background()
	gen := func(m Meta, g int32) Meta { m.Generation = g; return m }
	base := mustSave(t, old, gen(testMeta("in", 2, 10), 5), newState(1, 4000))
	var a applied
	head, _, err := owner.Load(ctx, "in", 2, a.decode)
	if err != nil {
		t.Fatal(err)
	}
	late := mustSave(t, old, gen(testMeta("in", 2, 11), 5), newState(2, 4000))
	_, err = owner.Save(ctx, owned(base, head, 10, 6), newState(3, 10))
	var ce *ChainError
	if !errors.As(err, &ce) {
		t.Fatalf("claim with a newer base (seq %d) held: %v, want a *ChainError", late.Seq, err)
	}
	nb := mustSave(t, owner, gen(testMeta("in", 2, 10), 6), newState(4, 4000))
	var b applied
	if head, _, err := owner.Load(ctx, "in", 2, b.decode); err != nil || head.Seq != nb.Seq {
		t.Errorf("load: head %d %v, want the new owner's base %d", head.Seq, err, nb.Seq)
	}
}

// checkChainMoveRace: the old owner's increment, begun before the new
// owner claimed the chain and finished after, is refused; the claim stands.
func checkChainMoveRace(t *testing.T, old, owner Store) {
	t.Helper()
	ctx := context.Background()
	gen := func(m Meta, g int32) Meta { m.Generation = g; return m }
	base := mustSave(t, old, gen(testMeta("in", 3, 10), 5), newState(1, 4000))
	i1 := mustSave(t, old, incMeta(base, base, 11), newState(2, 100))
	g := gatedState{st: newState(3, 64<<10), started: make(chan struct{}), released: make(chan struct{})}
	errc := make(chan error, 1)
	go func() {
		_, err := old.Save(ctx, incMeta(base, i1, 12), g)
		errc <- err
	}()
	<-g.started
	claim := mustSave(t, owner, owned(base, i1, 11, 6), newState(4, 10))
	close(g.released)
	wantRefused(t, "the old owner's increment finishing after the claim", <-errc)
	var b applied
	if head, _, err := owner.Load(ctx, "in", 3, b.decode); err != nil || head.Seq != claim.Seq {
		t.Errorf("load: head %d %v, want the claim %d", head.Seq, err, claim.Seq)
	}
}

func TestFileChainMove(t *testing.T) {
	dir := t.TempDir()
	checkChainMove(t, newFileStore(t, dir), newFileStore(t, dir), func(t *testing.T) Store { return newFileStore(t, dir) })
	checkChainMoveNewerBase(t, newFileStore(t, dir), newFileStore(t, dir))
	checkChainMoveRace(t, newFileStore(t, dir), newFileStore(t, dir))
}

func TestKafkaChainMove(t *testing.T) {
	brokers := newCluster(t)
	checkChainMove(t, newKafkaStore(t, brokers, KafkaOptions{}), newKafkaStore(t, brokers, KafkaOptions{}),
		func(t *testing.T) Store { return newKafkaStore(t, brokers, KafkaOptions{}) })
	checkChainMoveNewerBase(t, newKafkaStore(t, brokers, KafkaOptions{}), newKafkaStore(t, brokers, KafkaOptions{}))
	checkChainMoveRace(t, newKafkaStore(t, brokers, KafkaOptions{ChunkBytes: 4 << 10}), newKafkaStore(t, brokers, KafkaOptions{}))
}
