package rotation

import (
	"math/bits"

	"github.com/cespare/xxhash/v2"
)

// Prefetch starts loading the memory that a later TestAndAdd, Remove or Test
// of key will read, and returns without waiting for it. It changes nothing
// observable (answers, Stats, snapshots, time): it is only a hint for speed.
//
// Why: a probe of a large pair is a cache (and TLB) miss, and a TestAndAdd
// waits for its answer, so probes one after another pay one memory round
// trip each. The misses of several keys overlap when their loads are issued
// together: Prefetch the keys of a batch first, then TestAndAdd them in
// order. Prefetching a single key just before its TestAndAdd gains nothing.
//
// In Counting mode it touches the key's bucket (both generations); in Plain
// mode, whose k lines are scattered, it does nothing. It does not allocate.
func (p *Pair) Prefetch(key []byte) {
	if p.cnt == nil {
		return
	}
	block, _ := bits.Mul64(xxhash.Sum64(key), p.cnt.blocks)
	prefetchBucket((*[bucketWords]uint64)(p.cnt.words[block*bucketWords:]), &p.sink)
}
