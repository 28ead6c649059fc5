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

// sizeReport parses the dedup size flags args and extra and returns the
// workload, its report and the report as printed.
func sizeReport(t *testing.T, args []string, extra ...string) (sizing.Workload, sizing.Report, string) {
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
	return in, rep, out.String()
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
		in, _, out := sizeReport(t, args, extra...)
		return in, out
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

// TestSizeHopsPerRole: --hops sizes one REPARTITION_HOPS role. A rekey
// instance holds hop 1's reader and overhead per input partition and the
// runtime, no filters (the report names none); a dedup instance holds the
// filters and hop 2 as without --repartition, hop 1 not counted; both is
// the default and sums the two. The roles exist only with --repartition,
// and another value is refused.
func TestSizeHopsPerRole(t *testing.T) {
	args := []string{"--keys-per-second", "1000", "--window", "1m", "--partitions", "6", "--instances", "3",
		"--fp-rate", "0.01", "--measure=false", "--mode", "plain", "--produce-batch-bytes", "200000", "--record-bytes", "400"}
	report := func(extra ...string) (sizing.Workload, sizing.Resources, string) {
		t.Helper()
		in, rep, out := sizeReport(t, args, extra...)
		pair := int64(0)
		if len(rep.Filters) > 0 {
			pair = rep.Filters[0].PartitionBytes
		}
		return in, in.Deployment(pair).Resources(), out
	}
	_, one, _ := report()
	both, rBoth, _ := report("--repartition")
	_, rDefault, _ := report("--repartition", "--hops", "both")
	_, rDedup, dedupOut := report("--repartition", "--hops", "dedup")
	_, rRekey, rekeyOut := report("--repartition", "--hops", "rekey")
	hop1 := both.Repartition.Hop1PartitionBytes()

	if rDefault != rBoth {
		t.Errorf("--hops both %+v, want the default's %+v", rDefault, rBoth)
	}
	// dedup: the one-hop instance exactly.
	if rDedup != one {
		t.Errorf("--hops dedup %+v, want one hop's %+v", rDedup, one)
	}
	// rekey: 2 input partitions (3 with one of 3 down) of hop 1's reader
	// and overhead, and the runtime; ×5/4 headroom on the limit.
	per := hop1 + sizing.PartitionOverhead
	if want := 2*per + sizing.RuntimeBase; rRekey.Request != want {
		t.Errorf("rekey request %d, want 2 × %d + runtime = %d", rRekey.Request, per, want)
	}
	if want := (3*per + sizing.RuntimeBase) * 5 / 4; rRekey.Limit != want {
		t.Errorf("rekey limit %d, want %d", rRekey.Limit, want)
	}
	// The two roles together hold what both holds, but for the second
	// runtime and the partitions' overhead counted in each.
	if got, want := rDedup.Request+rRekey.Request, rBoth.Request+sizing.RuntimeBase+2*sizing.PartitionOverhead; got != want {
		t.Errorf("dedup + rekey request %d, want both's + runtime + overhead = %d", got, want)
	}
	for _, want := range []string{"REPARTITION_HOPS=rekey", "GOMEMLIMIT=" + sizing.GoMemLimit(rRekey.GoMemLimit),
		"requests memory " + sizing.Quantity(rRekey.Request) + ", limits memory " + sizing.Quantity(rRekey.Limit),
		"hop 1 holds " + sizing.BytesIEC(float64(hop1)) + " per input partition", "counted in the memory above"} {
		if !strings.Contains(rekeyOut, want) {
			t.Errorf("--hops rekey report lacks %q:\n%s", want, rekeyOut)
		}
	}
	for _, not := range []string{"DEDUP_MODE=", "DEDUP_EXPECTED_KEYS=", "Filters:", "checkpoint bandwidth"} {
		if strings.Contains(rekeyOut, not) {
			t.Errorf("--hops rekey report sizes filters (%q):\n%s", not, rekeyOut)
		}
	}
	for _, want := range []string{"REPARTITION_HOPS=dedup", "DEDUP_MODE=plain", "GOMEMLIMIT=" + sizing.GoMemLimit(rDedup.GoMemLimit),
		"not counted here: size them with --hops rekey", "Repartition topic"} {
		if !strings.Contains(dedupOut, want) {
			t.Errorf("--hops dedup report lacks %q:\n%s", want, dedupOut)
		}
	}
	if strings.Contains(dedupOut, "hop 1's reader") || strings.Contains(dedupOut, "counted in the memory above") {
		t.Errorf("--hops dedup report counts hop 1:\n%s", dedupOut)
	}

	for _, bad := range [][]string{{"--hops", "rekey"}, {"--hops", "dedup"}, {"--repartition", "--hops", "split"}} {
		var stderr bytes.Buffer
		if _, code := parseSize(append(append([]string(nil), args...), bad...), &stderr); code != exitConfig || !strings.Contains(stderr.String(), "--hops") {
			t.Errorf("%q: code %d, stderr %q: want exit %d naming --hops", bad, code, stderr.String(), exitConfig)
		}
	}
}
