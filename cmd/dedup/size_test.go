package main

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	"dedup/internal/config"
	"dedup/internal/testkit"
	"dedup/rotation"
	"dedup/sizing"
)

func TestSizePrintsWhatToDeploy(t *testing.T) {
	var stderr bytes.Buffer
	in, code := parseSize([]string{"--keys-per-second", "1000", "--window", "1m", "--partitions", "3", "--instances", "2",
		"--fp-rate", "0.01", "--measure=false"}, &stderr)
	if code != -1 {
		t.Fatalf("parse: code %d: %s", code, stderr.String())
	}
	if n := in.KeysPerPartition(); n != 20000 {
		t.Fatalf("keys per partition = %d, want 20000 (1000/s × 60s / 3)", n)
	}
	var out bytes.Buffer
	rep, err := sizing.NewReport(in)
	if err != nil {
		t.Fatal(err)
	}
	if err := rep.Write(&out); err != nil {
		t.Fatal(err)
	}
	if len(in.Modes) != len(allModes()) || len(allModes()) != 3 {
		t.Fatalf("modes %v, want every mode rotation knows (%v)", in.Modes, allModes())
	}
	// The default mode is listed first, and its block comes first.
	def, err := rotation.ParseMode(config.Default("DEDUP_MODE"))
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
		for _, want := range []string{block, fmt.Sprint(st.Current.M), sizing.BytesIEC(float64(p.SizeBytes())), sizing.BytesIEC(3 * float64(p.SizeBytes()))} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("%v: output lacks %q:\n%s", mode, want, out.String())
			}
		}
	}
	for _, want := range []string{"checkpoint bandwidth, all partitions every 10s", "restore reads at most ", "expected false drops: "} {
		if strings.Count(out.String(), want) != len(in.Modes) {
			t.Errorf("output lacks %q once per mode:\n%s", want, out.String())
		}
	}
	// Plain mode alone writes full snapshots.
	if n := strings.Count(out.String(), "in increments and their bases (CHECKPOINT_CHAIN_RATIO=1;"); n != len(in.Modes)-1 {
		t.Errorf("%d modes with incremental checkpoints, want %d:\n%s", n, len(in.Modes)-1, out.String())
	}
	if !strings.Contains(out.String(), "full snapshots (plain mode has no increments)") {
		t.Errorf("plain mode's full snapshots not said:\n%s", out.String())
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

// TestSizeCountsAsConfig: `dedup size` reads counts as the configuration
// reads DEDUP_EXPECTED_KEYS.
func TestSizeCountsAsConfig(t *testing.T) {
	cfg, err := config.Load(testkit.Env{"DEDUP_EXPECTED_KEYS": "10M"}.Lookup)
	if err != nil {
		t.Fatal(err)
	}
	in, code := parseSize([]string{"--keys-per-window", "10M", "--partitions", "1", "--measure=false"}, &bytes.Buffer{})
	if code != -1 || in.KeysPerWindow != cfg.ExpectedKeys {
		t.Errorf("dedup size --keys-per-window 10M: %d (code %d), want %d", in.KeysPerWindow, code, cfg.ExpectedKeys)
	}
}

// TestSizeRepartitionCountsHop1: with --repartition the memory request,
// limit and GOMEMLIMIT grow by hop 1's reader per input partition held
// (a 1 MiB fetch and 2 × PRODUCE_BATCH_SIZE records of --record-bytes),
// in normal running and with one instance down alike.
func TestSizeRepartitionCountsHop1(t *testing.T) {
	args := []string{"--keys-per-second", "1000", "--window", "1m", "--partitions", "6", "--instances", "3",
		"--fp-rate", "0.01", "--measure=false", "--mode", "plain"}
	report := func(extra ...string) (sizing.Workload, string) {
		t.Helper()
		var stderr bytes.Buffer
		in, code := parseSize(append(append([]string(nil), args...), extra...), &stderr)
		if code != -1 {
			t.Fatalf("parse %q: code %d: %s", extra, code, stderr.String())
		}
		rep, err := sizing.NewReport(in)
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if err := rep.Write(&out); err != nil {
			t.Fatal(err)
		}
		return in, out.String()
	}
	one, oneOut := report("--produce-batch-bytes", "200000")
	two, twoOut := report("--repartition", "--record-bytes", "400", "--produce-batch-bytes", "200000")
	// Per input partition: three fetches, the batch in hand and its origin
	// trailers.
	hop1 := int64(3<<20 + 200000 + 200000/400*two.Repartition.OriginBytes())
	if got := two.Repartition.Hop1PartitionBytes(); got != hop1 {
		t.Fatalf("hop 1 per input partition = %d, want %d", got, hop1)
	}
	p, err := rotation.New(one.Options(rotation.Plain))
	if err != nil {
		t.Fatal(err)
	}
	r1, r2 := one.Deployment(int64(p.SizeBytes())).Resources(), two.Deployment(int64(p.SizeBytes())).Resources()
	// 2 partitions per instance, 3 with one of the 3 down; ×5/4 headroom.
	if d := r2.Request - r1.Request; d != 2*hop1 {
		t.Errorf("request grew by %d, want 2 × %d", d, hop1)
	}
	if d := r2.Limit - r1.Limit; d != 3*hop1*5/4 {
		t.Errorf("limit grew by %d, want 3 × %d × 5/4", d, hop1)
	}
	if r2.GoMemLimit <= r1.GoMemLimit {
		t.Errorf("GOMEMLIMIT %d with --repartition, not above %d", r2.GoMemLimit, r1.GoMemLimit)
	}
	for _, want := range []string{"GOMEMLIMIT=" + sizing.GoMemLimit(r2.GoMemLimit), "limits memory " + sizing.Quantity(r2.Limit),
		"hop 1 holds " + sizing.BytesIEC(float64(hop1)) + " per input partition", "hop 1's reader (" + sizing.BytesIEC(float64(hop1)) + ") per input partition"} {
		if !strings.Contains(twoOut, want) {
			t.Errorf("--repartition report lacks %q:\n%s", want, twoOut)
		}
	}
	if !strings.Contains(oneOut, "GOMEMLIMIT="+sizing.GoMemLimit(r1.GoMemLimit)) || strings.Contains(oneOut, "hop 1") {
		t.Errorf("report without --repartition: want its own GOMEMLIMIT and no hop 1:\n%s", oneOut)
	}
}
