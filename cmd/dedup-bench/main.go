// Command dedup-bench measures the deduplication stage against the
// alternatives a user would otherwise run (a plain copy loop, an exact set,
// filters from other libraries) on the user's own machine.
//
//	dedup-bench --quick      under a minute
//	dedup-bench --full       the memory sweep over distinct keys
//
// It is a command of its own, not a subcommand of dedup, so that the service
// binary links none of the contenders' libraries nor the plotting code.
//
// Exit codes: 0 ok, 1 runtime failure, 2 bad flags.
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"syscall"
	"time"

	"dedup/bench"
	"dedup/bench/workload"
	"dedup/count"
)

// benchContender is the hidden subcommand the bench harness starts each
// contender process with: `dedup-bench contender SPEC-JSON`.
const benchContender = "contender"

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1
	exitConfig  = 2
)

// Presets of `dedup-bench`.
const (
	quickKeys     = "500k"
	quickRepeat   = 3
	fullKeys      = "1M,3M,10M,30M"
	fullValueSize = 16
	fullDupRatio  = 0.3
)

const benchUsage = `Usage: dedup-bench [flags]

Runs every contender over the same generated input on an embedded broker, one
process at a time, and prints records/s, peak resident memory, bytes per
distinct key, duplicates dropped and false drops, each as a ratio to the stage
in counting mode, and every contender's records/s and records per CPU second
against the copy loop (the stage's settings and source headers), as the
median of per-round ratios with --repeat. Progress bars go to stderr, tables to stdout.

  dedup-bench --quick                     under a minute (500k distinct keys, each contender 3 times)
  dedup-bench --full --plot docs/bench    the sweep: 1M,3M,10M,30M distinct keys (value 16 B, 30% duplicates)
  dedup-bench --keys 1M,10M,100M          any sweep (each point is a separate run)

Flags:
`

// contenderEnv is what each contender process adds to its environment.
func contenderEnv(memLimit string) []string {
	if memLimit == "" {
		return nil
	}
	return []string{"GOMEMLIMIT=" + memLimit}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	os.Exit(runBench(ctx, os.Args[1:]))
}

// runBench is the whole command, testable in-process.
func runBench(ctx context.Context, args []string) int {
	if len(args) > 0 && args[0] == benchContender {
		return runBenchContender(ctx, args[1:])
	}
	fs := flag.NewFlagSet("dedup-bench", flag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), benchUsage)
		fs.PrintDefaults()
	}
	var (
		quick      = fs.Bool("quick", false, fmt.Sprintf("small run that finishes in under a minute (--keys %s --repeat %d)", quickKeys, quickRepeat))
		full       = fs.Bool("full", false, fmt.Sprintf("the sweep: --keys %s (--value-size %d --dup-ratio %g unless given, so that 30M fits in 24 GiB)", fullKeys, fullValueSize, fullDupRatio))
		keys       = fs.String("keys", "1M", "distinct keys; a comma-separated list runs a sweep (k, M, G suffixes)")
		records    = fs.String("records", "0", "input records per run; 0 = keys/(1-dup-ratio)")
		dupRatio   = fs.Float64("dup-ratio", 0.5, "fraction of records that repeat an earlier key")
		valueSize  = fs.Int("value-size", 64, "value bytes per record (at least 8)")
		keySize    = fs.Int("key-size", 16, "key bytes per record (at least 16)")
		partitions = fs.Int("partitions", 4, "partitions of the input and output topics")
		seed       = fs.Uint64("seed", 1, "generator seed")
		fpRate     = fs.Float64("fp-rate", 0.001, "false-positive rate the filters are sized for")
		expected   = fs.String("expected-keys", "0", "distinct keys per partition the filters are sized for; 0 = the input's")
		window     = fs.Duration("window", time.Hour, "filter window (DEDUP_WINDOW)")
		windows    = fs.Int("windows", 2, "windows the input's timestamps span (2: the filters rotate once, both generations end up holding keys)")
		contenders = fs.String("contenders", strings.Join(bench.DefaultContenders, ","), "comma-separated contenders (also: cuckoo)")
		plotDir    = fs.String("plot", "", "write throughput.png and memory.png (against distinct keys) to this directory")
		jsonOut    = fs.String("json", "", "also write the reports as JSON to this file")
		from       = fs.String("from", "", "run nothing: read reports from this JSON file (written by --json) and print/plot them")
		perTimeout = fs.Duration("contender-timeout", time.Hour, "longest one contender process may run")
		memLimit   = fs.String("gomemlimit", "", "GOMEMLIMIT of the contender processes alone (as `dedup size` prints it for a deployment), not of the harness and its broker")
		repeat     = fs.Int("repeat", 1, "run every contender this many times (interleaved) and report the median records/s")
		resume     = fs.Bool("resume", false, "keep the runs already in --json that match this workload, and run only the missing key counts")
	)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return exitOK
		}
		return exitConfig
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "dedup-bench: unexpected arguments %q\n", fs.Args())
		return exitConfig
	}

	if *from != "" {
		reports, err := readReportsFile(*from)
		if err != nil {
			fmt.Fprintf(os.Stderr, "dedup-bench: %v\n", err)
			return exitConfig
		}
		return finishBench(reports, *plotDir)
	}

	var problems []error
	keyList := *keys
	set := map[string]bool{} // flags given explicitly win over a preset's
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	switch {
	case *quick && *full:
		problems = append(problems, errors.New("--quick and --full exclude each other"))
	case *quick:
		keyList = quickKeys
		if !set["repeat"] {
			*repeat = quickRepeat
		}
	case *full:
		keyList = fullKeys
		if !set["value-size"] {
			*valueSize = fullValueSize
		}
		if !set["dup-ratio"] {
			*dupRatio = fullDupRatio
		}
	}
	sweep, err := count.ParseList(keyList)
	if err != nil {
		problems = append(problems, fmt.Errorf("--keys: %w", err))
	}
	nRecords, err := count.ParseUint(*records)
	if err != nil {
		problems = append(problems, fmt.Errorf("--records: %w", err))
	}
	if nRecords != 0 && len(sweep) > 1 {
		problems = append(problems, errors.New("--records needs a single --keys value (a sweep derives records from --dup-ratio)"))
	}
	nExpected, err := count.ParseUint(*expected)
	if err != nil {
		problems = append(problems, fmt.Errorf("--expected-keys: %w", err))
	}
	names, err := bench.ParseContenders(*contenders)
	if err != nil {
		problems = append(problems, fmt.Errorf("--contenders: %w", err))
	}
	exe, err := os.Executable()
	if err != nil {
		problems = append(problems, fmt.Errorf("find own executable: %w", err))
	}
	base := bench.Options{
		Workload: workload.Workload{
			Records: nRecords, DupRatio: *dupRatio, KeySize: *keySize, ValueSize: *valueSize,
			Partitions: *partitions, Seed: *seed,
		},
		Contenders:       names,
		FPRate:           *fpRate,
		ExpectedKeys:     nExpected,
		Window:           *window,
		Windows:          *windows,
		Exe:              exe,
		Args:             []string{benchContender},
		Progress:         os.Stderr,
		ContenderTimeout: *perTimeout,
		Env:              contenderEnv(*memLimit),
		Repeat:           *repeat,
	}
	for _, k := range sweep {
		w := base.Workload
		w.Keys = k
		if err := w.Validate(); err != nil {
			problems = append(problems, fmt.Errorf("keys %d: %w", k, err))
		}
	}
	if *fpRate <= 0 || *fpRate >= 1 {
		problems = append(problems, fmt.Errorf("--fp-rate: %v is not in (0, 1)", *fpRate))
	}
	if *windows < 1 {
		problems = append(problems, fmt.Errorf("--windows: %d is below 1", *windows))
	}
	if *repeat < 1 {
		problems = append(problems, fmt.Errorf("--repeat: %d is below 1", *repeat))
	}
	if *window <= 0 {
		problems = append(problems, fmt.Errorf("--window: %v is not positive", *window))
	}
	if err := errors.Join(problems...); err != nil {
		fmt.Fprintf(os.Stderr, "dedup-bench: %v\n", err)
		return exitConfig
	}

	if *resume && *jsonOut == "" {
		fmt.Fprintln(os.Stderr, "dedup-bench: --resume needs --json")
		return exitConfig
	}
	var reports []bench.Report
	if *resume {
		kept, err := resumable(*jsonOut, base)
		if err != nil {
			fmt.Fprintf(os.Stderr, "dedup-bench: %v\n", err)
			return exitFailure
		}
		reports = kept
	}
	for i, k := range sweep {
		o := base
		o.Workload.Keys = k
		if done := slices.IndexFunc(reports, func(r bench.Report) bool { return r.Workload.Keys == k }); done >= 0 {
			fmt.Fprintf(os.Stderr, "\n== run %d of %d: %d distinct keys: kept from %s\n", i+1, len(sweep), k, *jsonOut)
			printReport(os.Stdout, reports[done])
			continue
		}
		if len(sweep) > 1 {
			fmt.Fprintf(os.Stderr, "\n== run %d of %d: %d distinct keys\n", i+1, len(sweep), k)
		}
		debug.FreeOSMemory() // the last run's broker, before the next run counts what is free
		rep, err := bench.Run(ctx, o)
		if err != nil {
			fmt.Fprintf(os.Stderr, "dedup-bench: %v\n", err)
			return exitFailure
		}
		reports = append(reports, rep)
		slices.SortFunc(reports, func(a, b bench.Report) int { return cmp.Compare(a.Workload.Keys, b.Workload.Keys) })
		printReport(os.Stdout, rep)
		// Written after every run, so that a sweep cut short keeps what it measured.
		if err := writeReportsFile(*jsonOut, reports); err != nil {
			fmt.Fprintf(os.Stderr, "dedup-bench: %v\n", err)
			return exitFailure
		}
	}
	return finishBench(reports, *plotDir)
}

// printReport prints one run's table with the input it ran on.
func printReport(w io.Writer, r bench.Report) {
	wl := r.Workload
	runs := ""
	if r.Repeat > 1 {
		runs = fmt.Sprintf("; median of %d runs per contender", r.Repeat)
	}
	fmt.Fprintf(w, "\n%d records, %d distinct keys, %d partition(s), key %d B, value %d B, timestamps over %d window(s);\nfilters sized for %d new keys per partition per window at fp-rate %g%s\n\n",
		wl.Records, wl.Keys, wl.Partitions, wl.KeySize, wl.ValueSize, r.Windows, r.ExpectedKeys, r.FPRate, runs)
	if err := bench.WriteTable(w, r); err != nil {
		fmt.Fprintf(os.Stderr, "dedup-bench: %v\n", err)
	}
}

// finishBench prints the sweep table and writes the plots.
func finishBench(reports []bench.Report, plotDir string) int {
	if len(reports) > 1 {
		fmt.Fprintln(os.Stdout, "\nsweep:")
		fmt.Fprintln(os.Stdout)
		if err := bench.WriteSweep(os.Stdout, reports); err != nil {
			fmt.Fprintf(os.Stderr, "dedup-bench: %v\n", err)
			return exitFailure
		}
	}
	if plotDir != "" {
		files, err := bench.Plot(plotDir, reports)
		if err != nil {
			fmt.Fprintf(os.Stderr, "dedup-bench: %v\n", err)
			return exitFailure
		}
		for _, f := range files {
			fmt.Fprintf(os.Stderr, "wrote %s\n", f)
		}
	}
	return exitOK
}

// writeReportsFile writes reports as JSON to path (nothing when path is
// empty), creating its directory.
func writeReportsFile(path string, reports []bench.Report) error {
	if path == "" {
		return nil
	}
	b, err := json.MarshalIndent(reports, "", "  ")
	if err != nil {
		return fmt.Errorf("encode reports: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("write reports: %w", err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		return fmt.Errorf("write reports: %w", err)
	}
	return nil
}

func readReportsFile(path string) ([]bench.Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read reports: %w", err)
	}
	var reports []bench.Report
	if err := json.Unmarshal(b, &reports); err != nil {
		return nil, fmt.Errorf("decode reports %s: %w", path, err)
	}
	for _, r := range reports {
		printReport(os.Stdout, r)
	}
	return reports, nil
}

// resumable returns the reports in path (none if it does not exist) whose
// workload and sizing match base's, apart from the key count.
func resumable(path string, base bench.Options) ([]bench.Report, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read reports: %w", err)
	}
	var all []bench.Report
	if err := json.Unmarshal(b, &all); err != nil {
		return nil, fmt.Errorf("decode reports %s: %w", path, err)
	}
	var kept []bench.Report
	for _, r := range all {
		w := r.Workload
		w.Keys, w.Records = base.Workload.Keys, base.Workload.Records
		if w == base.Workload && r.FPRate == base.FPRate && r.Repeat == base.Repeat && r.Windows == base.Windows &&
			(base.ExpectedKeys == 0 || r.ExpectedKeys == base.ExpectedKeys) && sameNames(r, base.Contenders) {
			kept = append(kept, r)
		}
	}
	return kept, nil
}

func sameNames(r bench.Report, names []string) bool {
	if len(r.Outcomes) != len(names) {
		return false
	}
	for i, o := range r.Outcomes {
		if o.Name != names[i] {
			return false
		}
	}
	return true
}

// runBenchContender is the body of one contender process.
func runBenchContender(ctx context.Context, args []string) int {
	if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "dedup-bench contender: want one JSON spec argument")
		return exitConfig
	}
	if err := bench.RunContender(ctx, args[0], os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "dedup-bench contender: %v\n", err)
		return exitFailure
	}
	return exitOK
}
