package rotation

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/bits-and-blooms/bloom/v3"
)

// The Large benchmarks compare the pairs of each mode with one plain
// bits-and-blooms filter at production size (100M keys, ε = 0.001; the
// fingerprint pair at its default ε = 1e-6), where every probe misses the
// CPU caches. Run them together and compare:
//
//	go test ./rotation -run '^$' -bench Large -benchmem -benchtime=2000000x
const (
	largeKeys     = 100_000_000
	largeFPRate   = 0.001
	largeFPRateFP = 1e-6 // the fingerprint pair's default rate
)

// freshKey writes the i-th benchmark key: 16 bytes, all distinct.
func freshKey(buf *[16]byte, i uint64) []byte {
	binary.LittleEndian.PutUint64(buf[0:], i*0x9E3779B97F4A7C15)
	binary.LittleEndian.PutUint64(buf[8:], i)
	return buf[:]
}

// prefault touches every page so that page faults of the fresh allocation are
// not charged to the probes.
func prefault(words []uint64) {
	for i := 0; i < len(words); i += 512 {
		words[i] = 0
	}
}

func BenchmarkLargePair(b *testing.B) {
	benchPair(b, Counting, largeKeys, largeFPRate)
}

func BenchmarkLargePlainPair(b *testing.B) {
	benchPair(b, Plain, largeKeys, largeFPRate)
}

func BenchmarkLargeFingerprintPair(b *testing.B) {
	benchPair(b, Fingerprint, largeKeys, largeFPRateFP)
}

func BenchmarkLargeBitsAndBlooms(b *testing.B) {
	f := bloom.NewWithEstimates(largeKeys, largeFPRate)
	prefault(f.BitSet().Bytes())
	var buf [16]byte
	b.ResetTimer()
	for i := range uint64(b.N) {
		f.TestAndAdd(freshKey(&buf, i))
	}
	b.StopTimer()
	b.ReportMetric(float64(f.Cap())/largeKeys, "bits/key")
	b.ReportMetric(float64(len(f.BitSet().Bytes())*8), "filter-bytes")
}

func BenchmarkSmallPair(b *testing.B) {
	benchPair(b, Counting, 100_000, largeFPRate)
}

func BenchmarkSmallPlainPair(b *testing.B) {
	benchPair(b, Plain, 100_000, largeFPRate)
}

func BenchmarkSmallFingerprintPair(b *testing.B) {
	benchPair(b, Fingerprint, 100_000, largeFPRateFP)
}

func benchPair(b *testing.B, mode Mode, n uint64, rate float64) {
	p, err := New(Options{ExpectedKeys: n, FPRate: rate, Window: time.Hour, Mode: mode})
	if err != nil {
		b.Fatal(err)
	}
	switch mode {
	case Counting:
		prefault(p.cnt.words)
	case Fingerprint:
		prefault(p.fp.words)
	default:
		prefault(p.pl.cur.words)
		prefault(p.pl.prev.words)
	}
	// Time advances so that each window holds n keys: the steady state.
	start, step := time.Unix(1_700_000_000, 0), time.Hour/time.Duration(n)
	var buf [16]byte
	b.ResetTimer()
	for i := range uint64(b.N) {
		p.TestAndAdd(freshKey(&buf, i), start.Add(time.Duration(i)*step))
	}
	b.StopTimer()
	filter := pairBytes(mode, p.m, p.k) // the filters alone, as BitsPerKey
	b.ReportMetric(float64(filter*8)/float64(n), "bits/key")
	b.ReportMetric(float64(filter), "filter-bytes")
}

// BenchmarkLargePairBatch8 is BenchmarkLargePair probed in batches of 8:
// Locate 8 keys, then TestAndAddAt them in order, so that their misses
// overlap. Compare its ns/op with BenchmarkLargePair in the same run:
//
//	go test ./rotation -run '^$' -bench 'LargePair(Batch.*)?$' -benchtime=2000000x
func BenchmarkLargePairBatch8(b *testing.B) {
	benchPairBatch(b, Counting, largeKeys, 8)
}

func BenchmarkLargePairBatch16(b *testing.B) {
	benchPairBatch(b, Counting, largeKeys, 16)
}

// The Medium benchmarks are the processor's benchmark size, 1,000,000 keys
// (22 MB for the pair: beyond L2, partly in L3):
//
//	go test ./rotation -run '^$' -bench 'MediumPair' -benchtime=2000000x
func BenchmarkMediumPair(b *testing.B) {
	benchPair(b, Counting, 1_000_000, largeFPRate)
}

func BenchmarkMediumPairBatch8(b *testing.B) {
	benchPairBatch(b, Counting, 1_000_000, 8)
}

func BenchmarkMediumFingerprintPair(b *testing.B) {
	benchPair(b, Fingerprint, 1_000_000, largeFPRateFP)
}

func BenchmarkMediumFingerprintPairBatch8(b *testing.B) {
	benchPairBatch(b, Fingerprint, 1_000_000, 8)
}

func BenchmarkLargeFingerprintPairBatch8(b *testing.B) {
	benchPairBatch(b, Fingerprint, largeKeys, 8)
}

func benchPairBatch(b *testing.B, mode Mode, n uint64, batch int) {
	rate := largeFPRate
	if mode == Fingerprint {
		rate = largeFPRateFP
	}
	p, err := New(Options{ExpectedKeys: n, FPRate: rate, Window: time.Hour, Mode: mode})
	if err != nil {
		b.Fatal(err)
	}
	if mode == Fingerprint {
		prefault(p.fp.words)
	} else {
		prefault(p.cnt.words)
	}
	start, step := time.Unix(1_700_000_000, 0), time.Hour/time.Duration(n)
	keys := make([][16]byte, batch)
	probes := make([]Probe, batch)
	b.ResetTimer()
	for i := uint64(0); i < uint64(b.N); i += uint64(batch) {
		todo := min(uint64(batch), uint64(b.N)-i)
		for j := range todo {
			p.Locate(freshKey(&keys[j], i+j), &probes[j])
		}
		for j := range todo {
			p.TestAndAddAt(&probes[j], start.Add(time.Duration(i+j)*step))
		}
	}
	b.StopTimer()
}
