package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"dedup/count"
	"dedup/internal/config"
	"dedup/rotation"
	"dedup/sizing"
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

// runSize is `dedup size`.
func runSize(args []string, stdout, stderr io.Writer) int {
	in, code := parseSize(args, stderr)
	if code >= 0 {
		return code
	}
	rep, err := sizing.NewReport(in)
	if err == nil {
		err = rep.Write(stdout)
	}
	if err != nil {
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
	def, err := rotation.ParseMode(config.Default("DEDUP_MODE"))
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
	d, _ := time.ParseDuration(config.Default(name)) // a test checks every default parses
	return d
}

// configFloat reads the envDefault of a number variable.
func configFloat(name string) float64 {
	f, _ := strconv.ParseFloat(config.Default(name), 64) // a test checks every default parses
	return f
}

// configCount reads the envDefault of a count variable.
func configCount(name string) int64 {
	n, _ := count.Parse(config.Default(name)) // a test checks every default parses
	return n
}

// sizeFlags are `dedup size`'s flags, as given.
type sizeFlags struct {
	perSecond, perWindow, fpRate, mode, fetchBuffer, batchBytes *string
	window, interval                                            *time.Duration
	partitions, instances                                       *int
	measure                                                     *bool
	chainRatio                                                  *float64
	// The repartition topic (REPARTITION_TOPIC): sized when repartition.
	repartition                  *bool
	recordsPerSecond, recordSize *string
	retention                    *time.Duration
	replication                  *int
	hops                         *string // REPARTITION_HOPS: the role sized
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
		fpRate:      fs.String("fp-rate", config.Default("DEDUP_FP_RATE"), "false-positive rate at the window's key count (DEDUP_FP_RATE)"),
		partitions:  fs.Int("partitions", 12, "input partitions"),
		instances:   fs.Int("instances", 1, "instances (replicas) the partitions are spread over"),
		mode:        fs.String("mode", "all", strings.Join(modeNames, ", ")+" or all (DEDUP_MODE)"),
		interval:    fs.Duration("checkpoint-interval", configDuration("CHECKPOINT_INTERVAL"), "checkpoint interval (CHECKPOINT_INTERVAL)"),
		chainRatio:  fs.Float64("checkpoint-chain-ratio", configFloat("CHECKPOINT_CHAIN_RATIO"), "increments per base, as a multiple of its size; 0 = full snapshots (CHECKPOINT_CHAIN_RATIO)"),
		fetchBuffer: fs.String("fetch-buffer-bytes", config.Default("FETCH_BUFFER_BYTES"), "FETCH_BUFFER_BYTES, for the memory per instance"),
		batchBytes:  fs.String("produce-batch-bytes", config.Default("PRODUCE_BATCH_BYTES"), "PRODUCE_BATCH_BYTES, for the memory per instance"),
		measure:     fs.Bool("measure", true, "also probe the sample pair with absent keys: the measured false-positive rate"),

		repartition:      fs.Bool("repartition", false, "also size the repartition topic (REPARTITION_TOPIC): its throughput and storage, and hop 1's memory"),
		recordsPerSecond: fs.String("records-per-second", "", "input records per second, duplicates included, for --repartition (default: the keys per second)"),
		recordSize:       fs.String("record-bytes", "500", "mean input record size (key, value, headers), for --repartition"),
		retention:        fs.Duration("repartition-retention", 7*24*time.Hour, "the repartition topic's retention, for --repartition"),
		replication:      fs.Int("replication", 3, "the repartition topic's replication factor, for --repartition"),
		hops: fs.String("hops", config.HopsBoth, "with --repartition, the role sized (REPARTITION_HOPS): both; rekey (hop 1 alone: no filters, --partitions the input's); "+
			"dedup (filters and hop 2 alone, --partitions the repartition topic's)"),
	}
}

// parseSize parses the flags; code is -1 when the size should be printed.
func parseSize(args []string, stderr io.Writer) (sizing.Workload, int) {
	fs, f := newSizeFlagSet()
	fs.SetOutput(stderr)
	fs.Usage = func() { printCommandUsage(fs.Output(), commandNamed("size")) }
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return sizing.Workload{}, exitOK
		}
		return sizing.Workload{}, exitConfig
	}
	in := sizing.Workload{Window: *f.window, Partitions: *f.partitions, Instances: *f.instances,
		CheckpointInterval: *f.interval, Measure: *f.measure, ChainRatio: *f.chainRatio}
	var problems []error
	switch {
	case *f.chainRatio < 0 || math.IsNaN(*f.chainRatio) || math.IsInf(*f.chainRatio, 0):
		problems = append(problems, fmt.Errorf("--checkpoint-chain-ratio: %v is not a number >= 0", *f.chainRatio))
	case *f.chainRatio == 0:
		in.ChainRatio = -1 // full snapshots: the workload's zero is the default
	}
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
	if *f.repartition {
		rp := &sizing.Repartition{RecordBytes: int64(flagCount("record-bytes", *f.recordSize)), KeyBytes: 16,
			Retention: *f.retention, Replication: *f.replication, InputTopic: config.Default("INPUT_TOPIC"),
			Topic: config.Default("INPUT_TOPIC") + "-repartition", FetchBytes: sizing.Hop1FetchBytes,
			BatchBytes: in.ProduceBatchBytes}
		rp.RecordsPerSecond = float64(in.KeysPerWindow) / f.window.Seconds()
		if *f.recordsPerSecond != "" {
			rp.RecordsPerSecond = float64(flagCount("records-per-second", *f.recordsPerSecond))
		}
		if *f.retention <= 0 || *f.replication < 1 {
			problems = append(problems, fmt.Errorf("--repartition-retention and --replication must be positive, got %v and %d", *f.retention, *f.replication))
		}
		in.Repartition = rp
	}
	switch *f.hops {
	case config.HopsBoth:
	case config.HopsRekey, config.HopsDedup:
		if !*f.repartition {
			problems = append(problems, fmt.Errorf("--hops %s needs --repartition: the hops exist only with a repartition topic", *f.hops))
		}
		in.Hops = *f.hops
	default:
		problems = append(problems, fmt.Errorf("--hops: must be both, rekey or dedup, got %q", *f.hops))
	}
	if len(problems) == 0 {
		problems = append(problems, in.Validate())
	}
	if err := errors.Join(problems...); err != nil {
		fmt.Fprintf(stderr, "dedup size: %v\n", err)
		return sizing.Workload{}, exitConfig
	}
	return in, -1
}
