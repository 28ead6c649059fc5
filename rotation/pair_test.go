package rotation

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
	"unsafe"
)

// TestNoFalseNegatives: every key added within the guarantee is reported
// seen, at design load, in both generations.
func TestNoFalseNegatives(t *testing.T) {
	const n = 20000
	for _, mode := range modes {
		p := mustNew(t, Options{ExpectedKeys: n, FPRate: 0.01, Window: time.Hour, Mode: mode})
		// Window W: keys 0..n-1 spread over the window.
		for i := range uint64(n) {
			p.TestAndAdd(testKey(1, i), epoch.Add(time.Duration(i)*time.Hour/n))
		}
		// Window W+1: keys n..2n-1; every key of W is still seen.
		for i := range uint64(n) {
			p.TestAndAdd(testKey(1, n+i), epoch.Add(time.Hour+time.Duration(i)*time.Hour/n))
		}
		for i := range uint64(2 * n) {
			if !p.Test(testKey(1, i)) {
				t.Fatalf("%v: key %d added within the guarantee not seen", mode, i)
			}
		}
		for i := range uint64(n) { // and TestAndAdd agrees
			if !p.TestAndAdd(testKey(1, n+i), epoch.Add(time.Hour)) {
				t.Fatalf("%v: TestAndAdd of key %d reported new", mode, n+i)
			}
		}
	}
}

// TestWindowGuarantee checks the guarantee with random synthetic timestamps:
// a key added at t is seen at t+d for d < window, and new for d >= 2 windows.
func TestWindowGuarantee(t *testing.T) {
	const window = time.Minute
	rng := rand.New(rand.NewPCG(3, 4))
	for _, mode := range modes {
		for trial := range 2000 {
			// Lightly loaded, so false positives are negligible and the test is exact.
			p := mustNew(t, Options{ExpectedKeys: 1000, FPRate: 1e-6, Window: window, Mode: mode})
			t0 := epoch.Add(time.Duration(rng.Int64N(int64(10 * window))))
			key := testKey(5, uint64(trial))
			// Other keys come and go around it, in order.
			p.TestAndAdd(testKey(6, uint64(trial)), t0.Add(-time.Duration(rng.Int64N(int64(window)))))
			if p.TestAndAdd(key, t0) {
				t.Fatalf("%v trial %d: fresh key seen", mode, trial)
			}
			d := time.Duration(rng.Int64N(int64(3 * window)))
			seen := p.TestAndAdd(key, t0.Add(d))
			switch {
			case d < window && !seen:
				t.Fatalf("%v: key added at %v not seen %v later (window %v)", mode, t0, d, window)
			case d >= 2*window && seen:
				t.Fatalf("%v: key added at %v still seen %v later (window %v)", mode, t0, d, window)
			}
		}
	}
}

func TestWindowSemantics(t *testing.T) {
	const w = time.Hour
	for _, mode := range modes {
		p := mustNew(t, Options{ExpectedKeys: 1000, FPRate: 1e-6, Window: w, Mode: mode})
		if st := p.Stats(); !st.WindowStart.IsZero() || st.Rotations != 0 {
			t.Fatalf("fresh pair: %+v", st)
		}
		a, b, c := []byte("a"), []byte("b"), []byte("c")
		t0 := epoch.Add(10 * time.Minute)
		p.TestAndAdd(a, t0)
		if got := p.Stats().WindowStart; !got.Equal(epoch) {
			t.Fatalf("window start %v, want boundary %v", got, epoch)
		}
		// Late record: before the current window; tested, added, time unchanged.
		if p.TestAndAdd(b, epoch.Add(-3*w)) {
			t.Fatal("late fresh key reported seen")
		}
		if !p.TestAndAdd(b, epoch.Add(-5*w)) {
			t.Fatal("late key not remembered")
		}
		if got := p.Stats(); !got.WindowStart.Equal(epoch) || got.Rotations != 0 {
			t.Fatalf("late record moved time: %+v", got)
		}
		// A zero timestamp leaves time where it is.
		p.TestAndAdd(c, time.Time{})
		if got := p.Stats(); !got.WindowStart.Equal(epoch) {
			t.Fatalf("zero timestamp moved time to %v", got.WindowStart)
		}
		// Next window: one rotation; a, b, c in previous are still seen.
		p.TestAndAdd([]byte("d"), epoch.Add(w))
		st := p.Stats()
		if st.Rotations != 1 || !st.WindowStart.Equal(epoch.Add(w)) || st.Previous.EstimatedKeys < 2 || st.Current.EstimatedKeys < 0.5 {
			t.Fatalf("after one window: %+v", st)
		}
		for _, k := range [][]byte{a, b, c} {
			if !p.Test(k) {
				t.Fatalf("key %s lost after one rotation", k)
			}
		}
		// Window after: a, b, c (previous-of-previous) are gone; d is previous.
		p.TestAndAdd([]byte("e"), epoch.Add(2*w+time.Minute))
		for _, k := range [][]byte{a, b, c} {
			if p.Test(k) {
				t.Fatalf("key %s still seen two windows later", k)
			}
		}
		if !p.Test([]byte("d")) || p.Stats().Rotations != 2 {
			t.Fatalf("d lost or rotations %d", p.Stats().Rotations)
		}
		// A jump of many windows clears both generations, as one rotation.
		p.TestAndAdd([]byte("f"), epoch.Add(50*w))
		st = p.Stats()
		if st.Rotations != 3 || !st.WindowStart.Equal(epoch.Add(50*w)) || st.Previous.Fill != 0 {
			t.Fatalf("after a jump: %+v", st)
		}
		if p.Test([]byte("d")) || p.Test([]byte("e")) || !p.Test([]byte("f")) {
			t.Fatal("jump did not clear both generations")
		}
		// Two windows exactly also clears both.
		p.TestAndAdd([]byte("g"), epoch.Add(52*w))
		if p.Test([]byte("f")) || p.Stats().Previous.Fill != 0 {
			t.Fatal("jump of two windows kept a generation")
		}
	}
}

func TestWindowBoundariesBeforeEpoch(t *testing.T) {
	p := mustNew(t, Options{ExpectedKeys: 10, FPRate: 0.01, Window: 7 * time.Second})
	p.TestAndAdd([]byte("x"), time.Unix(-1, 0))
	if got, want := p.Stats().WindowStart, time.Unix(-7, 0); !got.Equal(want) {
		t.Fatalf("window of -1s = %v, want %v", got, want)
	}
	p.TestAndAdd([]byte("y"), time.Unix(0, 0))
	if got := p.Stats(); got.Rotations != 1 || got.WindowStart.Unix() != 0 {
		t.Fatalf("crossing the epoch: %+v", got)
	}
}

// TestReplayDeterministic: the same records make the same decisions.
func TestReplayDeterministic(t *testing.T) {
	type rec struct {
		key []byte
		ts  time.Time
	}
	rng := rand.New(rand.NewPCG(5, 6))
	var recs []rec
	ts := epoch
	for range 30000 {
		ts = ts.Add(time.Duration(rng.Int64N(int64(time.Second))) - 100*time.Millisecond) // some late
		recs = append(recs, rec{testKey(7, rng.Uint64N(5000)), ts})
	}
	for _, mode := range modes {
		run := func() []bool {
			p := mustNew(t, Options{ExpectedKeys: 2000, FPRate: 0.01, Window: 10 * time.Minute, Mode: mode})
			out := make([]bool, len(recs))
			for i, r := range recs {
				out[i] = p.TestAndAdd(r.key, r.ts)
			}
			return out
		}
		a, b := run(), run()
		dups := 0
		for i := range a {
			if a[i] != b[i] {
				t.Fatalf("%v: record %d decided differently on replay", mode, i)
			}
			if a[i] {
				dups++
			}
		}
		if dups == 0 || dups == len(a) {
			t.Fatalf("%v: degenerate stream (%d duplicates)", mode, dups)
		}
	}
}

func TestNoAllocations(t *testing.T) {
	for _, mode := range modes {
		p := mustNew(t, Options{ExpectedKeys: 1000, FPRate: 0.01, Window: time.Second, Mode: mode})
		spare := mustNew(t, p.Options())
		key := []byte("0123456789abcdef")
		i := 0
		allocs := testing.AllocsPerRun(1000, func() {
			i++
			key[0] = byte(i)
			ts := epoch.Add(time.Duration(i) * 100 * time.Millisecond) // rotates every 10 calls
			p.TestAndAdd(key, ts)
			p.Test(key)
			if mode != Plain {
				if _, err := p.Remove(key, ts); err != nil {
					t.Fatal(err)
				}
			}
			_ = p.Stats()
			if err := p.CopyTo(spare); err != nil {
				t.Fatal(err)
			}
		})
		if allocs != 0 {
			t.Errorf("%v: %v allocations per record, want 0", mode, allocs)
		}
		if p.Stats().Rotations < 90 {
			t.Fatalf("%v: rotations not exercised", mode)
		}
	}
}

func TestStatsAtDesignLoad(t *testing.T) {
	const n = 50000
	for _, mode := range modes {
		p := mustNew(t, Options{ExpectedKeys: n, FPRate: 0.001, Window: time.Hour, Mode: mode})
		added := 0
		for i := range uint64(n) {
			if !p.TestAndAdd(testKey(1, i), epoch) {
				added++
			}
		}
		st := p.Stats()
		c := st.Current
		if st.Mode != mode || st.Window != time.Hour || st.Bytes != p.SizeBytes() || c.M == 0 || c.K == 0 {
			t.Fatalf("%v: stats %+v", mode, st)
		}
		if math.Abs(c.EstimatedKeys-float64(added)) > 0.02*float64(added) {
			t.Errorf("%v: estimated %.0f keys, added %d", mode, c.EstimatedKeys, added)
		}
		want := 1 - math.Exp(-float64(c.K)*float64(added)/float64(c.M))
		if mode == Fingerprint {
			want = float64(added) / float64(c.M) // one slot per key
		}
		if math.Abs(c.Fill-want) > 0.01 {
			t.Errorf("%v: fill %.4f, expected about %.4f", mode, c.Fill, want)
		}
		// The estimate of the current rate is about the per-generation target.
		if gen := generationFPRate(0.001); c.FPRate > 1.2*gen || c.FPRate < gen/2 {
			t.Errorf("%v: estimated FP rate %.3g, per-generation target %.3g", mode, c.FPRate, gen)
		}
		if st.Previous.Fill != 0 || st.Previous.EstimatedKeys != 0 || st.Previous.FPRate != 0 {
			t.Errorf("%v: empty previous generation: %+v", mode, st.Previous)
		}
		if c.Saturated != 0 && mode == Plain {
			t.Errorf("plain mode reports saturated counters")
		}
	}
}

// filledPair is a pair of mode holding 8000 keys testKey(1, i), added 15 ms
// apart over two minute-long windows (so it has rotated), and its options.
func filledPair(t *testing.T, mode Mode) (*Pair, Options) {
	t.Helper()
	o := Options{ExpectedKeys: 5000, FPRate: 0.01, Window: time.Minute, Mode: mode}
	p := mustNew(t, o)
	for i := range uint64(8000) {
		p.TestAndAdd(testKey(1, i), epoch.Add(time.Duration(i)*15*time.Millisecond))
	}
	return p, o
}

func TestCopyToAndClone(t *testing.T) {
	for _, mode := range modes {
		p, o := filledPair(t, mode)
		dst := mustNew(t, o)
		if err := p.CopyTo(dst); err != nil {
			t.Fatal(err)
		}
		clone := p.Clone()
		var zero Pair
		if err := p.CopyTo(&zero); err != nil {
			t.Fatal(err)
		}
		for _, q := range []*Pair{dst, clone, &zero} {
			if q.Stats() != p.Stats() {
				t.Fatalf("%v: copy stats differ: %+v vs %+v", mode, q.Stats(), p.Stats())
			}
			for i := range uint64(20000) {
				k := testKey(byte(i%2), i)
				if q.Test(k) != p.Test(k) {
					t.Fatalf("%v: copy answers differently for key %d", mode, i)
				}
			}
		}
		// The copy is independent of the original.
		p.TestAndAdd([]byte("only in p"), epoch.Add(2*time.Minute))
		if dst.Test([]byte("only in p")) || dst.Stats() == p.Stats() {
			t.Fatalf("%v: copy shares state with the original", mode)
		}
		other := o
		other.ExpectedKeys++
		if err := p.CopyTo(mustNew(t, other)); err == nil {
			t.Fatalf("%v: CopyTo a pair with other options accepted", mode)
		}
	}
}

// TestExtremeTimestamps: timestamps far outside int64 nanoseconds are
// clamped, never overflow, and never move time backwards.
func TestExtremeTimestamps(t *testing.T) {
	p := mustNew(t, Options{ExpectedKeys: 10, FPRate: 0.01, Window: 24 * time.Hour})
	far := time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)
	p.TestAndAdd([]byte("a"), time.Date(-9999, 1, 1, 0, 0, 0, 0, time.UTC))
	p.TestAndAdd([]byte("b"), far)
	st := p.Stats()
	if st.Rotations != 1 || st.WindowStart.Before(epoch) {
		t.Fatalf("after extreme timestamps: %+v", st)
	}
	p.TestAndAdd([]byte("c"), far.AddDate(1, 0, 0))
	if got := p.Stats(); !got.WindowStart.Equal(st.WindowStart) || !p.Test([]byte("b")) {
		t.Fatalf("clamped time moved: %+v", got)
	}
}

// TestReset: a Reset pair is indistinguishable from a new one, and then
// behaves like one: the first record starts its window afresh.
func TestReset(t *testing.T) {
	for _, mode := range modes {
		p, o := filledPair(t, mode)
		if p.Stats().Rotations == 0 {
			t.Fatalf("%v: the fill did not rotate; the test needs it to", mode)
		}
		p.Reset()
		if got, want := p.Stats(), mustNew(t, o).Stats(); got != want {
			t.Fatalf("%v: stats after Reset %+v, want a new pair's %+v", mode, got, want)
		}
		for i := range uint64(8000) {
			if p.Test(testKey(1, i)) {
				t.Fatalf("%v: key %d still seen after Reset", mode, i)
			}
		}
		// An earlier window than before the Reset is accepted as the start.
		if p.TestAndAdd([]byte("again"), epoch) || !p.Test([]byte("again")) {
			t.Fatalf("%v: the reset pair does not add", mode)
		}
		if st := p.Stats(); !st.WindowStart.Equal(epoch.Truncate(time.Minute)) || st.Rotations != 0 {
			t.Fatalf("%v: reset pair's window %v (rotations %d), want it started at %v", mode, st.WindowStart, st.Rotations, epoch.Truncate(time.Minute))
		}
	}
}

// TestSizeBytesCountsAllocations holds SizeBytes to what New allocates for
// the filters and their change tracking: the memory model (sizing,
// dedup_filter_bytes) is built on it.
func TestSizeBytesCountsAllocations(t *testing.T) {
	for _, mode := range modes {
		for _, n := range []uint64{1000, 123_457} {
			p := mustNew(t, Options{ExpectedKeys: n, FPRate: 0.001, Window: time.Hour, Mode: mode})
			var alloc, slack int
			if d := p.gens.tracking(); d != nil {
				alloc += 8*(len(d.maps[0])+len(d.maps[1])) + int(unsafe.Sizeof(d.ring))
			}
			switch mode {
			case Counting:
				alloc += 8 * len(p.cnt.words)
			case Fingerprint:
				alloc += 8 * len(p.fp.words)
				slack = tabPad + 8 // padding for 8-byte loads and prefetches
			case Plain:
				alloc += 8 * (len(p.pl.cur.words) + len(p.pl.prev.words))
			}
			if got := p.SizeBytes(); got > alloc || got < alloc-slack {
				t.Errorf("%v n=%d: SizeBytes %d, allocated %d (up to %d of padding not counted)", mode, n, got, alloc, slack)
			}
			if mode.Incremental() && p.SizeBytes() <= int(pairBytes(mode, p.m, p.k)) {
				t.Errorf("%v n=%d: SizeBytes %d does not count the change tracking", mode, n, p.SizeBytes())
			}
		}
	}
}

// TestZeroPair: the methods that make sense on a zero Pair (one ReadFrom
// or CopyTo will fill) work on it.
func TestZeroPair(t *testing.T) {
	var p Pair
	p.ResetDelta()
	var d Delta
	p.TakeDelta(&d)
	if p.SizeBytes() != 0 || d.Len() != 0 || p.Stats().Bytes != 0 || p.Clone().SizeBytes() != 0 {
		t.Fatalf("zero pair: SizeBytes %d, delta %d bytes, Stats %+v", p.SizeBytes(), d.Len(), p.Stats())
	}
}
