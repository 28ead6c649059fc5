package rotation

import (
	"fmt"
	"math"
	"math/bits"

	"github.com/bits-and-blooms/bloom/v3"
)

// plain is one generation in Plain mode: a bits-and-blooms bit filter plus the
// number of keys it took in as new. The count stands in for a scan of the
// bits: with n keys added the expected fill is 1 - e^{-kn/m}.
type plain struct {
	f     *bloom.BloomFilter
	words []uint64 // the filter's bitset words, for snapshots and copies
	m     uint64
	k     int
	added uint64
}

func newPlain(m uint64, k int) *plain {
	f := bloom.New(uint(m), uint(k))
	adviseHuge(f.BitSet().Bytes())
	return &plain{f: f, words: f.BitSet().Bytes(), m: m, k: k}
}

func (p *plain) reset() {
	clear(p.words)
	p.added = 0
}

// plainPair holds both generations of the plain pair: two separate bit
// filters, swapped on rotation. It does not track the words it writes (the
// bits-and-blooms filter places its bits itself), so its deltas carry every
// word.
type plainPair struct {
	cur, prev *plain
}

func newPlainPair(m uint64, k int) *plainPair {
	return &plainPair{cur: newPlain(m, k), prev: newPlain(m, k)}
}

// gen returns logical generation g (0 current, 1 previous).
func (c *plainPair) gen(g int) *plain {
	if g == 0 {
		return c.cur
	}
	return c.prev
}

func (c *plainPair) testAndAdd(key []byte) bool {
	if c.prev.f.Test(key) || c.cur.f.TestOrAdd(key) {
		return true
	}
	c.cur.added++
	return false
}

func (c *plainPair) test(key []byte) bool { return c.cur.f.Test(key) || c.prev.f.Test(key) }

func (c *plainPair) testCurrent(key []byte) bool { return c.cur.f.Test(key) }

func (c *plainPair) rotate() {
	c.cur, c.prev = c.prev, c.cur
	c.cur.reset()
}

func (c *plainPair) clearAll() {
	c.cur.reset()
	c.prev.reset()
}

func (c *plainPair) reset() { c.clearAll() }

func (c *plainPair) copyFrom(src generations) {
	s := src.(*plainPair)
	for g := range 2 {
		copy(c.gen(g).words, s.gen(g).words)
		c.gen(g).added = s.gen(g).added
	}
}

func (c *plainPair) genWords() uint64 { return uint64(len(c.cur.words)) }

func (c *plainPair) gather(g int, i uint64, dst []uint64) int {
	return copy(dst, c.gen(g).words[i:])
}

func (c *plainPair) scatter(g int, i uint64, src []uint64) int {
	return copy(c.gen(g).words[i:], src)
}

func (c *plainPair) word(g int, i uint64) uint64 { return c.gen(g).words[i] }

func (c *plainPair) setWord(g int, i, v uint64) { c.gen(g).words[i] = v }

// tracking is nil: a plain pair's deltas carry every word.
func (c *plainPair) tracking() *dirtySet { return nil }

func (c *plainPair) dirtyMap(int) []uint64 { return nil }

func (c *plainPair) counts() (a, z [2]uint64) {
	return [2]uint64{c.cur.added, c.prev.added}, [2]uint64{}
}

func (c *plainPair) setCounts(a, _ [2]uint64) { c.cur.added, c.prev.added = a[0], a[1] }

// lastWordProblem reports bits set beyond m in the last word of a
// generation.
func (c *plainPair) lastWordProblem(v uint64) string {
	if tail := c.cur.m % 64; tail != 0 && v>>tail != 0 {
		return fmt.Sprintf("bits set beyond m=%d", c.cur.m)
	}
	return ""
}

func (c *plainPair) stats(g int) FilterStats {
	p := c.gen(g)
	fs := FilterStats{M: p.m, K: uint32(p.k)}
	fs.Fill = -math.Expm1(-float64(p.k) * float64(p.added) / float64(p.m))
	fs.EstimatedKeys = float64(p.added) // = estimateKeys(fs.Fill, p.m, float64(p.k))
	fs.FPRate = math.Pow(fs.Fill, float64(p.k))
	return fs
}

// validate checks that no bits beyond m are set.
func (c *plainPair) validate() error {
	for g := range 2 {
		words := c.gen(g).words
		if tail := c.cur.m % 64; tail != 0 {
			if last := words[len(words)-1]; last>>tail != 0 {
				return invalid([2]string{"current generation", "previous generation"}[g], headerSize,
					"%d bits set beyond m=%d", bits.OnesCount64(last>>tail), c.cur.m)
			}
		}
	}
	return nil
}
