package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"dedup/rotation"
)

func TestSizePrintsTheStageGeometry(t *testing.T) {
	var stderr bytes.Buffer
	in, code := parseSize([]string{"--keys-per-second", "1000", "--window", "1m", "--partitions", "3", "--fp-rate", "0.01", "--measure=false"}, &stderr)
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
	for _, mode := range []rotation.Mode{rotation.Counting, rotation.Plain} {
		p, err := rotation.New(rotation.Options{ExpectedKeys: 20000, FPRate: 0.01, Window: time.Minute, Mode: mode})
		if err != nil {
			t.Fatal(err)
		}
		st := p.Stats()
		for _, want := range []string{fmt.Sprint(st.Current.M), bytesIEC(float64(p.SizeBytes())), bytesIEC(3 * float64(p.SizeBytes()))} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("%v: output lacks %q:\n%s", mode, want, out.String())
			}
		}
	}
}

func TestSizeMeasuredRateIsNearTheTarget(t *testing.T) {
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
		// The pair may size each generation for ε or for ε/2 (so that both
		// generations together stay within ε); either way one generation
		// holding n keys stays within ε, and the measurement (1M probes,
		// thousands of hits) agrees with the model to a few percent.
		if r.modelFP <= 0 || r.modelFP > 1.1*eps {
			t.Errorf("%v: expected rate at end of window %g, want in (0, %g]", mode, r.modelFP, 1.1*eps)
		}
		if !r.measured || r.measuredFP < 0.7*r.modelFP || r.measuredFP > 1.3*r.modelFP {
			t.Errorf("%v: measured rate %g (measured=%v), model %g", mode, r.measuredFP, r.measured, r.modelFP)
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
