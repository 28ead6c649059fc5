package sizing

import (
	"testing"
	"time"

	"dedup/rotation"
)

func TestSizeFiguresFromRotation(t *testing.T) {
	for _, tc := range []struct {
		eps     float64
		measure bool // enough false positives to count in 1M probes
	}{{0.01, true}, {0.001, true}, {1e-6, false}} {
		in := Workload{KeysPerWindow: 50000, Window: time.Hour, FPRate: tc.eps, Partitions: 2, Instances: 1,
			Modes: []rotation.Mode{rotation.Fingerprint, rotation.Counting, rotation.Plain}, CheckpointInterval: 10 * time.Second,
			Measure: tc.measure}
		for _, mode := range in.Modes {
			r, err := Size(in, mode)
			if err != nil {
				t.Fatal(err)
			}
			// Every rate and the false drops are rotation's model, the one
			// the docs and the deploy test use.
			o := rotation.Options{ExpectedKeys: 25000, FPRate: tc.eps, Window: in.Window, Mode: mode}
			end, err := rotation.PairRate(o, 25000)
			if err != nil {
				t.Fatal(err)
			}
			firsts := 50000 / in.Window.Seconds() * 86400 // a day, all partitions
			perPartition, err := rotation.FalseDropsPerDay(o, firsts/2)
			if err != nil {
				t.Fatal(err)
			}
			if r.EndFP != end || r.DropsPerDay != 2*perPartition || r.SampleFP != end {
				t.Errorf("%v ε=%g: end rate %g, sample %g, drops %g a day; rotation's model: %g, %g a day",
					mode, tc.eps, r.EndFP, r.SampleFP, r.DropsPerDay, end, 2*perPartition)
			}
			// Each generation is sized for about ε/2, so with both full the
			// pair's rate is at most ε. A fingerprint generation's width is
			// even: the next narrower width costs more memory, so its rate
			// lands at or below ε, but above ε/4 (two bits fewer would be
			// 4× the rate at the same load).
			if r.EndFP <= tc.eps/4 || r.EndFP > 1.1*tc.eps {
				t.Errorf("%v ε=%g: rate at the end of a window %g, want in (ε/4, 1.1ε]", mode, tc.eps, r.EndFP)
			}
			if !(r.OneGenFP < r.MeanFP && r.MeanFP < r.EndFP) {
				t.Errorf("%v ε=%g: one generation %g, mean %g, end %g: want increasing", mode, tc.eps, r.OneGenFP, r.MeanFP, r.EndFP)
			}
			// A record meets about half the end rate at a window's start
			// (previous generation full, current empty) and all of it at the
			// end, so between half and all of the first occurrences times
			// the end rate are dropped.
			if r.DropsPerDay < firsts*r.EndFP/2*0.9 || r.DropsPerDay > firsts*r.EndFP {
				t.Errorf("%v ε=%g: %g false drops per day for %g first occurrences a day at end rate %g, want between half and all",
					mode, tc.eps, r.DropsPerDay, firsts, r.EndFP)
			}
			// The measurement (1M probes, hundreds to thousands of hits)
			// agrees with the model within 20 % (several standard deviations).
			if r.Measured != tc.measure || tc.measure && (r.MeasuredFP < 0.8*r.SampleFP || r.MeasuredFP > 1.2*r.SampleFP) {
				t.Errorf("%v ε=%g: measured rate %g (measured=%v), model %g", mode, tc.eps, r.MeasuredFP, r.Measured, r.SampleFP)
			}
			// A snapshot with one generation empty compresses better than one
			// with both full, and none is larger than raw by more than framing.
			if !(r.RatioStart > 0 && r.RatioStart < r.RatioEnd && r.RatioEnd <= 1.01) {
				t.Errorf("%v ε=%g: compressed/raw %g at a window's start, %g at its end", mode, tc.eps, r.RatioStart, r.RatioEnd)
			}
		}
	}
}

// TestIncrementalBandwidthAtScale: a billion new keys a day, a 24 h window
// and 48 partitions. Full snapshots every interval would write hundreds of
// MiB/s; with increments (the default chain ratio) the checkpoints write
// at most 1 MiB/s, and a restore reads at most twice the base.
func TestIncrementalBandwidthAtScale(t *testing.T) {
	in := Workload{KeysPerWindow: 1_000_000_000, Window: 24 * time.Hour, FPRate: 1e-6, Partitions: 48, Instances: 1,
		Modes: []rotation.Mode{rotation.Fingerprint}, CheckpointInterval: 10 * time.Second}
	r, err := Size(in, rotation.Fingerprint)
	if err != nil {
		t.Fatal(err)
	}
	inc, full := r.IncrementalBandwidth(in), r.CheckpointBandwidth(in)*r.RatioStart
	t.Logf("incremental %.0f B/s, full snapshots %.0f B/s compressed at a window's start", inc, full)
	if inc <= 0 || inc > 1<<20 {
		t.Errorf("incremental checkpoint bandwidth %.0f B/s, want at most 1 MiB/s", inc)
	}
	if inc*100 > full {
		t.Errorf("incremental %.0f B/s is not a hundredth of full snapshots' %.0f B/s", inc, full)
	}
	if got, want := r.RestoreBytes(in), 2*r.BaseBytes; got != want {
		t.Errorf("restore reads %.0f bytes, want twice the base: %.0f", got, want)
	}
	in.ChainRatio = -1
	if got := r.IncrementalBandwidth(in); got != 0 {
		t.Errorf("full snapshots only: incremental bandwidth %.0f, want 0", got)
	}
}

// TestRollingDeployAtScale: the same workload on 6 instances. A rolling
// deploy with chains writes a move's final increment and claim, not a
// base: the whole deploy less than a minute of the steady bandwidth per
// instance replaced, and a thousandth of what a base per move would write.
// Without increments there is nothing to continue: no figure.
func TestRollingDeployAtScale(t *testing.T) {
	in := Workload{KeysPerWindow: 1_000_000_000, Window: 24 * time.Hour, FPRate: 1e-6, Partitions: 48, Instances: 6,
		Modes: []rotation.Mode{rotation.Fingerprint}, CheckpointInterval: 10 * time.Second}
	r, err := Size(in, rotation.Fingerprint)
	if err != nil {
		t.Fatal(err)
	}
	total, perMove, bases, moves := r.RollingDeploy(in)
	steady := r.IncrementalBandwidth(in)
	t.Logf("deploy %.0f bytes, %.0f per moved partition, %d moves; bases instead %.0f; steady %.0f B/s", total, perMove, moves, bases, steady)
	if moves != 2*in.Partitions || r.IncrementFixed <= 0 || perMove <= r.IncrementFixed || perMove > r.IncrementBytes+r.IncrementFixed {
		t.Errorf("%d moves of %.0f bytes each (empty increment %.0f, interval's %.0f)", moves, perMove, r.IncrementFixed, r.IncrementBytes)
	}
	if total <= 0 || total > 60*steady*float64(in.Instances) || total*1000 > bases {
		t.Errorf("deploy writes %.0f bytes: want above 0, below a minute of steady %.0f B/s per instance and a thousandth of bases' %.0f", total, steady, bases)
	}
	in.ChainRatio = -1
	if total, _, _, _ := r.RollingDeploy(in); total != 0 {
		t.Errorf("full snapshots only: rolling deploy %.0f bytes, want no figure", total)
	}
}
