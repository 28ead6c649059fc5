package main

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
)

const usageHead = `dedup: drops duplicate records from a Kafka topic (Bloom filters rotating on event-time windows).

Usage:
  dedup [run]                  run the stage until SIGTERM/SIGINT; with KAFKA_BROKERS empty it
                               starts an embedded broker on EMBEDDED_BROKER_ADDR first
  dedup demo [flags]           embedded broker + stage + generator of duplicate-laden traffic,
                               with a live progress line; 'dedup demo -h' lists the flags
  dedup demo --generate-only   only the traffic generator, against KAFKA_BROKERS
  dedup inspect                print, per partition, what the checkpoint store holds
  dedup check                  before deploying: configuration, brokers, topics, checkpoint store,
                               effective settings and sizing; exit 0 ok, 1 a check failed ('dedup check -h')
  dedup size [flags]           what to deploy for a workload: settings, memory, GOMEMLIMIT,
                               checkpoint bandwidth, false drops per day ('dedup size -h')
  dedup healthcheck            exit 0 when /healthz on METRICS_ADDR answers 200 (container HEALTHCHECK)
  dedup version                module version, commit and Go version (also --version, -v)
  dedup help [--markdown]      this text; --markdown prints the configuration table for the README

Exit codes: 0 ok (also a stop by SIGTERM/SIGINT, at any point), 1 runtime failure (such as
no broker reached within KAFKA_STARTUP_TIMEOUT), 2 configuration error.
Numbers take k, M, G suffixes (10M); enumerations are case-insensitive.

Configuration (environment variables):
`

const checkUsage = `Usage: dedup check [--timeout 10s]

With the same environment as the stage, checks what the stage needs before
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
    topic, or a probe file written, fsynced and removed in CHECKPOINT_DIR.
It prints the effective settings (KAFKA_SASL_PASSWORD masked) and the sizing
'dedup size' computes for them. REPARTITION_TOPIC is not checked (the stage
does not implement it yet).

Exit codes: 0 every check holds (warnings allowed), 1 a check failed (all
failed checks are named on the last line), 2 configuration error.

Flags:
`

func printUsage(w io.Writer) {
	fmt.Fprint(w, usageHead)
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  VARIABLE\tDEFAULT\tMEANING")
	for _, d := range configDocs() {
		fmt.Fprintf(tw, "  %s\t%s\t%s\n", d.Name, d.Default, d.Meaning)
	}
	tw.Flush()
}

// writeConfigTable writes the README's configuration table, generated from
// the Config struct (`dedup help --markdown`): literal defaults in
// backticks, computed ones as a phrase.
func writeConfigTable(w io.Writer) {
	fmt.Fprintln(w, "| variable | meaning | default |")
	fmt.Fprintln(w, "|---|---|---|")
	for _, d := range configDocs() {
		def := "`" + d.Default + "`"
		if !d.Literal {
			def = strings.ReplaceAll(d.Default, "'", "`")
		}
		fmt.Fprintf(w, "| `%s` | %s | %s |\n", d.Name, d.Meaning, def)
	}
}
