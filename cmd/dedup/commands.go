package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"dedup/internal/config"
)

// command is one subcommand. The dispatch, the general usage and each
// subcommand's own usage (`dedup SUB -h`, `dedup help SUB`) are all read
// from commands(), so a subcommand cannot be runnable and undocumented.
type command struct {
	name     string
	aliases  []string
	synopsis string // after "dedup "
	summary  string // the general usage's line(s) beside the synopsis
	about    string // the subcommand's own usage, before its flags
	env      envUse
	vars     []string             // the variables read, when env is someVars
	flags    func() *flag.FlagSet // nil: takes no flags
	run      func(context.Context, []string, config.LookupFunc, io.Writer, io.Writer) int
}

// envUse is which environment variables a subcommand reads.
type envUse int

const (
	noVars   envUse = iota // none
	allVars                // the whole configuration, validated as `dedup run` does
	someVars               // those named in command.vars
)

func commands() []command {
	return []command{
		{
			name: "run", synopsis: "[run]",
			summary: "run the stage until SIGTERM/SIGINT; with KAFKA_BROKERS empty it\nstarts an embedded broker on EMBEDDED_BROKER_ADDR first",
			about: `Runs the stage until SIGTERM or SIGINT: consumes INPUT_TOPIC, forwards first
occurrences to OUTPUT_TOPIC, checkpoints and commits. With KAFKA_BROKERS empty it
starts an embedded broker on EMBEDDED_BROKER_ADDR first, keeping its log in DATA_DIR.
A stop flushes, checkpoints, commits and leaves the group within SHUTDOWN_TIMEOUT.`,
			env: allVars, run: runServe,
		},
		{
			name: "demo", synopsis: "demo [flags]",
			summary: "embedded broker + stage + generator of duplicate-laden traffic, with a\nlive progress line; --generate-only: only the generator, against KAFKA_BROKERS",
			about: `Without --generate-only: starts the stage (and the embedded broker when KAFKA_BROKERS is empty),
sends generated traffic to INPUT_TOPIC and redraws a progress line twice a second.
With --generate-only: only sends traffic to INPUT_TOPIC on KAFKA_BROKERS, logging its rate.`,
			env: allVars, flags: func() *flag.FlagSet { return newDemoFlagSet(&demoFlags{}) }, run: runDemo,
		},
		{
			name: "inspect", synopsis: "inspect",
			summary: "print, per partition, what the checkpoint store holds",
			about: `Prints every snapshot the configured checkpoint store holds, newest first per
partition, with its verdict, the offsets it covers and the filter statistics decoded
from it. It only reads the store. With CHECKPOINT_STORE=kafka and no KAFKA_BROKERS it
reads from the embedded broker of a running dedup at EMBEDDED_BROKER_ADDR.`,
			env: allVars, run: runInspect,
		},
		{
			name: "explain", synopsis: "explain [flags] KEY...",
			summary: "whether the checkpointed filters hold a dedup key, per partition: generation,\nwindows, false-positive chance; one argument per part of a composite key",
			about:   explainAbout,
			env:     allVars, flags: func() *flag.FlagSet { fs, _ := newExplainFlagSet(); return fs }, run: runExplain,
		},
		{
			name: "check", synopsis: "check [--timeout 10s]",
			summary: "before deploying: configuration, brokers, topics, checkpoint store,\neffective settings and sizing; exit 0 ok, 1 a check failed",
			about:   checkAbout,
			env:     allVars, flags: func() *flag.FlagSet { fs, _ := newCheckFlagSet(); return fs }, run: runCheck,
		},
		{
			name: "size", synopsis: "size [flags]",
			summary: "what to deploy for a workload: settings, memory, GOMEMLIMIT,\ncheckpoint bandwidth, false drops per day",
			about:   sizeAbout,
			env:     noVars, flags: func() *flag.FlagSet { fs, _ := newSizeFlagSet(); return fs },
			run: func(_ context.Context, args []string, _ config.LookupFunc, stdout, stderr io.Writer) int {
				return runSize(args, stdout, stderr)
			},
		},
		{
			name: "healthcheck", synopsis: "healthcheck",
			summary: "exit 0 when /healthz on METRICS_ADDR answers 200 (container HEALTHCHECK)",
			about: `GETs /healthz on this host's METRICS_ADDR and exits 0 when it answers 200, 1
otherwise: a container HEALTHCHECK that needs no curl or shell in the image.`,
			env: someVars, vars: []string{"METRICS_ADDR"}, run: runHealthcheck,
		},
		{
			name: "version", aliases: []string{"--version", "-version", "-v"}, synopsis: "version",
			summary: "semantic version, commit and Go version (also --version, -v)",
			about: `Prints one line: the stage's semantic version, the commit the binary was built
from ("unknown" when the build recorded none) and its Go version, as
"dedup <version> (commit <commit>, <go version>)".`,
			env: noVars,
			run: func(_ context.Context, args []string, _ config.LookupFunc, stdout, stderr io.Writer) int {
				return runVersion(args, stdout, stderr)
			},
		},
		{
			name: "help", aliases: []string{"-h", "-help", "--help"}, synopsis: "help [SUB | --markdown]",
			summary: "this text; 'dedup help SUB' (or 'dedup SUB -h') a subcommand's own;\n--markdown prints the configuration table for the README",
			about: `Prints the general usage with every environment variable; with a subcommand's
name, that subcommand's usage; with --markdown, the README's configuration table.`,
			env: noVars,
			run: func(_ context.Context, args []string, _ config.LookupFunc, stdout, stderr io.Writer) int {
				return runHelp(args, stdout, stderr)
			},
		},
	}
}

// commandNamed is the subcommand called name (or one of its aliases); the
// zero command when there is none.
func commandNamed(name string) command {
	for _, c := range commands() {
		if c.name == name {
			return c
		}
		for _, a := range c.aliases {
			if a == name {
				return c
			}
		}
	}
	return command{}
}

// asksHelp reports whether args ask for the subcommand's usage.
func asksHelp(args []string) bool {
	for _, a := range args {
		switch a {
		case "-h", "-help", "--help":
			return true
		case "--":
			return false
		}
	}
	return false
}

const exitCodes = `Exit codes: 0 ok (also a stop by SIGTERM/SIGINT, at any point), 1 runtime failure (such as
no broker reached within KAFKA_STARTUP_TIMEOUT), 2 configuration error.
`

// printCommandUsage writes c's own usage: what it does, its flags and the
// environment it reads.
func printCommandUsage(w io.Writer, c command) {
	fmt.Fprintf(w, "Usage: dedup %s\n\n%s\n", c.synopsis, strings.TrimRight(c.about, "\n"))
	if c.flags != nil {
		fs := c.flags()
		fs.SetOutput(w)
		fmt.Fprint(w, "\nFlags:\n")
		fs.PrintDefaults()
	}
	if !strings.Contains(c.about, "Exit codes:") {
		fmt.Fprintln(w)
		fmt.Fprint(w, exitCodes)
	}
	switch c.env {
	case noVars:
		fmt.Fprint(w, "\nEnvironment: none read.\n")
	case allVars:
		fmt.Fprint(w, "\nEnvironment (the stage's whole configuration; numbers take k, M, G suffixes):\n")
		writeVarTable(w, nil)
	case someVars:
		fmt.Fprint(w, "\nEnvironment:\n")
		writeVarTable(w, c.vars)
	}
}

// writeVarTable writes the configuration variables named in only (all when
// only is nil) with their defaults and meanings.
func writeVarTable(w io.Writer, only []string) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  VARIABLE\tDEFAULT\tMEANING")
	for _, d := range config.Docs() {
		if only != nil && !slices.Contains(only, d.Name) {
			continue
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", d.Name, d.Default, d.Meaning)
	}
	tw.Flush()
}
