package sizing

import (
	"bytes"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"dedup/rotation"
)

// keyCostRow is a row of docs/benchmarks.md's key extraction table: the
// format and its median wall ns/op (bold).
var keyCostRow = regexp.MustCompile("^\\| `([a-z]+):id` \\| \\*\\*([0-9.]+)\\*\\*")

// TestKeyCostsMatchTheDocs: the figures `dedup size` prints are the ones
// docs/benchmarks.md records, every format of its table and no other, of
// the date it says they were measured.
func TestKeyCostsMatchTheDocs(t *testing.T) {
	b, err := os.ReadFile("../docs/benchmarks.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(b), "\n## Key extraction by format\n")
	if !ok {
		t.Fatal(`docs/benchmarks.md has no "## Key extraction by format"`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	section, _, _ = strings.Cut(section, "\n### ")
	if !strings.Contains(section, "Measured "+KeyCostsMeasured) {
		t.Errorf("the section does not say it was measured %s", KeyCostsMeasured)
	}
	docs := map[string]string{}
	for _, line := range strings.Split(section, "\n") {
		if m := keyCostRow.FindStringSubmatch(line); m != nil {
			docs[m[1]] = m[2]
		}
	}
	if len(docs) != len(KeyCosts) {
		t.Errorf("the docs' table has %d formats %v, KeyCosts %d", len(docs), docs, len(KeyCosts))
	}
	for _, c := range KeyCosts {
		if got, want := docs[c.Format], fmt.Sprintf("%.3g", c.NS); got != want {
			t.Errorf("%s: docs say %q ns, KeyCosts %v (%q)", c.Format, got, c.NS, want)
		}
	}
}

// TestReportPrintsKeyCosts: both reports (filters, and hop 1 alone) give
// every format's key extraction cost.
func TestReportPrintsKeyCosts(t *testing.T) {
	in := Workload{KeysPerWindow: 1000, Window: time.Hour, FPRate: 0.01, Partitions: 2, Instances: 1,
		Modes: []rotation.Mode{rotation.Fingerprint}, CheckpointInterval: 10 * time.Second}
	rekey := in
	rekey.Hops, rekey.Repartition = HopsRekey, &Repartition{RecordsPerSecond: 1000, RecordBytes: 500, Replication: 3, Retention: time.Hour}
	for _, w := range []Workload{in, rekey} {
		r, err := NewReport(w)
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if err := r.Write(&out); err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(out.String(), "Key extraction, CPU per record by DEDUP_KEY format (docs/benchmarks.md, "+KeyCostsMeasured); n != 1 {
			t.Errorf("hops %q: the key extraction line appears %d times:\n%s", w.Hops, n, out.String())
		}
		for _, c := range KeyCosts {
			if want := fmt.Sprintf("%s ~%.0f ns", c.Format, c.NS); !strings.Contains(out.String(), want) {
				t.Errorf("hops %q: the report lacks %q:\n%s", w.Hops, want, out.String())
			}
		}
	}
}
