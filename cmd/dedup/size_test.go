package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"dedup/cmd/dedup/sizing"
	"dedup/rotation"
)

func TestSizePrintsWhatToDeploy(t *testing.T) {
	var stderr bytes.Buffer
	in, code := parseSize([]string{"--keys-per-second", "1000", "--window", "1m", "--partitions", "3", "--instances", "2",
		"--fp-rate", "0.01", "--measure=false"}, &stderr)
	if code != -1 {
		t.Fatalf("parse: code %d: %s", code, stderr.String())
	}
	if n := in.keysPerPartition(); n != 20000 {
		t.Fatalf("keys per partition = %d, want 20000 (1000/s × 60s / 3)", n)
	}
	var out bytes.Buffer
	if err := writeSize(&out, in); err != nil {
		t.Fatal(err)
	}
	if len(in.Modes) != len(allModes()) || len(allModes()) != 3 {
		t.Fatalf("modes %v, want every mode rotation knows (%v)", in.Modes, allModes())
	}
	// The default mode is listed first, and its block comes first.
	def, err := rotation.ParseMode(configDefault("DEDUP_MODE"))
	if err != nil || in.Modes[0] != def || def != rotation.Fingerprint {
		t.Errorf("modes %v (default %v, %v): want the default, fingerprint, first", in.Modes, def, err)
	}
	if i := strings.Index(out.String(), "Deploy, mode "); i < 0 || !strings.HasPrefix(out.String()[i:], "Deploy, mode fingerprint") {
		t.Errorf("first mode block is not fingerprint:\n%s", out.String())
	}
	for _, mode := range in.Modes {
		p, err := rotation.New(rotation.Options{ExpectedKeys: 20000, FPRate: 0.01, Window: time.Minute, Mode: mode})
		if err != nil {
			t.Fatal(err)
		}
		st := p.Stats()
		res := sizing.Deployment{PairBytes: int64(p.SizeBytes()), Partitions: 3, Replicas: 2,
			FetchBufferBytes: 64 << 20, ProduceBatchBytes: 1048576}.Resources()
		block := fmt.Sprintf("  DEDUP_MODE=%s\n  DEDUP_EXPECTED_KEYS=20000\n  DEDUP_FP_RATE=0.01\n  DEDUP_WINDOW=1m0s\n  GOMEMLIMIT=%s\n"+
			"  resources: requests memory %s, limits memory %s (replicas: 2)\n",
			mode, sizing.GoMemLimit(res.GoMemLimit), sizing.Quantity(res.Request), sizing.Quantity(res.Limit))
		for _, want := range []string{block, fmt.Sprint(st.Current.M), bytesIEC(float64(p.SizeBytes())), bytesIEC(3 * float64(p.SizeBytes()))} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("%v: output lacks %q:\n%s", mode, want, out.String())
			}
		}
	}
	for _, want := range []string{"checkpoint bandwidth, all partitions every 10s: raw ", "expected false drops: "} {
		if strings.Count(out.String(), want) != len(in.Modes) {
			t.Errorf("output lacks %q once per mode:\n%s", want, out.String())
		}
	}
}

func TestSizeFiguresFromRotation(t *testing.T) {
	for _, tc := range []struct {
		eps     float64
		measure bool // enough false positives to count in 1M probes
	}{{0.01, true}, {0.001, true}, {1e-6, false}} {
		in, code := parseSize([]string{"--keys-per-window", "50k", "--partitions", "2", "--fp-rate", fmt.Sprint(tc.eps),
			"--measure=" + fmt.Sprint(tc.measure)}, &bytes.Buffer{})
		if code != -1 {
			t.Fatalf("parse: code %d", code)
		}
		for _, mode := range in.Modes {
			r, err := sizeFor(in, mode)
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
			if r.endFP != end || r.dropsPerDay != 2*perPartition || r.sampleFP != end {
				t.Errorf("%v ε=%g: end rate %g, sample %g, drops %g a day; rotation's model: %g, %g a day",
					mode, tc.eps, r.endFP, r.sampleFP, r.dropsPerDay, end, 2*perPartition)
			}
			// Each generation is sized for about ε/2, so with both full the
			// pair's rate is at most ε. A fingerprint generation's width is
			// even: the next narrower width costs more memory, so its rate
			// lands at or below ε, but above ε/4 (two bits fewer would be
			// 4× the rate at the same load).
			if r.endFP <= tc.eps/4 || r.endFP > 1.1*tc.eps {
				t.Errorf("%v ε=%g: rate at the end of a window %g, want in (ε/4, 1.1ε]", mode, tc.eps, r.endFP)
			}
			if !(r.oneGenFP < r.meanFP && r.meanFP < r.endFP) {
				t.Errorf("%v ε=%g: one generation %g, mean %g, end %g: want increasing", mode, tc.eps, r.oneGenFP, r.meanFP, r.endFP)
			}
			// A record meets about half the end rate at a window's start
			// (previous generation full, current empty) and all of it at the
			// end, so between half and all of the first occurrences times
			// the end rate are dropped.
			if r.dropsPerDay < firsts*r.endFP/2*0.9 || r.dropsPerDay > firsts*r.endFP {
				t.Errorf("%v ε=%g: %g false drops per day for %g first occurrences a day at end rate %g, want between half and all",
					mode, tc.eps, r.dropsPerDay, firsts, r.endFP)
			}
			// The measurement (1M probes, hundreds to thousands of hits)
			// agrees with the model within 20 % (several standard deviations).
			if r.measured != tc.measure || tc.measure && (r.measuredFP < 0.8*r.sampleFP || r.measuredFP > 1.2*r.sampleFP) {
				t.Errorf("%v ε=%g: measured rate %g (measured=%v), model %g", mode, tc.eps, r.measuredFP, r.measured, r.sampleFP)
			}
			// A snapshot with one generation empty compresses better than one
			// with both full, and none is larger than raw by more than framing.
			if !(r.ratioStart > 0 && r.ratioStart < r.ratioEnd && r.ratioEnd <= 1.01) {
				t.Errorf("%v ε=%g: compressed/raw %g at a window's start, %g at its end", mode, tc.eps, r.ratioStart, r.ratioEnd)
			}
		}
	}
}

func TestSizeReportsEveryProblemAtOnce(t *testing.T) {
	var stderr bytes.Buffer
	_, code := parseSize([]string{"--window", "-1s", "--partitions", "0", "--mode", "fancy"}, &stderr)
	if code != exitConfig {
		t.Fatalf("code %d, want %d", code, exitConfig)
	}
	for _, want := range []string{"--keys-per-second", "--window", "--partitions", "--mode"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("error does not mention %s: %s", want, stderr.String())
		}
	}
}
