package rotation

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"
)

// TestFingerprintRateTable measures single fingerprint generations of fixed
// geometry (f bits, load) against fingerprintRate, both ways within 1.2x;
// about 500 false positives are expected per row, so 1.2x is over 4
// standard deviations.
func TestFingerprintRateTable(t *testing.T) {
	const buckets = 5000
	for _, row := range []struct {
		f    int
		load float64
	}{{8, 0.5}, {8, 0.9}, {10, 0.9}, {12, 0.95}} {
		t.Run(fmt.Sprintf("f=%d,load=%g", row.f, row.load), func(t *testing.T) {
			c := newFingerprint(buckets, row.f, true)
			n := uint64(row.load * buckets * slotsPerBucket)
			var pr fprobe
			for i := range n {
				c.locate(xxhash.Sum64(testKey(1, i)), &pr)
				c.add(0, &pr)
			}
			model := fingerprintRate(row.f, buckets, float64(c.held[0]-c.stashed[0]), float64(c.stashed[0]))
			probes := uint64(500 / model)
			got := measure(probes, func(i uint64) bool {
				c.locate(xxhash.Sum64(testKey(2, i)), &pr)
				return c.contains(0, &pr)
			})
			t.Logf("measured %.3g, model %.3g, ratio %.3f (%d probes, %d stashed)", got, model, got/model, probes, c.stashed[0])
			if got > 1.2*model || got < model/1.2 {
				t.Errorf("measured %.3g, model %.3g: outside 1.2x", got, model)
			}
		})
	}
}

// TestFingerprintPairRate fills both generations of fingerprint pairs to
// ExpectedKeys and measures the pair's false-positive rate against PairRate,
// both ways within 1.2x (about 500 false positives expected).
func TestFingerprintPairRate(t *testing.T) {
	for _, rate := range []float64{1e-3, 1e-4} {
		t.Run(fmt.Sprint(rate), func(t *testing.T) {
			const n = 50000
			o := Options{ExpectedKeys: n, FPRate: rate, Window: time.Hour, Mode: Fingerprint}
			p := mustNew(t, o)
			for i := range uint64(2 * n) {
				p.TestAndAdd(testKey(1, i), epoch.Add(time.Duration(i/n)*time.Hour))
			}
			model, err := PairRate(o, n)
			if err != nil {
				t.Fatal(err)
			}
			if model > rate {
				t.Errorf("model %.3g above the target %.3g", model, rate)
			}
			probes := uint64(500 / model)
			got := measure(probes, func(i uint64) bool { return p.Test(testKey(3, i)) })
			t.Logf("ε=%g: f=%d, measured %.3g, model %.3g, ratio %.3f (%d probes)", rate, p.k, got, model, got/model, probes)
			if got > 1.2*model || got < model/1.2 {
				t.Errorf("measured %.3g, model %.3g: outside 1.2x", got, model)
			}
		})
	}
}

// TestFingerprintSizing checks the geometry against its model and the
// lower bound, and the memory target at ε = 1e-6.
func TestFingerprintSizing(t *testing.T) {
	for _, rate := range []float64{0.1, 0.01, 0.001, 1e-4, 1e-6, 1e-9} {
		for _, n := range []uint64{1, 1000, 1e6, 1e8} {
			gen := generationFPRate(rate)
			buckets, f := fingerprintGeometry(n, gen)
			if r := fingerprintRate(f, buckets, float64(n), 0); r > gen {
				t.Errorf("ε=%g n=%d: modelled rate %.3g above %.3g", rate, n, r, gen)
			}
			if load := float64(n) / float64(buckets*slotsPerBucket); load > maxBucketLoad {
				t.Errorf("ε=%g n=%d: load %.3f above %g", rate, n, load, maxBucketLoad)
			}
			if bpk := float64(buckets*slotsPerBucket*uint64(f)) / float64(n); n >= 1000 && bpk < math.Log2(1/gen) {
				t.Errorf("ε=%g n=%d: %.2f bits per key below the bound", rate, n, bpk)
			}
		}
	}
	// 48 bits is 1.15 times the lower bound for a pair at 1e-6 (two
	// generations of log2(1/p) = 20.9 bits).
	bpk, err := BitsPerKey(Options{ExpectedKeys: 100_000_000, FPRate: 1e-6, Window: time.Hour, Mode: Fingerprint})
	if err != nil || bpk > 48 {
		t.Errorf("pair at ε=1e-6: %.2f bits per key, %v; want ≤ 48", bpk, err)
	}
}

// TestFingerprintHeadroom fills the current generation of a pair of 10⁶
// expected keys to ExpectedKeys and a little past it: at ExpectedKeys the
// buckets take every key, at 1.01 times they refuse a few (stashed, far
// from the stash's capacity), and no early rotation happens.
func TestFingerprintHeadroom(t *testing.T) {
	const n = 1_000_000
	p := mustNew(t, Options{ExpectedKeys: n, FPRate: 1e-6, Window: time.Hour, Mode: Fingerprint})
	i := uint64(0)
	for _, c := range []struct {
		keys      uint64
		maxStash  uint64
		condition string
	}{{n, 0, "at ExpectedKeys"}, {n * 101 / 100, p.fp.stashCap / 8, "at 1.01 x ExpectedKeys"}} {
		for ; i < c.keys; i++ {
			p.TestAndAdd(testKey(1, i), epoch)
		}
		st := p.Stats()
		t.Logf("%s: load %.4f, %d stashed (capacity %d)", c.condition, st.Current.Fill, st.Current.Stashed, p.fp.stashCap)
		if st.Current.Stashed > c.maxStash || st.EarlyRotations != 0 {
			t.Errorf("%s: %d stashed, %d early rotations; want at most %d and none", c.condition, st.Current.Stashed, st.EarlyRotations, c.maxStash)
		}
	}
}

// TestFingerprintOverload drives pairs at 2x and 5x their design load within
// one window: the buckets refuse inserts, the stash keeps them, full stashes
// rotate early. No key added since the last-but-one early rotation may be
// reported new, every key dropped early is counted, and new records are
// dropped no more often than the model of full generations allows.
func TestFingerprintOverload(t *testing.T) {
	for _, factor := range []uint64{2, 5} {
		t.Run(fmt.Sprintf("%dx", factor), func(t *testing.T) {
			const n = 20000
			o := Options{ExpectedKeys: n, FPRate: 0.01, Window: time.Hour, Mode: Fingerprint}
			p := mustNew(t, o)
			total := factor * n
			var (
				dropped, added uint64
				early          []uint64 // index of the key whose add rotated early
				isNew          = make([]bool, total)
			)
			for i := range total {
				if p.TestAndAdd(testKey(1, i), epoch) {
					dropped++
					continue
				}
				added++
				isNew[i] = true
				if !p.Test(testKey(1, i)) {
					t.Fatalf("key %d lost at insertion", i)
				}
				if st := p.Stats(); st.EarlyRotations > uint64(len(early)) {
					early = append(early, i)
				}
			}
			st := p.Stats()
			t.Logf("%d keys: %d overflows, %d early rotations, %d forgotten, %d dropped as false positives",
				total, st.Overflows, st.EarlyRotations, st.ForgottenKeys, dropped)
			if st.Overflows == 0 || st.EarlyRotations == 0 || st.Rotations != 0 {
				t.Fatalf("overload not exercised: %+v", st)
			}
			// Both generations: every key added after the last-but-one early
			// rotation (a key dropped as a false positive was never added, and
			// the generation that matched it may be gone).
			from := uint64(0)
			if len(early) >= 2 {
				from = early[len(early)-2] + 1
			}
			for i := from; i < total; i++ {
				if isNew[i] && !p.Test(testKey(1, i)) {
					t.Fatalf("key %d (after the early rotation at %d) reported new", i, from)
				}
			}
			if held := uint64(st.Current.EstimatedKeys + st.Previous.EstimatedKeys); st.ForgottenKeys != added-held {
				t.Errorf("forgotten %d, want added %d - held %d", st.ForgottenKeys, added, held)
			}
			// A generation never holds more than its slots and stash.
			c := p.fp
			full := fingerprintRate(p.k, c.buckets, float64(p.m), float64(c.stashCap))
			bound := 1 - (1-full)*(1-full)
			if rate := float64(dropped) / float64(total); rate > bound {
				t.Errorf("false drops %.3g above the full-pair model %.3g", rate, bound)
			}
			// Retracting every key empties both generations, stash included.
			for i := range total {
				if _, err := p.Remove(testKey(1, i), epoch); err != nil {
					t.Fatal(err)
				}
			}
			st = p.Stats()
			if st.Current.EstimatedKeys+st.Previous.EstimatedKeys != 0 || st.Current.Stashed+st.Previous.Stashed != 0 ||
				c.recount(0)+c.recount(1) != 0 {
				t.Errorf("after removing every key: %+v", st)
			}
		})
	}
}

// TestFingerprintSnapshotWithStash round-trips a pair whose stashes are in
// use, and checks that the decoder refuses a stash entry out of place.
func TestFingerprintSnapshotWithStash(t *testing.T) {
	o := Options{ExpectedKeys: 2000, FPRate: 0.01, Window: time.Hour, Mode: Fingerprint}
	p := mustNew(t, o)
	for i := range uint64(2065) { // just past the load the buckets hold
		p.TestAndAdd(testKey(1, i), epoch)
	}
	if p.fp.stashed[p.fp.cur] == 0 {
		t.Fatal("no fingerprint stashed; overload the pair more")
	}
	data := encode(t, p)
	var q Pair
	if _, err := q.ReadFrom(bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	if q.Stats() != p.Stats() || !bytes.Equal(encode(t, &q), data) {
		t.Fatalf("decoded %+v, want %+v", q.Stats(), p.Stats())
	}
	for i := range uint64(2065) { // just past the load the buckets hold
		if p.Test(testKey(1, i)) != q.Test(testKey(1, i)) {
			t.Fatalf("key %d answered differently after decoding", i)
		}
	}
	// The last stash entry's bucket beyond the filter.
	bad := bytes.Clone(data)
	off := len(bad) - 4 - 16
	bad[off+7] = 0x40
	if _, err := new(Pair).ReadFrom(bytes.NewReader(reseal(bad))); !errors.Is(err, ErrInvalid) {
		t.Errorf("stash entry out of range: err = %v", err)
	}
}

// TestFalseDropsPerDay checks the model against its bounds: below the pair
// rate at design load times the keys, above half the previous generation's
// share, and growing with traffic.
func TestFalseDropsPerDay(t *testing.T) {
	for _, mode := range modes {
		o := Options{ExpectedKeys: 1_000_000, FPRate: 0.001, Window: time.Hour, Mode: mode}
		perDay := 24e6 // ExpectedKeys per window
		drops, err := FalseDropsPerDay(o, perDay)
		if err != nil {
			t.Fatal(err)
		}
		prev, _ := PairRate(o, 0)
		full, _ := PairRate(o, 1e6)
		gen := generationFPRate(0.001)
		if drops > full*perDay || drops < 0.5*gen*perDay || prev != 0 {
			t.Errorf("%v: %.0f drops/day; want between %.0f and %.0f", mode, drops, 0.5*gen*perDay, full*perDay)
		}
		if more, _ := FalseDropsPerDay(o, 2*perDay); more <= 2*drops {
			t.Errorf("%v: doubling traffic gives %.0f drops/day from %.0f", mode, more, drops)
		}
		if _, err := FalseDropsPerDay(o, -1); err == nil {
			t.Errorf("%v: negative traffic accepted", mode)
		}
	}
}

// TestFingerprintHoldsMatchesSlots checks the two-slots-at-once comparison
// of the raw layout against slot-by-slot reads for every fingerprint width.
func TestFingerprintHoldsMatchesSlots(t *testing.T) {
	for f := 2; f <= 32; f += 2 {
		c := newFingerprint(64, f, false)
		x := uint64(f)
		next := func() uint64 { x = mix(x + golden); return x }
		for s := range uint64(64 * 2 * slotsPerBucket) {
			if next()%4 != 0 { // a quarter of the slots stay empty
				c.setSlot(s, next()&c.mask)
			}
		}
		for range 20000 {
			g, i := int(next()%2), next()%64
			fp := next() & c.mask
			if next()%2 == 0 { // half the time, a fingerprint the bucket holds
				fp = c.slot(c.slotIndex(g, i) + next()%slotsPerBucket)
			}
			if _, want := c.find(g, i, fp); c.holds(g, i, fp) != want {
				t.Fatalf("f=%d: bucket %d of generation %d, fingerprint %#x: holds = %v, slots say %v", f, i, g, fp, !want, want)
			}
		}
	}
}

// TestSemiSortedBuckets checks the semi-sorted layout against a plain
// model of the buckets for every fingerprint width: places, removals,
// tests of one and both generations, the stream form, and the index of
// every multiset of nibbles.
func TestSemiSortedBuckets(t *testing.T) {
	seen := map[uint16]bool{}
	for x := range uint16(nibbleSets) {
		n := nibbleSet[x]
		a, b, c, d := n&15, n>>4&15, n>>8&15, n>>12
		if a > b || b > c || c > d || seen[n] {
			t.Fatalf("index %d: nibbles %#04x not ascending or repeated", x, n)
		}
		seen[n] = true
		if r := nibbleRank[0][a] + nibbleRank[1][b] + nibbleRank[2][c] + nibbleRank[3][d]; r != x {
			t.Fatalf("nibbles %#04x rank %d, want %d", n, r, x)
		}
	}
	const buckets = 64
	for f := 6; f <= 32; f += 2 {
		c := newFingerprint(buckets, f, true)
		var model [2][buckets][]uint64
		x := uint64(f)
		next := func() uint64 { x = mix(x + golden); return x }
		for range 20000 {
			g, i := int(next()%2), next()%buckets
			fp := next() & c.mask
			if next()%3 == 0 && len(model[g][i]) > 0 { // one the bucket holds
				fp = model[g][i][next()%uint64(len(model[g][i]))]
			}
			if fp == 0 {
				continue
			}
			has := slices.Contains(model[g][i], fp)
			if c.sortedHolds(g, i, fp) != has {
				t.Fatalf("f=%d: bucket %d of generation %d, %#x: sortedHolds = %v", f, i, g, fp, !has)
			}
			either := has || slices.Contains(model[1-g][i], fp)
			j := next() % buckets
			any := either || slices.Contains(model[0][j], fp) || slices.Contains(model[1][j], fp)
			if c.pairsHold(i, j, fp) != any {
				t.Fatalf("f=%d: buckets %d and %d, %#x: pairsHold = %v", f, i, j, fp, !any)
			}
			switch next() % 3 {
			case 0, 1:
				if placed := c.sortedPlace(g, i, fp); placed != (len(model[g][i]) < slotsPerBucket) {
					t.Fatalf("f=%d: place in a bucket of %d: %v", f, len(model[g][i]), placed)
				} else if placed {
					model[g][i] = append(model[g][i], fp)
				}
			default:
				if took := c.sortedTake(g, i, fp); took != has {
					t.Fatalf("f=%d: take %#x: %v, held %v", f, fp, took, has)
				} else if took {
					j := slices.Index(model[g][i], fp)
					model[g][i] = slices.Delete(model[g][i], j, j+1)
				}
			}
			want := [slotsPerBucket]uint64{}
			copy(want[slotsPerBucket-len(model[g][i]):], slices.Sorted(slices.Values(model[g][i])))
			if got := c.sortedBucket(g, i); got != want {
				t.Fatalf("f=%d: bucket %v, want %v", f, got, want)
			}
			var sb [16]byte
			c.streamBucket(g, i, &sb)
			if got := slotsOf(binary.LittleEndian.Uint64(sb[:]), binary.LittleEndian.Uint64(sb[8:]), c.f); got != want {
				t.Fatalf("f=%d: stream form %v, want %v", f, got, want)
			}
		}
	}
}
