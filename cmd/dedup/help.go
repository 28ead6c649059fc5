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
