package rotation

import (
	"fmt"
	"math"
	"time"
	"unsafe"
)

// maxBucketLoad is the fraction of slots a fingerprint generation holds at
// ExpectedKeys. Two candidate buckets of 4 slots can hold keys up to about
// 97.7 % full (the load threshold of the (2,4) cuckoo table); the
// breadth-first insert (bfsInsert) finds a place up to about 97 %, so 96 %
// leaves some room for late growth (beyond it refused inserts go to the
// stash). 0.958 is the least load at which the pair at 1e-6 stays within
// 48 bits per key.
const maxBucketLoad = 0.96

// earlierBucketLoad is maxBucketLoad of the releases up to 0.9.0, whose
// tables were neither semi-sorted nor filled breadth-first
// (earlierFingerprintGeometry).
const earlierBucketLoad = 0.9

// fingerprintRate is the false-positive rate of one fingerprint generation
// of N buckets holding x fingerprints in its slots and s in its stash, with
// f-bit fingerprints: a probe compares its fingerprint with those in its two
// candidate buckets (2x/N expected) and with the stashed ones under its
// lower bucket (s/N expected); each matches with probability 1/(2^f - 1).
func fingerprintRate(f int, buckets uint64, x, s float64) float64 {
	q := 1 / (math.Ldexp(1, f) - 1)
	return -math.Expm1((2*x + s) / float64(buckets) * math.Log1p(-q))
}

// fingerprintGeometry sizes a fingerprint generation for n keys at rate p:
// for each even f it takes the highest load (at most maxBucketLoad) at which
// the modelled rate is at most p, and keeps the f with the fewest bits per
// key, (f-1)/load (a semi-sorted slot stores f-1 bits), f from 6 (see
// fingerprint.sortable). It returns the number of buckets and f.
func fingerprintGeometry(n uint64, p float64) (buckets uint64, f int) {
	return fingerprintSizing(n, p, 6, maxBucketLoad, 1)
}

// earlierFingerprintGeometry is fingerprintGeometry as releases up to 0.9.0
// computed it (f/load, f from 2, load at most 0.9): the geometry of their
// snapshots, which the snapshot header tells apart from this release's
// (putPreamble).
func earlierFingerprintGeometry(n uint64, p float64) (buckets uint64, f int) {
	return fingerprintSizing(n, p, 2, earlierBucketLoad, 0)
}

// fingerprintSizing is fingerprintGeometry with f from minF, the load at
// most maxLoad, and bits per key (f-saved)/load.
func fingerprintSizing(n uint64, p float64, minF int, maxLoad, saved float64) (buckets uint64, f int) {
	best := math.Inf(1)
	bestLoad := 0.0
	for ff := minF; ff <= 32; ff += 2 {
		q := 1 / (math.Ldexp(1, ff) - 1)
		// rate at load a: 1 - (1-q)^(2·slotsPerBucket·a) ≤ p.
		load := math.Min(maxLoad, math.Log1p(-p)/(2*slotsPerBucket*math.Log1p(-q)))
		if bpk := (float64(ff) - saved) / load; bpk < best {
			best, bestLoad, f = bpk, load, ff
		}
	}
	buckets = max(1, uint64(math.Ceil(float64(n)/(slotsPerBucket*bestLoad))))
	for fingerprintRate(f, buckets, float64(n), 0) > p { // rounding of the load
		buckets++
	}
	return buckets, f
}

// generationRate is the modelled false-positive rate of one generation of
// geometry (m, k) of mode holding x keys.
func generationRate(mode Mode, m uint64, k int, x float64) float64 {
	switch mode {
	case Plain:
		return math.Pow(-math.Expm1(-float64(k)*x/float64(m)), float64(k))
	case Fingerprint:
		return fingerprintRate(k, m/slotsPerBucket, x, 0)
	default:
		blocks := m / blockCounters
		return modelFor(k).rate(x / float64(blocks))
	}
}

// PairRate is the modelled false-positive rate of a pair built with o (the
// probability that a key never added is reported seen, that is, that a new
// record is dropped) when each generation holds keysPerGeneration keys. At
// o.ExpectedKeys it is at most o.FPRate.
func PairRate(o Options, keysPerGeneration float64) (float64, error) {
	o, err := o.normalize()
	if err != nil {
		return 0, err
	}
	m, k := geometry(o)
	g := generationRate(o.Mode, m, k, keysPerGeneration)
	return -math.Expm1(2 * math.Log1p(-g)), nil
}

// FalseDropsPerDay is the expected number of new records a pair built with o
// drops per day (false positives) when it sees newKeysPerDay distinct keys a
// day, evenly over time: each window then holds x = newKeysPerDay·Window/24h
// keys, the previous generation x and the current one from 0 to x, and a new
// key is dropped with probability 1 - (1 - r(x))(1 - r(t·x)) at a fraction t
// of the window, r being one generation's model. For a stage, pass the keys
// of one partition and multiply by the partitions.
func FalseDropsPerDay(o Options, newKeysPerDay float64) (float64, error) {
	o, err := o.normalize()
	if err != nil {
		return 0, err
	}
	if math.IsNaN(newKeysPerDay) || newKeysPerDay < 0 {
		return 0, fmt.Errorf("false drops per day: new keys per day %g: want >= 0", newKeysPerDay)
	}
	m, k := geometry(o)
	x := newKeysPerDay * float64(o.Window) / float64(24*time.Hour)
	prev := generationRate(o.Mode, m, k, x)
	const steps = 64
	var sum float64
	for i := range steps {
		cur := generationRate(o.Mode, m, k, x*(float64(i)+0.5)/steps)
		sum += 1 - (1-prev)*(1-cur)
	}
	return newKeysPerDay * sum / steps, nil
}

// BitsPerKey is the filter memory of a pair built with o per expected key
// (both generations; without the change tracking SizeBytes also counts).
func BitsPerKey(o Options) (float64, error) {
	o, err := o.normalize()
	if err != nil {
		return 0, err
	}
	m, k := geometry(o)
	return float64(pairBytes(o.Mode, m, k)*8) / float64(o.ExpectedKeys), nil
}

// pairBytes is the filter memory of both generations of geometry (m, k).
func pairBytes(mode Mode, m uint64, k int) uint64 {
	switch mode {
	case Plain:
		return 2 * 8 * ((m + 63) / 64)
	case Fingerprint:
		return (m / slotsPerBucket) * (uint64(k) - 1) // semi-sorted: f-1 bytes per bucket of both generations
	default:
		return 2 * m / 2
	}
}

// generationWords is the words of one generation's snapshot data.
func generationWords(mode Mode, m, k uint64) uint64 {
	switch mode {
	case Plain:
		return (m + 63) / 64
	case Fingerprint:
		return (m/slotsPerBucket*(k/2) + 7) / 8
	default:
		return m / 16
	}
}

// trackingBytes is the memory of a pair's change tracking (dirty.go): a
// bit per word of each generation, and the ring of pending marks. Plain
// pairs track nothing.
func trackingBytes(mode Mode, m uint64, k int) uint64 {
	if !mode.Incremental() {
		return 0
	}
	return 2*8*((generationWords(mode, m, uint64(k))+63)/64) + uint64(unsafe.Sizeof(dirtySet{}.ring))
}
