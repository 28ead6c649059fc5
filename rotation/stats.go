package rotation

import (
	"math"
	"time"
)

// Stats describes a pair; computing it costs O(1) (no scan of the filters).
type Stats struct {
	Mode        Mode
	Window      time.Duration
	WindowStart time.Time // start of the current window (zero before the first record)
	Rotations   uint64    // cumulative number of rotations (a 2+ window jump counts as one rotation event)
	Bytes       int
	Current     FilterStats
	Previous    FilterStats

	// Fingerprint mode, cumulative since New or Reset (0 in other modes):
	// Overflows counts inserts the buckets refused, whose fingerprint went
	// to the generation's exact stash (nothing lost); EarlyRotations counts
	// rotations forced by a full stash, far past ExpectedKeys, and
	// ForgottenKeys the keys those rotations dropped early (they pass as new
	// again: duplicates may go through, no new record is dropped).
	Overflows      uint64
	EarlyRotations uint64
	ForgottenKeys  uint64
}

// FilterStats describes one generation.
type FilterStats struct {
	M             uint64  // counters (counting), bits (plain) or fingerprint slots (fingerprint)
	K             uint32  // hash functions, or fingerprint bits (fingerprint)
	Fill          float64 // fraction of non-zero counters / set bits
	EstimatedKeys float64 // -(m/k) ln(1 - fill)
	FPRate        float64 // estimated current false-positive rate
	Saturated     uint64  // counters stuck at 15 (counting only)
	Stashed       uint64  // fingerprints in the exact stash (fingerprint only)
}

// Stats returns the pair's statistics. In Counting mode the fill is exact
// (counts kept by every change) and the false-positive estimate comes from
// the blocked filter's model at the estimated load. In Plain mode the fill is
// the expected fill 1 - e^{-kn/m} of the n keys added as new (keys rejected
// as false positives are not counted), and the estimate is fill^k.
func (p *Pair) Stats() Stats {
	s := Stats{Mode: p.opts.Mode, Window: p.opts.Window, Rotations: p.rotations, Bytes: p.SizeBytes()}
	if p.started {
		s.WindowStart = time.Unix(0, p.start).UTC()
	}
	if p.gens != nil {
		s.Current, s.Previous = p.gens.stats(0), p.gens.stats(1)
	}
	if c := p.fp; c != nil {
		s.Overflows, s.EarlyRotations, s.ForgottenKeys = c.refused, c.early, c.forgotten
	}
	return s
}

// estimateKeys inverts the expected fill: n ≈ -(m/k) ln(1 - fill), with k
// the number of distinct counters per key (in counting mode, where a key's k
// draws may repeat, their mean). A full filter has no finite estimate;
// report +Inf.
func estimateKeys(fill float64, m uint64, k float64) float64 {
	if fill >= 1 {
		return math.Inf(1)
	}
	return -float64(m) / k * math.Log1p(-fill)
}
