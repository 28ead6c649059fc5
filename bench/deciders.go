package bench

import (
	"runtime"
	"time"

	cuckoo "github.com/seiflotfy/cuckoofilter"
	boom "github.com/tylertreat/BoomFilters"
)

// copyState forwards everything.
type copyState struct{}

func newCopy(Spec) state                      { return copyState{} }
func (copyState) decider(int) decider         { return copyState{} }
func (copyState) seen([]byte, time.Time) bool { return false }
func (copyState) bytes() (int64, string)      { return 0, "none" }

// exactSet keeps every key of a partition in a Go map: the naive exact answer.
type exactSet struct {
	sets     []map[string]struct{}
	heapBase uint64
}

func newExactSet(s Spec) state {
	return &exactSet{sets: make([]map[string]struct{}, len(s.Ends)), heapBase: liveHeap()}
}

func (e *exactSet) decider(p int) decider {
	m := make(map[string]struct{})
	e.sets[p] = m
	return setDecider(m)
}

// bytes measures the live heap after a collection, less the heap before the
// maps were made: the maps' keys, buckets and slack.
func (e *exactSet) bytes() (int64, string) {
	live := liveHeap()
	runtime.KeepAlive(e.sets)
	return int64(live) - int64(e.heapBase), "live heap growth"
}

type setDecider map[string]struct{}

func (s setDecider) seen(key []byte, _ time.Time) bool {
	if _, ok := s[string(key)]; ok {
		return true
	}
	s[string(key)] = struct{}{}
	return false
}

func liveHeap() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// pairState holds, per partition, a current and a previous filter from
// another library, rotating on the same windows as the stage's pair.
type pairState struct {
	pairs []*libraryPair
	size  func(Spec) int64
}

type libraryFilter interface {
	test(key []byte) bool
	add(key []byte)
	reset()
}

// libraryPair rotates like the stage's pair: windows are multiples of the
// window length since the Unix epoch; entering the next window drops the
// previous filter and makes the current one previous; a jump of two or more
// windows clears both.
type libraryPair struct {
	current, previous libraryFilter
	window            int64 // nanoseconds
	index             int64 // current window number
	started           bool
}

func (l *libraryPair) seen(key []byte, ts time.Time) bool {
	if i := ts.UnixNano() / l.window; !l.started || i > l.index {
		switch {
		case !l.started:
		case i == l.index+1:
			l.previous.reset()
			l.current, l.previous = l.previous, l.current
		default:
			l.current.reset()
			l.previous.reset()
		}
		l.index, l.started = i, true
	}
	if l.current.test(key) || l.previous.test(key) {
		return true
	}
	l.current.add(key)
	return false
}

func (p *pairState) decider(i int) decider { return p.pairs[i] }

// boomCounting is tylertreat/BoomFilters' counting Bloom filter with 4-bit
// counters, sized by the same expected keys and false-positive rate as the
// stage.
type boomCounting struct{ f *boom.CountingBloomFilter }

func (b boomCounting) test(key []byte) bool { return b.f.Test(key) }
func (b boomCounting) add(key []byte)       { b.f.Add(key) }
func (b boomCounting) reset()               { b.f.Reset() }

const boomCounterBits = 4

func newBoomCounting(s Spec) state {
	ps := &pairState{pairs: make([]*libraryPair, len(s.Ends))}
	var bytes int64
	for i := range ps.pairs {
		cur := boom.NewCountingBloomFilter(uint(s.ExpectedKeys), boomCounterBits, s.FPRate)
		prev := boom.NewCountingBloomFilter(uint(s.ExpectedKeys), boomCounterBits, s.FPRate)
		bytes += 2 * int64((cur.Capacity()*boomCounterBits+7)/8)
		ps.pairs[i] = &libraryPair{current: boomCounting{cur}, previous: boomCounting{prev}, window: int64(s.Window)}
	}
	ps.size = func(Spec) int64 { return bytes }
	return ps
}

// cuckooFilter is seiflotfy/cuckoofilter: 8-bit fingerprints, 4 per bucket,
// so its false-positive rate (about 3%) is fixed, not the configured one.
type cuckooFilter struct{ f *cuckoo.Filter }

func (c cuckooFilter) test(key []byte) bool { return c.f.Lookup(key) }
func (c cuckooFilter) add(key []byte)       { c.f.Insert(key) }
func (c cuckooFilter) reset()               { c.f.Reset() }

func newCuckoo(s Spec) state {
	ps := &pairState{pairs: make([]*libraryPair, len(s.Ends))}
	var bytes int64
	for i := range ps.pairs {
		cur := cuckoo.NewFilter(uint(s.ExpectedKeys))
		prev := cuckoo.NewFilter(uint(s.ExpectedKeys))
		bytes += 2 * cuckooBytes(s.ExpectedKeys)
		ps.pairs[i] = &libraryPair{current: cuckooFilter{cur}, previous: cuckooFilter{prev}, window: int64(s.Window)}
	}
	ps.size = func(Spec) int64 { return bytes }
	return ps
}

func (p *pairState) bytes() (int64, string) { return p.size(Spec{}), "filter size" }

// cuckooBytes is the size of a seiflotfy/cuckoofilter of the given capacity:
// one byte per fingerprint slot, capacity rounded up to a power of two.
func cuckooBytes(capacity uint64) int64 {
	n := uint64(4)
	for n < capacity {
		n <<= 1
	}
	return int64(n)
}
