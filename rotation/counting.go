package rotation

import "math/bits"

// counting is a blocked counting Bloom filter with 4-bit saturating counters.
//
// Counters are packed 16 to a uint64 and 128 to a 64-byte block; a key's k
// counters are k distinct counters of one block, so a test or an add touches
// one cache line. A counter that reaches 15 is saturated: it is never
// decremented again, because its true count is no longer known.
//
// nonzero and saturated are kept up to date by every change so that the
// statistics never scan the filter.
type counting struct {
	words     []uint64 // blocks*8 words
	blocks    uint64
	k         int
	nonzero   uint64 // counters > 0
	saturated uint64 // counters == 15
}

// probe is where a key lives: its block, and a mask with the low bit of each
// of its k counters (nibbles) set.
type probe struct {
	block uint64
	mask  [blockWords]uint64
}

const (
	lowNibbles = 0x1111111111111111
	// Multiplier and increment of the 64-bit PCG linear congruential generator;
	// its high bits are well spread, and they pick counters within a block.
	lcgMul = 6364136223846793005
	lcgInc = 1442695040888963407
)

func newCounting(blocks uint64, k int) *counting {
	return &counting{words: make([]uint64, blocks*blockWords), blocks: blocks, k: k}
}

// nonzeroNibbles has the low bit of every non-zero nibble of x set.
func nonzeroNibbles(x uint64) uint64 { return (x | x>>1 | x>>2 | x>>3) & lowNibbles }

// fullNibbles has the low bit of every nibble of x equal to 15 set.
func fullNibbles(x uint64) uint64 { return x & (x >> 1) & (x >> 2) & (x >> 3) & lowNibbles }

// mix is the murmur3 64-bit finaliser: it decorrelates the counter choice from
// the block choice, which uses the high bits of h.
func mix(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

// locate computes the probe of a 64-bit key hash. The block is h scaled to
// [0, blocks) (multiply-high, no division); the k counters are drawn from a
// PCG sequence seeded by mix(h), redrawing repeats so they are distinct.
func (c *counting) locate(h uint64, pr *probe) {
	pr.block, _ = bits.Mul64(h, c.blocks)
	pr.mask = [blockWords]uint64{}
	x := mix(h)
	for i := 0; i < c.k; {
		pos := x >> 57
		x = x*lcgMul + lcgInc
		w, bit := pos>>4, uint64(1)<<((pos&15)*4)
		if pr.mask[w]&bit != 0 {
			continue
		}
		pr.mask[w] |= bit
		i++
	}
}

func (c *counting) block(pr *probe) *[blockWords]uint64 {
	return (*[blockWords]uint64)(c.words[pr.block*blockWords : pr.block*blockWords+blockWords])
}

// contains reports whether every counter of the probe is non-zero.
func (c *counting) contains(pr *probe) bool {
	b := c.block(pr)
	var missing uint64
	for w := range blockWords {
		missing |= pr.mask[w] &^ nonzeroNibbles(b[w])
	}
	return missing == 0
}

// add increments the probe's counters, leaving saturated ones at 15.
func (c *counting) add(pr *probe) {
	b := c.block(pr)
	for w := range blockWords {
		m := pr.mask[w]
		if m == 0 {
			continue
		}
		x := b[w]
		inc := m &^ fullNibbles(x)
		c.nonzero += uint64(bits.OnesCount64(m &^ nonzeroNibbles(x)))
		x += inc // no carry: every incremented nibble was below 15
		c.saturated += uint64(bits.OnesCount64(fullNibbles(x) & inc))
		b[w] = x
	}
}

// remove decrements the probe's unsaturated counters. The caller has checked
// contains, so every counter is at least 1 and nothing borrows.
func (c *counting) remove(pr *probe) {
	b := c.block(pr)
	for w := range blockWords {
		m := pr.mask[w]
		if m == 0 {
			continue
		}
		x := b[w]
		dec := m &^ fullNibbles(x)
		x -= dec
		c.nonzero -= uint64(bits.OnesCount64(dec &^ nonzeroNibbles(x)))
		b[w] = x
	}
}

// counter returns counter i (for tests and snapshot validation).
func (c *counting) counter(i uint64) uint8 {
	return uint8(c.words[i/16] >> ((i % 16) * 4) & 15)
}

func (c *counting) reset() {
	clear(c.words)
	c.nonzero, c.saturated = 0, 0
}

func (c *counting) copyFrom(src *counting) {
	copy(c.words, src.words)
	c.nonzero, c.saturated = src.nonzero, src.saturated
}

// recount scans the filter; used only to validate a decoded snapshot.
func (c *counting) recount() (nonzero, saturated uint64) {
	for _, x := range c.words {
		nonzero += uint64(bits.OnesCount64(nonzeroNibbles(x)))
		saturated += uint64(bits.OnesCount64(fullNibbles(x)))
	}
	return nonzero, saturated
}
