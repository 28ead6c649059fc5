package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"dedup/checkpoint"
	"dedup/cmd/dedup/sizing"
	"dedup/count"
	"dedup/rotation"
)

const sizeAbout = `Prints what to deploy for a workload: the DEDUP_* settings, each instance's
container memory request and limit and GOMEMLIMIT, the checkpoint bandwidth
raw and compressed, and the expected false drops per day; then the filter
geometry behind them (counters or bits per generation, k, memory per
partition) against the information-theoretic bound n·log2(1/ε).

  dedup size --keys-per-second 50000 --window 1h --fp-rate 0.001 --partitions 12 --instances 3

Keys are distinct keys (a repeat of a key already in the window costs no
memory). Every figure of a filter comes from rotation itself: the memory of
a pair it builds, the false-positive rates and false drops per day of its
model (rotation.PairRate, rotation.FalseDropsPerDay), and the size of a
compressed snapshot of a sample pair written by the checkpoint store.
Partitions of more than 1M keys are sampled on a pair sized for 1M keys at
the same rate (the same counters or bits per key and k). With --measure
(the default) the full sample pair is also probed with keys never added:
the measured false-positive rate, next to the model's.
`

// sampleKeys bounds the keys inserted to estimate the false-positive rate
// and the compressed snapshot size: a larger partition is estimated on a
// pair sized for sampleKeys keys at the same rate, which has the same
// geometry per key (counters or bits per key, k) and so the same rate and
// compression, and takes a second rather than a minute.
const sampleKeys = 1_000_000

// measureProbes is how many absent keys --measure tests.
const measureProbes = 1_000_000

// fillSteps is how many points of a window the false-positive rate and the
// snapshot size are read at.
const fillSteps = 8

// sizeInput is what `dedup size` is asked.
type sizeInput struct {
	KeysPerWindow      uint64 // distinct keys per window, all partitions
	Window             time.Duration
	FPRate             float64
	Partitions         int
	Instances          int
	Modes              []rotation.Mode
	CheckpointInterval time.Duration
	FetchBufferBytes   int64
	ProduceBatchBytes  int64
	Measure            bool
}

// runSize is `dedup size`.
func runSize(args []string, stdout, stderr io.Writer) int {
	in, code := parseSize(args, stderr)
	if code >= 0 {
		return code
	}
	if err := writeSize(stdout, in); err != nil {
		fmt.Fprintf(stderr, "dedup size: %v\n", err)
		return exitFailure
	}
	return exitOK
}

// allModes lists every filter mode rotation knows, the default
// (DEDUP_MODE) first and the others in rotation's order, so a mode added
// there is sized here without a change.
func allModes() []rotation.Mode {
	var modes []rotation.Mode
	def, err := rotation.ParseMode(configDefault("DEDUP_MODE"))
	if err == nil {
		modes = append(modes, def)
	}
	for m := rotation.Mode(1); m != 0; m++ {
		if got, err := rotation.ParseMode(m.String()); err != nil || got != m {
			break
		}
		if m != def {
			modes = append(modes, m)
		}
	}
	return modes
}

// configDuration reads the envDefault of a duration variable.
func configDuration(name string) time.Duration {
	d, _ := time.ParseDuration(configDefault(name)) // a test checks every default parses
	return d
}

// configCount reads the envDefault of a count variable.
func configCount(name string) int64 {
	n, _ := count.Parse(configDefault(name)) // a test checks every default parses
	return n
}

// sizeFlags are `dedup size`'s flags, as given.
type sizeFlags struct {
	perSecond, perWindow, fpRate, mode, fetchBuffer, batchBytes *string
	window, interval                                            *time.Duration
	partitions, instances                                       *int
	measure                                                     *bool
}

// newSizeFlagSet defines `dedup size`'s flags, for parsing and for its usage.
func newSizeFlagSet() (*flag.FlagSet, sizeFlags) {
	fs := flag.NewFlagSet("dedup size", flag.ContinueOnError)
	var modeNames []string
	for _, m := range allModes() {
		modeNames = append(modeNames, m.String())
	}
	return fs, sizeFlags{
		perSecond:   fs.String("keys-per-second", "", "distinct keys per second, all partitions (k, M, G suffixes)"),
		perWindow:   fs.String("keys-per-window", "", "distinct keys per window, all partitions (instead of --keys-per-second)"),
		window:      fs.Duration("window", configDuration("DEDUP_WINDOW"), "dedup window (DEDUP_WINDOW)"),
		fpRate:      fs.String("fp-rate", configDefault("DEDUP_FP_RATE"), "false-positive rate at the window's key count (DEDUP_FP_RATE)"),
		partitions:  fs.Int("partitions", 12, "input partitions"),
		instances:   fs.Int("instances", 1, "instances (replicas) the partitions are spread over"),
		mode:        fs.String("mode", "all", strings.Join(modeNames, ", ")+" or all (DEDUP_MODE)"),
		interval:    fs.Duration("checkpoint-interval", configDuration("CHECKPOINT_INTERVAL"), "checkpoint interval (CHECKPOINT_INTERVAL)"),
		fetchBuffer: fs.String("fetch-buffer-bytes", configDefault("FETCH_BUFFER_BYTES"), "FETCH_BUFFER_BYTES, for the memory per instance"),
		batchBytes:  fs.String("produce-batch-bytes", configDefault("PRODUCE_BATCH_BYTES"), "PRODUCE_BATCH_BYTES, for the memory per instance"),
		measure:     fs.Bool("measure", true, "also probe the sample pair with absent keys: the measured false-positive rate"),
	}
}

// parseSize parses the flags; code is -1 when the size should be printed.
func parseSize(args []string, stderr io.Writer) (sizeInput, int) {
	fs, f := newSizeFlagSet()
	fs.SetOutput(stderr)
	fs.Usage = func() { printCommandUsage(fs.Output(), commandNamed("size")) }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return sizeInput{}, exitOK
		}
		return sizeInput{}, exitConfig
	}
	in := sizeInput{Window: *f.window, Partitions: *f.partitions, Instances: *f.instances,
		CheckpointInterval: *f.interval, Measure: *f.measure}
	var problems []error
	if fs.NArg() > 0 {
		problems = append(problems, fmt.Errorf("unexpected arguments %q", fs.Args()))
	}
	flagCount := func(flag, s string) uint64 {
		n, err := count.ParseUint(s)
		if err != nil {
			problems = append(problems, fmt.Errorf("--%s: %w", flag, err))
		}
		return n
	}
	switch {
	case (*f.perSecond == "") == (*f.perWindow == ""):
		problems = append(problems, errors.New("give exactly one of --keys-per-second and --keys-per-window"))
	case *f.perSecond != "":
		in.KeysPerWindow = uint64(math.Round(float64(flagCount("keys-per-second", *f.perSecond)) * f.window.Seconds()))
	default:
		in.KeysPerWindow = flagCount("keys-per-window", *f.perWindow)
	}
	if _, err := fmt.Sscan(*f.fpRate, &in.FPRate); err != nil {
		problems = append(problems, fmt.Errorf("--fp-rate: %q is not a number", *f.fpRate))
	}
	in.FetchBufferBytes = int64(flagCount("fetch-buffer-bytes", *f.fetchBuffer))
	in.ProduceBatchBytes = int64(flagCount("produce-batch-bytes", *f.batchBytes))
	if *f.window <= 0 {
		problems = append(problems, fmt.Errorf("--window: %v is not positive", *f.window))
	}
	if *f.partitions < 1 {
		problems = append(problems, fmt.Errorf("--partitions: %d is not positive", *f.partitions))
	}
	if *f.instances < 1 || *f.instances > max(*f.partitions, 1) {
		problems = append(problems, fmt.Errorf("--instances: %d is not in 1..partitions", *f.instances))
	}
	if *f.interval <= 0 {
		problems = append(problems, fmt.Errorf("--checkpoint-interval: %v is not positive", *f.interval))
	}
	if strings.EqualFold(strings.TrimSpace(*f.mode), "all") || strings.EqualFold(strings.TrimSpace(*f.mode), "both") {
		in.Modes = allModes()
	} else {
		m, err := rotation.ParseMode(*f.mode)
		if err != nil {
			problems = append(problems, fmt.Errorf("--mode: %w", err))
		}
		in.Modes = []rotation.Mode{m}
	}
	if len(problems) == 0 {
		if n := in.keysPerPartition(); n > maxExpectedKeys {
			problems = append(problems, fmt.Errorf("%d keys per partition: want at most %d (DEDUP_EXPECTED_KEYS); add partitions", n, uint64(maxExpectedKeys)))
		}
		for _, m := range in.Modes {
			o := in.options(m)
			o.ExpectedKeys = 1 // validate the rest without allocating
			if _, err := rotation.New(o); err != nil {
				problems = append(problems, err)
			}
		}
	}
	if err := errors.Join(problems...); err != nil {
		fmt.Fprintf(stderr, "dedup size: %v\n", err)
		return sizeInput{}, exitConfig
	}
	return in, -1
}

// keysPerPartition is n: the distinct keys one partition sees in a window.
func (in sizeInput) keysPerPartition() uint64 {
	return (in.KeysPerWindow + uint64(in.Partitions) - 1) / uint64(in.Partitions)
}

func (in sizeInput) options(m rotation.Mode) rotation.Options {
	return rotation.Options{ExpectedKeys: max(in.keysPerPartition(), 1), FPRate: in.FPRate, Window: in.Window, Mode: m}
}

// sizeRow is one mode's figures, every one from rotation or the checkpoint
// store.
type sizeRow struct {
	mode           rotation.Mode
	m              uint64
	k              uint32
	partitionBytes int64 // both generations
	sampled        uint64
	// False-positive rates from rotation's model (rotation.PairRate,
	// rotation.FalseDropsPerDay), the one model behind the sizing: one
	// generation holding n keys, a record's rate averaged over a
	// steady-state window (previous generation full, current filling), and
	// both generations full.
	oneGenFP, meanFP, endFP float64
	dropsPerDay             float64 // new records dropped a day, all partitions
	// The sample pair with both generations full, probed with keys never
	// added, next to the model's rate for that pair.
	measuredFP, sampleFP float64
	measured             bool
	// Compressed snapshot size over raw, at the start of a window (previous
	// generation full, current empty), and at its end (both full).
	ratioStart, ratioEnd float64
}

// sampleKey is the id-th synthetic key: distinct ids give distinct keys.
func sampleKey(buf *[16]byte, id uint64) []byte {
	copy(buf[:8], "dedupkey")
	for i := range 8 {
		buf[8+i] = byte(id >> (8 * i))
	}
	return buf[:]
}

// newKeysPerDay is the distinct keys one partition sees a day at the
// workload's rate.
func (in sizeInput) newKeysPerDay() float64 {
	return float64(in.KeysPerWindow) / float64(in.Partitions) * float64(24*time.Hour) / float64(in.Window)
}

func sizeFor(in sizeInput, mode rotation.Mode) (sizeRow, error) {
	o := in.options(mode)
	p, err := rotation.New(o)
	if err != nil {
		return sizeRow{}, err
	}
	st := p.Stats()
	r := sizeRow{mode: mode, m: st.Current.M, k: st.Current.K, partitionBytes: int64(p.SizeBytes())}
	p = nil // the sample below stands for it; let the memory go

	if r.endFP, err = rotation.PairRate(o, float64(o.ExpectedKeys)); err != nil {
		return sizeRow{}, err
	}
	r.oneGenFP = -math.Expm1(0.5 * math.Log1p(-r.endFP)) // 1-(1-g)² = endFP
	perPartition, err := rotation.FalseDropsPerDay(o, in.newKeysPerDay())
	if err != nil {
		return sizeRow{}, err
	}
	r.dropsPerDay = perPartition * float64(in.Partitions)
	if keys := in.newKeysPerDay(); keys > 0 {
		r.meanFP = perPartition / keys
	}

	so := o
	so.ExpectedKeys = min(o.ExpectedKeys, sampleKeys)
	r.sampled = so.ExpectedKeys
	sp, err := rotation.New(so)
	if err != nil {
		return sizeRow{}, err
	}
	if r.sampleFP, err = rotation.PairRate(so, float64(so.ExpectedKeys)); err != nil {
		return sizeRow{}, err
	}
	dir, err := os.MkdirTemp("", "dedup-size-")
	if err != nil {
		return sizeRow{}, err
	}
	defer os.RemoveAll(dir)
	store, err := checkpoint.NewFileStore(checkpoint.FileOptions{Dir: dir, Keep: 1, Group: "size"})
	if err != nil {
		return sizeRow{}, err
	}
	ratio := func() (float64, error) {
		m, err := store.Save(context.Background(), checkpoint.Meta{Group: "size", Topic: "t", OutputTopic: "o"}, sp)
		if err != nil {
			return 0, fmt.Errorf("compress a sample snapshot: %w", err)
		}
		return float64(m.StoredBytes) / float64(m.RawBytes), nil
	}

	var buf [16]byte
	n := so.ExpectedKeys
	// The previous window: fill a generation with n keys, then rotate.
	t0 := time.Unix(0, 0).Add(100 * o.Window)
	for id := range n {
		sp.TestAndAdd(sampleKey(&buf, id), t0)
	}
	t1 := t0.Add(o.Window)
	sp.TestAndAdd(sampleKey(&buf, n), t1) // rotates; one key of the new window
	if r.ratioStart, err = ratio(); err != nil {
		return sizeRow{}, err
	}
	for id := n + 1; id < 2*n; id++ {
		sp.TestAndAdd(sampleKey(&buf, id), t1)
	}
	if r.ratioEnd, err = ratio(); err != nil {
		return sizeRow{}, err
	}
	if in.Measure {
		var fp uint64
		for id := range uint64(measureProbes) {
			if sp.Test(sampleKey(&buf, 2*n+id)) {
				fp++
			}
		}
		r.measuredFP = float64(fp) / measureProbes
		r.measured = true
	}
	return r, nil
}

// deployment is the sizing model of in for one pair size.
func (in sizeInput) deployment(pairBytes int64) sizing.Deployment {
	return sizing.Deployment{PairBytes: pairBytes, Partitions: in.Partitions, Replicas: in.Instances,
		FetchBufferBytes: in.FetchBufferBytes, ProduceBatchBytes: in.ProduceBatchBytes}
}

func writeSize(w io.Writer, in sizeInput) error {
	n := in.keysPerPartition()
	rows := []sizeRow{}
	for _, mode := range in.Modes {
		r, err := sizeFor(in, mode)
		if err != nil {
			return err
		}
		rows = append(rows, r)
	}
	res := in.deployment(rows[0].partitionBytes).Resources()
	fmt.Fprintf(w, "workload: %d distinct keys per %v window over %d partitions: n = %d keys per partition per window\n",
		in.KeysPerWindow, in.Window, in.Partitions, n)
	fmt.Fprintf(w, "target false-positive rate ε = %g; %d instance(s): %d partition(s) each, %d while one is down\n",
		in.FPRate, in.Instances, res.PartitionsPerInstance, res.PartitionsPerInstanceOneDown)

	for _, r := range rows {
		res := in.deployment(r.partitionBytes).Resources()
		fmt.Fprintf(w, "\nDeploy, mode %s (every instance):\n", r.mode)
		fmt.Fprintf(w, "  DEDUP_MODE=%s\n  DEDUP_EXPECTED_KEYS=%d\n  DEDUP_FP_RATE=%g\n  DEDUP_WINDOW=%v\n",
			r.mode, n, in.FPRate, in.Window)
		fmt.Fprintf(w, "  GOMEMLIMIT=%s\n", sizing.GoMemLimit(res.GoMemLimit))
		fmt.Fprintf(w, "  resources: requests memory %s, limits memory %s (replicas: %d)\n",
			sizing.Quantity(res.Request), sizing.Quantity(res.Limit), in.Instances)
		raw := float64(r.partitionBytes) * float64(in.Partitions) / in.CheckpointInterval.Seconds()
		fmt.Fprintf(w, "  checkpoint bandwidth, all partitions every %v: raw %s/s; compressed %s/s at a window's start to %s/s at its end\n",
			in.CheckpointInterval, bytesIEC(raw), bytesIEC(raw*r.ratioStart), bytesIEC(raw*r.ratioEnd))
		fmt.Fprintf(w, "  expected false drops: %.3g new records a day, all partitions (%.3g%% of first occurrences, mean over a window)\n",
			r.dropsPerDay, 100*r.meanFP)
	}

	fmt.Fprintln(w, "\nFilters:")
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	line := func(label string, cell func(r sizeRow) string) {
		fmt.Fprint(tw, "  "+label)
		for _, r := range rows {
			fmt.Fprintf(tw, "\t%s", cell(r))
		}
		fmt.Fprintln(tw, "\t")
	}
	bits := math.Log2(1 / in.FPRate)
	bound := float64(n) * bits / 8
	line("", func(r sizeRow) string { return r.mode.String() })
	line("m per generation (counters, bits or slots)", func(r sizeRow) string { return fmt.Sprint(r.m) })
	line("k (hash functions, or fingerprint bits)", func(r sizeRow) string { return fmt.Sprint(r.k) })
	line("memory per partition (2 generations)", func(r sizeRow) string { return bytesIEC(float64(r.partitionBytes)) })
	line(fmt.Sprintf("filters per instance (%d partitions + 1 checkpoint spare)", res.PartitionsPerInstance), func(r sizeRow) string {
		return bytesIEC(float64(r.partitionBytes) * float64(res.PartitionsPerInstance+1))
	})
	line(fmt.Sprintf("memory, all %d partitions", in.Partitions), func(r sizeRow) string {
		return bytesIEC(float64(r.partitionBytes) * float64(in.Partitions))
	})
	line("bits per key (one generation)", func(r sizeRow) string {
		return fmt.Sprintf("%.2f", float64(r.partitionBytes)*8/2/float64(n))
	})
	line("bound n·log2(1/ε), one generation", func(sizeRow) string {
		return fmt.Sprintf("%s (%.2f bits/key)", bytesIEC(bound), bits)
	})
	line("memory / bound", func(r sizeRow) string {
		return fmt.Sprintf("%.2f×", float64(r.partitionBytes)*8/2/float64(n)/bits)
	})
	line("FP rate, one generation holding n keys", func(r sizeRow) string { return fmt.Sprintf("%.3g%%", 100*r.oneGenFP) })
	line("FP rate, mean over a window (steady state)", func(r sizeRow) string { return fmt.Sprintf("%.3g%%", 100*r.meanFP) })
	line("FP rate, end of a window (both generations full)", func(r sizeRow) string { return fmt.Sprintf("%.3g%%", 100*r.endFP) })
	if in.Measure {
		line(fmt.Sprintf("  measured on the sample, %d absent keys (model)", measureProbes), func(r sizeRow) string {
			return fmt.Sprintf("%.3g%% (%.3g%%)", 100*r.measuredFP, 100*r.sampleFP)
		})
	}
	line("compressed snapshot / raw, window start .. end", func(r sizeRow) string {
		return fmt.Sprintf("%.3f .. %.3f", r.ratioStart, r.ratioEnd)
	})
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	if n > sampleKeys {
		fmt.Fprintf(w, "The measured rate and the compression are read on a sample pair sized for %d keys at the same rate (same counters or bits per key, same k).\n", uint64(sampleKeys))
	}
	fmt.Fprintln(w, "A record is tested against both generations, sized so that with both full (n keys each) the pair's modelled rate is at most ε (each generation at about ε/2; fingerprint widths are even, so that mode lands at or below ε):")
	fmt.Fprintln(w, "in steady state the previous generation holds a full window while the current one fills, so a record meets about half the end-of-window rate at a window's start and all of it at its end; false drops are rotation's model over the window.")
	fmt.Fprintf(w, "Memory: request = filters of %d partitions + 1 spare + their share of FETCH_BUFFER_BYTES (%d to %d MiB each) + %d KiB each + a PRODUCE_BATCH_BYTES batch per output partition + %d MiB runtime;\n",
		res.PartitionsPerInstance, sizing.MinPartitionShare>>20, sizing.MaxPartitionShare>>20, sizing.PartitionOverhead>>10, sizing.RuntimeBase>>20)
	fmt.Fprintf(w, "limit = the same with one instance down (%d partitions) ×5/4 for the collector; GOMEMLIMIT = 90%% of the limit.\n", res.PartitionsPerInstanceOneDown)
	fmt.Fprintln(w, "Under load the resident memory settles near GOMEMLIMIT (the collector holds it there); without GOMEMLIMIT it grows to about twice the live heap.")
	fmt.Fprintln(w, "The bound n·log2(1/ε) is the least memory any structure answering membership at rate ε can use for n keys.")
	fmt.Fprintln(w, "Changing DEDUP_MODE, DEDUP_EXPECTED_KEYS, DEDUP_FP_RATE or DEDUP_WINDOW: each partition keeps its old pair beside the new one until")
	fmt.Fprintln(w, "the old window has passed twice; until the log says the old filters were released, memory must also cover the old settings' filters.")
	return nil
}

// bytesIEC formats a byte count with a binary-prefix unit.
func bytesIEC(b float64) string {
	units := []string{"B", "KiB", "MiB", "GiB", "TiB"}
	i := 0
	for b >= 1024 && i < len(units)-1 {
		b /= 1024
		i++
	}
	if i == 0 {
		return fmt.Sprintf("%.0f B", b)
	}
	return fmt.Sprintf("%.1f %s", b, units[i])
}
