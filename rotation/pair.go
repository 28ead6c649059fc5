package rotation

import (
	"fmt"
	"math"
	"time"

	"github.com/cespare/xxhash/v2"
)

// Pair is a current and a previous generation of filters that rotate on
// event-time window boundaries. See the package documentation for what it
// guarantees. A Pair is not safe for concurrent use: give each partition its
// own Pair and touch it from one goroutine only (use CopyTo to hand a copy to
// another goroutine).
type Pair struct {
	opts      Options
	window    int64 // window length in nanoseconds
	start     int64 // start of the current window, Unix nanoseconds
	started   bool  // a record has set the current window
	rotations uint64

	// Geometry shared by both generations: counters (counting) or bits (plain), and k.
	m uint64
	k int

	// gens holds both generations and does what every mode does alike.
	// Exactly one of cnt, fp and pl is set, to the same value: the
	// per-record path (Locate, TestAndAdd, TestAndAddAt, Test, Remove)
	// calls the concrete type, so that it pays no indirect call and its
	// probes stay on the stack.
	gens generations
	cnt  *counting    // Counting mode
	fp   *fingerprint // Fingerprint mode
	pl   *plainPair   // Plain mode

	sink uint64 // where Locate folds its loads (where it has no prefetch instruction); meaningless

	// Change tracking for TakeDelta (delta.go), besides the per-word dirty
	// bitmaps of the filters: the swap-and-clear operations of generations
	// since the last delta (a clear of both counts two), and the rotations
	// of the state the last delta left behind.
	deltaSwaps uint64
	deltaFrom  uint64
	deltaSeq   uint32 // deltas taken (or applied) since the base state
	applyBuf   []byte // ApplyDelta's reusable read buffer
}

// generations is what a mode does to its two generations, apart from
// testing and adding keys. g is a logical generation: 0 current, 1
// previous. counting.go, fingerprint.go and plain.go implement it.
type generations interface {
	rotate()   // the current generation becomes previous; the previous one, cleared, current
	clearAll() // both generations empty
	reset()    // clearAll, and zero cumulative counts (Pair.Reset)
	copyFrom(src generations)

	// A generation's snapshot data, as words (snapshot.go, delta.go).
	genWords() uint64
	gather(g int, i uint64, dst []uint64) int // from word i on into dst; how many
	scatter(g int, i uint64, src []uint64) int
	word(g int, i uint64) uint64
	setWord(g int, i, v uint64)
	lastWordProblem(v uint64) string // why v cannot be a generation's last word, or ""

	// Change tracking (delta.go); nil when every word is carried.
	tracking() *dirtySet
	dirtyMap(g int) []uint64 // with pending marks folded in

	// The two counts per generation of snapshot and delta headers.
	counts() (a, b [2]uint64)
	setCounts(a, b [2]uint64)
	stats(g int) FilterStats
	validate() error // of decoded data, against the counts
}

// byGeneration reorders per-generation values x of a pair whose current
// generation is cur: physical to logical (current first) and back.
func byGeneration(x [2]uint64, cur int) [2]uint64 { return [2]uint64{x[cur], x[1-cur]} }

// New validates o and allocates both generations.
func New(o Options) (*Pair, error) {
	o, err := o.normalize()
	if err != nil {
		return nil, err
	}
	m, k := geometry(o)
	return newPair(o, m, k), nil
}

// geometry returns the counters (or bits) of one generation, and k. A test
// checks both generations, so each is sized for the rate p with
// 1-(1-p)² = FPRate (p ≈ FPRate/2): with ExpectedKeys keys in each, a key
// never added is reported seen with probability at most FPRate.
func geometry(o Options) (m uint64, k int) {
	p := generationFPRate(o.FPRate)
	switch o.Mode {
	case Plain:
		return plainGeometry(o.ExpectedKeys, p)
	case Fingerprint:
		buckets, f := fingerprintGeometry(o.ExpectedKeys, p)
		return buckets * slotsPerBucket, f
	}
	blocks, k := countingGeometry(o.ExpectedKeys, p)
	return blocks * blockCounters, k
}

// generationFPRate is the per-generation rate p with 1-(1-p)² = pairRate.
func generationFPRate(pairRate float64) float64 {
	return -math.Expm1(0.5 * math.Log1p(-pairRate))
}

// newPair allocates a pair of normalised options o and the given geometry.
func newPair(o Options, m uint64, k int) *Pair {
	p := &Pair{opts: o, window: int64(o.Window), m: m, k: k}
	switch o.Mode {
	case Plain:
		p.pl = newPlainPair(m, k)
		p.gens = p.pl
	case Fingerprint:
		// A pair of another release's sizing is only ever read (a legacy
		// pair): it stays in the stream's layout, as it was written.
		p.fp = newFingerprint(m/slotsPerBucket, k, !o.otherSizing)
		p.gens = p.fp
	default:
		p.cnt = newCounting(m/blockCounters, k)
		p.gens = p.cnt
	}
	return p
}

// TestAndAdd moves time forward to ts (never backwards), reports whether key
// is in either generation, and adds it to the current generation when it is
// not. A key already seen is left as it is: duplicates neither refresh nor
// re-count it, so the pair holds each key from its first occurrence, and one
// Remove undoes one TestAndAdd. A zero ts leaves time where it is.
func (p *Pair) TestAndAdd(key []byte, ts time.Time) (seen bool) {
	p.advance(ts)
	if p.fp != nil {
		var pr fprobe
		p.fp.locate(xxhash.Sum64(key), &pr)
		return p.testAndAddFingerprint(&pr)
	}
	if p.cnt == nil {
		return p.pl.testAndAdd(key)
	}
	var pr probe
	p.cnt.locate(xxhash.Sum64(key), &pr)
	return p.cnt.testAndAdd(&pr)
}

func (p *Pair) testAndAddFingerprint(pr *fprobe) bool {
	if !p.fp.sorted {
		p.fp.settle()
	}
	seen, full := p.fp.testAndAdd(pr)
	if full {
		p.overflow()
	}
	return seen
}

// overflow rotates the fingerprint pair early: the current generation's
// buckets and stash are full, far past ExpectedKeys, so the pair drops its
// previous generation (counted as forgotten: those keys will pass as new
// again) rather than refuse a key, which would drop a record. Time and the
// window start are unchanged; the next window boundary rotates as usual.
func (p *Pair) overflow() {
	c := p.fp
	c.early++
	c.forgotten += c.held[1-c.cur]
	c.rotate()
	p.deltaSwaps++
}

// Remove moves time forward to ts, then removes key from each generation
// that holds it (a key that does not test present is left alone, so a
// retraction of a key never added removes nothing). It reports whether
// anything was removed. In Plain mode it changes nothing and returns
// ErrRemoveUnsupported.
func (p *Pair) Remove(key []byte, ts time.Time) (removed bool, err error) {
	if p.pl != nil {
		return false, ErrRemoveUnsupported
	}
	p.advance(ts)
	if p.fp != nil {
		p.fp.settle()
		var pr fprobe
		p.fp.locate(xxhash.Sum64(key), &pr)
		for g := range 2 {
			if p.fp.contains(g, &pr) {
				p.fp.remove(g, &pr)
				removed = true
			}
		}
		return removed, nil
	}
	var pr probe
	p.cnt.locate(xxhash.Sum64(key), &pr)
	for g := range 2 {
		if p.cnt.contains(g, &pr) {
			p.cnt.remove(g, &pr)
			removed = true
		}
	}
	return removed, nil
}

// Test reports whether key is in either generation, without changing
// anything (not even time).
func (p *Pair) Test(key []byte) bool {
	if p.fp != nil {
		var pr fprobe
		p.fp.locate(xxhash.Sum64(key), &pr)
		return p.fp.contains(0, &pr) || p.fp.contains(1, &pr)
	}
	if p.cnt == nil {
		return p.pl.test(key)
	}
	var pr probe
	p.cnt.locate(xxhash.Sum64(key), &pr)
	return p.cnt.contains(0, &pr) || p.cnt.contains(1, &pr)
}

// Bounds on event time, in Unix nanoseconds; keeping well inside int64 means
// window arithmetic cannot overflow.
const (
	minNanos = math.MinInt64 / 4
	maxNanos = math.MaxInt64 / 4
)

// advance moves the current window to the one holding ts. One window
// forward rotates (previous is dropped, current becomes previous, the
// dropped memory is cleared and becomes current); two or more clear both.
// Earlier timestamps (late records) and a zero ts change nothing.
func (p *Pair) advance(ts time.Time) {
	if ts.IsZero() {
		return
	}
	t := unixNanos(ts)
	if uint64(t-p.start) < uint64(p.window) && p.started {
		return // the common case: inside the current window
	}
	w := t / p.window
	if t%p.window < 0 {
		w--
	}
	w *= p.window
	switch {
	case !p.started:
		p.start, p.started = w, true
		return
	case w <= p.start:
		return
	case w-p.start == p.window:
		p.rotate()
	default:
		p.clearBoth()
	}
	p.start = w
	p.rotations++
}

// unixNanos is ts in Unix nanoseconds, clamped to [minNanos, maxNanos].
func unixNanos(ts time.Time) int64 {
	switch s := ts.Unix(); {
	case s < minNanos/1_000_000_000:
		return minNanos
	case s > maxNanos/1_000_000_000:
		return maxNanos
	default:
		return s*1_000_000_000 + int64(ts.Nanosecond())
	}
}

func (p *Pair) rotate() {
	p.deltaSwaps++
	p.gens.rotate()
}

func (p *Pair) clearBoth() {
	p.deltaSwaps += 2
	p.gens.clearAll()
}

// Reset returns the pair to the state New gives it: both generations
// empty, no window started, no rotations counted. It writes every word of
// both generations, so it also commits memory the operating system has
// not yet backed: a pair that will receive a CopyTo on a latency-sensitive
// path can be Reset beforehand, elsewhere, so that the copy does not take
// the page faults of fresh memory.
func (p *Pair) Reset() {
	p.deltaSwaps += 2
	p.gens.reset()
	p.start, p.started, p.rotations = 0, false, 0
}

// Options returns the options the pair was built (or decoded) with; Mode is
// never zero.
func (p *Pair) Options() Options { return p.opts }

// SizeBytes is the memory of both generations' filter data and, in the
// modes whose deltas carry only what changed, of the change tracking
// (1/64 of the filters' memory and a 4 KiB ring).
func (p *Pair) SizeBytes() int {
	if !p.initialised() {
		return 0
	}
	filters := pairBytes(p.opts.Mode, p.m, p.k)
	if p.fp != nil {
		filters = p.fp.tableBytes() // a raw table is larger
	}
	return int(filters + trackingBytes(p.opts.Mode, p.m, p.k))
}

// CopyTo copies the whole state of p into dst without allocating. dst must
// have the same options and geometry (built by New with the same Options, or
// by Clone); otherwise it returns an error wrapping ErrMismatch. A zero dst
// is initialised, which allocates. dst's change tracking (TakeDelta) starts
// empty; p's is left as it is (see ResetDelta).
func (p *Pair) CopyTo(dst *Pair) error {
	if !dst.initialised() {
		*dst = *newPair(p.opts, p.m, p.k)
	}
	if dst.opts != p.opts || dst.m != p.m || dst.k != p.k {
		return fmt.Errorf("copy pair: %w: have %+v (m=%d k=%d), destination %+v (m=%d k=%d)",
			ErrMismatch, p.opts, p.m, p.k, dst.opts, dst.m, dst.k)
	}
	if p.fp != nil && !p.opts.otherSizing {
		p.fp.settle() // so that the copy is laid out as the pair New built
	}
	dst.start, dst.started, dst.rotations = p.start, p.started, p.rotations
	dst.deltaSwaps, dst.deltaFrom, dst.deltaSeq = 0, p.rotations, 0 // dst's copies clear its dirty bitmaps
	dst.gens.copyFrom(p.gens)
	return nil
}

// Clone returns a deep copy of p.
func (p *Pair) Clone() *Pair {
	var c Pair
	if !p.initialised() {
		return &c
	}
	_ = p.CopyTo(&c) // cannot fail: c is zero, so it takes p's geometry
	return &c
}

// initialised reports whether p has filters (New, Clone or ReadFrom made it).
func (p *Pair) initialised() bool { return p.gens != nil }
