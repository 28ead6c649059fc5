package sizing

import (
	"fmt"
	"io"
	"strings"
)

// KeyCost is what taking one record's dedup key costs in a DEDUP_KEY
// format, as package key's BenchmarkKeyFormats measured it on a ten-field
// event with the schema known: the median ns/op of its runs.
type KeyCost struct {
	Format string // the DEDUP_KEY prefix; the benchmark reads "<Format>:id"
	NS     float64
}

// KeyCosts are the figures of docs/benchmarks.md's "Key extraction by
// format" table, measured on KeyCostsMeasured; a test holds the two equal.
// They are the one copy of those figures in the code.
var KeyCosts = []KeyCost{
	{Format: "json", NS: 342.8},
	{Format: "avro", NS: 31.46},
	{Format: "protobuf", NS: 94.45},
	{Format: "jsonschema", NS: 353.6},
}

// KeyCostsMeasured is the date of KeyCosts.
const KeyCostsMeasured = "2026-11-27"

// writeKeyCosts prints the key extraction cost per format: CPU per
// record, which no memory figure of the report depends on.
func writeKeyCosts(w io.Writer) {
	var costs []string
	for _, c := range KeyCosts {
		costs = append(costs, fmt.Sprintf("%s ~%.0f ns", c.Format, c.NS))
	}
	fmt.Fprintf(w, "Key extraction, CPU per record by DEDUP_KEY format (docs/benchmarks.md, %s, schemas cached): %s; none allocates, so memory does not depend on the format.\n",
		KeyCostsMeasured, strings.Join(costs, ", "))
}
