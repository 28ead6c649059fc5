package rotation

import "math/bits"

// dirtyRing is how many marks dirtySet buffers before folding them into its
// bitmaps (a power of two).
const dirtyRing = 256

// dirtySet records which words of each generation (physical half, not
// current/previous) changed since the last delta: a bitmap of one bit per
// word per generation. A bitmap of a large pair is far bigger than the
// caches, so setting its bit on every insert would add a cache miss to
// each; instead a mark goes to a small ring, which stays in L1, and a full
// ring is folded into the bitmaps at once, where the misses of its
// independent updates overlap.
//
// In fingerprint mode a mark is a bucket of a generation instead
// (markBucket), turned into the words of the stream it spans when folded.
type dirtySet struct {
	maps        [2][]uint64
	n           int
	words       int    // bits set in maps: the changed words folded so far
	bucketBytes uint64 // fingerprint mode: stream bytes per bucket; 0: marks are words
	ring        [dirtyRing]dirtyMark
}

// dirtyMark is a pending mark: bits mask of word at>>1 of bitmap at&1, or
// in fingerprint mode bucket at>>1 of generation at&1.
type dirtyMark struct{ at, mask uint64 }

// newDirtySet returns the tracking of generations of the given words; a
// fingerprint table gives its stream bytes per bucket, others 0.
func newDirtySet(words, bucketBytes uint64) dirtySet {
	n := (words + 63) / 64
	return dirtySet{maps: [2][]uint64{make([]uint64, n), make([]uint64, n)}, bucketBytes: bucketBytes}
}

// mark records that the words of generation g set in mask (bit j: word
// 64w+j) changed.
func (d *dirtySet) mark(g int, w, mask uint64) {
	d.ring[d.n&(dirtyRing-1)] = dirtyMark{at: w<<1 | uint64(g), mask: mask}
	d.n++
	if d.n == dirtyRing {
		d.fold()
	}
}

// markBucket records that bucket i of generation g of a fingerprint table
// changed, and starts loading the bitmap word the fold will set, so that
// the fold's updates find it in the caches.
func (d *dirtySet) markBucket(g int, i uint64) {
	if m := d.maps[g]; len(m) > 0 {
		prefetchLine(&m[min(i*d.bucketBytes>>9, uint64(len(m)-1))])
	}
	d.ring[d.n&(dirtyRing-1)].at = i<<1 | uint64(g)
	d.n++
	if d.n == dirtyRing {
		d.fold()
	}
}

// fold moves the pending marks into the bitmaps.
func (d *dirtySet) fold() {
	if bb := d.bucketBytes; bb != 0 {
		for _, m := range d.ring[:d.n] {
			// Bucket i is bytes [i·bb, (i+1)·bb) of its generation's
			// stream: up to three words (bb ≤ 16).
			lo := (m.at >> 1) * bb
			first, last := lo>>3, (lo+bb-1)>>3
			b := d.maps[m.at&1]
			if first>>6 == last>>6 { // one word of the bitmap: nearly always
				d.set(b, first>>6, (2<<(last&63)-1)&^(1<<(first&63)-1))
				continue
			}
			for w := first; w <= last; w++ {
				d.set(b, w>>6, 1<<(w&63))
			}
		}
		d.n = 0
		return
	}
	for _, m := range d.ring[:d.n] {
		d.set(d.maps[m.at&1], m.at>>1, m.mask)
	}
	d.n = 0
}

// set sets mask in word i of bitmap b, counting the bits it newly sets.
func (d *dirtySet) set(b []uint64, i, mask uint64) {
	d.words += bits.OnesCount64(mask &^ b[i])
	b[i] |= mask
}

// changed is the number of words changed since the last delta (it folds
// the pending marks: at most a ring's).
func (d *dirtySet) changed() int {
	d.fold()
	return d.words
}

// clearGen forgets the changes of generation g (it was cleared: only later
// writes matter).
func (d *dirtySet) clearGen(g int) {
	d.fold()
	for _, w := range d.maps[g] {
		d.words -= bits.OnesCount64(w)
	}
	clear(d.maps[g])
}

// reset forgets every change.
func (d *dirtySet) reset() {
	d.n, d.words = 0, 0
	clear(d.maps[0])
	clear(d.maps[1])
}
