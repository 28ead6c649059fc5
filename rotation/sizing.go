package rotation

import (
	"math"
	"sync"

	"github.com/bits-and-blooms/bloom/v3"
)

// Geometry of the blocked counting filter: a block is one 64-byte cache line
// holding 128 4-bit counters, and all k counters of a key live in one block.
const (
	blockWords    = 8
	blockCounters = blockWords * 16
	maxK          = 32
	// modelMaxJ is how many keys per block the false-positive model tabulates;
	// beyond it the model assumes the worst (every probe is a false positive).
	modelMaxJ = 1024
)

// blockModel is the exact false-positive rate of a block holding j keys, for
// one k. Each key draws k of the block's 128 counters uniformly with
// replacement, so it sets s distinct counters with the occupancy
// distribution P(s); the union size U after j keys is a Markov chain, and a
// probe with s counters is a false positive when they all fall inside the
// union: C(U,s)/C(128,s). Over the filter, the number of keys sharing the
// probed block is Poisson with mean λ = n/blocks.
type blockModel struct {
	k        int
	distinct float64   // mean number of distinct counters per key: 128(1-(127/128)^k)
	fp       []float64 // fp[j]: false-positive probability of a block holding j keys
}

var (
	modelsMu sync.Mutex
	models   = map[int]*blockModel{}
)

func modelFor(k int) *blockModel {
	modelsMu.Lock()
	defer modelsMu.Unlock()
	if m, ok := models[k]; ok {
		return m
	}
	m := newBlockModel(k)
	models[k] = m
	return m
}

func newBlockModel(k int) *blockModel {
	const b = blockCounters
	var binom [b + 1][b + 1]float64
	for n := 0; n <= b; n++ {
		binom[n][0] = 1
		for r := 1; r <= n; r++ {
			binom[n][r] = binom[n-1][r-1] + binom[n-1][r]
		}
	}
	// occ[s]: probability that k draws with replacement hit s distinct counters.
	occ := make([]float64, k+1)
	occ[0] = 1
	for range k {
		for s := k; s >= 0; s-- {
			stay := occ[s] * float64(s) / b
			if s > 0 {
				stay += occ[s-1] * float64(b-s+1) / b
			}
			occ[s] = stay
		}
	}
	// trans[u][d]: probability that a new key adds d counters to a union of u;
	// hit[u]: probability that a probe's counters all lie in a union of u.
	trans := make([][]float64, b+1)
	hit := make([]float64, b+1)
	for u := 0; u <= b; u++ {
		trans[u] = make([]float64, k+1)
		for s := 1; s <= k; s++ {
			if occ[s] == 0 {
				continue
			}
			for d := 0; d <= s; d++ {
				if d <= b-u && s-d <= u {
					trans[u][d] += occ[s] * binom[b-u][d] * binom[u][s-d] / binom[b][s]
				}
			}
			if s <= u {
				hit[u] += occ[s] * binom[u][s] / binom[b][s]
			}
		}
	}
	fp := make([]float64, modelMaxJ+1)
	dist := make([]float64, b+1)
	next := make([]float64, b+1)
	dist[0] = 1
	for j := 0; j <= modelMaxJ; j++ {
		var f float64
		for u, pu := range dist {
			f += pu * hit[u]
		}
		fp[j] = f
		clear(next)
		for u := 0; u <= b; u++ {
			if dist[u] == 0 {
				continue
			}
			for d, p := range trans[u] {
				if p != 0 {
					next[u+d] += dist[u] * p
				}
			}
		}
		dist, next = next, dist
	}
	var distinct float64
	for s, p := range occ {
		distinct += float64(s) * p
	}
	return &blockModel{k: k, distinct: distinct, fp: fp}
}

// rate is the expected false-positive rate when blocks hold λ keys on average.
func (m *blockModel) rate(lambda float64) float64 {
	if lambda <= 0 {
		return 0
	}
	if lambda > modelMaxJ {
		return 1
	}
	var sum, mass float64
	lnl := math.Log(lambda)
	hi := int(lambda + 12*math.Sqrt(lambda) + 30)
	for j := 0; j <= hi; j++ {
		if j > modelMaxJ {
			break
		}
		lg, _ := math.Lgamma(float64(j + 1))
		p := math.Exp(-lambda + float64(j)*lnl - lg)
		sum += p * m.fp[j]
		mass += p
	}
	if mass < 1 {
		sum += 1 - mass // keys beyond the table: assume the worst
	}
	return math.Min(sum, 1)
}

// countingGeometry sizes the blocked counting filter. It starts from the
// classic sizing (bloom.EstimateParameters) and, for k near the classic
// optimum, finds the fewest 128-counter blocks whose modelled false-positive
// rate at n keys is at most p; blocking makes block loads uneven, so this
// needs more counters than the classic m. It returns the number of blocks and k.
func countingGeometry(n uint64, p float64) (blocks uint64, k int) {
	m0, k0 := bloom.EstimateParameters(uint(n), p)
	bestBlocks := uint64(math.MaxUint64)
	bestK := 0
	for kk := 1; kk <= min(maxK, int(k0)+3); kk++ {
		model := modelFor(kk)
		fits := func(b uint64) bool { return model.rate(float64(n)/float64(b)) <= p }
		hi := max(1, (uint64(m0)+blockCounters-1)/blockCounters)
		for !fits(hi) {
			if hi > 1<<40 {
				break
			}
			hi *= 2
		}
		if !fits(hi) {
			continue
		}
		lo := uint64(1)
		if fits(lo) {
			hi = lo
		}
		for hi-lo > 1 { // invariant: !fits(lo), fits(hi)
			mid := lo + (hi-lo)/2
			if fits(mid) {
				hi = mid
			} else {
				lo = mid
			}
		}
		if hi < bestBlocks {
			bestBlocks, bestK = hi, kk
		}
	}
	return bestBlocks, bestK
}

// plainGeometry is the classic sizing used by the plain (bits-and-blooms) mode.
func plainGeometry(n uint64, p float64) (m uint64, k int) {
	mm, kk := bloom.EstimateParameters(uint(n), p)
	return uint64(mm), int(kk)
}
