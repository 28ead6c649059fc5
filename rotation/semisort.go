package rotation

import (
	"encoding/binary"
	"math/bits"
	"unsafe"
)

// Semi-sorted buckets (Fan et al. 2014, section 5.2). A bucket's four
// fingerprints are kept in ascending order, so the multiset of their high
// nibbles is all a bucket needs to say of them: one of the C(19,4) = 3876
// multisets of four values of 0..15, an index of 12 bits instead of 16
// bits of nibbles. A generation's bucket is then the index and the four
// fingerprints' low f-4 bits, 4f-4 bits instead of 4f: one bit per slot.
//
// Ascending order by the whole fingerprint (the nibble is its high part)
// makes the encoding of a bucket a function of the fingerprints it holds,
// empty slots (0) first: equal pairs have equal bytes, whatever the order
// of the inserts, and a bucket with a free slot is one whose first slot is
// 0.
const (
	nibbleSets = 3876 // C(16+4-1, 4)
	indexBits  = 12
)

var (
	// nibbleSet[x] is the multiset of index x as four ascending nibbles
	// (the lowest at bits 0-3); 4096 entries, so that any 12-bit value
	// indexes it without a bounds check.
	nibbleSet [1 << indexBits]uint16
	// nibbleRank[j][v] is nibble v's share of the index as the j-th
	// (ascending) of four: the combinatorial number system over the
	// strictly increasing {n0, n1+1, n2+2, n3+3} ⊂ 0..18, whose colex rank
	// is C(n0,1) + C(n1+1,2) + C(n2+2,3) + C(n3+3,4).
	nibbleRank [4][16]uint16
)

func init() {
	binom := func(n, k int) int {
		r := 1
		for i := range k {
			r = r * (n - i) / (i + 1)
		}
		return r
	}
	for j := range 4 {
		for v := range 16 {
			nibbleRank[j][v] = uint16(binom(v+j, j+1))
		}
	}
	for a := range 16 {
		for b := a; b < 16; b++ {
			for c := b; c < 16; c++ {
				for d := c; d < 16; d++ {
					x := nibbleRank[0][a] + nibbleRank[1][b] + nibbleRank[2][c] + nibbleRank[3][d]
					nibbleSet[x] = uint16(a | b<<4 | c<<8 | d<<12)
				}
			}
		}
	}
}

// sortedLayout places the fields of a semi-sorted bucket pair. Generation
// g's bucket starts at bit g·(4f-4) of the pair: the low f-4 bits of its
// four slots, then the 12-bit index of their nibbles. Slot j's low bits
// are at byte off[g][j], bit sh[g][j] of the pair, the index at
// off[g][4], sh[g][4].
//
// pairsHold reads each generation's low bits as two words (chunks), each
// holding whole slots: chunk[2g] the first slots of generation g, as many
// as fit, chunk[2g+1] the rest (none when all four fit in the first).
func (c *fingerprint) sortedLayout() {
	c.lbits = c.f - 4
	c.lmask = 1<<c.lbits - 1
	c.gbits = 4*uint64(c.f) - 4
	c.pbytes = uint64(c.f) - 1
	w := uint64(c.lbits)
	// at is the byte from which a word holding the field at bit b (of
	// width n) is read: the field's first byte, moved back so that the
	// word does not reach past the pair where the pair is long enough.
	// A bucket pair then touches only its own cache lines.
	at := func(b, n uint64) (o, sh uint64) {
		o = b >> 3
		if c.pbytes >= 8 && o+8 > c.pbytes {
			o = c.pbytes - 8
		}
		if b-8*o+n > 64 {
			panic("rotation: semi-sorted field outside its word")
		}
		return o, b - 8*o
	}
	for g := range 2 {
		bit := uint64(g) * c.gbits
		for j := range uint64(slotsPerBucket + 1) {
			n := w
			if j == slotsPerBucket {
				n = indexBits
			}
			c.off[g][j], c.sh[g][j] = at(bit+j*w, n)
		}
		// writeSorted's two words: from the bucket's first byte, or as far
		// back as keeps them inside the pair (a generation's bucket ends
		// at most at the pair's end, so two words hold it).
		c.wo[g] = min(bit>>3, max(c.pbytes, 16)-16)
		for j := range uint64(slotsPerBucket + 1) {
			r := bit - 8*c.wo[g] + j*w
			c.wpos[g][j] = fieldPos{mul: 1 << (r & 63)}
			if r < 64 {
				c.wpos[g][j].sel = ^uint64(0)
			}
		}
		for k := range uint64(2) {
			first := bit - 8*c.wo[g]
			lo, hi := max(k*64, first), min((k+1)*64, first+c.gbits)
			if lo < hi {
				c.wmask[g][k] = (^uint64(0) >> (64 - (hi - lo))) << (lo - k*64)
			}
		}
		_, sh0 := at(bit, w)
		a := min(slotsPerBucket, (64-sh0)/w)
		for k, lanes := range [2]uint64{a, slotsPerBucket - a} {
			ch := &c.chunk[2*g+k]
			ch.off, ch.sh = at(bit+uint64(k)*a*w, lanes*w)
			ch.ones = 0
			for j := range lanes {
				ch.ones |= 1 << (j * w)
			}
			ch.highs = ch.ones << (w - 1)
		}
	}
}

// chunk is where pairsHold finds some slots' low bits: a word at byte off
// of the pair, shifted right by sh; ones has the lowest bit of each slot's
// low bits set, highs the highest.
type chunk struct{ off, sh, ones, highs uint64 }

// sortedBucket returns the slots of bucket i of generation g, ascending.
func (c *fingerprint) sortedBucket(g int, i uint64) (s [slotsPerBucket]uint64) {
	base := unsafe.Add(c.base, i*c.pbytes)
	o, sh := &c.off[g], &c.sh[g]
	// (Shift counts are masked with 63, which they are below, so that the
	// compiler emits no test for counts of 64 or more.)
	n := uint64(nibbleSet[ld(base, o[4])>>(sh[4]&63)&(1<<indexBits-1)])
	lb, lm := c.lbits&63, c.lmask
	s[0] = ld(base, o[0])>>(sh[0]&63)&lm | (n&15)<<lb
	s[1] = ld(base, o[1])>>(sh[1]&63)&lm | (n>>4&15)<<lb
	s[2] = ld(base, o[2])>>(sh[2]&63)&lm | (n>>8&15)<<lb
	s[3] = ld(base, o[3])>>(sh[3]&63)&lm | (n>>12)<<lb
	return s
}

// sortedHasFree reports whether bucket i of generation g has an empty
// slot: its first (lowest) slot is 0.
func (c *fingerprint) sortedHasFree(g int, i uint64) bool {
	base := unsafe.Add(c.base, i*c.pbytes)
	o, sh := &c.off[g], &c.sh[g]
	return ld(base, o[0])>>sh[0]&c.lmask == 0 && nibbleSet[ld(base, o[4])>>sh[4]&(1<<indexBits-1)]&15 == 0
}

// pairsHold is non-zero when either generation's bucket i1 or i2 holds
// fp. It first compares fp's low bits with every slot's at once, four
// words for the eight slots of a bucket pair: y has a zero slot exactly
// where the low bits are equal, and (y - ones) &^ y has a slot's high bit
// set if and only if some slot of y is zero (a borrow only runs upwards
// from a zero slot; bits above the slots do not reach them). Only when
// some low bits are equal, which a key never added rarely meets (16 slots,
// 2^(f-4) values), does it decode the buckets and compare whole
// fingerprints. All eight words are read before any branch, so that the
// misses of both places overlap.
func (c *fingerprint) pairsHold(i1, i2, fp uint64) bool {
	b1, b2 := unsafe.Add(c.base, i1*c.pbytes), unsafe.Add(c.base, i2*c.pbytes)
	low := fp & c.lmask
	k := &c.chunk
	r0, r1, r2, r3 := low*k[0].ones, low*k[1].ones, low*k[2].ones, low*k[3].ones
	y0 := ld(b1, k[0].off)>>(k[0].sh&63) ^ r0
	y1 := ld(b1, k[1].off)>>(k[1].sh&63) ^ r1
	y2 := ld(b1, k[2].off)>>(k[2].sh&63) ^ r2
	y3 := ld(b1, k[3].off)>>(k[3].sh&63) ^ r3
	z0 := ld(b2, k[0].off)>>(k[0].sh&63) ^ r0
	z1 := ld(b2, k[1].off)>>(k[1].sh&63) ^ r1
	z2 := ld(b2, k[2].off)>>(k[2].sh&63) ^ r2
	z3 := ld(b2, k[3].off)>>(k[3].sh&63) ^ r3
	if ((y0-k[0].ones)&^y0|(z0-k[0].ones)&^z0)&k[0].highs|((y1-k[1].ones)&^y1|(z1-k[1].ones)&^z1)&k[1].highs|
		((y2-k[2].ones)&^y2|(z2-k[2].ones)&^z2)&k[2].highs|((y3-k[3].ones)&^y3|(z3-k[3].ones)&^z3)&k[3].highs == 0 {
		return false
	}
	return c.sortedHolds(0, i1, fp) || c.sortedHolds(1, i1, fp) || c.sortedHolds(0, i2, fp) || c.sortedHolds(1, i2, fp)
}

// sortedHolds reports whether bucket i of generation g holds fp.
func (c *fingerprint) sortedHolds(g int, i, fp uint64) bool {
	s := c.sortedBucket(g, i)
	return s[0] == fp || s[1] == fp || s[2] == fp || s[3] == fp
}

// putBits sets the n bits at bit position bit of the table to v.
func (c *fingerprint) putBits(bit uint64, n uint, v uint64) {
	w := c.tab[bit>>3:]
	sh := bit & 7
	m := (uint64(1)<<n - 1) << sh
	binary.LittleEndian.PutUint64(w, binary.LittleEndian.Uint64(w)&^m|v<<sh)
}

// putSorted writes the ascending slots s as bucket i of generation g and
// marks the bucket changed for the next delta.
func (c *fingerprint) putSorted(g int, i uint64, s *[slotsPerBucket]uint64) {
	c.writeSorted(g, i, s)
	c.dirty.markBucket(g, i)
}

func (c *fingerprint) writeSorted(g int, i uint64, s *[slotsPerBucket]uint64) {
	lb, lm := c.lbits&63, c.lmask
	x := uint64(nibbleRank[0][s[0]>>lb&15] + nibbleRank[1][s[1]>>lb&15] + nibbleRank[2][s[2]>>lb&15] + nibbleRank[3][s[3]>>lb&15])
	// The bucket is composed in the two words from byte wo[g] of the pair
	// and written with one read-modify-write each: writes that do not
	// overlap, so no load waits on a partial store. A field at bit r of
	// the words is its value times 2^(r mod 64), a 128-bit product whose
	// halves go to the word r falls in and the next (sel says which).
	var w0, w1 uint64
	put := func(v uint64, f *fieldPos) {
		h, l := bits.Mul64(v, f.mul)
		w0 |= l & f.sel
		w1 |= h&f.sel | l&^f.sel
	}
	fp := &c.wpos[g]
	put(s[0]&lm, &fp[0])
	put(s[1]&lm, &fp[1])
	put(s[2]&lm, &fp[2])
	put(s[3]&lm, &fp[3])
	put(x, &fp[4])
	m := &c.wmask[g]
	t := c.tab[i*c.pbytes+c.wo[g]:]
	t = t[:16]
	binary.LittleEndian.PutUint64(t[0:], binary.LittleEndian.Uint64(t[0:])&^m[0]|w0)
	binary.LittleEndian.PutUint64(t[8:], binary.LittleEndian.Uint64(t[8:])&^m[1]|w1)
}

// fieldPos places a field of a bucket in the words writeSorted composes:
// mul is 2^(r mod 64) for the field's bit r, sel all ones when r < 64.
type fieldPos struct{ mul, sel uint64 }

// sort4 sorts four slots ascending.
func sort4(s *[slotsPerBucket]uint64) {
	if s[0] > s[1] {
		s[0], s[1] = s[1], s[0]
	}
	if s[2] > s[3] {
		s[2], s[3] = s[3], s[2]
	}
	if s[0] > s[2] {
		s[0], s[2] = s[2], s[0]
	}
	if s[1] > s[3] {
		s[1], s[3] = s[3], s[1]
	}
	if s[1] > s[2] {
		s[1], s[2] = s[2], s[1]
	}
}

func ascending(s *[slotsPerBucket]uint64) bool {
	return s[0] <= s[1] && s[1] <= s[2] && s[2] <= s[3]
}

// sortedPlace puts fp in a free slot of bucket i of generation g.
func (c *fingerprint) sortedPlace(g int, i, fp uint64) bool {
	// sortedBucket, its first slot tested before the others are read.
	base := unsafe.Add(c.base, i*c.pbytes)
	o, sh := &c.off[g], &c.sh[g]
	n := uint64(nibbleSet[ld(base, o[4])>>(sh[4]&63)&(1<<indexBits-1)])
	lb, lm := c.lbits&63, c.lmask
	if n&15 != 0 || ld(base, o[0])>>(sh[0]&63)&lm != 0 {
		return false
	}
	s1 := ld(base, o[1])>>(sh[1]&63)&lm | (n>>4&15)<<lb
	s2 := ld(base, o[2])>>(sh[2]&63)&lm | (n>>8&15)<<lb
	s3 := ld(base, o[3])>>(sh[3]&63)&lm | (n>>12)<<lb
	// fp merged into the ascending s1, s2, s3, without a branch on the
	// values.
	s := [slotsPerBucket]uint64{min(fp, s1), max(s1, min(fp, s2)), max(s2, min(fp, s3)), max(s3, fp)}
	c.putSorted(g, i, &s)
	return true
}

// insertSorted writes bucket i of generation g, whose ascending slots s
// have s[0] free, with fp merged into them, without a branch on the
// values.
func (c *fingerprint) insertSorted(g int, i uint64, s *[slotsPerBucket]uint64, fp uint64) {
	t := [slotsPerBucket]uint64{min(fp, s[1]), max(s[1], min(fp, s[2])), max(s[2], min(fp, s[3])), max(s[3], fp)}
	c.putSorted(g, i, &t)
}

// sortedTake removes one copy of fp from bucket i of generation g, if it
// holds one.
func (c *fingerprint) sortedTake(g int, i, fp uint64) bool {
	s := c.sortedBucket(g, i)
	for j := range slotsPerBucket {
		if s[j] == fp {
			for ; j > 0; j-- { // the emptied slot goes first
				s[j] = s[j-1]
			}
			s[0] = 0
			c.putSorted(g, i, &s)
			return true
		}
	}
	return false
}

// bfsNodes bounds the breadth-first search of an insert: the two
// candidate buckets and four levels below them (2+8+32+128+512), so that
// an insert the table refuses costs a bounded number of bucket reads.
const bfsNodes = 682

// bfsNode is a bucket the search reached by moving fp, held by its parent
// node's bucket, there (parent -1: a candidate bucket of the new key).
type bfsNode struct {
	bucket, fp uint64
	parent     int32
}

// bfsInsert places fp, whose candidate buckets i1 and i2 of generation g
// are full, by moving residents along the shortest chain of moves that
// ends in a bucket with a free slot (breadth-first, Li et al. 2014): each
// move takes a fingerprint to its other candidate bucket. Nothing moves
// unless a chain is found. Like every move of the table it
// depends only on the table's contents, so replays make the same moves.
func (c *fingerprint) bfsInsert(g int, i1, i2, fp uint64) bool {
	if c.bfs == nil {
		c.bfs = make([]bfsNode, 0, bfsNodes)
	}
	q := c.bfs[:0]
	q = append(q, bfsNode{bucket: i1, parent: -1})
	if i2 != i1 {
		q = append(q, bfsNode{bucket: i2, parent: -1})
	}
	// Nodes are expanded in the order they were reached, so the first
	// bucket found free ends a shortest chain.
	for head := 0; head < len(q); head++ {
		n := q[head]
		s := c.sortedBucket(g, n.bucket)
		for j, v := range s {
			if j > 0 && v == s[j-1] {
				continue // the same move as the slot before
			}
			nb := c.alt(n.bucket, v)
			if nb == n.bucket || onPath(q, head, nb) {
				continue
			}
			if len(q) == cap(q) {
				return false
			}
			q = append(q, bfsNode{bucket: nb, fp: v, parent: int32(head)})
			if !c.sortedHasFree(g, nb) {
				continue
			}
			// Move along the chain from its free end, each move freeing
			// the slot the next one fills.
			t := len(q) - 1
			for ; q[t].parent >= 0; t = int(q[t].parent) {
				c.sortedTake(g, q[q[t].parent].bucket, q[t].fp)
				c.sortedPlace(g, q[t].bucket, q[t].fp)
			}
			return c.sortedPlace(g, q[t].bucket, fp)
		}
	}
	return false
}

// onPath reports whether bucket b is node n's or one of its ancestors':
// a chain never passes a bucket twice.
func onPath(q []bfsNode, n int, b uint64) bool {
	for ; n >= 0; n = int(q[n].parent) {
		if q[n].bucket == b {
			return true
		}
	}
	return false
}

// settle turns a raw table (as decoded) into the semi-sorted layout, in
// place: bucket pair i moves from byte i·f to byte i·(f-1), so it is read
// whole before anything below its new end is written. A bucket whose
// slots were not in ascending order encodes to other stream bytes than it
// was decoded from: it is marked changed, so the next delta carries it.
func (c *fingerprint) settle() {
	if c.sorted || !c.sortable() {
		return
	}
	rawBB := c.bb
	c.sortedLayout()
	for i := range c.buckets {
		var s [2][slotsPerBucket]uint64
		for g := range 2 {
			s[g] = c.rawBucket(rawBB, g, i)
		}
		for g := range 2 {
			if !ascending(&s[g]) {
				sort4(&s[g])
				c.dirty.markBucket(g, i)
			}
			c.writeSorted(g, i, &s[g])
		}
	}
	clear(c.tab[c.buckets*c.pbytes:])
	c.sorted = true
}

// sortable reports whether the fingerprints are wide enough for the
// semi-sorted layout (a nibble and at least two low bits, which pairsHold
// compares first).
func (c *fingerprint) sortable() bool { return c.f >= 6 }

// unsettle turns a semi-sorted table into the raw layout, in a new
// allocation: a delta being applied holds a bucket out of order, which
// only the raw layout can keep (see flush). The stream is unchanged.
func (c *fingerprint) unsettle() {
	if !c.sorted {
		return
	}
	rawBB := c.bb
	words := make([]uint64, (2*c.buckets*rawBB+tabPad+7)/8)
	adviseHuge(words)
	tab := unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), len(words)*8)
	for i := range c.buckets {
		for g := range 2 {
			s := c.sortedBucket(g, i)
			o := (2*i + uint64(g)) * rawBB
			lo, hi := streamOf(&s, c.f)
			var b [16]byte
			binary.LittleEndian.PutUint64(b[:], lo)
			binary.LittleEndian.PutUint64(b[8:], hi)
			copy(tab[o:o+rawBB], b[:])
		}
	}
	c.words, c.tab, c.base = words, tab, unsafe.Pointer(&words[0])
	c.sorted = false
}

// streamOf packs four slots f bits apiece, the first lowest: a bucket's
// bytes in the snapshot stream (lo, then hi).
func streamOf(s *[slotsPerBucket]uint64, f uint) (lo, hi uint64) {
	for j := range uint(slotsPerBucket) {
		b := j * f
		if b < 64 {
			lo |= s[j] << b
			if b+f > 64 {
				hi |= s[j] >> (64 - b)
			}
		} else {
			hi |= s[j] << (b - 64)
		}
	}
	return lo, hi
}

// slotsOf unpacks what streamOf packs.
func slotsOf(lo, hi uint64, f uint) (s [slotsPerBucket]uint64) {
	mask := uint64(1)<<f - 1
	for j := range uint(slotsPerBucket) {
		b := j * f
		switch {
		case b+f <= 64:
			s[j] = lo >> b & mask
		case b < 64:
			s[j] = (lo>>b | hi<<(64-b)) & mask
		default:
			s[j] = hi >> (b - 64) & mask
		}
	}
	return s
}
