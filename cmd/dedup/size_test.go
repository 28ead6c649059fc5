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
	if len(in.Modes) != len(allModes()) || len(allModes()) < 2 {
		t.Fatalf("modes %v, want every mode rotation knows (%v)", in.Modes, allModes())
	}
	for _, mode := range in.Modes {
		p, err := rotation.New(rotation.Options{ExpectedKeys: 20000, FPRate: 0.01, Window: time.Minute, Mode: mode})
		if err != nil {
			t.Fatal(err)
		}
		st := p.Stats()
		res := sizing.Deployment{PairBytes: int64(p.SizeBytes()), Partitions: 3, Replicas: 2,
			FetchMaxBytes: 10485760, ProduceBatchBytes: 1048576}.Resources()
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
	const eps = 0.01
	in, code := parseSize([]string{"--keys-per-window", "50k", "--partitions", "1", "--fp-rate", fmt.Sprint(eps)}, &bytes.Buffer{})
	if code != -1 {
		t.Fatalf("parse: code %d", code)
	}
	for _, mode := range in.Modes {
		r, err := sizeFor(in, mode)
		if err != nil {
			t.Fatal(err)
		}
		// Each generation is sized for about ε/2, so a record meets about
		// ε/2 at a window's start and ε at its end (both generations full);
		// the measurement (1M probes, thousands of hits) agrees with the
		// model to a few percent.
		if r.endFP <= 0 || r.endFP > 1.1*eps {
			t.Errorf("%v: rate at the end of a window %g, want in (0, %g]", mode, r.endFP, 1.1*eps)
		}
		if !(r.oneGenFP < r.meanFP && r.meanFP < r.endFP) {
			t.Errorf("%v: one generation %g, mean %g, end %g: want increasing", mode, r.oneGenFP, r.meanFP, r.endFP)
		}
		if !r.measured || r.measuredFP < 0.8*r.endFP || r.measuredFP > 1.2*r.endFP {
			t.Errorf("%v: measured rate %g (measured=%v), model %g", mode, r.measuredFP, r.measured, r.endFP)
		}
		// A snapshot with one generation empty compresses better than one
		// with both full, and none is larger than raw by more than framing.
		if !(r.ratioStart > 0 && r.ratioStart < r.ratioEnd && r.ratioEnd <= 1.01) {
			t.Errorf("%v: compressed/raw %g at a window's start, %g at its end", mode, r.ratioStart, r.ratioEnd)
		}
		perDay := in.falseDropsPerDay(r)
		firsts := float64(in.KeysPerWindow) / in.Window.Seconds() * 86400
		if perDay < firsts*eps/2*0.9 || perDay > firsts*eps*1.1 {
			t.Errorf("%v: %g false drops per day for %g first occurrences a day, want between ε/2 and ε of them", mode, perDay, firsts)
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
