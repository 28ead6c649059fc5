package partition

import (
	"bytes"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
	"time"

	"dedup/rotation"
)

// TestEarlierFingerprintSnapshotIsLegacy: a snapshot of the fingerprint
// pair of release 0.9.0 (rotation/testdata/fingerprint-0.9.0, sized by that
// release's geometry) decodes with options other than the configured ones,
// which are the same settings: the partition keeps it read-only as a legacy
// pair beside new filters (start.go compares the options), never running
// it against the spare pair of this release's geometry. As a legacy pair
// it answers every key as 0.9.0 did.
func TestEarlierFingerprintSnapshotIsLegacy(t *testing.T) {
	dir := filepath.Join("..", "..", "rotation", "testdata", "fingerprint-0.9.0")
	snap, err := os.ReadFile(filepath.Join(dir, "final.snap"))
	if err != nil {
		t.Fatal(err)
	}
	answers, err := os.ReadFile(filepath.Join(dir, "answers"))
	if err != nil {
		t.Fatal(err)
	}
	var got rotation.Pair
	old, err := readState(bytes.NewReader(snap), &got)
	if err != nil || old != nil {
		t.Fatalf("readState: legacy %v, %v", old, err)
	}
	configured, err := rotation.New(rotation.Options{ExpectedKeys: 3000, FPRate: 0.001, Window: time.Hour, Mode: rotation.Fingerprint})
	if err != nil {
		t.Fatal(err)
	}
	if got.Options() == configured.Options() {
		t.Fatalf("options %+v equal the configured ones: the pair would run against a spare of another geometry", got.Options())
	}
	if err := got.CopyTo(configured); err == nil {
		t.Fatal("CopyTo into a pair of this release's geometry accepted")
	}
	l := newLegacy(&got)
	l.age(got.Stats().WindowStart)
	for i, want := range answers {
		key := fixtureKey(1, uint64(i))
		if i >= 8000 {
			key = fixtureKey(2, uint64(i-8000))
		}
		if l.seen(key) != (want == 1) {
			t.Fatalf("key %d: legacy says %v, 0.9.0 said %v", i, !(want == 1), want == 1)
		}
	}
}

// fixtureKey is rotation's testKey: key i of key space space.
func fixtureKey(space byte, i uint64) []byte {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[0:], i)
	binary.LittleEndian.PutUint64(b[8:], uint64(space)<<56|i*0x9E3779B97F4A7C15>>8)
	return b[:]
}
