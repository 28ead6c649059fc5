package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"dedup/internal/buildinfo"
	"dedup/internal/config"
	"dedup/internal/demo"
	"dedup/internal/service"
)

// demoFlags are the generator's knobs; the rest of the configuration comes
// from the environment as for `dedup run`.
type demoFlags struct {
	generateOnly bool
	duration     time.Duration
	gen          demo.Options
}

// newDemoFlagSet defines `dedup demo`'s flags into f, for parsing and for
// its usage.
func newDemoFlagSet(f *demoFlags) *flag.FlagSet {
	fs := flag.NewFlagSet("dedup demo", flag.ContinueOnError)
	fs.BoolVar(&f.generateOnly, "generate-only", false, "only generate traffic (needs KAFKA_BROKERS)")
	fs.DurationVar(&f.duration, "duration", 0, "stop after this long (0 = until SIGTERM/SIGINT)")
	fs.IntVar(&f.gen.Rate, "rate", 500, "records per second")
	fs.IntVar(&f.gen.Keys, "keys", 0, "distinct keys before fresh keys repeat (0 = never repeat)")
	fs.Float64Var(&f.gen.DuplicateRate, "dup", 0.3, "fraction of records that repeat a key already sent")
	fs.Float64Var(&f.gen.RetractRate, "retract", 0.02, "fraction of records that retract a key already sent")
	fs.Float64Var(&f.gen.UnkeyedRate, "unkeyed", 0.02, "fraction of records without a key")
	fs.IntVar(&f.gen.Count, "count", 0, "stop generating after this many records (0 = no limit)")
	fs.IntVar(&f.gen.ValueSize, "value-size", 64, "filler bytes per value")
	fs.Uint64Var(&f.gen.Seed, "seed", 1, "random seed (same seed, same traffic)")
	return fs
}

func parseDemoFlags(args []string, stderr io.Writer) (demoFlags, error) {
	var f demoFlags
	fs := newDemoFlagSet(&f)
	fs.SetOutput(stderr)
	fs.Usage = func() { printCommandUsage(fs.Output(), commandNamed("demo")) }
	if err := fs.Parse(args); err != nil {
		return f, err
	}
	if fs.NArg() > 0 {
		return f, fmt.Errorf("unexpected arguments: %v", fs.Args())
	}
	if f.duration < 0 {
		return f, fmt.Errorf("--duration must be >= 0, got %s", f.duration)
	}
	return f, nil
}

// runDemo is `dedup demo`.
func runDemo(ctx context.Context, args []string, lookup config.LookupFunc, stdout, stderr io.Writer) int {
	flags, err := parseDemoFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "dedup demo: %v\n", err)
		return exitConfig
	}
	// The progress line shares the terminal with the logs: unless asked
	// otherwise, the demo logs warnings only.
	if _, set := lookup("LOG_LEVEL"); !set && !flags.generateOnly {
		lookup = withDefault(lookup, "LOG_LEVEL", "warn")
	}
	cfg, log, code := setup(lookup, stderr)
	if code != exitOK {
		return code
	}
	if flags.generateOnly && cfg.Embedded() {
		reportConfigError(stderr, &config.Error{Problems: []config.Problem{{Var: "KAFKA_BROKERS", Msg: "dedup demo --generate-only needs brokers to send to"}}})
		return exitConfig
	}
	flags.gen.Topic = cfg.InputTopic
	flags.gen.RetractHeader = cfg.RetractHeader
	flags.gen.Logger = log
	if _, err := demo.New(flags.gen); err != nil {
		fmt.Fprintf(stderr, "dedup demo: %v\n", err)
		return exitConfig
	}
	if flags.duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, flags.duration)
		defer cancel()
	}
	if flags.generateOnly {
		err = demo.GenerateOnly(ctx, cfg, flags.gen, log)
	} else {
		err = demo.Run(ctx, service.Options{Config: cfg, Logger: log, Stdout: stdout, Build: buildinfo.Read(commit)}, flags.gen)
	}
	if err != nil {
		log.Error("dedup demo failed", "err", err)
		return exitFailure
	}
	return exitOK
}

// withDefault answers name with value when the environment does not set it.
func withDefault(lookup config.LookupFunc, name, value string) config.LookupFunc {
	return func(k string) (string, bool) {
		if v, ok := lookup(k); ok || k != name {
			return v, ok
		}
		return value, true
	}
}
