package workload

import (
	"strings"
	"testing"
)

func TestGeneratorCountsAndFirsts(t *testing.T) {
	w := Workload{Keys: 1000, DupRatio: 0.75, KeySize: 20, ValueSize: 12, Partitions: 4, Seed: 3}.Resolved()
	if w.Records != 4000 {
		t.Fatalf("records = %d, want 4000", w.Records)
	}
	seen := map[string]bool{}
	perPartition := map[int]map[string]bool{}
	var n uint64
	g := NewGenerator(w)
	for r := g.Next(); r != nil; r = g.Next() {
		k := string(r.Key)
		if len(r.Key) != w.KeySize || len(r.Value) != w.ValueSize {
			t.Fatalf("record %d: key %d B, value %d B", r.Index, len(r.Key), len(r.Value))
		}
		if r.First == seen[k] {
			t.Fatalf("record %d: First=%v but key seen before=%v", r.Index, r.First, seen[k])
		}
		seen[k] = true
		if idx, ok := RecordIndex(r.Value); !ok || idx != r.Index || idx != n {
			t.Fatalf("record %d carries index %d (%v)", n, idx, ok)
		}
		if perPartition[r.Partition] == nil {
			perPartition[r.Partition] = map[string]bool{}
		}
		perPartition[r.Partition][k] = true
		n++
	}
	if n != w.Records || uint64(len(seen)) != w.Keys {
		t.Fatalf("%d records with %d distinct keys, want %d and %d", n, len(seen), w.Records, w.Keys)
	}
	for p, keys := range perPartition {
		if uint64(len(keys)) > w.KeysPerPartition() {
			t.Errorf("partition %d has %d keys, more than %d", p, len(keys), w.KeysPerPartition())
		}
	}
}

func TestGeneratorIsDeterministic(t *testing.T) {
	w := Workload{Keys: 300, Records: 900, KeySize: 16, ValueSize: 8, Partitions: 2, Seed: 9}
	a, b := NewGenerator(w), NewGenerator(w)
	for ra := a.Next(); ra != nil; ra = a.Next() {
		rb := b.Next()
		if rb == nil || string(ra.Key) != string(rb.Key) || ra.First != rb.First || ra.Partition != rb.Partition {
			t.Fatalf("record %d differs between two generators of one workload", ra.Index)
		}
	}
	w.Seed++
	c, d := NewGenerator(w), NewGenerator(Workload{Keys: 300, Records: 900, KeySize: 16, ValueSize: 8, Partitions: 2, Seed: 9})
	same := true
	for rc := c.Next(); rc != nil; rc = c.Next() {
		if string(rc.Key) != string(d.Next().Key) {
			same = false
			break
		}
	}
	if same {
		t.Error("a different seed generated the same keys")
	}
}

func TestWorkloadValidateReportsEveryProblem(t *testing.T) {
	err := Workload{Keys: 0, DupRatio: 1, KeySize: 4, ValueSize: 2, Partitions: 0}.Validate()
	if err == nil {
		t.Fatal("no error")
	}
	for _, want := range []string{"keys", "dup-ratio", "key-size", "value-size", "partitions"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not mention %s", err, want)
		}
	}
}
