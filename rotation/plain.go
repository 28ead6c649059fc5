package rotation

import "github.com/bits-and-blooms/bloom/v3"

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

func (p *plain) copyFrom(src *plain) {
	copy(p.words, src.words)
	p.added = src.added
}
