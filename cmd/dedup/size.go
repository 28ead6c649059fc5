package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"dedup/bench/workload"
	"dedup/rotation"
)

const sizeUsage = `Usage: dedup size [flags]

Prints the filter parameters the stage would use for a workload: counters or
bits per generation (m) and hash functions (k), memory per partition and per
instance, the false-positive rate expected at the end of a window, and the
information-theoretic bound n·log2(1/ε) for comparison.

  dedup size --keys-per-second 50000 --window 1h --fp-rate 0.001 --partitions 12

Keys are distinct keys (a repeat of a key already in the window costs no
memory). With --measure (the default) it also builds a filter pair, fills
its current generation with synthetic keys to its size, and probes it with
keys never added: the measured false-positive rate. Partitions of more than
1M keys are measured on a pair sized for 1M keys at the same rate (the same
counters or bits per key and k).

Flags:
`

// sampleKeys bounds the keys inserted to estimate the false-positive rate:
// a larger partition is estimated on a pair sized for sampleKeys keys at the
// same rate, which has the same geometry per key (counters or bits per key,
// k) and so the same rate, and takes a second rather than a minute.
const sampleKeys = 1_000_000

// measureProbes is how many absent keys --measure tests.
const measureProbes = 1_000_000

// sizeInput is what `dedup size` is asked.
type sizeInput struct {
	KeysPerWindow      uint64 // distinct keys per window, all partitions
	Window             time.Duration
	FPRate             float64
	Partitions         int
	Instances          int
	Modes              []rotation.Mode
	CheckpointInterval time.Duration
	Measure            bool
}

// runSize is `dedup size`.
func runSize(args []string) int {
	in, code := parseSize(args, os.Stderr)
	if code >= 0 {
		return code
	}
	if err := writeSize(os.Stdout, in); err != nil {
		fmt.Fprintf(os.Stderr, "dedup size: %v\n", err)
		return exitFailure
	}
	return exitOK
}

// parseSize parses the flags; code is -1 when the size should be printed.
func parseSize(args []string, stderr io.Writer) (sizeInput, int) {
	fs := flag.NewFlagSet("dedup size", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), sizeUsage)
		fs.PrintDefaults()
	}
	var (
		perSecond  = fs.String("keys-per-second", "", "distinct keys per second, all partitions (k, M, G suffixes)")
		perWindow  = fs.String("keys-per-window", "", "distinct keys per window, all partitions (instead of --keys-per-second)")
		window     = fs.Duration("window", time.Hour, "dedup window (DEDUP_WINDOW)")
		fpRate     = fs.Float64("fp-rate", 0.001, "false-positive rate at the window's key count (DEDUP_FP_RATE)")
		partitions = fs.Int("partitions", 12, "input partitions")
		instances  = fs.Int("instances", 1, "instances the partitions are spread over")
		mode       = fs.String("mode", "both", "counting, plain or both (DEDUP_MODE)")
		interval   = fs.Duration("checkpoint-interval", 10*time.Second, "checkpoint interval, for the checkpoint bandwidth (CHECKPOINT_INTERVAL)")
		measure    = fs.Bool("measure", true, "fill one partition's filter and measure its false-positive rate")
	)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return sizeInput{}, exitOK
		}
		return sizeInput{}, exitConfig
	}
	in := sizeInput{Window: *window, FPRate: *fpRate, Partitions: *partitions, Instances: *instances,
		CheckpointInterval: *interval, Measure: *measure}
	var problems []error
	if fs.NArg() > 0 {
		problems = append(problems, fmt.Errorf("unexpected arguments %q", fs.Args()))
	}
	switch {
	case (*perSecond == "") == (*perWindow == ""):
		problems = append(problems, errors.New("give exactly one of --keys-per-second and --keys-per-window"))
	case *perSecond != "":
		n, err := workload.ParseCount(*perSecond)
		if err != nil {
			problems = append(problems, fmt.Errorf("--keys-per-second: %w", err))
		}
		in.KeysPerWindow = uint64(math.Round(float64(n) * window.Seconds()))
	default:
		n, err := workload.ParseCount(*perWindow)
		if err != nil {
			problems = append(problems, fmt.Errorf("--keys-per-window: %w", err))
		}
		in.KeysPerWindow = n
	}
	if *window <= 0 {
		problems = append(problems, fmt.Errorf("--window: %v is not positive", *window))
	}
	if *partitions < 1 {
		problems = append(problems, fmt.Errorf("--partitions: %d is not positive", *partitions))
	}
	if *instances < 1 || *instances > max(*partitions, 1) {
		problems = append(problems, fmt.Errorf("--instances: %d is not in 1..partitions", *instances))
	}
	if *interval <= 0 {
		problems = append(problems, fmt.Errorf("--checkpoint-interval: %v is not positive", *interval))
	}
	switch strings.ToLower(*mode) {
	case "both":
		in.Modes = []rotation.Mode{rotation.Counting, rotation.Plain}
	default:
		m, err := rotation.ParseMode(*mode)
		if err != nil {
			problems = append(problems, fmt.Errorf("--mode: %w", err))
		}
		in.Modes = []rotation.Mode{m}
	}
	if len(problems) == 0 {
		for _, m := range in.Modes {
			if _, err := rotation.New(in.options(m)); err != nil {
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

// sizeRow is one mode's figures.
type sizeRow struct {
	mode             rotation.Mode
	m                uint64
	k                uint32
	bitsPerUnit      int // bits per counter (4) or per bit (1)
	partitionBytes   int // both generations
	modelFP          float64
	measuredFP       float64
	measured         bool
	sampled          uint64 // keys of the pair the rate was measured on
	bitsPerKeyOneGen float64
	boundBitsPerKey  float64
}

func sizeFor(in sizeInput, mode rotation.Mode) (sizeRow, error) {
	o := in.options(mode)
	p, err := rotation.New(o)
	if err != nil {
		return sizeRow{}, err
	}
	st := p.Stats()
	r := sizeRow{mode: mode, m: st.Current.M, k: st.Current.K, partitionBytes: p.SizeBytes(), bitsPerUnit: 1}
	if mode == rotation.Counting {
		r.bitsPerUnit = 4
	}
	n := float64(o.ExpectedKeys)
	r.bitsPerKeyOneGen = float64(r.partitionBytes) * 8 / 2 / n
	if mode == rotation.Plain {
		r.modelFP = math.Pow(-math.Expm1(-float64(r.k)*n/float64(r.m)), float64(r.k))
	}
	if mode == rotation.Counting || in.Measure {
		// The counting filter's rate comes from the stage's own model, which
		// reads the fill: fill a pair to learn it.
		so := o
		so.ExpectedKeys = min(o.ExpectedKeys, sampleKeys)
		sp, err := rotation.New(so)
		if err != nil {
			return sizeRow{}, err
		}
		p = nil
		w := workload.Workload{KeySize: workload.MinKeySize}
		ts := time.Unix(0, 0).Add(in.Window / 2)
		for id := range so.ExpectedKeys {
			sp.TestAndAdd(workload.KeyBytes(w, id), ts)
		}
		if mode == rotation.Counting {
			r.modelFP = sp.Stats().Current.FPRate
		}
		if in.Measure {
			var fp uint64
			for id := range uint64(measureProbes) {
				if sp.Test(workload.KeyBytes(w, so.ExpectedKeys+id)) {
					fp++
				}
			}
			r.measuredFP = float64(fp) / measureProbes
			r.measured = true
			r.sampled = so.ExpectedKeys
		}
	}
	return r, nil
}

func writeSize(w io.Writer, in sizeInput) error {
	n := in.keysPerPartition()
	perInstance := (in.Partitions + in.Instances - 1) / in.Instances
	fmt.Fprintf(w, "workload: %d distinct keys per %v window over %d partitions: n = %d keys per partition per window\n",
		in.KeysPerWindow, in.Window, in.Partitions, n)
	fmt.Fprintf(w, "target false-positive rate ε = %g; %d instance(s), at most %d partition(s) each\n\n",
		in.FPRate, in.Instances, perInstance)
	rows := []sizeRow{}
	for _, mode := range in.Modes {
		r, err := sizeFor(in, mode)
		if err != nil {
			return err
		}
		rows = append(rows, r)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 3, ' ', 0)
	line := func(label string, cell func(r sizeRow) string) {
		fmt.Fprint(tw, label)
		for _, r := range rows {
			fmt.Fprintf(tw, "\t%s", cell(r))
		}
		fmt.Fprintln(tw, "\t")
	}
	bound := float64(n) * math.Log2(1/in.FPRate) / 8
	line("", func(r sizeRow) string { return r.mode.String() })
	line("m per generation", func(r sizeRow) string {
		if r.mode == rotation.Counting {
			return fmt.Sprintf("%d counters (4 bits)", r.m)
		}
		return fmt.Sprintf("%d bits", r.m)
	})
	line("k (hash functions)", func(r sizeRow) string { return fmt.Sprint(r.k) })
	line("memory per partition (2 generations)", func(r sizeRow) string { return bytesIEC(float64(r.partitionBytes)) })
	// A running instance also holds one spare pair, which checkpoints copy
	// into so that the hot path never waits for a snapshot to be written.
	line(fmt.Sprintf("filters per instance (%d partitions + 1 checkpoint spare)", perInstance), func(r sizeRow) string {
		return bytesIEC(float64(r.partitionBytes) * float64(perInstance+1))
	})
	line(fmt.Sprintf("memory, all %d partitions", in.Partitions), func(r sizeRow) string {
		return bytesIEC(float64(r.partitionBytes) * float64(in.Partitions))
	})
	line("bits per key (one generation)", func(r sizeRow) string { return fmt.Sprintf("%.2f", r.bitsPerKeyOneGen) })
	line("bound n·log2(1/ε), one generation", func(sizeRow) string {
		return fmt.Sprintf("%s (%.2f bits/key)", bytesIEC(bound), math.Log2(1/in.FPRate))
	})
	line("memory / bound", func(r sizeRow) string { return fmt.Sprintf("%.2f×", r.bitsPerKeyOneGen/math.Log2(1/in.FPRate)) })
	line("FP rate at end of window (one generation, n keys)", func(r sizeRow) string { return fmt.Sprintf("%.4f%%", 100*r.modelFP) })
	if in.Measure {
		line(fmt.Sprintf("  measured, %d absent keys", measureProbes), func(r sizeRow) string {
			mark := ""
			if r.sampled < n {
				mark = " *"
			}
			return fmt.Sprintf("%.4f%%%s", 100*r.measuredFP, mark)
		})
	}
	line("FP rate, both generations full (end of a window, steady state)", func(r sizeRow) string {
		return fmt.Sprintf("%.4f%%", 100*(1-(1-r.modelFP)*(1-r.modelFP)))
	})
	line(fmt.Sprintf("checkpoint state, all partitions, every %v", in.CheckpointInterval), func(r sizeRow) string {
		all := float64(r.partitionBytes) * float64(in.Partitions)
		return fmt.Sprintf("%s raw (%s/s)", bytesIEC(all), bytesIEC(all/in.CheckpointInterval.Seconds()))
	})
	if err := tw.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(w)
	if in.Measure && n > sampleKeys {
		fmt.Fprintf(w, "* measured on a pair sized for %d keys at the same rate (same counters or bits per key, same k).\n", uint64(sampleKeys))
	}
	fmt.Fprintln(w, "FP rate at end of window: counting = the stage's own estimate (its blocked-filter model at the filled load); plain = (1-e^(-kn/m))^k.")
	fmt.Fprintln(w, "A record is tested against both generations, each sized for p with 1-(1-p)^2 = ε: in steady state the previous one holds a full window, so over each window the rate climbs from about p = ε/2 to ε.")
	fmt.Fprintln(w, "Process memory is the filters per instance plus fetch and write buffers (partitions × FETCH_MAX_BYTES + output partitions × PRODUCE_BATCH_BYTES) and about 32 MiB; set GOMEMLIMIT (README, Sizing).")
	fmt.Fprintln(w, "The bound n·log2(1/ε) is the least memory any structure answering membership at rate ε can use for n keys.")
	fmt.Fprintln(w, "Checkpoint state is before compression; every partition is snapshotted once per interval.")
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
