package rotation

import (
	"encoding/binary"
	"math/bits"
	"unsafe"
)

// fingerprint holds both generations of the fingerprint pair: cuckoo filters
// (partial-key cuckoo hashing, Fan et al. 2014) with 4 slots per bucket and
// f-bit fingerprints, f even, 6 ≤ f ≤ 32 (2 and 4 in decoded tables).
//
// A key has a fingerprint fp (f bits of its hash, never 0: 0 marks an empty
// slot) and two candidate buckets i1 (from the hash) and i2 = c(fp) - i1 mod
// N, so that either bucket and fp give the other: the involution i ↦ c - i
// works for any bucket count N, not only powers of two.
//
// The table is semi-sorted (semisort.go): a generation's bucket is 4f-4
// bits, its fingerprints in ascending order. The two generations are
// interleaved like the counting filter's: bucket i of both generations is
// the f-1 bytes from byte i·(f-1), generation 0 first, so a test of both
// generations touches two places (i1 and i2), not four.
//
// Snapshots and deltas carry the table in another form, the stream: a
// generation's buckets in order, f/2 bytes each, four slots of f bits
// packed from the low bit, ascending (streamBytes). Earlier releases kept
// that form in memory, unsorted; a table decoded from them starts in it
// (raw, sorted false), where tests, clears and stream reads and writes
// work but inserts do not: the first insert, removal or copy settles it
// into the semi-sorted layout (Pair.settle). Decoding keeps it raw only
// when it must: a bucket out of order cannot be held semi-sorted, and
// holding the stream's exact bytes is what lets the deltas written after
// it apply.
//
// An insert that finds both buckets full moves residents to their other
// bucket along the shortest chain that ends in a free slot (bfsInsert).
// When there is none within reach, the fingerprint is kept exactly in the
// generation's stash (keyed by its lower candidate bucket and fp), so no
// key is lost; when a stash reaches its capacity the pair rotates early
// (see Pair.overflow).
type fingerprint struct {
	words   []uint64       // backing store of tab (8-byte aligned, for adviseHuge)
	tab     []byte         // the buckets, plus padding for 8-byte loads and prefetches
	base    unsafe.Pointer // &tab[0]
	buckets uint64
	f       uint   // fingerprint bits
	mask    uint64 // 1<<f - 1
	bb      uint64 // stream bytes of a generation's bucket: f/2
	sorted  bool   // semi-sorted layout; false: raw (the stream's bytes)

	// Semi-sorted layout (sortedLayout): low bits per slot, f-4, and their
	// mask; bits of a generation's bucket, 4f-4; bytes of a bucket pair,
	// f-1; where each field of each generation starts in a pair, and the
	// words pairsHold reads.
	lbits   uint
	lmask   uint64
	gbits   uint64
	pbytes  uint64
	off, sh [2][slotsPerBucket + 1]uint64
	chunk   [4]chunk
	wo      [2]uint64 // writeSorted: where it writes each generation's bucket
	wpos    [2][slotsPerBucket + 1]fieldPos
	wmask   [2][2]uint64

	// Raw layout: a bucket is read as two halves of two slots (2f bits
	// each, at most 64): the second half starts at byte half2 and bit
	// shift2 of it. ones2 has the low bit of each slot of a half set,
	// highs2 the high bit.
	ones2, highs2, mask2 uint64
	half2, shift2        uint64

	cur      int
	held     [2]uint64 // per generation: fingerprints held, in slots and stash
	stash    [2]map[stashKey]uint32
	stashed  [2]uint64 // per generation: stash entries, with multiplicity
	stashCap uint64

	refused   uint64 // inserts the buckets refused (fingerprint stashed), cumulative
	early     uint64 // early rotations because a stash was full, cumulative
	forgotten uint64 // fingerprints dropped by early rotations, cumulative

	badPad bool // a decoded generation had non-zero padding (see streamBytes)

	// pend is a bucket a stream write (scatter, setWord) has written part
	// of, kept as stream bytes until written whole (flush).
	pend pendingBucket

	bfs []bfsNode // bfsInsert's queue, allocated at its first use

	// dirty marks, per generation, the words of its snapshot stream
	// (gather) every bucket write since the last TakeDelta changed; a clear
	// of the generation clears its marks too (delta.go).
	dirty dirtySet
}

// pendingBucket is a bucket's stream bytes while a stream write is under
// way: writes come in ascending order, so at most one bucket is partly
// written at a time.
type pendingBucket struct {
	ok     bool
	g      int // physical generation
	bucket uint64
	b      [16]byte
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
	// tabPad keeps 8-byte loads and writes of the last bucket and a
	// two-line prefetch of it inside the allocation.
	tabPad = 16 + 2*64
)

// stashCapacity is how many refused fingerprints a generation keeps before
// the pair rotates early: enough to absorb the rare refusals near the design
// load, small next to the filter.
func stashCapacity(buckets uint64) uint64 { return 64 + buckets/256 }

// newFingerprint returns an empty pair of tables, semi-sorted when sorted
// is set (New), else raw (a decoder's, see fingerprint).
func newFingerprint(buckets uint64, f int, sorted bool) *fingerprint {
	bb := uint64(f) / 2
	c := &fingerprint{
		buckets: buckets, f: uint(f), mask: 1<<uint(f) - 1, bb: bb,
		stashCap: stashCapacity(buckets),
		ones2:    1 | 1<<uint(f), half2: uint64(f) / 4, shift2: uint64(2*f) % 8,
	}
	c.highs2 = c.ones2 << (uint(f) - 1)
	c.mask2 = 1<<(2*uint(f)) - 1
	n := 2 * buckets * bb
	if sorted && c.sortable() {
		c.sortedLayout()
		c.sorted = true
		n = buckets * c.pbytes
	}
	c.words = make([]uint64, (n+tabPad+7)/8)
	adviseHuge(c.words)
	c.tab = unsafe.Slice((*byte)(unsafe.Pointer(&c.words[0])), len(c.words)*8)
	c.base = unsafe.Pointer(&c.words[0])
	for g := range 2 {
		c.stash[g] = make(map[stashKey]uint32, c.stashCap)
	}
	c.dirty = newDirtySet(c.genWords(), bb)
	return c
}

// tableBytes is the memory of the buckets of both generations.
func (c *fingerprint) tableBytes() uint64 {
	if c.sorted {
		return c.buckets * c.pbytes
	}
	return 2 * c.buckets * c.bb
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

// The raw layout (a decoded table, see fingerprint): bucket i of
// generation g is the stream's bytes [(2i+g)·f/2, (2i+g+1)·f/2), slot j
// its j-th f bits. slotIndex is the index of slot 0 of that bucket.
func (c *fingerprint) slotIndex(g int, i uint64) uint64 {
	return (2*i + uint64(g)) * slotsPerBucket
}

func (c *fingerprint) slot(s uint64) uint64 {
	bit := s * uint64(c.f)
	return binary.LittleEndian.Uint64(c.tab[bit>>3:]) >> (bit & 7) & c.mask
}

// setSlot writes slot s of a raw table (tests build raw tables with it).
func (c *fingerprint) setSlot(s, v uint64) {
	bit := s * uint64(c.f)
	w := c.tab[bit>>3:]
	sh := bit & 7
	binary.LittleEndian.PutUint64(w, binary.LittleEndian.Uint64(w)&^(c.mask<<sh)|v<<sh)
}

// find returns the slot of raw bucket i of generation g holding fp.
func (c *fingerprint) find(g int, i, fp uint64) (uint64, bool) {
	s := c.slotIndex(g, i)
	for j := range uint64(slotsPerBucket) {
		if c.slot(s+j) == fp {
			return s + j, true
		}
	}
	return 0, false
}

// rawBucket returns the slots of bucket i of generation g of a raw table
// whose generation buckets are bb bytes, in the stream's order.
func (c *fingerprint) rawBucket(bb uint64, g int, i uint64) [slotsPerBucket]uint64 {
	o := (2*i + uint64(g)) * bb
	var b [16]byte
	copy(b[:], c.tab[o:o+bb])
	return slotsOf(binary.LittleEndian.Uint64(b[:]), binary.LittleEndian.Uint64(b[8:]), c.f)
}

// bucket returns the slots of bucket i of generation g in either layout.
func (c *fingerprint) bucket(g int, i uint64) [slotsPerBucket]uint64 {
	if c.sorted {
		return c.sortedBucket(g, i)
	}
	return c.rawBucket(c.bb, g, i)
}

func (c *fingerprint) stashKeyOf(pr *fprobe) stashKey {
	return stashKey{bucket: min(pr.i1, pr.i2), fp: pr.fp}
}

// holds reports whether raw bucket i of generation g holds fp, comparing
// each half's two slots at once: y has a zero slot exactly where the
// bucket holds fp, and (y - ones) &^ y has a slot's high bit set if and
// only if some slot of y is zero (a borrow only runs upwards from a zero
// slot).
func (c *fingerprint) holds(g int, i, fp uint64) bool {
	o := (2*i + uint64(g)) * c.bb
	lo := binary.LittleEndian.Uint64(c.tab[o:]) & c.mask2
	hi := binary.LittleEndian.Uint64(c.tab[o+c.half2:]) >> c.shift2 & c.mask2
	rep := fp * c.ones2
	y, z := lo^rep, hi^rep
	return ((y-c.ones2)&^y|(z-c.ones2)&^z)&c.highs2 != 0
}

// contains reports whether generation g holds the probe's fingerprint in
// either candidate bucket or in its stash.
func (c *fingerprint) contains(g int, pr *fprobe) bool {
	if c.sorted {
		if c.sortedHolds(g, pr.i1, pr.fp) || c.sortedHolds(g, pr.i2, pr.fp) {
			return true
		}
	} else if c.holds(g, pr.i1, pr.fp) || c.holds(g, pr.i2, pr.fp) {
		return true
	}
	return c.stashed[g] > 0 && c.stash[g][c.stashKeyOf(pr)] > 0
}

// testAndAdd reports whether either generation holds the probe and, if
// neither does, adds it to the current one. full reports that the add
// filled the current generation's stash: the caller must rotate early.
// Both candidate places are read before any branch on them, so that their
// misses overlap. The table is semi-sorted (the caller settled it).
func (c *fingerprint) testAndAdd(pr *fprobe) (seen, full bool) {
	cur, prev := c.cur, 1-c.cur
	if c.pairsHold(pr.i1, pr.i2, pr.fp) {
		return true, false
	}
	if c.stashed[cur]|c.stashed[prev] != 0 && (c.contains(cur, pr) || c.contains(prev, pr)) {
		return true, false
	}
	return false, c.add(cur, pr)
}

// add inserts the probe's fingerprint into generation g of a semi-sorted
// table and reports whether the generation's stash is now full. A bucket
// with two free slots or more takes it; otherwise the candidate bucket
// with more free slots does (i1 on a tie), which keeps buckets even, so
// that both candidates are full, and a search for a chain of moves
// needed, only near the design load.
func (c *fingerprint) add(g int, pr *fprobe) (full bool) {
	c.held[g]++
	s1 := c.sortedBucket(g, pr.i1)
	if s1[1] == 0 { // free slots come first
		c.insertSorted(g, pr.i1, &s1, pr.fp)
		return false
	}
	s2 := c.sortedBucket(g, pr.i2)
	switch {
	case s2[0] == 0 && (s1[0] != 0 || s2[1] == 0):
		c.insertSorted(g, pr.i2, &s2, pr.fp)
		return false
	case s1[0] == 0:
		c.insertSorted(g, pr.i1, &s1, pr.fp)
		return false
	case c.bfsInsert(g, pr.i1, pr.i2, pr.fp):
		return false
	}
	c.stash[g][c.stashKeyOf(pr)]++
	c.stashed[g]++
	c.refused++
	return c.stashed[g] >= c.stashCap
}

// remove takes one copy of the probe's fingerprint out of generation g of
// a semi-sorted table; the caller has checked contains.
func (c *fingerprint) remove(g int, pr *fprobe) {
	c.held[g]--
	if c.sortedTake(g, pr.i1, pr.fp) || c.sortedTake(g, pr.i2, pr.fp) {
		return
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
	c.flush()
	if c.sorted {
		m0, m1 := c.wmask[g][0], c.wmask[g][1]
		for i := range c.buckets {
			t := c.tab[i*c.pbytes+c.wo[g]:]
			t = t[:16]
			binary.LittleEndian.PutUint64(t, binary.LittleEndian.Uint64(t)&^m0)
			binary.LittleEndian.PutUint64(t[8:], binary.LittleEndian.Uint64(t[8:])&^m1)
		}
	} else {
		for i := range c.buckets {
			o := (2*i + uint64(g)) * c.bb
			clear(c.tab[o : o+c.bb])
		}
	}
	clear(c.stash[g])
	c.held[g], c.stashed[g] = 0, 0
	c.dirty.clearGen(g)
}

func (c *fingerprint) clearAll() {
	c.pend.ok = false
	clear(c.words)
	for g := range 2 {
		clear(c.stash[g])
	}
	c.dirty.reset()
	c.held, c.stashed = [2]uint64{}, [2]uint64{}
}

// reset clears both generations and the cumulative overflow counts
// (Pair.Reset); a raw table becomes semi-sorted, as New makes it.
func (c *fingerprint) reset() {
	c.clearAll()
	if !c.sorted && c.sortable() {
		c.sortedLayout()
		c.sorted = true
	}
	c.refused, c.early, c.forgotten = 0, 0, 0
}

// copyFrom copies src's state, src semi-sorted or raw; the receiver's
// change tracking is cleared (it holds what src holds, nothing is
// pending).
func (c *fingerprint) copyFrom(src generations) {
	s := src.(*fingerprint)
	if s.sorted != c.sorted {
		if s.sorted {
			c.sortedLayout()
			c.sorted = true
		} else {
			c.unsettle()
		}
	}
	n := copy(c.words, s.words)
	clear(c.words[n:])
	c.pend.ok = false
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
	if c.sorted {
		return (*[bucketWords]uint64)(unsafe.Add(c.base, i*c.pbytes))
	}
	return (*[bucketWords]uint64)(unsafe.Add(c.base, 2*i*c.bb))
}

// genBytes is the size of one generation's stream in a snapshot, and
// genWords the same in words (the last one zero-padded).
func (c *fingerprint) genBytes() uint64 { return c.buckets * c.bb }
func (c *fingerprint) genWords() uint64 { return (c.genBytes() + 7) / 8 }

// gather copies words of logical generation g's stream, from word i on,
// into dst, and returns how many it copied.
func (c *fingerprint) gather(g int, i uint64, dst []uint64) int {
	n := min(uint64(len(dst)), c.genWords()-i)
	var b [8]byte
	for w := range n {
		c.streamBytes(c.cur^g, 8*(i+w), b[:], false)
		dst[w] = binary.LittleEndian.Uint64(b[:])
	}
	return int(n)
}

// scatter is the inverse of gather; flush ends it.
func (c *fingerprint) scatter(g int, i uint64, src []uint64) int {
	n := min(uint64(len(src)), c.genWords()-i)
	var b [8]byte
	for w := range n {
		binary.LittleEndian.PutUint64(b[:], src[w])
		c.streamBytes(c.cur^g, 8*(i+w), b[:], true)
	}
	return int(n)
}

// word returns word i of logical generation g's stream.
func (c *fingerprint) word(g int, i uint64) uint64 {
	var b [8]byte
	c.streamBytes(c.cur^g, 8*i, b[:], false)
	return binary.LittleEndian.Uint64(b[:])
}

// setWord sets word i of logical generation g's stream to v. Words of a
// generation are set in ascending order, and flush ends them.
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

// streamBytes copies len(b) bytes at offset q of generation g's stream out
// of the table into b, or from b into the table when in is set; bytes past
// the generation's end read as 0 and are not stored (decoders check that
// they are 0 with padIsZero). A semi-sorted table writes a bucket only
// once its stream bytes are written whole (pend, flush).
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
		var n int
		switch {
		case !c.sorted:
			o := (2*bucket+uint64(g))*c.bb + off
			if in {
				n = copy(c.tab[o:o+c.bb-off], b)
			} else {
				n = copy(b, c.tab[o:o+c.bb-off])
			}
		case in:
			p := &c.pend
			if p.ok && (p.g != g || p.bucket != bucket) {
				c.flush()
			}
			if !p.ok {
				*p = pendingBucket{ok: true, g: g, bucket: bucket}
				c.streamBucket(g, bucket, &p.b)
			}
			n = copy(p.b[off:c.bb], b)
			if off+uint64(n) == c.bb {
				c.flush()
			}
		default:
			var sb [16]byte
			c.streamBucket(g, bucket, &sb)
			n = copy(b, sb[off:c.bb])
		}
		b, q = b[n:], q+uint64(n)
	}
}

// streamBucket writes the stream bytes of semi-sorted bucket i of
// generation g to b.
func (c *fingerprint) streamBucket(g int, i uint64, b *[16]byte) {
	s := c.sortedBucket(g, i)
	lo, hi := streamOf(&s, c.f)
	binary.LittleEndian.PutUint64(b[:], lo)
	binary.LittleEndian.PutUint64(b[8:], hi)
}

// flush writes the pending bucket of a stream write into the table. A
// bucket out of ascending order comes from a table that earlier releases
// filled (they placed a fingerprint in the first free slot); the table
// turns raw to keep its bytes exactly, since the deltas that follow it
// write parts of buckets in that order.
func (c *fingerprint) flush() {
	p := &c.pend
	if !p.ok {
		return
	}
	p.ok = false
	s := slotsOf(binary.LittleEndian.Uint64(p.b[:]), binary.LittleEndian.Uint64(p.b[8:]), c.f)
	if c.sorted && ascending(&s) {
		c.writeSorted(p.g, p.bucket, &s)
		return
	}
	c.unsettle()
	o := (2*p.bucket + uint64(p.g)) * c.bb
	copy(c.tab[o:o+c.bb], p.b[:c.bb])
}

// recount scans generation g's slots; used only to validate a decoded
// snapshot.
func (c *fingerprint) recount(g int) (slots uint64) {
	for i := range c.buckets {
		for _, v := range c.bucket(g, i) {
			if v != 0 {
				slots++
			}
		}
	}
	return slots
}
