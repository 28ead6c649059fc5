package rotation

import (
	"time"

	"github.com/cespare/xxhash/v2"
)

// Probe is where a key lives in a pair: computed once by Locate, then used
// by TestAndAddAt without hashing the key again. It depends only on the key
// and the pair's geometry (its Options), not on time or contents, so it
// stays valid across rotations and for every pair of the same Options
// (Clone, CopyTo, a decoded snapshot). It holds a reference to the key. The
// zero Probe is not valid.
type Probe struct {
	key []byte // Plain mode: bits-and-blooms hashes the key itself
	loc probe  // Counting mode
	fpr fprobe // Fingerprint mode
}

// Locate writes key's place in p to pr and starts loading the memory a
// later TestAndAddAt of pr will read, returning without waiting for it. It
// changes nothing observable (answers, Stats, snapshots, time) and does not
// allocate.
//
// Why: a probe of a large pair is a cache (and TLB) miss, and a TestAndAdd
// waits for its answer, so probes one after another pay one memory round
// trip each. The misses of several keys overlap when their loads are issued
// together: Locate the keys of a batch first, then TestAndAddAt them in
// order. The hashing and counter placement Locate does then run while the
// earlier keys' misses are outstanding, instead of after them.
//
// In Counting mode it prefetches the key's bucket (both generations: a
// PREFETCHT0 of each line on amd64, a load of one word of each elsewhere);
// in Fingerprint mode it does the same for both candidate buckets (both
// generations of each); in Plain mode, whose k lines are scattered, it only
// keeps the key.
func (p *Pair) Locate(key []byte, pr *Probe) {
	pr.key = key
	if c := p.fp; c != nil {
		c.locate(xxhash.Sum64(key), &pr.fpr)
		prefetchBucket(c.bucketLines(pr.fpr.i1), &p.sink)
		prefetchBucket(c.bucketLines(pr.fpr.i2), &p.sink)
		return
	}
	if p.cnt == nil {
		return
	}
	p.cnt.locate(xxhash.Sum64(key), &pr.loc)
	prefetchBucket(p.cnt.bucket(&pr.loc), &p.sink)
}

// TestAndAddAt is TestAndAdd of the key pr was located for.
func (p *Pair) TestAndAddAt(pr *Probe, ts time.Time) (seen bool) {
	p.advance(ts)
	if p.fp != nil {
		return p.testAndAddFingerprint(&pr.fpr)
	}
	if p.cnt == nil {
		return p.pl.testAndAdd(pr.key)
	}
	return p.cnt.testAndAdd(&pr.loc)
}
