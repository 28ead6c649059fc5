package rotation

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"
)

func probeOf(c *counting, key []byte) *probe {
	var pr probe
	c.locate(xxhash.Sum64(key), &pr)
	return &pr
}

// counters lists the counter indexes (within the generation) of a probe.
func (pr *probe) counters() []uint64 {
	var idx []uint64
	for w, m := range pr.mask {
		for j := range uint64(16) {
			if m>>(4*j+3)&1 != 0 {
				idx = append(idx, pr.block*blockCounters+uint64(w)*16+j)
			}
		}
	}
	return idx
}

func TestLocateCounters(t *testing.T) {
	for _, k := range []int{1, 3, 8, 14, maxK} {
		c := newCounting(1000, k)
		const keys = 20000
		total, blocks := 0, make([]int, c.blocks)
		for i := range uint64(keys) {
			pr := probeOf(c, testKey(1, i))
			got := len(pr.counters())
			if got < 1 || got > k {
				t.Fatalf("k=%d: key %d has %d counters", k, i, got)
			}
			total += got
			blocks[pr.block]++
		}
		// Draws with replacement: k(1 - (127/128)^k)·128/k distinct on average.
		want := blockCounters * (1 - math.Pow(1-1.0/blockCounters, float64(k)))
		if mean := float64(total) / keys; math.Abs(mean-want) > 0.02*want {
			t.Errorf("k=%d: %.3f distinct counters per key, want %.3f", k, mean, want)
		}
		for b, n := range blocks { // keys spread evenly: 20 per block on average
			if n < 3 || n > 50 {
				t.Fatalf("k=%d: block %d holds %d of %d keys", k, b, n, keys)
			}
		}
	}
}

func TestCountingSaturation(t *testing.T) {
	c := newCounting(4, 8)
	pr := probeOf(c, []byte("hot key"))
	for range 20 {
		c.add(c.cur, pr)
	}
	for _, i := range pr.counters() {
		if v := c.counter(c.cur, i); v != 15 {
			t.Fatalf("counter %d = %d after 20 adds, want 15", i, v)
		}
	}
	if c.saturated[c.cur] != 8 || c.nonzero[c.cur] != 8 {
		t.Fatalf("saturated=%d nonzero=%d, want 8, 8", c.saturated[c.cur], c.nonzero[c.cur])
	}
	// A saturated counter is never decremented: its true count is unknown.
	for range 20 {
		c.remove(c.cur, pr)
	}
	for _, i := range pr.counters() {
		if v := c.counter(c.cur, i); v != 15 {
			t.Fatalf("counter %d = %d after removes, want 15", i, v)
		}
	}
	if !c.contains(c.cur, pr) || c.saturated[c.cur] != 8 {
		t.Fatalf("saturated key lost: contains=%v saturated=%d", c.contains(c.cur, pr), c.saturated[c.cur])
	}
}

// TestCountingCountsMatchScan checks the incremental counts against a scan
// after a random mix of adds, removes and rotations.
func TestCountingCountsMatchScan(t *testing.T) {
	c := newCounting(8, 6)
	rng := rand.New(rand.NewPCG(1, 2))
	var added [][]byte
	for step := range 20000 {
		switch r := rng.IntN(100); {
		case r < 70:
			key := testKey(2, rng.Uint64N(30))
			c.add(c.cur, probeOf(c, key))
			added = append(added, key)
		case r < 95 && len(added) > 0:
			key := added[rng.IntN(len(added))]
			pr := probeOf(c, key)
			for g := range 2 {
				if c.contains(g, pr) {
					c.remove(g, pr)
				}
			}
		case r == 99 && rng.IntN(40) == 0:
			c.rotate()
		}
		if step%997 == 0 || step == 19999 {
			for g := range 2 {
				nz, sat := c.recount(g)
				if nz != c.nonzero[g] || sat != c.saturated[g] {
					t.Fatalf("step %d gen %d: counts %d/%d, scan %d/%d", step, g, c.nonzero[g], c.saturated[g], nz, sat)
				}
			}
		}
	}
	if c.saturated[0]+c.saturated[1] == 0 {
		t.Fatal("test never saturated a counter; make it hotter")
	}
}

func TestRetraction(t *testing.T) {
	for _, mode := range []Mode{Counting, Fingerprint} {
		t.Run(mode.String(), func(t *testing.T) { testRetraction(t, mode) })
	}
}

func testRetraction(t *testing.T, mode Mode) {
	p := mustNew(t, Options{ExpectedKeys: 10000, FPRate: 0.001, Window: time.Hour, Mode: mode})
	ts := epoch
	for i := range uint64(5000) {
		p.TestAndAdd(testKey(1, i), ts)
	}
	key := testKey(3, 42)
	if p.TestAndAdd(key, ts) {
		t.Fatal("fresh key reported seen")
	}
	before := p.Stats()
	removed, err := p.Remove(key, ts)
	if err != nil || !removed {
		t.Fatalf("Remove = %v, %v; want true, nil", removed, err)
	}
	if p.Test(key) {
		t.Fatal("removed key still seen")
	}
	if p.TestAndAdd(key, ts) {
		t.Fatal("removed key not reported new")
	}
	if after := p.Stats(); after.Current != before.Current {
		t.Fatalf("add, remove, add changed the filter: %+v vs %+v", after.Current, before.Current)
	}

	// A key never added removes nothing (it does not test present).
	st := p.Stats()
	removed, err = p.Remove(testKey(4, 1), ts)
	if err != nil || removed {
		t.Fatalf("Remove(never added) = %v, %v; want false, nil", removed, err)
	}
	if p.Stats() != st {
		t.Fatal("removing a key never added changed the filter")
	}

	// Remove applies to the previous generation too.
	old := testKey(3, 7)
	p.TestAndAdd(old, ts)
	p.TestAndAdd(testKey(3, 8), ts.Add(time.Hour)) // rotate: old is in previous
	if removed, _ := p.Remove(old, ts.Add(time.Hour)); !removed || p.Test(old) {
		t.Fatalf("remove from previous generation: removed=%v still seen=%v", removed, p.Test(old))
	}

	// Every one of many retracted keys is new again, the others are still seen.
	for i := uint64(0); i < 5000; i += 2 {
		if removed, _ := p.Remove(testKey(1, i), ts.Add(time.Hour)); !removed {
			t.Fatalf("key %d not removed", i)
		}
	}
	for i := uint64(1); i < 5000; i += 2 {
		if !p.Test(testKey(1, i)) {
			t.Fatalf("key %d lost by removing others (false negative)", i)
		}
	}
}

func TestPlainRemoveRefused(t *testing.T) {
	p := mustNew(t, Options{ExpectedKeys: 100, FPRate: 0.01, Window: time.Hour, Mode: Plain})
	p.TestAndAdd([]byte("k"), epoch)
	st := p.Stats()
	removed, err := p.Remove([]byte("k"), epoch.Add(5*time.Hour))
	if removed || !errors.Is(err, ErrRemoveUnsupported) {
		t.Fatalf("Remove in plain mode = %v, %v; want false, ErrRemoveUnsupported", removed, err)
	}
	if p.Stats() != st || !p.Test([]byte("k")) {
		t.Fatal("refused Remove changed the pair")
	}
}
