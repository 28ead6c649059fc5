package rotation

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"testing"
	"time"
)

// deltaCase is a pair configuration the delta tests run on.
type deltaCase struct {
	name string
	o    Options
	keys uint64 // keys per window the operations aim at
}

func deltaCases() []deltaCase {
	return []deltaCase{
		{"counting", Options{ExpectedKeys: 2000, FPRate: 0.01, Window: time.Minute, Mode: Counting}, 2000},
		{"plain", Options{ExpectedKeys: 2000, FPRate: 0.01, Window: time.Minute, Mode: Plain}, 2000},
		{"fingerprint", Options{ExpectedKeys: 2000, FPRate: 0.01, Window: time.Minute, Mode: Fingerprint}, 2000},
		// Four times the design load: kicks, stashes and early rotations.
		{"fingerprint-overflow", Options{ExpectedKeys: 500, FPRate: 0.01, Window: time.Minute, Mode: Fingerprint}, 4000},
	}
}

// deltaWorkload drives p with a random mix of operations: adds of new and
// repeated keys with advancing (and sometimes late) timestamps that cross
// crossings window boundaries in all, removals, AdvanceTo and, rarely,
// Reset. It returns the time it reached.
func deltaWorkload(t testing.TB, p *Pair, rng *rand.Rand, ts time.Time, ops int, crossings int, keys uint64, next *uint64) time.Time {
	t.Helper()
	w := p.Options().Window
	end := ts.Add(time.Duration(crossings) * w)
	if crossings == 0 {
		end = ts.Truncate(w).Add(w - 1)
		if end.Before(ts) {
			end = ts
		}
	}
	step := end.Sub(ts) / time.Duration(ops+1)
	for j := range ops {
		at := ts.Add(time.Duration(j+1) * step)
		switch r := rng.IntN(100); {
		case r < 60: // a new key
			p.TestAndAdd(testKey(1, *next), at)
			*next++
		case r < 75: // a repeat, or a late record
			if rng.IntN(2) == 0 {
				at = at.Add(-w)
			}
			p.TestAndAdd(testKey(1, rng.Uint64N(*next+1)), at)
		case r < 93:
			if p.Options().Mode == Plain {
				continue
			}
			if _, err := p.Remove(testKey(1, *next-rng.Uint64N(min(*next, 2*keys)+1)), at); err != nil {
				t.Fatal(err)
			}
		case r < 99:
			p.AdvanceTo(at)
		default:
			if rng.IntN(20) == 0 {
				p.Reset()
			}
		}
	}
	if crossings > 0 {
		p.AdvanceTo(end)
	}
	return end
}

// TestDeltaReplay: a pair restored from a base snapshot plus every delta
// since, in order, encodes to exactly the bytes of the original after each
// delta, in every mode, across 0 to 3 window boundaries between deltas.
func TestDeltaReplay(t *testing.T) {
	for _, tc := range deltaCases() {
		t.Run(tc.name, func(t *testing.T) {
			for seed := range uint64(3) {
				rng := rand.New(rand.NewPCG(seed, 23))
				p := mustNew(t, tc.o)
				var next uint64
				ts := deltaWorkload(t, p, rng, epoch, int(tc.keys), 1, tc.keys, &next)
				// The base: a copy taken at the same instant as ResetDelta,
				// as a checkpointer does.
				spare := mustNew(t, tc.o)
				if err := p.CopyTo(spare); err != nil {
					t.Fatal(err)
				}
				p.ResetDelta()
				var q Pair
				if _, err := q.ReadFrom(bytes.NewReader(encode(t, spare))); err != nil {
					t.Fatal(err)
				}
				var d Delta
				var buf bytes.Buffer
				var early, stashed bool // the overflow case reached them
				for step := range 40 {
					crossings := rng.IntN(4)
					ts = deltaWorkload(t, p, rng, ts, 1+rng.IntN(int(tc.keys)), crossings, tc.keys, &next)
					p.TakeDelta(&d)
					buf.Reset()
					if n, err := d.WriteTo(&buf); err != nil || n != int64(d.Len()) {
						t.Fatalf("WriteTo = %d, %v; Len %d", n, err, d.Len())
					}
					from, to := d.From(), d.To()
					if d.Seq() != uint32(step) {
						t.Fatalf("step %d: delta Seq %d", step, d.Seq())
					}
					if to != p.Stats().Rotations || from != q.Stats().Rotations {
						t.Fatalf("delta From %d To %d; pair at %d, replica at %d", from, to, p.Stats().Rotations, q.Stats().Rotations)
					}
					var rd Delta
					if _, err := rd.ReadFrom(bytes.NewReader(buf.Bytes())); err != nil || rd.Len() != d.Len() || rd.Words() != d.Words() ||
						rd.From() != d.From() || rd.To() != d.To() || rd.Seq() != d.Seq() {
						t.Fatalf("Delta.ReadFrom: %v; read %d bytes, %d words, from %d to %d seq %d; wrote %d, %d, %d, %d, %d",
							err, rd.Len(), rd.Words(), rd.From(), rd.To(), rd.Seq(), d.Len(), d.Words(), d.From(), d.To(), d.Seq())
					}
					if n, err := q.ApplyDelta(&buf); err != nil || n != int64(d.Len()) {
						t.Fatalf("seed %d step %d (%d crossings): ApplyDelta = %d, %v (delta %d bytes)", seed, step, crossings, n, err, d.Len())
					}
					if want, got := encode(t, p), encode(t, &q); !bytes.Equal(want, got) {
						t.Fatalf("seed %d step %d (%d crossings): replica differs from the original (%d words carried)", seed, step, crossings, d.Words())
					}
					st := q.Stats()
					if st != p.Stats() {
						t.Fatalf("seed %d step %d: stats differ: %+v, want %+v", seed, step, st, p.Stats())
					}
					early = early || st.EarlyRotations > 0
					stashed = stashed || st.Current.Stashed+st.Previous.Stashed > 0
				}
				if tc.name == "fingerprint-overflow" && (!early || !stashed) {
					t.Fatalf("overflow not exercised: early rotations %v, stash in use %v", early, stashed)
				}
				// The replica's tracking is empty after ApplyDelta: its own
				// delta carries no word (Plain carries all, always).
				q.TakeDelta(&d)
				if tc.o.Mode != Plain && d.Words() != 0 {
					t.Errorf("replica's own delta carries %d words after ApplyDelta", d.Words())
				}
			}
		})
	}
}

// emptyDelta takes p's delta into d and fails t unless it carries no
// words; what names the delta.
func emptyDelta(t *testing.T, p *Pair, d *Delta, what string) {
	t.Helper()
	p.TakeDelta(d)
	if d.Words() != 0 {
		t.Fatalf("%s carries %d words", what, d.Words())
	}
}

// TestDeltaTracksOnlyChanges: a delta carries the words that changed, not
// the words that were written and restored, nor the untouched ones; an
// empty interval gives an empty delta; ReadFrom and CopyTo leave nothing
// pending.
func TestDeltaTracksOnlyChanges(t *testing.T) {
	for _, mode := range []Mode{Counting, Fingerprint} {
		o := Options{ExpectedKeys: 100_000, FPRate: 0.001, Window: time.Hour, Mode: mode}
		p := mustNew(t, o)
		var d Delta
		emptyDelta(t, p, &d, fmt.Sprintf("%v: fresh pair's delta", mode))
		for i := range uint64(50_000) {
			p.TestAndAdd(testKey(1, i), epoch)
		}
		p.TakeDelta(&d)
		full := d.Words()
		emptyDelta(t, p, &d, fmt.Sprintf("%v: second delta with nothing in between", mode))
		for i := range uint64(100) {
			p.TestAndAdd(testKey(2, i), epoch)
		}
		p.TakeDelta(&d)
		// A new key writes one bucket (a few words); kicks move a few more.
		if d.Words() == 0 || d.Words() > 100*8 || full < 10_000 {
			t.Fatalf("%v: 100 new keys carried %d words (50,000 carried %d)", mode, d.Words(), full)
		}
		for _, dst := range []*Pair{p.Clone(), mustNew(t, o)} {
			if err := p.CopyTo(dst); err != nil {
				t.Fatal(err)
			}
			emptyDelta(t, dst, &d, fmt.Sprintf("%v: copy's delta", mode))
		}
		var q Pair
		if _, err := q.ReadFrom(bytes.NewReader(encode(t, p))); err != nil {
			t.Fatal(err)
		}
		emptyDelta(t, &q, &d, fmt.Sprintf("%v: decoded pair's delta", mode))
	}
}

// deltaPair returns a pair, a replica of its state as a base, and a delta
// of changes since that takes the replica to the pair's state.
func deltaPair(t testing.TB, tc deltaCase) (p, base *Pair, delta []byte) {
	t.Helper()
	rng := rand.New(rand.NewPCG(7, 7))
	p = mustNew(t, tc.o)
	var next uint64
	ts := deltaWorkload(t, p, rng, epoch, 300, 1, tc.keys, &next)
	base = p.Clone()
	p.ResetDelta()
	deltaWorkload(t, p, rng, ts, 200, 1, tc.keys, &next)
	var d Delta
	p.TakeDelta(&d)
	return p, base, bytes.Clone(d.Bytes())
}

// TestDeltaDamage: every single-byte change and every truncation of a delta
// is refused with a *CorruptError and leaves the pair as it was.
func TestDeltaDamage(t *testing.T) {
	for _, tc := range deltaCases() {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.ExpectedKeys = min(tc.o.ExpectedKeys, 200) // small deltas: every byte is tried
			tc.keys = 200
			p, base, data := deltaPair(t, tc)
			q := base.Clone()
			before := encode(t, q)
			flips := []byte{0x01, 0x80, 0xFF}
			if testing.Short() {
				flips = flips[:1]
			}
			for i := range data {
				for _, flip := range flips {
					bad := bytes.Clone(data)
					bad[i] ^= flip
					_, err := q.ApplyDelta(bytes.NewReader(bad))
					var ce *CorruptError
					if !errors.As(err, &ce) {
						t.Fatalf("byte %d ^ %#x: err = %v, want *CorruptError", i, flip, err)
					}
					var rd Delta
					if _, err := rd.ReadFrom(bytes.NewReader(bad)); !errors.As(err, &ce) || rd.Len() != 0 {
						t.Fatalf("byte %d ^ %#x: Delta.ReadFrom err = %v (len %d), want *CorruptError", i, flip, err, rd.Len())
					}
					if !bytes.Equal(encode(t, q), before) {
						t.Fatalf("byte %d ^ %#x: refused delta changed the pair", i, flip)
					}
				}
			}
			for n := range len(data) {
				_, err := q.ApplyDelta(bytes.NewReader(data[:n]))
				var ce *CorruptError
				if !errors.Is(err, ErrTruncated) || !errors.As(err, &ce) || ce.Offset != int64(n) {
					t.Fatalf("truncated to %d of %d bytes: err = %v", n, len(data), err)
				}
				var rd Delta
				if _, err := rd.ReadFrom(bytes.NewReader(data[:n])); !errors.Is(err, ErrTruncated) {
					t.Fatalf("truncated to %d of %d bytes: Delta.ReadFrom err = %v", n, len(data), err)
				}
				if !bytes.Equal(encode(t, q), before) {
					t.Fatalf("truncated delta changed the pair")
				}
			}
			// The intact delta reads back whole, and still applies.
			var rd Delta
			if n, err := rd.ReadFrom(bytes.NewReader(append(bytes.Clone(data), 0xAA))); err != nil || n != int64(len(data)) ||
				!bytes.Equal(rd.Bytes(), data) || rd.Len() != len(data) {
				t.Fatalf("Delta.ReadFrom = %d, %v; read back %d bytes of %d", n, err, rd.Len(), len(data))
			}
			if _, err := q.ApplyDelta(bytes.NewReader(rd.Bytes())); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(encode(t, q), encode(t, p)) {
				t.Fatal("intact delta did not give the original's state")
			}
		})
	}
}

// resealDelta recomputes both checksums of a delta after a deliberate edit,
// so that the field checks are what refuses it.
func resealDelta(b []byte) []byte {
	binary.LittleEndian.PutUint32(b[160:], crc32.Checksum(b[:160], castagnoli))
	binary.LittleEndian.PutUint32(b[len(b)-4:], crc32.Checksum(b[:len(b)-4], castagnoli))
	return b
}

// TestDeltaErrors: each kind of refusal names its cause; a delta for
// another pair or another state is ErrDeltaMismatch, not corruption.
func TestDeltaErrors(t *testing.T) {
	tc := deltaCases()[0] // counting
	p, base, data := deltaPair(t, tc)
	for _, c := range []struct {
		name string
		edit func([]byte) []byte
		want error
		what string // "" for ErrDeltaMismatch
	}{
		{"magic", func(b []byte) []byte { b[0] = 'X'; return b }, ErrInvalid, "delta magic"},
		{"version", func(b []byte) []byte { b[4] = 9; return b }, ErrVersion, "delta version"},
		{"header checksum", func(b []byte) []byte { b[64]++; return b }, ErrChecksum, "delta header"},
		{"body checksum", func(b []byte) []byte { b[deltaHeaderSize+1] ^= 2; return b }, ErrChecksum, "delta checksum"},
		{"mode", func(b []byte) []byte { b[6] = byte(Fingerprint); return resealDelta(b) }, ErrDeltaMismatch, ""},
		{"expected keys", func(b []byte) []byte { b[8]++; return resealDelta(b) }, ErrDeltaMismatch, ""},
		{"fp rate", func(b []byte) []byte { b[16]++; return resealDelta(b) }, ErrDeltaMismatch, ""},
		{"window", func(b []byte) []byte { b[25]++; return resealDelta(b) }, ErrDeltaMismatch, ""},
		{"from", func(b []byte) []byte { b[48]++; return resealDelta(b) }, ErrDeltaMismatch, ""},
		{"sequence", func(b []byte) []byte { b[44]++; return resealDelta(b) }, ErrDeltaMismatch, ""},
		{"flags", func(b []byte) []byte { b[7] |= 4; return resealDelta(b) }, ErrInvalid, "delta flags"},
		{"window start", func(b []byte) []byte { b[64]++; return resealDelta(b) }, ErrInvalid, "delta window start"},
		{"counts", func(b []byte) []byte { b[80]++; return resealDelta(b) }, ErrInvalid, "delta current generation"},
		{"word count", func(b []byte) []byte { b[136+7] = 1; return resealDelta(b) }, ErrInvalid, "delta word count"},
		{"body length", func(b []byte) []byte { b[159] = 1; return resealDelta(b) }, ErrInvalid, "delta body length"},
	} {
		q := base.Clone()
		before := encode(t, q)
		_, err := q.ApplyDelta(bytes.NewReader(c.edit(bytes.Clone(data))))
		var ce *CorruptError
		switch {
		case !errors.Is(err, c.want):
			t.Errorf("%s: err = %v, want %v", c.name, err, c.want)
		case c.what == "" && errors.As(err, &ce):
			t.Errorf("%s: mismatch reported as corruption: %v", c.name, err)
		case c.what != "" && (!errors.As(err, &ce) || ce.What != c.what):
			t.Errorf("%s: err = %v, want a *CorruptError in %q", c.name, err, c.what)
		}
		if !bytes.Equal(encode(t, q), before) {
			t.Errorf("%s: refused delta changed the pair", c.name)
		}
		// Delta.ReadFrom, which has no pair, refuses what needs none.
		switch c.what {
		case "delta magic", "delta version", "delta header", "delta checksum", "delta word count", "delta body length":
			var rd Delta
			if _, err := rd.ReadFrom(bytes.NewReader(c.edit(bytes.Clone(data)))); !errors.Is(err, c.want) || !errors.As(err, &ce) || ce.What != c.what {
				t.Errorf("%s: Delta.ReadFrom err = %v, want %v in %q", c.name, err, c.want, c.what)
			}
		}
	}
	// Applied twice: the second time the pair is no longer at From (the
	// delta crosses a window boundary).
	q := base.Clone()
	if _, err := q.ApplyDelta(bytes.NewReader(data)); err != nil {
		t.Fatal(err)
	}
	if _, err := q.ApplyDelta(bytes.NewReader(data)); !errors.Is(err, ErrDeltaMismatch) {
		t.Errorf("applied twice: err = %v", err)
	}
	// A lost delta, or one applied twice, in one window (same From): the
	// sequence refuses them.
	p2 := base.Clone()
	q2 := base.Clone()
	var d1, d2 Delta
	p2.TestAndAdd(testKey(5, 1), time.Time{})
	p2.TakeDelta(&d1)
	p2.TestAndAdd(testKey(5, 2), time.Time{})
	p2.TakeDelta(&d2)
	if d1.From() != d2.From() || d1.Seq() != 0 || d2.Seq() != 1 {
		t.Fatalf("deltas in one window: From %d, %d; Seq %d, %d", d1.From(), d2.From(), d1.Seq(), d2.Seq())
	}
	if _, err := q2.ApplyDelta(bytes.NewReader(d2.Bytes())); !errors.Is(err, ErrDeltaMismatch) {
		t.Errorf("second delta without the first: err = %v", err)
	}
	if _, err := q2.ApplyDelta(bytes.NewReader(d1.Bytes())); err != nil {
		t.Fatal(err)
	}
	if _, err := q2.ApplyDelta(bytes.NewReader(d1.Bytes())); !errors.Is(err, ErrDeltaMismatch) {
		t.Errorf("first delta twice: err = %v", err)
	}
	if _, err := q2.ApplyDelta(bytes.NewReader(d2.Bytes())); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(encode(t, q2), encode(t, p2)) {
		t.Error("chain of two deltas did not give the original's state")
	}
	// Another mode's pair, a zero pair.
	fp := mustNew(t, Options{ExpectedKeys: tc.o.ExpectedKeys, FPRate: tc.o.FPRate, Window: tc.o.Window, Mode: Fingerprint})
	if _, err := fp.ApplyDelta(bytes.NewReader(data)); !errors.Is(err, ErrDeltaMismatch) {
		t.Errorf("fingerprint pair: err = %v", err)
	}
	if _, err := new(Pair).ApplyDelta(bytes.NewReader(data)); !errors.Is(err, ErrDeltaMismatch) {
		t.Errorf("zero pair: err = %v", err)
	}
	// Read and write errors come back wrapped.
	boom := errors.New("disk full")
	var d Delta
	if _, err := d.WriteTo(&bytes.Buffer{}); err == nil {
		t.Error("empty Delta wrote something")
	}
	p.TakeDelta(&d)
	if _, err := d.WriteTo(failingWriter{boom}); !errors.Is(err, boom) {
		t.Errorf("failing writer: err = %v", err)
	}
	if _, err := base.ApplyDelta(failingReader{boom}); !errors.Is(err, boom) {
		t.Errorf("failing reader: err = %v", err)
	}
}

// TestDeltaNoAllocations: at steady state TakeDelta into a reused Delta and
// ApplyDelta of deltas no larger than before allocate nothing.
func TestDeltaNoAllocations(t *testing.T) {
	for _, mode := range []Mode{Counting, Fingerprint} {
		o := Options{ExpectedKeys: 10_000, FPRate: 0.001, Window: time.Hour, Mode: mode}
		p, q := mustNew(t, o), mustNew(t, o)
		var d Delta
		var r bytes.Reader
		i := uint64(0)
		round := func() {
			for range 100 {
				p.TestAndAdd(testKey(1, i), epoch)
				i++
			}
			p.TakeDelta(&d)
			r.Reset(d.Bytes())
			if _, err := q.ApplyDelta(&r); err != nil {
				t.Fatal(err)
			}
		}
		for range 10 {
			round() // grow the buffers
		}
		if a := testing.AllocsPerRun(20, round); a != 0 {
			t.Errorf("%v: %.1f allocations per TakeDelta+ApplyDelta", mode, a)
		}
	}
}

// FuzzApplyDelta: any input is either applied (then the pair's snapshot
// decodes and the pair carries on) or refused, leaving the pair as it was.
// Never a panic. With reseal set, the input's checksums are recomputed
// first, so that the fuzzer gets past them to the field checks.
func FuzzApplyDelta(f *testing.F) {
	for _, tc := range deltaCases() {
		tc.o.ExpectedKeys, tc.keys = min(tc.o.ExpectedKeys, 100), 100
		_, _, data := deltaPair(f, tc)
		f.Add(byte(tc.o.Mode), false, data)
		f.Add(byte(tc.o.Mode), true, data)
		f.Add(byte(tc.o.Mode), false, data[:deltaHeaderSize])
		f.Add(byte(tc.o.Mode), false, data[:len(data)/2])
	}
	bases := map[Mode]*Pair{}
	for _, tc := range deltaCases()[:3] {
		tc.o.ExpectedKeys, tc.keys = 100, 100
		_, base, _ := deltaPair(f, tc)
		bases[tc.o.Mode] = base
	}
	f.Fuzz(func(t *testing.T, mode byte, reseal bool, data []byte) {
		base, ok := bases[Mode(mode)]
		if !ok {
			return
		}
		if reseal && len(data) >= deltaHeaderSize+4 {
			data = resealDelta(bytes.Clone(data))
		}
		var rd Delta
		_, rerr := rd.ReadFrom(bytes.NewReader(data))
		q := base.Clone()
		before := encode(t, q)
		n, err := q.ApplyDelta(bytes.NewReader(data))
		if err == nil && (rerr != nil || int64(rd.Len()) != n) {
			t.Fatalf("applied delta of %d bytes; Delta.ReadFrom read %d: %v", n, rd.Len(), rerr)
		}
		if err != nil {
			if !bytes.Equal(encode(t, q), before) {
				t.Fatal("refused delta changed the pair")
			}
			return
		}
		if n > int64(len(data)) {
			t.Fatalf("read %d of %d bytes", n, len(data))
		}
		// What was accepted is a state the pair can carry on from.
		var r Pair
		if _, err := r.ReadFrom(bytes.NewReader(encode(t, q))); err != nil {
			t.Fatalf("accepted delta made a pair whose snapshot is refused: %v", err)
		}
		for i := range uint64(50) {
			q.TestAndAdd(testKey(3, i), time.Time{})
			_, _ = q.Remove(testKey(3, i/2), time.Time{}) // Plain refuses, as it should
		}
	})
}

func ExamplePair_TakeDelta() {
	o := Options{ExpectedKeys: 1_000_000, FPRate: 0.001, Window: time.Hour, Mode: Fingerprint}
	p, _ := New(o)
	// A base snapshot, and tracking from the same instant.
	var base bytes.Buffer
	p.WriteTo(&base)
	p.ResetDelta()
	for i := range 1000 {
		p.TestAndAdd([]byte(fmt.Sprint("key-", i)), time.Unix(1_700_000_000, 0))
	}
	var d Delta
	p.TakeDelta(&d)
	var log bytes.Buffer
	d.WriteTo(&log)
	// Restore: the base, then every delta in order.
	var q Pair
	q.ReadFrom(&base)
	if _, err := q.ApplyDelta(&log); err != nil {
		fmt.Println(err)
	}
	fmt.Println(q.Test([]byte("key-7")), d.Words() < 3000)
	// Output: true true
}

// deltaBenchSizes are the expected keys per partition of the delta
// benchmarks: the state grows 16× across them.
var deltaBenchSizes = []uint64{1 << 20, 4 << 20, 16 << 20}

// steadyPair is a pair at a point of its steady state, for the delta
// benchmarks.
type steadyPair struct {
	p    *Pair
	ts   time.Time
	step time.Duration
	next uint64 // the next fresh key
}

// steadyPairs memoises the filled pairs: filling 16M keys takes seconds.
var steadyPairs = map[[2]uint64]*steadyPair{}

// deltaSteady returns a fingerprint pair of the stage's default options
// (ε = 1e-6, 1 h window) sized for n keys, at steady state with time
// advancing so that each window holds n keys: the previous generation
// holds n keys and the current one fill% of n. Callers clone it.
func deltaSteady(b *testing.B, n, fill uint64) *steadyPair {
	b.Helper()
	if s, ok := steadyPairs[[2]uint64{n, fill}]; ok {
		return s
	}
	o := Options{ExpectedKeys: n, FPRate: largeFPRateFP, Window: time.Hour, Mode: Fingerprint}
	s := &steadyPair{p: mustNew(b, o), ts: epoch, step: time.Hour / time.Duration(n)}
	var buf [16]byte
	for s.next < n+n*fill/100 {
		s.p.TestAndAdd(freshKey(&buf, s.next), s.ts)
		s.next++
		s.ts = s.ts.Add(s.step)
	}
	s.p.ResetDelta()
	steadyPairs[[2]uint64{n, fill}] = s
	return s
}

// BenchmarkDeltaBytesPerKey: delta bytes per new key at steady state, 1000
// new keys per delta, for pairs of 1M, 4M and 16M keys (fingerprint mode,
// default options), beside a full snapshot's bytes per key for the same
// interval. Every delta starts from the same state (a copy, outside the
// timer), so the figure does not depend on b.N: mid-window (the current
// generation half full) and late in the window (90% full: more
// displacements per insert, each a word more). The figure should not grow
// with the state:
//
//	go test ./rotation -run '^$' -bench DeltaBytesPerKey -benchtime=20x
func BenchmarkDeltaBytesPerKey(b *testing.B) {
	const perDelta = 1000
	for _, n := range deltaBenchSizes {
		for _, fill := range []uint64{50, 90} {
			b.Run(fmt.Sprintf("keys=%dM/fill=%d%%", n>>20, fill), func(b *testing.B) {
				s := deltaSteady(b, n, fill)
				p := s.p.Clone()
				var d Delta
				var buf [16]byte
				var total, words int
				b.ResetTimer()
				for i := range b.N {
					b.StopTimer()
					if err := s.p.CopyTo(p); err != nil {
						b.Fatal(err)
					}
					b.StartTimer()
					ts := s.ts
					for j := range uint64(perDelta) {
						p.TestAndAdd(freshKey(&buf, s.next+uint64(i)*perDelta+j), ts)
						ts = ts.Add(s.step)
					}
					p.TakeDelta(&d)
					total += d.Len()
					words += d.Words()
				}
				b.StopTimer()
				keys := float64(b.N * perDelta)
				b.ReportMetric(float64(total)/keys, "bytes/key")
				b.ReportMetric(float64(words)/keys, "words/key")
				b.ReportMetric(float64(p.SizeBytes()+headerSize)/perDelta, "snapshot-bytes/key")
			})
		}
	}
}

// BenchmarkTakeDelta and BenchmarkApplyDelta time one delta of 1000 new
// keys on pairs of 1M, 4M and 16M keys (the bitmap scan grows with the
// pair, the words with the keys):
//
//	go test ./rotation -run '^$' -bench 'TakeDelta|ApplyDelta' -benchtime=200x
func BenchmarkTakeDelta(b *testing.B) { benchDelta(b, false) }

func BenchmarkApplyDelta(b *testing.B) { benchDelta(b, true) }

func benchDelta(b *testing.B, apply bool) {
	const perDelta = 1000
	for _, n := range deltaBenchSizes {
		b.Run(fmt.Sprintf("keys=%dM", n>>20), func(b *testing.B) {
			s := deltaSteady(b, n, 50)
			p, q := s.p.Clone(), s.p.Clone()
			ts, step, next := s.ts, s.step, s.next
			var d Delta
			var buf [16]byte
			var r bytes.Reader
			b.ResetTimer()
			for range b.N {
				b.StopTimer()
				for range perDelta {
					p.TestAndAdd(freshKey(&buf, next), ts)
					next++
					ts = ts.Add(step)
				}
				if apply {
					p.TakeDelta(&d)
					r.Reset(d.Bytes())
					b.StartTimer()
					if _, err := q.ApplyDelta(&r); err != nil {
						b.Fatal(err)
					}
					continue
				}
				b.StartTimer()
				p.TakeDelta(&d)
			}
		})
	}
}

// TestDeltaWordsCountsChanges: DeltaWords tells, before TakeDelta, how many
// words the delta carries, through rotations that clear a generation, and
// 0 after it.
func TestDeltaWordsCountsChanges(t *testing.T) {
	for _, mode := range []Mode{Counting, Fingerprint} {
		t.Run(mode.String(), func(t *testing.T) {
			p, err := New(Options{ExpectedKeys: 20000, FPRate: 1e-4, Window: time.Hour, Mode: mode})
			if err != nil {
				t.Fatal(err)
			}
			t0 := time.Unix(0, 0).Add(10 * time.Hour)
			var d Delta
			for round, keys := range []int{0, 1, 700, 5000, 3000} {
				ts := t0.Add(time.Duration(round) * 40 * time.Minute) // rotates every other round or so
				for i := range keys {
					p.TestAndAdd(fmt.Appendf(nil, "r%d-k%d", round, i), ts)
				}
				before := p.DeltaWords()
				p.TakeDelta(&d)
				if before != d.Words() {
					t.Errorf("round %d: DeltaWords %d before a delta of %d words", round, before, d.Words())
				}
				if n := p.DeltaWords(); n != 0 {
					t.Errorf("round %d: DeltaWords %d after TakeDelta, want 0", round, n)
				}
			}
		})
	}
}
