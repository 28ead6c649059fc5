package rotation

import "math/bits"

// counting holds both generations of the counting pair: blocked counting
// Bloom filters with 4-bit saturating counters.
//
// Counters are packed 16 to a uint64 and 128 to a 64-byte block (one cache
// line); a key's counters are k counters of one block chosen by its hash. The two generations are interleaved: block b of generation g is
// line 2b+g, so the current and previous blocks of a key are adjacent lines
// of one 128-byte bucket and a test of both costs one memory round trip, not
// two. Rotation flips which half of every bucket is current and clears that
// half in place.
//
// A counter that reaches 15 is saturated: it is never decremented again,
// because its true count is no longer known. nonzero and saturated are kept
// up to date by every change so that statistics never scan the filter.
type counting struct {
	words     []uint64 // blocks × 16: block b of generation g is words[16b+8g : 16b+8g+8]
	blocks    uint64
	k         int
	cur       int       // generation (0 or 1) that is current
	nonzero   [2]uint64 // per generation: counters > 0
	saturated [2]uint64 // per generation: counters == 15
	// dirty marks, per generation, the words every change since the last
	// TakeDelta wrote (word 8b+w: word w of block b); a clear of the
	// generation clears its marks too (delta.go).
	dirty dirtySet
	model *blockModel // false-positive model of k, for stats
}

// probe is where a key lives: its block, and per word a mask with the high
// bit (bit 3) of each of its counters (nibbles) set.
type probe struct {
	block uint64
	mask  [blockWords]uint64
}

const (
	nibbles1    = 0x1111111111111111
	nibbles7    = 0x7777777777777777
	nibbles8    = 0x8888888888888888
	bucketWords = 2 * blockWords
	golden      = 0x9E3779B97F4A7C15
)

func newCounting(blocks uint64, k int) *counting {
	words := make([]uint64, blocks*bucketWords)
	adviseHuge(words)
	return &counting{words: words, blocks: blocks, k: k, dirty: newDirtySet(blocks*blockWords, 0), model: modelFor(k)}
}

// nonzero8 has bit 3 of every non-zero nibble of x set (and garbage in bits
// 0..2, which callers mask off): adding 7 to the low three bits carries into
// bit 3 unless they are zero, and bit 3 itself is ORed in.
func nonzero8(x uint64) uint64 { return ((x & nibbles7) + nibbles7) | x }

// full8 has bit 3 of every nibble of x equal to 15 set (garbage in bits 0..2):
// adding 1 to the low three bits carries into bit 3 only when they are 7.
func full8(x uint64) uint64 { return ((x & nibbles7) + nibbles1) & x }

// mix is the murmur3 64-bit finaliser: it decorrelates the counter choice from
// the block choice, which uses the high bits of the key hash.
func mix(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

// locate computes the probe of a 64-bit key hash h. The block is h scaled to
// [0, blocks) (multiply-high, no division). The k counters are 7-bit slices
// of mix(h), mix(h+φ), … (9 slices each), drawn with replacement: a repeat
// leaves the key with fewer distinct counters, which the sizing model
// accounts for, and keeps this loop free of data-dependent branches.
func (c *counting) locate(h uint64, pr *probe) {
	pr.block, _ = bits.Mul64(h, c.blocks)
	pr.mask = [blockWords]uint64{}
	for base := 0; base < c.k; base += 9 {
		x := mix(h + uint64(base)*golden)
		for range min(9, c.k-base) {
			pos := x & (blockCounters - 1)
			x >>= 7
			pr.mask[pos>>4] |= 8 << ((pos & 15) * 4)
		}
	}
}

// bucket returns the two blocks (one per generation) of the probe.
func (c *counting) bucket(pr *probe) *[bucketWords]uint64 {
	i := pr.block * bucketWords
	return (*[bucketWords]uint64)(c.words[i : i+bucketWords])
}

// halves returns the probe's block in the current and in the previous
// generation.
func (c *counting) halves(pr *probe) (cur, prev *[blockWords]uint64) {
	i := pr.block*bucketWords + uint64(c.cur)*blockWords
	j := pr.block*bucketWords + uint64(1-c.cur)*blockWords
	return (*[blockWords]uint64)(c.words[i : i+blockWords]), (*[blockWords]uint64)(c.words[j : j+blockWords])
}

// pack folds four words of bit-3 nibble masks into one word (bits 0..3 of
// each nibble), so that one popcount counts them all.
func pack(a, b, c, d uint64) uint64 { return a>>3 | b>>2 | c>>1 | d }

// testAndAdd reports whether either generation holds the probe and, if
// neither does, adds it to the current one. Both blocks are read together so
// that their cache misses overlap, and the test also counts the current
// generation's zero counters that the add will make non-zero. The loops are
// unrolled by hand: the fewer instructions a record takes, the sooner the
// next record's memory access can start while this one's is in flight.
func (c *counting) testAndAdd(pr *probe) bool {
	cb, pb := c.halves(pr)
	m := &pr.mask
	z0, z1, z2, z3 := m[0]&^nonzero8(cb[0]), m[1]&^nonzero8(cb[1]), m[2]&^nonzero8(cb[2]), m[3]&^nonzero8(cb[3])
	z4, z5, z6, z7 := m[4]&^nonzero8(cb[4]), m[5]&^nonzero8(cb[5]), m[6]&^nonzero8(cb[6]), m[7]&^nonzero8(cb[7])
	missPrev := m[0]&^nonzero8(pb[0]) | m[1]&^nonzero8(pb[1]) | m[2]&^nonzero8(pb[2]) | m[3]&^nonzero8(pb[3]) |
		m[4]&^nonzero8(pb[4]) | m[5]&^nonzero8(pb[5]) | m[6]&^nonzero8(pb[6]) | m[7]&^nonzero8(pb[7])
	zeros := bits.OnesCount64(pack(z0, z1, z2, z3)) + bits.OnesCount64(pack(z4, z5, z6, z7))
	if zeros == 0 || missPrev == 0 {
		return true
	}
	c.nonzero[c.cur] += uint64(zeros)
	sat, changed := incrementBlock(cb, m)
	c.saturated[c.cur] += uint64(sat)
	c.markBlock(c.cur, pr.block, changed)
	return false
}

// markBlock marks the words of block b of generation g whose bits are set in
// changed (bit w: word w) as dirty: one mark, because a block's 8 words are
// one byte of the bitmap.
func (c *counting) markBlock(g int, b, changed uint64) {
	c.dirty.mark(g, b>>3, changed<<((b&7)*blockWords))
}

// incrementBlock adds one to the masked, unsaturated counters of block b and
// returns how many reached 15, and which words changed (bit w: word w).
func incrementBlock(b, m *[blockWords]uint64) (saturated int, changed uint64) {
	var s [blockWords]uint64
	for w := range blockWords {
		x := b[w]
		inc := m[w] &^ full8(x)
		x += inc >> 3 // no carry: every incremented nibble was below 15
		s[w] = full8(x) & inc
		b[w] = x
		changed |= (inc | -inc) >> 63 << w
	}
	return bits.OnesCount64(pack(s[0], s[1], s[2], s[3])) + bits.OnesCount64(pack(s[4], s[5], s[6], s[7])), changed
}

// contains reports whether every counter of the probe is non-zero in
// generation g.
func (c *counting) contains(g int, pr *probe) bool {
	b := c.bucket(pr)
	off := g * blockWords
	var missing uint64
	for w := range blockWords {
		missing |= pr.mask[w] &^ nonzero8(b[off+w])
	}
	return missing == 0
}

// add increments the probe's counters in generation g, leaving saturated
// ones at 15.
func (c *counting) add(g int, pr *probe) {
	b := c.bucket(pr)
	off := g * blockWords
	zeros := 0
	for w := range blockWords {
		zeros += bits.OnesCount64(pr.mask[w] &^ nonzero8(b[off+w]))
	}
	c.nonzero[g] += uint64(zeros)
	c.increment(g, pr)
}

// increment adds one to the probe's unsaturated counters in generation g and
// counts those that reach 15; the caller counts those that leave 0.
func (c *counting) increment(g int, pr *probe) {
	i := pr.block*bucketWords + uint64(g)*blockWords
	sat, changed := incrementBlock((*[blockWords]uint64)(c.words[i:i+blockWords]), &pr.mask)
	c.saturated[g] += uint64(sat)
	c.markBlock(g, pr.block, changed)
}

// remove decrements the probe's unsaturated counters in generation g. The
// caller has checked contains, so every counter is at least 1 and nothing
// borrows.
func (c *counting) remove(g int, pr *probe) {
	b := c.bucket(pr)
	off := g * blockWords
	var zeroed int
	var changed uint64
	for w := range blockWords {
		x := b[off+w]
		dec := pr.mask[w] &^ full8(x)
		x -= dec >> 3
		zeroed += bits.OnesCount64(dec &^ nonzero8(x))
		b[off+w] = x
		changed |= (dec | -dec) >> 63 << w
	}
	c.nonzero[g] -= uint64(zeroed)
	c.markBlock(g, pr.block, changed)
}

// counter returns counter i of generation g (for tests).
func (c *counting) counter(g int, i uint64) uint8 {
	block, j := i/blockCounters, i%blockCounters
	x := c.words[block*bucketWords+uint64(g)*blockWords+j/16]
	return uint8(x >> ((j % 16) * 4) & 15)
}

// rotate makes the current generation previous, and the previous one, cleared,
// current.
func (c *counting) rotate() {
	c.cur = 1 - c.cur
	c.clearGen(c.cur)
}

func (c *counting) clearGen(g int) {
	for i := uint64(g * blockWords); i < uint64(len(c.words)); i += bucketWords {
		clear(c.words[i : i+blockWords])
	}
	c.nonzero[g], c.saturated[g] = 0, 0
	c.dirty.clearGen(g)
}

func (c *counting) clearAll() {
	clear(c.words)
	c.nonzero, c.saturated = [2]uint64{}, [2]uint64{}
	c.dirty.reset()
}

func (c *counting) reset() { c.clearAll() }

// copyFrom copies src's state; the receiver's change tracking is cleared
// (it holds what src holds, nothing is pending).
func (c *counting) copyFrom(src generations) {
	s := src.(*counting)
	copy(c.words, s.words)
	c.cur, c.nonzero, c.saturated = s.cur, s.nonzero, s.saturated
	c.dirty.reset()
}

// genWords returns the number of words of one generation.
func (c *counting) genWords() uint64 { return c.blocks * blockWords }

// gather copies words of logical generation g (0 current), from its word
// i (a multiple of 8) on, into dst (a multiple of 8 long), and returns how
// many it copied.
func (c *counting) gather(g int, i uint64, dst []uint64) int {
	n := 0
	for b := i / blockWords; b < c.blocks && n < len(dst); b++ {
		o := b*bucketWords + uint64(c.cur^g)*blockWords
		n += copy(dst[n:], c.words[o:o+blockWords])
	}
	return n
}

// scatter is the inverse of gather.
func (c *counting) scatter(g int, i uint64, src []uint64) int {
	n := 0
	for b := i / blockWords; b < c.blocks && n < len(src); b++ {
		o := b*bucketWords + uint64(c.cur^g)*blockWords
		n += copy(c.words[o:o+blockWords], src[n:])
	}
	return n
}

// wordAt is the index in words of word i of logical generation g.
func (c *counting) wordAt(g int, i uint64) uint64 {
	return i/blockWords*bucketWords + uint64(c.cur^g)*blockWords + i%blockWords
}

func (c *counting) word(g int, i uint64) uint64   { return c.words[c.wordAt(g, i)] }
func (c *counting) setWord(g int, i, v uint64)    { c.words[c.wordAt(g, i)] = v }
func (c *counting) tracking() *dirtySet           { return &c.dirty }
func (c *counting) lastWordProblem(uint64) string { return "" }

// dirtyMap returns the change bitmap of logical generation g, with every
// pending mark folded in.
func (c *counting) dirtyMap(g int) []uint64 {
	c.dirty.fold()
	return c.dirty.maps[c.cur^g]
}

// counts are the non-zero and the saturated counters of the current and
// the previous generation.
func (c *counting) counts() (nonzero, saturated [2]uint64) {
	return byGeneration(c.nonzero, c.cur), byGeneration(c.saturated, c.cur)
}

func (c *counting) setCounts(nonzero, saturated [2]uint64) {
	c.nonzero, c.saturated = byGeneration(nonzero, c.cur), byGeneration(saturated, c.cur)
}

// stats of logical generation g: the fill is exact, the false-positive
// estimate comes from the blocked filter's model at the estimated load.
func (c *counting) stats(g int) FilterStats {
	g ^= c.cur
	m := c.blocks * blockCounters
	fs := FilterStats{M: m, K: uint32(c.k), Saturated: c.saturated[g]}
	fs.Fill = float64(c.nonzero[g]) / float64(m)
	fs.EstimatedKeys = estimateKeys(fs.Fill, m, c.model.distinct)
	fs.FPRate = c.model.rate(fs.EstimatedKeys / float64(c.blocks))
	return fs
}

// validate checks a decoded pair's counts (generation 0 current) against
// its counters.
func (c *counting) validate() error {
	for g := range 2 {
		nz, sat := c.recount(g)
		if nz != c.nonzero[g] || sat != c.saturated[g] {
			return invalid([2]string{"current counts", "previous counts"}[g], int64(64+16*g),
				"header says %d non-zero, %d saturated; data has %d, %d", c.nonzero[g], c.saturated[g], nz, sat)
		}
	}
	return nil
}

// recount scans generation g; used only to validate a decoded snapshot.
func (c *counting) recount(g int) (nonzero, saturated uint64) {
	for i := uint64(g * blockWords); i < uint64(len(c.words)); i += bucketWords {
		for _, x := range c.words[i : i+blockWords] {
			nonzero += uint64(bits.OnesCount64(nonzero8(x) & nibbles8))
			saturated += uint64(bits.OnesCount64(full8(x) & nibbles8))
		}
	}
	return nonzero, saturated
}
