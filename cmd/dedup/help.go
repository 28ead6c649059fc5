package main

import (
	"fmt"
	"io"
	"strings"

	"dedup/internal/config"
)

const usageIntro = `dedup: drops duplicate records from a Kafka topic (Bloom filters rotating on event-time windows).

Usage:
`

// printUsage writes the general usage: every subcommand, the exit codes and
// every configuration variable.
func printUsage(w io.Writer) {
	fmt.Fprint(w, usageIntro)
	for _, c := range commands() {
		lines := strings.Split(c.summary, "\n")
		fmt.Fprintf(w, "  %-30s %s\n", "dedup "+c.synopsis, lines[0])
		for _, l := range lines[1:] {
			fmt.Fprintf(w, "  %-30s %s\n", "", l)
		}
	}
	fmt.Fprint(w, "\n"+exitCodes)
	fmt.Fprint(w, "Numbers take k, M, G suffixes (10M); enumerations are case-insensitive.\n\nConfiguration (environment variables):\n")
	writeVarTable(w, nil)
}

// writeConfigTable writes the README's configuration table, generated from
// the config.Config struct (`dedup help --markdown`): literal defaults in
// backticks, computed ones as a phrase.
func writeConfigTable(w io.Writer) {
	fmt.Fprintln(w, "| variable | meaning | default |")
	fmt.Fprintln(w, "|---|---|---|")
	for _, d := range config.Docs() {
		def := "`" + d.Default + "`"
		if !d.Literal {
			def = strings.ReplaceAll(d.Default, "'", "`")
		}
		fmt.Fprintf(w, "| `%s` | %s | %s |\n", d.Name, d.Meaning, def)
	}
}
