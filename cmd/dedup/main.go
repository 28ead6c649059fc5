// Command dedup runs the Kafka stream deduplication stage.
//
// Its subcommands are listed in commands.go; `dedup help` prints them.
//
// Exit codes: 0 ok, 1 runtime failure, 2 configuration error.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
)

// Exit codes.
const (
	exitOK      = 0
	exitFailure = 1
	exitConfig  = 2
)

func main() {
	os.Exit(realMain())
}

// realMain wires the process to run: signals cancel the context once; a
// second signal gets the default behaviour (immediate exit) because the
// handler is released as soon as the first arrives.
func realMain() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	context.AfterFunc(ctx, stop)
	return run(ctx, os.Args[1:], os.LookupEnv, os.Stdout, os.Stderr)
}

// run is the whole program behind main, testable in-process.
func run(ctx context.Context, args []string, lookup LookupFunc, stdout, stderr io.Writer) int {
	cmd := "run"
	if len(args) > 0 {
		cmd, args = args[0], args[1:]
	}
	c := commandNamed(cmd)
	if c.run == nil {
		fmt.Fprintf(stderr, "dedup: unknown subcommand %q; run 'dedup help' for the list\n", cmd)
		return exitConfig
	}
	if c.name != "help" && asksHelp(args) {
		printCommandUsage(stdout, c)
		return exitOK
	}
	return c.run(ctx, args, lookup, stdout, stderr)
}

// runHelp prints the general usage; with a subcommand's name, its own; with
// --markdown, the README's configuration table.
func runHelp(args []string, stdout, stderr io.Writer) int {
	switch {
	case len(args) == 0:
		printUsage(stdout)
		return exitOK
	case len(args) == 1 && args[0] == "--markdown":
		writeConfigTable(stdout)
		return exitOK
	case len(args) == 1 && commandNamed(args[0]).run != nil:
		printCommandUsage(stdout, commandNamed(args[0]))
		return exitOK
	}
	fmt.Fprintf(stderr, "dedup help: unexpected arguments %s (want none, a subcommand's name, or --markdown)\n", strings.Join(args, " "))
	return exitConfig
}

// setup loads the configuration and builds the logger; it reports every
// configuration problem at once.
func setup(lookup LookupFunc, stderr io.Writer) (*Config, *slog.Logger, int) {
	cfg, err := LoadConfig(lookup)
	if err != nil {
		reportConfigError(stderr, err)
		return nil, nil, exitConfig
	}
	return &cfg, newLogger(&cfg, stderr), exitOK
}

func reportConfigError(w io.Writer, err error) {
	var ce *ConfigError
	if !errors.As(err, &ce) {
		fmt.Fprintf(w, "dedup: configuration error: %v\n", err)
		return
	}
	plural := "s"
	if len(ce.Problems) == 1 {
		plural = ""
	}
	fmt.Fprintf(w, "dedup: configuration error (%d problem%s):\n", len(ce.Problems), plural)
	for _, p := range ce.Problems {
		fmt.Fprintf(w, "  %s\n", p.Error())
	}
	fmt.Fprintln(w, "Run 'dedup help' for every variable and its default.")
}

// noArgs rejects arguments for subcommands that take none (run has
// answered -h already).
func noArgs(name string, args []string, _, stderr io.Writer) (int, bool) {
	if len(args) == 0 {
		return exitOK, true
	}
	fmt.Fprintf(stderr, "dedup %s: unexpected arguments %s (configuration comes from environment variables; see 'dedup help')\n", name, strings.Join(args, " "))
	return exitConfig, false
}

// runServe is the default command: the stage until a signal.
func runServe(ctx context.Context, args []string, lookup LookupFunc, stdout, stderr io.Writer) int {
	if code, ok := noArgs("run", args, stdout, stderr); !ok {
		return code
	}
	cfg, log, code := setup(lookup, stderr)
	if code != exitOK {
		return code
	}
	if err := serve(ctx, cfg, log, stdout); err != nil {
		if errors.Is(err, errStoppedDuringStartup) {
			log.Info("stopped during start-up")
			return exitOK
		}
		log.Error("dedup failed", "err", err)
		return exitFailure
	}
	log.Info("stopped")
	return exitOK
}

// serve starts the stage and runs it until ctx ends.
func serve(ctx context.Context, cfg *Config, log *slog.Logger, stdout io.Writer) (err error) {
	svc, err := startService(ctx, cfg, log, stdout)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, svc.Close()) }()
	log.Info("dedup running", "input", cfg.InputTopic, "output", cfg.OutputTopic, "group", cfg.GroupID,
		"key", cfg.Key, "window", cfg.Window, "mode", cfg.Mode, "checkpoint_store", cfg.CheckpointStore)
	return svc.Stage.Run(ctx)
}
