package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"dedup/internal/check"
	"dedup/internal/config"
)

const checkAbout = `With the same environment as the stage, checks what the stage needs before
it is deployed, one line per check (ok, warn or FAIL), every check run:
  - the configuration (a problem: every one named, exit 2, as the stage does);
  - each broker of KAFKA_BROKERS, and each broker the cluster advertises;
    KAFKA_BROKERS empty: the embedded broker (a running stage's, or its
    address free);
  - INPUT_TOPIC, OUTPUT_TOPIC and DEAD_LETTER_TOPIC (when set) exist; the
    output's partition count against the input's and its max.message.bytes
    against PRODUCE_BATCH_BYTES; CHECKPOINT_TOPIC (kafka store) compacted,
    with the input's partition count;
  - committed offsets of GROUP_ID below the input's log start (input that
    will be skipped);
  - the checkpoint store read (its snapshots listed) and written: a probe
    record written, read back and tombstoned on every partition of the
    topic, or a probe file written, fsynced and removed in CHECKPOINT_DIR;
  - with an avro:, protobuf: or jsonschema: DEDUP_KEY: the Schema Registry
    answers (SCHEMA_REGISTRY_*), and the latest schema of
    SCHEMA_REGISTRY_SUBJECT is of the format each such part reads and has
    its path as a scalar.
It prints the effective settings (KAFKA_SASL_PASSWORD masked) and the sizing
'dedup size' computes for them. With REPARTITION_TOPIC: that topic exists
(else the stage creates it), is not compacted, keeps records at least a day,
and has the output's and REPARTITION_PARTITIONS' partition count.

Exit codes: 0 every check holds (warnings allowed), 1 a check failed (all
failed checks are named on the last line), 2 configuration error.`

// newCheckFlagSet defines `dedup check`'s flags, for parsing and for its
// usage.
func newCheckFlagSet() (*flag.FlagSet, *time.Duration) {
	fs := flag.NewFlagSet("dedup check", flag.ContinueOnError)
	return fs, fs.Duration("timeout", check.TimeoutDefault, "bound on each network step (Go duration)")
}

// runCheck is `dedup check`.
func runCheck(ctx context.Context, args []string, lookup config.LookupFunc, stdout, stderr io.Writer) int {
	fs, timeout := newCheckFlagSet()
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			printCommandUsage(stdout, commandNamed("check"))
			return exitOK
		}
		fmt.Fprintf(stderr, "dedup check: %v; 'dedup check -h' for the usage\n", err)
		return exitConfig
	}
	if fs.NArg() > 0 || *timeout <= 0 {
		fmt.Fprintf(stderr, "dedup check: want no arguments and a positive --timeout (configuration comes from environment variables; 'dedup check -h')\n")
		return exitConfig
	}
	cfg, log, code := setup(lookup, stderr)
	if code != exitOK {
		return code
	}
	if !check.Run(ctx, check.Options{Config: cfg, Lookup: lookup, Logger: log, Out: stdout, Timeout: *timeout}) {
		return exitFailure
	}
	return exitOK
}
