package rotation

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/bits-and-blooms/bloom/v3"
)

// probesFor returns how many probes make about 500 false positives at rate
// p expected, so that a 1.2x deviation is over 4 standard deviations.
func probesFor(p float64) uint64 {
	return uint64(math.Min(500/p, 8e6))
}

// TestFalsePositiveRateAtDesignLoad fills both generations of a pair with
// ExpectedKeys keys each (the worst case: the end of a window) and measures
// how often keys never added are reported seen.
func TestFalsePositiveRateAtDesignLoad(t *testing.T) {
	for _, tc := range []struct {
		n    uint64
		rate float64
	}{{20000, 0.01}, {50000, 0.001}} {
		for _, mode := range modes {
			t.Run(fmt.Sprintf("%v/%g", mode, tc.rate), func(t *testing.T) {
				p := mustNew(t, Options{ExpectedKeys: tc.n, FPRate: tc.rate, Window: time.Hour, Mode: mode})
				// Current generation only: the per-generation rate.
				for i := range tc.n {
					p.TestAndAdd(testKey(1, i), epoch)
				}
				gen := generationFPRate(tc.rate)
				probes := probesFor(gen)
				got := measure(probes, func(i uint64) bool { return p.Test(testKey(2, i)) })
				t.Logf("one generation at %d keys: measured %.3g, target %.3g (%d probes)", tc.n, got, gen, probes)
				if got > 1.2*gen {
					t.Errorf("one generation: measured rate %.3g > 1.2 x %.3g", got, gen)
				}
				// Both generations full.
				for i := range tc.n {
					p.TestAndAdd(testKey(1, tc.n+i), epoch.Add(time.Hour))
				}
				probes = probesFor(tc.rate)
				got = measure(probes, func(i uint64) bool { return p.Test(testKey(3, i)) })
				t.Logf("pair at %d keys per generation: measured %.3g, target %.3g (%d probes)", tc.n, got, tc.rate, probes)
				if got > 1.2*tc.rate {
					t.Errorf("pair: measured rate %.3g > 1.2 x target %.3g", got, tc.rate)
				}
			})
		}
	}
}

func measure(probes uint64, seen func(i uint64) bool) float64 {
	fp := 0
	for i := range probes {
		if seen(i) {
			fp++
		}
	}
	return float64(fp) / float64(probes)
}

// TestFalsePositiveTable measures single filters with fixed m/n and k, the
// rows of a commonly published table of measured rates, against the classic
// formula (1 - e^{-kn/m})^k for plain filters, and against the blocked
// filter's own model for counting filters (blocking raises the rate; the
// ratio to the classic formula is logged).
func TestFalsePositiveTable(t *testing.T) {
	const n = 20000
	for _, row := range []struct{ mn, k int }{{20, 6}, {20, 14}, {7, 7}, {5, 3}} {
		classic := math.Pow(-math.Expm1(-float64(row.k)/float64(row.mn)), float64(row.k))
		t.Run(fmt.Sprintf("m/n=%d,k=%d", row.mn, row.k), func(t *testing.T) {
			m := uint64(row.mn * n)
			f := bloom.New(uint(m), uint(row.k))
			for i := range uint64(n) {
				f.Add(testKey(1, i))
			}
			probes := probesFor(classic)
			got := measure(probes, func(i uint64) bool { return f.Test(testKey(2, i)) })
			t.Logf("plain: measured %.3g, formula %.3g, ratio %.2f (%d probes)", got, classic, got/classic, probes)
			if got > 1.2*classic || got < classic/1.2 {
				t.Errorf("plain: measured %.3g, formula %.3g: outside 1.2x", got, classic)
			}

			blocks := (m + blockCounters - 1) / blockCounters
			c := newCounting(blocks, row.k)
			for i := range uint64(n) {
				c.add(c.cur, probeOf(c, testKey(1, i)))
			}
			model := modelFor(row.k).rate(float64(n) / float64(blocks))
			probes = probesFor(model)
			got = measure(probes, func(i uint64) bool { return c.contains(c.cur, probeOf(c, testKey(2, i))) })
			t.Logf("counting (blocked): measured %.3g, model %.3g (ratio %.2f), classic formula %.3g (ratio %.2f)",
				got, model, got/model, classic, got/classic)
			if got > 1.2*model || got < model/1.2 {
				t.Errorf("counting: measured %.3g, model %.3g: outside 1.2x", got, model)
			}
		})
	}
}

// TestSizing checks the sizing against the model and the lower bound.
func TestSizing(t *testing.T) {
	for _, rate := range []float64{0.1, 0.01, 0.001, 1e-4, 1e-6} {
		for _, n := range []uint64{1, 1000, 1e6} {
			gen := generationFPRate(rate)
			blocks, k := countingGeometry(n, gen)
			if r := modelFor(k).rate(float64(n) / float64(blocks)); r > gen {
				t.Errorf("ε=%g n=%d: modelled rate %.3g above target %.3g", rate, n, r, gen)
			}
			if blocks > 1 {
				if r := modelFor(k).rate(float64(n) / float64(blocks-1)); r <= gen {
					t.Errorf("ε=%g n=%d: one block fewer would do (%.3g)", rate, n, r)
				}
			}
			bound := math.Log2(1 / gen)
			if bpk := float64(blocks*blockCounters*4) / float64(n); bpk < bound {
				t.Errorf("ε=%g n=%d: %.2f bits per key below the bound %.2f", rate, n, bpk, bound)
			}
		}
	}
}
