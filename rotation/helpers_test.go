package rotation

import (
	"encoding/binary"
	"testing"
	"time"
)

// epoch is an arbitrary window-aligned instant for synthetic timestamps.
var epoch = time.Unix(1_700_000_000, 0).Truncate(time.Hour)

// testKey returns key i of key space space (16 bytes); keys of different
// spaces never collide, so "probe" keys are never among "added" ones.
func testKey(space byte, i uint64) []byte {
	var b [16]byte
	binary.LittleEndian.PutUint64(b[0:], i)
	binary.LittleEndian.PutUint64(b[8:], uint64(space)<<56|i*0x9E3779B97F4A7C15>>8)
	return b[:]
}

func mustNew(t testing.TB, o Options) *Pair {
	t.Helper()
	p, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

var modes = []Mode{Counting, Plain, Fingerprint}
