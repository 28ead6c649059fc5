package rotation

import (
	"encoding/binary"
	"math/bits"
	"unsafe"
)

// fingerprint holds both generations of the fingerprint pair: cuckoo filters
// (partial-key cuckoo hashing, Fan et al. 2014) with 4 slots per bucket and
// f-bit fingerprints, f even, 2 ≤ f ≤ 32.
//
// A key has a fingerprint fp (f bits of its hash, never 0: 0 marks an empty
// slot) and two candidate buckets i1 (from the hash) and i2 = c(fp) - i1 mod
// N, so that either bucket and fp give the other: the involution i ↦ c - i
// works for any bucket count N, not only powers of two. Slots are packed
// f bits apiece; a generation's bucket is 4f bits = f/2 bytes, byte-aligned
// because f is even. The two generations are interleaved like the counting
// filter's: bucket i of generation g is bytes [(2i+g)·f/2, (2i+g+1)·f/2), so
// a test of both generations touches two places (i1 and i2), not four.
//
// An insert that finds both buckets full evicts a resident fingerprint to
// its other bucket, up to maxKicks times. When that fails, the fingerprint
// left without a place is kept exactly in the generation's stash (keyed by
// its lower candidate bucket and fp), so no key is lost; when a stash
// reaches its capacity the pair rotates early (see Pair.overflow).
type fingerprint struct {
	words   []uint64 // backing store of tab (8-byte aligned, for adviseHuge)
	tab     []byte   // packed slots, plus padding for 8-byte loads and prefetches
	buckets uint64
	f       uint   // fingerprint bits
	mask    uint64 // 1<<f - 1
	bb      uint64 // bytes per generation bucket: f/2
	// A bucket is read as two halves of two slots (2f bits each, at most
	// 64): the second half starts at byte half2 and bit shift2 of it.
	// ones2 has the low bit of each slot of a half set, highs2 the high bit.
	ones2, highs2, mask2 uint64
	half2, shift2        uint64
	// Both generations of a bucket (f bytes) are four such halves; half h
	// starts at byte hb[h] and bit hs[h] of it.
	hb, hs   [4]uint64
	cur      int
	held     [2]uint64 // per generation: fingerprints held, in slots and stash
	stash    [2]map[stashKey]uint32
	stashed  [2]uint64 // per generation: stash entries, with multiplicity
	stashCap uint64

	refused   uint64 // inserts the buckets refused (fingerprint stashed), cumulative
	early     uint64 // early rotations because a stash was full, cumulative
	forgotten uint64 // fingerprints dropped by early rotations, cumulative

	badPad bool // a decoded generation had non-zero padding (see streamBytes)

	// dirty marks, per generation, the words of its snapshot stream
	// (gather) every slot write since the last TakeDelta changed; a clear of
	// the generation clears its marks too (delta.go).
	dirty dirtySet
}

// fprobe is where a key lives in the fingerprint pair.
type fprobe struct {
	i1, i2 uint64
	fp     uint64
}

// stashKey identifies a stashed fingerprint: its lower candidate bucket and fp.
type stashKey struct {
	bucket uint64
	fp     uint64
}

const (
	slotsPerBucket = 4
	maxKicks       = 500
	// tabPad keeps an 8-byte load of the last slot and a two-line prefetch
	// of the last bucket inside the allocation.
	tabPad = 8 + 2*64
)

// stashCapacity is how many refused fingerprints a generation keeps before
// the pair rotates early: enough to absorb the rare refusals near the design
// load, small next to the filter.
func stashCapacity(buckets uint64) uint64 { return 64 + buckets/256 }

func newFingerprint(buckets uint64, f int) *fingerprint {
	bb := uint64(f) / 2
	n := 2*buckets*bb + tabPad
	words := make([]uint64, (n+7)/8)
	adviseHuge(words)
	c := &fingerprint{
		words: words, tab: unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), len(words)*8),
		buckets: buckets, f: uint(f), mask: 1<<uint(f) - 1, bb: bb,
		stashCap: stashCapacity(buckets),
		ones2:    1 | 1<<uint(f), half2: uint64(f) / 4, shift2: uint64(2*f) % 8,
	}
	c.highs2 = c.ones2 << (uint(f) - 1)
	c.mask2 = 1<<(2*uint(f)) - 1
	for h := range uint64(4) {
		c.hb[h], c.hs[h] = h*2*uint64(f)/8, h*2*uint64(f)%8
	}
	for g := range 2 {
		c.stash[g] = make(map[stashKey]uint32, c.stashCap)
	}
	c.dirty = newDirtySet(c.genWords(), uint64(f))
	return c
}

// alt is the other candidate bucket of fp in bucket i: c(fp) - i mod N.
func (c *fingerprint) alt(i, fp uint64) uint64 {
	h, _ := bits.Mul64(fp*golden, c.buckets)
	j := h - i
	if h < i {
		j += c.buckets
	}
	return j
}

// locate computes the probe of a 64-bit key hash h: the bucket from its high
// bits (multiply-high), the fingerprint from its low f bits.
func (c *fingerprint) locate(h uint64, pr *fprobe) {
	pr.i1, _ = bits.Mul64(h, c.buckets)
	pr.fp = h & c.mask
	if pr.fp == 0 {
		pr.fp = 1
	}
	pr.i2 = c.alt(pr.i1, pr.fp)
}

// slot index of slot j of bucket i in generation g.
func (c *fingerprint) slotIndex(g int, i uint64) uint64 {
	return (2*i + uint64(g)) * slotsPerBucket
}

func (c *fingerprint) slot(s uint64) uint64 {
	bit := s * uint64(c.f)
	return binary.LittleEndian.Uint64(c.tab[bit>>3:]) >> (bit & 7) & c.mask
}

// setSlot writes slot s. Every change of the table is followed by a
// dirty.markSlot of it, for the next delta (kept apart so that setSlot
// stays small enough to inline).
func (c *fingerprint) setSlot(s, v uint64) {
	bit := s * uint64(c.f)
	w := c.tab[bit>>3:]
	sh := bit & 7
	binary.LittleEndian.PutUint64(w, binary.LittleEndian.Uint64(w)&^(c.mask<<sh)|v<<sh)
}

// find returns the slot of bucket i of generation g holding fp.
func (c *fingerprint) find(g int, i, fp uint64) (uint64, bool) {
	s := c.slotIndex(g, i)
	for j := range uint64(slotsPerBucket) {
		if c.slot(s+j) == fp {
			return s + j, true
		}
	}
	return 0, false
}

func (c *fingerprint) stashKeyOf(pr *fprobe) stashKey {
	return stashKey{bucket: min(pr.i1, pr.i2), fp: pr.fp}
}

// holds reports whether bucket i of generation g holds fp, comparing each
// half's two slots at once: y has a zero slot exactly where the bucket holds
// fp, and (y - ones) &^ y has a slot's high bit set if and only if some
// slot of y is zero (a borrow only runs upwards from a zero slot).
func (c *fingerprint) holds(g int, i, fp uint64) bool {
	o := (2*i + uint64(g)) * c.bb
	lo := binary.LittleEndian.Uint64(c.tab[o:]) & c.mask2
	hi := binary.LittleEndian.Uint64(c.tab[o+c.half2:]) >> c.shift2 & c.mask2
	rep := fp * c.ones2
	y, z := lo^rep, hi^rep
	return ((y-c.ones2)&^y|(z-c.ones2)&^z)&c.highs2 != 0
}

// eitherHolds is non-zero when either generation's bucket i holds fp: the
// check of holds over all four halves of both generations, without a branch.
func (c *fingerprint) eitherHolds(i, fp uint64) uint64 {
	t := c.tab[2*i*c.bb:]
	m, one, rep := c.mask2, c.ones2, fp*c.ones2
	y0 := binary.LittleEndian.Uint64(t)&m ^ rep
	y1 := binary.LittleEndian.Uint64(t[c.hb[1]:])>>c.hs[1]&m ^ rep
	y2 := binary.LittleEndian.Uint64(t[c.hb[2]:])>>c.hs[2]&m ^ rep
	y3 := binary.LittleEndian.Uint64(t[c.hb[3]:])>>c.hs[3]&m ^ rep
	return ((y0-one)&^y0 | (y1-one)&^y1 | (y2-one)&^y2 | (y3-one)&^y3) & c.highs2
}

// contains reports whether generation g holds the probe's fingerprint in
// either candidate bucket or in its stash.
func (c *fingerprint) contains(g int, pr *fprobe) bool {
	if c.holds(g, pr.i1, pr.fp) || c.holds(g, pr.i2, pr.fp) {
		return true
	}
	return c.stashed[g] > 0 && c.stash[g][c.stashKeyOf(pr)] > 0
}

// testAndAdd reports whether either generation holds the probe and, if
// neither does, adds it to the current one. full reports that the add
// filled the current generation's stash: the caller must rotate early.
// The four buckets are all read before any branch on them, so that the
// misses of both candidate places overlap.
func (c *fingerprint) testAndAdd(pr *fprobe) (seen, full bool) {
	cur, prev := c.cur, 1-c.cur
	if c.eitherHolds(pr.i1, pr.fp)|c.eitherHolds(pr.i2, pr.fp) != 0 {
		return true, false
	}
	if c.stashed[cur]|c.stashed[prev] != 0 && (c.contains(cur, pr) || c.contains(prev, pr)) {
		return true, false
	}
	return false, c.add(cur, pr)
}

// place puts fp in the first free slot of bucket i of generation g. The
// lowest slot marked by the zero test of holds is exactly the first empty
// one; a half has two slots, so its high bit says which.
func (c *fingerprint) place(g int, i, fp uint64) bool {
	o := (2*i + uint64(g)) * c.bb
	lo := binary.LittleEndian.Uint64(c.tab[o:]) & c.mask2
	hi := binary.LittleEndian.Uint64(c.tab[o+c.half2:]) >> c.shift2 & c.mask2
	s := c.slotIndex(g, i)
	if z := (lo - c.ones2) &^ lo & c.highs2; z != 0 {
		s += uint64(bits.TrailingZeros64(z)) / uint64(c.f)
	} else if z := (hi - c.ones2) &^ hi & c.highs2; z != 0 {
		s += 2 + uint64(bits.TrailingZeros64(z))/uint64(c.f)
	} else {
		return false
	}
	c.setSlot(s, fp)
	c.dirty.markSlot(s)
	return true
}

// add inserts the probe's fingerprint into generation g and reports whether
// the generation's stash is now full.
func (c *fingerprint) add(g int, pr *fprobe) (full bool) {
	c.held[g]++
	if c.place(g, pr.i1, pr.fp) || c.place(g, pr.i2, pr.fp) {
		return false
	}
	i, fp := pr.i1, pr.fp
	// The victim slot is a function of the fingerprint and the kick number,
	// not of a random state, so that replays and decoded snapshots make the
	// same moves.
	for n := range uint64(maxKicks) {
		s := c.slotIndex(g, i) + mix(fp^n)%slotsPerBucket
		victim := c.slot(s)
		c.setSlot(s, fp)
		c.dirty.markSlot(s)
		fp = victim
		i = c.alt(i, fp)
		if c.place(g, i, fp) {
			return false
		}
	}
	c.stash[g][stashKey{bucket: min(i, c.alt(i, fp)), fp: fp}]++
	c.stashed[g]++
	c.refused++
	return c.stashed[g] >= c.stashCap
}

// remove takes one copy of the probe's fingerprint out of generation g; the
// caller has checked contains.
func (c *fingerprint) remove(g int, pr *fprobe) {
	c.held[g]--
	for _, i := range [2]uint64{pr.i1, pr.i2} {
		if s, ok := c.find(g, i, pr.fp); ok {
			c.setSlot(s, 0)
			c.dirty.markSlot(s)
			return
		}
	}
	k := c.stashKeyOf(pr)
	if c.stash[g][k]--; c.stash[g][k] == 0 {
		delete(c.stash[g], k)
	}
	c.stashed[g]--
}

// rotate makes the current generation previous, and the previous one,
// cleared, current.
func (c *fingerprint) rotate() {
	c.cur = 1 - c.cur
	c.clearGen(c.cur)
}

func (c *fingerprint) clearGen(g int) {
	for i := range c.buckets {
		o := (2*i + uint64(g)) * c.bb
		clear(c.tab[o : o+c.bb])
	}
	clear(c.stash[g])
	c.held[g], c.stashed[g] = 0, 0
	c.dirty.clearGen(g)
}

func (c *fingerprint) clearAll() {
	clear(c.words)
	for g := range 2 {
		clear(c.stash[g])
	}
	c.dirty.reset()
	c.held, c.stashed = [2]uint64{}, [2]uint64{}
}

// reset clears both generations and the cumulative overflow counts
// (Pair.Reset).
func (c *fingerprint) reset() {
	c.clearAll()
	c.refused, c.early, c.forgotten = 0, 0, 0
}

// copyFrom copies src's state; the receiver's change tracking is cleared
// (it holds what src holds, nothing is pending).
func (c *fingerprint) copyFrom(src generations) {
	s := src.(*fingerprint)
	copy(c.words, s.words)
	c.dirty.reset()
	for g := range 2 {
		clear(c.stash[g])
		for k, v := range s.stash[g] {
			c.stash[g][k] = v
		}
	}
	c.cur, c.held, c.stashed = s.cur, s.held, s.stashed
	c.refused, c.early, c.forgotten = s.refused, s.early, s.forgotten
}

// bucketLines returns the first byte of bucket i (both generations) as the
// two-line unit prefetchBucket loads.
func (c *fingerprint) bucketLines(i uint64) *[bucketWords]uint64 {
	return (*[bucketWords]uint64)(unsafe.Pointer(&c.tab[2*i*c.bb]))
}

// genBytes is the size of one generation's slots in a snapshot, and
// genWords the same in words (the last one zero-padded).
func (c *fingerprint) genBytes() uint64 { return c.buckets * c.bb }
func (c *fingerprint) genWords() uint64 { return (c.genBytes() + 7) / 8 }

// gather copies words of logical generation g's byte stream (its buckets
// in order), from word i on, into dst, and returns how many it copied.
func (c *fingerprint) gather(g int, i uint64, dst []uint64) int {
	n := min(uint64(len(dst)), c.genWords()-i)
	var b [8]byte
	for w := range n {
		c.streamBytes(c.cur^g, 8*(i+w), b[:], false)
		dst[w] = binary.LittleEndian.Uint64(b[:])
	}
	return int(n)
}

// scatter is the inverse of gather.
func (c *fingerprint) scatter(g int, i uint64, src []uint64) int {
	n := min(uint64(len(src)), c.genWords()-i)
	var b [8]byte
	for w := range n {
		binary.LittleEndian.PutUint64(b[:], src[w])
		c.streamBytes(c.cur^g, 8*(i+w), b[:], true)
	}
	return int(n)
}

// word returns word i of logical generation g's byte stream.
func (c *fingerprint) word(g int, i uint64) uint64 {
	var b [8]byte
	c.streamBytes(c.cur^g, 8*i, b[:], false)
	return binary.LittleEndian.Uint64(b[:])
}

// setWord sets word i of logical generation g's byte stream to v.
func (c *fingerprint) setWord(g int, i, v uint64) {
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], v)
	c.streamBytes(c.cur^g, 8*i, b[:], true)
}

func (c *fingerprint) tracking() *dirtySet { return &c.dirty }

// dirtyMap returns the change bitmap of logical generation g, with every
// pending mark folded in.
func (c *fingerprint) dirtyMap(g int) []uint64 {
	c.dirty.fold()
	return c.dirty.maps[c.cur^g]
}

// lastWordProblem reports non-zero padding after the last bucket in the
// last word of a generation's stream.
func (c *fingerprint) lastWordProblem(v uint64) string {
	if r := c.genBytes() % 8; r != 0 && v>>(8*r) != 0 {
		return "non-zero padding after the last bucket"
	}
	return ""
}

// counts are the fingerprints held and stashed by the current and the
// previous generation.
func (c *fingerprint) counts() (held, stashed [2]uint64) {
	return byGeneration(c.held, c.cur), byGeneration(c.stashed, c.cur)
}

func (c *fingerprint) setCounts(held, stashed [2]uint64) {
	c.held, c.stashed = byGeneration(held, c.cur), byGeneration(stashed, c.cur)
}

// stats of logical generation g are exact: the fill is the fraction of
// occupied slots, the keys are the fingerprints held, the rate is the
// model at that load.
func (c *fingerprint) stats(g int) FilterStats {
	g ^= c.cur
	inSlots := c.held[g] - c.stashed[g]
	m := c.buckets * slotsPerBucket
	return FilterStats{
		M: m, K: uint32(c.f), Stashed: c.stashed[g],
		Fill:          float64(inSlots) / float64(m),
		EstimatedKeys: float64(c.held[g]),
		FPRate:        fingerprintRate(int(c.f), c.buckets, float64(inSlots), float64(c.stashed[g])),
	}
}

// validate checks a decoded pair (generation 0 current): zero padding, and
// the header's counts of fingerprints in slots against the slots.
func (c *fingerprint) validate() error {
	for g := range 2 {
		what := [2]string{"current generation", "previous generation"}[g]
		if c.badPad {
			return invalid(what, headerSize, "non-zero padding after the last bucket")
		}
		if n := c.recount(g); n != c.held[g]-c.stashed[g] {
			return invalid(what, int64(64+16*g), "header says %d fingerprints in slots; data has %d", c.held[g]-c.stashed[g], n)
		}
	}
	return nil
}

// streamBytes copies len(b) bytes at offset q of generation g's byte stream
// out of the table into b, or from b into the table when in is set; bytes
// past the generation's end read as 0 and are not stored (decoders check
// that they are 0 with padIsZero).
func (c *fingerprint) streamBytes(g int, q uint64, b []byte, in bool) {
	for len(b) > 0 {
		if q >= c.genBytes() {
			if !in {
				clear(b)
			}
			for _, x := range b {
				c.badPad = c.badPad || x != 0
			}
			return
		}
		bucket, off := q/c.bb, q%c.bb
		o := (2*bucket+uint64(g))*c.bb + off
		var n int
		if in {
			n = copy(c.tab[o:o+c.bb-off], b)
		} else {
			n = copy(b, c.tab[o:o+c.bb-off])
		}
		b, q = b[n:], q+uint64(n)
	}
}

// recount scans generation g's slots; used only to validate a decoded
// snapshot.
func (c *fingerprint) recount(g int) (slots uint64) {
	for i := range c.buckets {
		s := c.slotIndex(g, i)
		for j := range uint64(slotsPerBucket) {
			if c.slot(s+j) != 0 {
				slots++
			}
		}
	}
	return slots
}
