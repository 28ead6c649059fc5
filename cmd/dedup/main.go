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

	"dedup/internal/buildinfo"
	"dedup/internal/config"
	"dedup/internal/service"
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
func run(ctx context.Context, args []string, lookup config.LookupFunc, stdout, stderr io.Writer) int {
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
func setup(lookup config.LookupFunc, stderr io.Writer) (*config.Config, *slog.Logger, int) {
	cfg, err := config.Load(lookup)
	if err != nil {
		reportConfigError(stderr, err)
		return nil, nil, exitConfig
	}
	return &cfg, config.NewLogger(&cfg, stderr), exitOK
}

func reportConfigError(w io.Writer, err error) {
	var ce *config.Error
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

// setupNoArgs is setup for a subcommand that takes no arguments.
func setupNoArgs(name string, args []string, lookup config.LookupFunc, stderr io.Writer) (*config.Config, *slog.Logger, int) {
	if code, ok := noArgs(name, args, nil, stderr); !ok {
		return nil, nil, code
	}
	return setup(lookup, stderr)
}

// runServe is the default command: the stage until a signal.
func runServe(ctx context.Context, args []string, lookup config.LookupFunc, stdout, stderr io.Writer) int {
	cfg, log, code := setupNoArgs("run", args, lookup, stderr)
	if code != exitOK {
		return code
	}
	err := service.Run(ctx, service.Options{Config: cfg, Logger: log, Stdout: stdout, Build: buildinfo.Read(commit)})
	if err != nil {
		if errors.Is(err, service.ErrStoppedDuringStartup) {
			log.Info("stopped during start-up")
			return exitOK
		}
		log.Error("dedup failed", "err", err)
		return exitFailure
	}
	log.Info("stopped")
	return exitOK
}
