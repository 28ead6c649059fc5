package checkpoint

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
)

// applied is a caller's state as Load rebuilds it: a base replaces it,
// an increment is appended.
type applied struct {
	metas  []Meta
	states []string
}

func (a *applied) decode(m Meta, r io.Reader) error {
	b, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	if !m.Increment() {
		a.metas, a.states = nil, nil
	}
	a.metas = append(a.metas, m)
	a.states = append(a.states, string(b))
	return nil
}

func (a *applied) seqs() []uint64 {
	out := make([]uint64, len(a.metas))
	for i, m := range a.metas {
		out[i] = m.Seq
	}
	return out
}

// chainHooks damage one store's pieces as a disk or a broker would.
type chainHooks struct {
	corrupt func(t *testing.T, m Meta) // damage the stored bytes of piece m
	remove  func(t *testing.T, m Meta) // make piece m vanish
	// fresh returns a store on the same data with nothing cached.
	fresh func(t *testing.T) Store
}

func incMeta(base Meta, prev Meta, offset int64) Meta {
	m := testMeta(base.Topic, base.Partition, offset)
	m.Epoch, m.Generation = base.Epoch, base.Generation
	m.Base, m.Prev = base.Seq, prev.Seq
	return m
}

// saveChain saves a base and n increments of partition p and returns them
// and their states, the base first.
func saveChain(t *testing.T, s Store, p int, offset int64, n int) ([]Meta, []state) {
	t.Helper()
	st := newState(uint64(offset), 20_000)
	base := mustSave(t, s, testMeta("in", p, offset), st)
	metas, states := []Meta{base}, []state{st}
	for i := range n {
		st := newState(uint64(offset)*100+uint64(i), 500)
		m := mustSave(t, s, incMeta(base, metas[len(metas)-1], offset+int64(i)+1), st)
		metas, states = append(metas, m), append(states, st)
	}
	return metas, states
}

func seqsOf(ms []Meta) []uint64 {
	out := make([]uint64, len(ms))
	for i, m := range ms {
		out[i] = m.Seq
	}
	return out
}

// checkChainRoundTrip: a base and 5 increments load back in order with
// their Metas, the head carries ChainBytes, and List reads base then
// increments.
func checkChainRoundTrip(t *testing.T, s Store, h chainHooks) {
	t.Helper()
	saveChain(t, s, 0, 10, 2) // an older chain
	metas, states := saveChain(t, s, 0, 100, 5)
	var sum int64
	for i, m := range metas[1:] {
		sum += m.StoredBytes
		if !m.Increment() || m.Base != metas[0].Seq || m.Prev != metas[i].Seq || m.ChainBytes != sum || m.Seq <= m.Prev {
			t.Fatalf("increment %d saved as %+v, want base %d prev %d chain bytes %d", i, m, metas[0].Seq, metas[i].Seq, sum)
		}
	}
	if metas[0].Increment() || metas[0].ChainBytes != 0 {
		t.Errorf("base saved as %+v", metas[0])
	}
	for _, st := range []Store{s, h.fresh(t)} {
		var a applied
		head, src, err := st.Load(context.Background(), "in", 0, a.decode)
		if err != nil || src != SourceLatest {
			t.Fatalf("load: %v %q", err, src)
		}
		if !slices.Equal(a.seqs(), seqsOf(metas)) {
			t.Fatalf("applied %v, want %v", a.seqs(), seqsOf(metas))
		}
		for i, m := range a.metas {
			if a.states[i] != string(states[i]) || m.Offset != metas[i].Offset || m.Base != metas[i].Base || m.Prev != metas[i].Prev ||
				m.Checksum != metas[i].Checksum || m.ChainBytes != metas[i].ChainBytes {
				t.Errorf("piece %d: decode saw %+v, saved %+v", i, m, metas[i])
			}
		}
		last := metas[len(metas)-1]
		if head.Seq != last.Seq || head.Offset != last.Offset || head.ChainBytes != sum || head.Base != metas[0].Seq {
			t.Errorf("head %+v, want %+v", head, last)
		}
	}
	entries, err := s.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		if e.Err != nil {
			t.Errorf("entry %s: %v", e.Where, e.Err)
		}
		got = append(got, fmt.Sprintf("%d/%d", e.Meta.Seq, e.Meta.Base))
	}
	want := []string{"4/0", "5/4", "6/4", "7/4", "8/4", "9/4", "1/0", "2/1", "3/1"}
	if !slices.Equal(got, want) {
		t.Errorf("listed seq/base %v, want %v", got, want)
	}
}

// checkChainPruning: Keep counts bases only; a pruned base takes its
// increments along, the kept bases keep whole chains, and an older base's
// chain is what a damaged newer base falls back to.
func checkChainPruning(t *testing.T, s Store, keep int, h chainHooks) {
	t.Helper()
	var chains [][]Meta
	var states [][]state
	for i := range keep + 2 {
		ms, sts := saveChain(t, s, 1, int64(100*(i+1)), 3)
		chains, states = append(chains, ms), append(states, sts)
	}
	entries, err := h.fresh(t).List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var got []uint64
	for _, e := range entries {
		if e.Meta.Partition == 1 {
			got = append(got, e.Meta.Seq)
		}
	}
	var want []uint64
	for i := len(chains) - 1; i >= len(chains)-keep; i-- {
		want = append(want, seqsOf(chains[i])...)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("listed %v, want the newest %d chains whole: %v", got, keep, want)
	}
	// Increments of a kept base never go, however many are saved.
	newest := chains[len(chains)-1]
	for i := range 3 {
		m := mustSave(t, s, incMeta(newest[0], newest[len(newest)-1], int64(1000+i)), newState(uint64(i), 100))
		newest = append(newest, m)
	}
	h.corrupt(t, newest[0])
	var reports []Damage
	ctx := WithDamageReport(context.Background(), func(d Damage) { reports = append(reports, d) })
	var a applied
	head, src, err := h.fresh(t).Load(ctx, "in", 1, a.decode)
	older := chains[len(chains)-2]
	if err != nil || src != SourceFallback || head.Seq != older[len(older)-1].Seq {
		t.Fatalf("load: head %d %q %v, want the older base's chain head %d as fallback", head.Seq, src, err, older[len(older)-1].Seq)
	}
	if !slices.Equal(a.seqs(), seqsOf(older)) {
		t.Errorf("applied %v, want the older chain %v", a.seqs(), seqsOf(older))
	}
	for i := range a.states {
		if a.states[i] != string(states[len(states)-2][i]) {
			t.Errorf("piece %d of the older chain: wrong state", i)
		}
	}
	if len(reports) != 1 || reports[0].Seq != newest[0].Seq || !IsDamage(reports[0].Err) {
		t.Errorf("reports %+v, want one for the damaged base %d", reports, newest[0].Seq)
	}
}

// checkChainCut: increment 3 of 5 damaged (or gone): Load applies the base
// and increments 1-2, reports 3 (damaged) and 4-5 (unreachable) by name,
// and returns the head before with SourceFallback.
func checkChainCut(t *testing.T, s Store, h chainHooks, gone bool) {
	t.Helper()
	metas, states := saveChain(t, s, 2, 100, 5)
	bad := metas[3]
	if gone {
		h.remove(t, bad)
	} else {
		h.corrupt(t, bad)
	}
	var reports []Damage
	ctx := WithDamageReport(context.Background(), func(d Damage) { reports = append(reports, d) })
	var a applied
	r := h.fresh(t)
	head, src, err := r.Load(ctx, "in", 2, a.decode)
	if err != nil || src != SourceFallback || head.Seq != metas[2].Seq || head.Offset != metas[2].Offset || head.ChainBytes != metas[2].ChainBytes {
		t.Fatalf("load: head %+v %q %v, want seq %d as fallback", head, src, err, metas[2].Seq)
	}
	if !slices.Equal(a.seqs(), seqsOf(metas[:3])) || a.states[2] != string(states[2]) {
		t.Errorf("applied %v, want %v", a.seqs(), seqsOf(metas[:3]))
	}
	var got []uint64
	for _, d := range reports {
		got = append(got, d.Seq)
		if d.Where == "" || !IsDamage(d.Err) {
			t.Errorf("report %+v: want a place and a damage", d)
		}
		if d.Seq > bad.Seq && !errors.Is(d.Err, ErrChainGap) {
			t.Errorf("report of %d: %v, want ErrChainGap", d.Seq, d.Err)
		}
	}
	want := seqsOf(metas[3:])
	if gone {
		want = want[1:]
	}
	if !slices.Equal(got, want) {
		t.Errorf("reported %v, want %v", got, want)
	}
	if !gone && !errors.Is(reports[0].Err, ErrChecksum) {
		t.Errorf("damaged increment reported as %v, want a checksum mismatch", reports[0].Err)
	}
	// Still restorable to the same head after that, each piece reported
	// once, and nothing was deleted.
	reports = nil
	a = applied{}
	if head, src, err := r.Load(ctx, "in", 2, a.decode); err != nil || head.Seq != metas[2].Seq || src != SourceFallback || len(reports) != 0 {
		t.Errorf("second load: head %d %q %v, %d reports; want %d as fallback, nothing reported again", head.Seq, src, err, len(reports), metas[2].Seq)
	}
	entries, err := h.fresh(t).List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	held := map[uint64]bool{}
	for _, e := range entries {
		if e.Meta.Partition == 2 {
			held[e.Meta.Seq] = true
		}
	}
	for _, m := range metas {
		if !held[m.Seq] && !(gone && m.Seq == bad.Seq) {
			t.Errorf("piece %d no longer listed", m.Seq)
		}
	}
}

// checkChainRefusals: increments that do not continue their chain, or of
// a stale generation, are refused with typed errors and publish nothing.
func checkChainRefusals(t *testing.T, s Store) {
	t.Helper()
	ctx := context.Background()
	gen := func(m Meta, g int32) Meta { m.Generation = g; return m }
	base := mustSave(t, s, gen(testMeta("in", 3, 10), 5), newState(1, 1000))
	i1 := mustSave(t, s, incMeta(base, base, 11), newState(2, 100))
	wantChain := func(what string, m Meta, newest uint64) {
		t.Helper()
		_, err := s.Save(ctx, m, newState(3, 100))
		var ce *ChainError
		if !errors.As(err, &ce) || !errors.Is(err, ErrChainBroken) || ce.Newest != newest || ce.Base != m.Base {
			t.Errorf("%s: %v, want a *ChainError with newest %d", what, err, newest)
		}
	}
	wantChain("prev not the newest", incMeta(base, base, 12), i1.Seq)
	wantChain("prev beyond the newest", incMeta(base, Meta{Seq: i1.Seq + 5}, 12), i1.Seq)
	wantChain("no such base", incMeta(Meta{Topic: "in", Partition: 3, Seq: 99, Generation: 5}, Meta{Seq: 99}, 12), 0)
	wantChain("base is an increment", incMeta(i1, i1, 12), 0)
	newer := incMeta(base, i1, 12)
	newer.Generation = 6
	wantChain("increment of a newer generation than its base", newer, i1.Seq)
	// A newer generation's base: the old generation's increment is stale.
	b2 := mustSave(t, s, gen(testMeta("in", 3, 20), 6), newState(4, 1000))
	_, err := s.Save(ctx, incMeta(base, i1, 12), newState(5, 100))
	var se *StaleError
	if !errors.As(err, &se) || se.Generation != 5 || se.HeldGeneration != 6 {
		t.Errorf("stale increment: %v, want a *StaleError", err)
	}
	// Bases beyond Keep take their chains: an increment of a pruned base is refused.
	for i := range defaultKeep {
		mustSave(t, s, gen(testMeta("in", 3, int64(30+i)), 6), newState(uint64(6+i), 1000))
	}
	wantChain("pruned base", incMeta(b2, b2, 40), 0)
	var a applied
	head, _, err := s.Load(ctx, "in", 3, a.decode)
	if err != nil || head.Increment() || head.Offset != int64(30+defaultKeep-1) {
		t.Errorf("load after refusals: %+v %v, want the newest base", head, err)
	}
}

// checkChainConcurrent: goroutines race to extend one chain; per Prev at
// most one wins, and Load applies exactly the increments saved, in order.
func checkChainConcurrent(t *testing.T, stores []Store) {
	t.Helper()
	base := mustSave(t, stores[0], testMeta("in", 4, 1), newState(1, 1000))
	var (
		mu    sync.Mutex
		head  = base
		saved []Meta
		lost  int
		wg    sync.WaitGroup
	)
	for g := range 6 {
		s := stores[g%len(stores)]
		wg.Go(func() {
			for i := range 8 {
				mu.Lock()
				prev := head
				mu.Unlock()
				m, err := s.Save(context.Background(), incMeta(base, prev, int64(100*g+i)), newState(uint64(100*g+i), 300))
				var ce *ChainError
				if errors.As(err, &ce) {
					mu.Lock()
					lost++
					mu.Unlock()
					continue
				}
				if err != nil {
					t.Errorf("save: %v", err)
					return
				}
				mu.Lock()
				for _, o := range saved {
					if o.Prev == m.Prev {
						t.Errorf("increments %d and %d both saved after %d", o.Seq, m.Seq, m.Prev)
					}
				}
				saved = append(saved, m)
				if m.Seq > head.Seq {
					head = m
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	slices.SortFunc(saved, func(a, b Meta) int { return int(a.Seq) - int(b.Seq) })
	var a applied
	got, src, err := stores[0].Load(context.Background(), "in", 4, a.decode)
	if err != nil || src != SourceLatest || got.Seq != head.Seq {
		t.Fatalf("load: head %d %q %v, want %d", got.Seq, src, err, head.Seq)
	}
	if want := append([]uint64{base.Seq}, seqsOf(saved)...); !slices.Equal(a.seqs(), want) {
		t.Errorf("applied %v, want %v (%d refused)", a.seqs(), want, lost)
	}
}

// checkChainCrash: an increment whose Save fails midway leaves nothing
// Load applies, and the chain goes on after it.
func checkChainCrash(t *testing.T, s Store, h chainHooks) {
	t.Helper()
	metas, _ := saveChain(t, s, 5, 100, 2)
	if _, err := s.Save(context.Background(), incMeta(metas[0], metas[2], 200), failingState(400_000)); err == nil {
		t.Fatal("save of a failing increment succeeded")
	}
	var reports []Damage
	ctx := WithDamageReport(context.Background(), func(d Damage) { reports = append(reports, d) })
	var a applied
	head, src, err := h.fresh(t).Load(ctx, "in", 5, a.decode)
	if err != nil || src != SourceLatest || head.Seq != metas[2].Seq || len(reports) != 0 {
		t.Fatalf("load: head %d %q %v, %d reports; want %d as latest", head.Seq, src, err, len(reports), metas[2].Seq)
	}
	next := mustSave(t, s, incMeta(metas[0], metas[2], 300), newState(7, 100))
	a = applied{}
	if head, _, err := h.fresh(t).Load(ctx, "in", 5, a.decode); err != nil || head.Seq != next.Seq || len(a.metas) != 4 {
		t.Errorf("load after the next increment: head %d %v, applied %v", head.Seq, err, a.seqs())
	}
}

// A base's Meta encodes as before chains existed: a binary that predates
// them reads new bases, and this one reads old snapshots as bases.
func TestBaseMetaUnchanged(t *testing.T) {
	b, err := json.Marshal(testMeta("in", 0, 1))
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{`"base"`, `"prev"`, `"chain_bytes"`} {
		if strings.Contains(string(b), k) {
			t.Errorf("a base's meta %s holds %s", b, k)
		}
	}
	var m Meta
	if err := json.Unmarshal([]byte(`{"group":"g","topic":"in","partition":0,"offset":5,"seq":3}`), &m); err != nil || m.Increment() || checkPiece(m, 0) != nil {
		t.Errorf("an old snapshot's meta %+v (%v) is not a base", m, err)
	}
}
