package rotation

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// The files in testdata/fingerprint-0.9.0 were written by the fingerprint
// pair of release 0.9.0 (unsorted buckets filled to 0.9 by random-walk
// eviction, the geometry of earlierFingerprintGeometry): a base snapshot
// of a pair of 3000 expected keys at ε = 0.001 holding two full windows,
// two deltas (retractions and keys past the design load, then a rotation
// and new keys), the snapshot of the pair after both, and that pair's
// answers to keys 0..7999 of key space 1 then 0..19999 of space 2, a byte
// each.
func earlierFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "fingerprint-0.9.0", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var earlierOptions = Options{ExpectedKeys: 3000, FPRate: 0.001, Window: time.Hour, Mode: Fingerprint}

// TestEarlierChainRestores: a chain written by 0.9.0 restores exactly (the
// deltas apply to the base, the pair answers every key as 0.9.0's did and
// encodes to the bytes 0.9.0 wrote), its options differ from the
// configured ones (a partition keeps it as a legacy pair), and it still
// takes inserts once settled, keeping every key it held.
func TestEarlierChainRestores(t *testing.T) {
	var p Pair
	if _, err := p.ReadFrom(bytes.NewReader(earlierFixture(t, "base.snap"))); err != nil {
		t.Fatal(err)
	}
	if p.fp.sorted {
		t.Fatal("a table of 0.9.0 decoded semi-sorted")
	}
	configured := mustNew(t, earlierOptions).Options()
	if p.Options() == configured || !p.Options().otherSizing {
		t.Fatalf("options %+v: want other than the configured %+v", p.Options(), configured)
	}
	for _, d := range []string{"delta0", "delta1"} {
		if _, err := p.ApplyDelta(bytes.NewReader(earlierFixture(t, d))); err != nil {
			t.Fatalf("%s: %v", d, err)
		}
	}
	if got := encode(t, &p); !bytes.Equal(got, earlierFixture(t, "final.snap")) {
		t.Fatal("the restored chain encodes to other bytes than 0.9.0's pair")
	}
	answers := earlierFixture(t, "answers")
	check := func(q *Pair, what string) (held []uint64) {
		for i, want := range answers {
			key := testKey(1, uint64(i))
			if i >= 8000 {
				key = testKey(2, uint64(i-8000))
			}
			if got := q.Test(key); got != (want == 1) {
				t.Fatalf("%s: key %d: %v, 0.9.0 said %v", what, i, got, want == 1)
			}
			if want == 1 && i < 8000 {
				held = append(held, uint64(i))
			}
		}
		return held
	}
	held := check(&p, "restored")
	if got := check(p.Clone(), "cloned"); len(got) != len(held) {
		t.Fatal("clone differs")
	}
	// Both ways through a snapshot of this release: the same bytes.
	var q Pair
	if _, err := q.ReadFrom(bytes.NewReader(encode(t, &p))); err != nil || q.Options() != p.Options() {
		t.Fatalf("re-read: %v, options %+v", err, q.Options())
	}
	// Settled by an insert: every key still held, the new one too.
	ts := p.Stats().WindowStart
	if p.TestAndAdd(testKey(3, 1), ts) {
		t.Fatal("a key never added reported seen")
	}
	if !p.fp.sorted {
		t.Fatal("an insert did not settle the table")
	}
	for _, i := range held {
		if !p.Test(testKey(1, i)) {
			t.Fatalf("key %d lost when the table settled", i)
		}
	}
	if !p.Test(testKey(3, 1)) {
		t.Fatal("inserted key not held")
	}
}

// TestSnapshotForEarlierRelease: a pair of this release's sizing is written
// in the stream 0.9.0 reads (slots of f bits, f/2 bytes a bucket) with
// FPRate's lowest bit flipped; this release reads it back with the
// configured options, semi-sorted.
func TestSnapshotForEarlierRelease(t *testing.T) {
	p := mustNew(t, earlierOptions)
	for i := range uint64(3000) {
		p.TestAndAdd(testKey(1, i), epoch)
	}
	b := encode(t, p)
	stored := preambleOptions(b)
	if stored.FPRate == earlierOptions.FPRate || stored.FPRate/earlierOptions.FPRate-1 > 1e-15 {
		t.Errorf("stored rate %v: want one ulp from %v", stored.FPRate, earlierOptions.FPRate)
	}
	var q Pair
	if _, err := q.ReadFrom(bytes.NewReader(b)); err != nil {
		t.Fatal(err)
	}
	if q.Options() != p.Options() || !q.fp.sorted {
		t.Fatalf("read back with %+v (sorted %v), want %+v", q.Options(), q.fp.sorted, p.Options())
	}
	// The stream is the earlier release's: 4 slots of f bits a bucket.
	if want := headerSize + 2*8*int(generationWords(Fingerprint, p.m, uint64(p.k))); len(b) < want {
		t.Fatalf("%d bytes, want at least %d", len(b), want)
	}
}

// TestDeltaOutOfOrder: deltas of a writer that keeps buckets unsorted
// (0.9.0 running a pair of this release's snapshot after a downgrade) on a
// base of this release apply exactly: the reader turns raw at the first
// bucket out of order, and the deltas after it, which write parts of such
// buckets, still give the writer's bytes.
func TestDeltaOutOfOrder(t *testing.T) {
	p := mustNew(t, earlierOptions)
	for i := range uint64(2000) {
		p.TestAndAdd(testKey(1, i), epoch)
	}
	base := encode(t, p)
	var w, r Pair
	for _, q := range []*Pair{&w, &r} {
		if _, err := q.ReadFrom(bytes.NewReader(base)); err != nil {
			t.Fatal(err)
		}
	}
	w.fp.unsettle() // the writer keeps the stream's layout, as 0.9.0 did
	c := w.fp
	var d Delta
	for round := range 3 {
		// Fill free slots last-first, as no semi-sorted table would.
		for i := uint64(round); i < c.buckets; i += 7 {
			s := c.slotIndex(c.cur, i)
			for j := uint64(slotsPerBucket); j > 0; j-- {
				if c.slot(s+j-1) == 0 {
					c.setSlot(s+j-1, (i*31+j)&c.mask|1)
					c.dirty.markBucket(c.cur, i)
					c.held[c.cur]++
					break
				}
			}
		}
		w.TakeDelta(&d)
		if _, err := r.ApplyDelta(bytes.NewReader(d.Bytes())); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if r.fp.sorted {
			t.Fatalf("round %d: reader still semi-sorted after buckets out of order", round)
		}
		if !bytes.Equal(encode(t, &r), encode(t, &w)) {
			t.Fatalf("round %d: reader and writer differ", round)
		}
	}
}
