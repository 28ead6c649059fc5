package rotation

import (
	"bytes"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"
)

// TestLocateChangesNothing runs the same records through two pairs: one
// decides each key with TestAndAdd, the other locates the keys of a batch
// first (as the processor does) and decides them with TestAndAddAt. Every
// answer, the stats and the snapshot bytes must be the same, across
// rotations and retractions.
func TestLocateChangesNothing(t *testing.T) {
	for _, mode := range modes {
		o := Options{ExpectedKeys: 2000, FPRate: 0.01, Window: time.Second, Mode: mode}
		direct, located := mustNew(t, o), mustNew(t, o)
		const n, batch = 6000, 7
		var probes [batch]Probe
		for i := uint64(0); i < n; i += batch {
			for j := i; j < min(i+batch, n); j++ {
				located.Locate(testKey(1, j%2500), &probes[j-i])
			}
			for j := i; j < min(i+batch, n); j++ {
				key, ts := testKey(1, j%2500), epoch.Add(time.Duration(j)*time.Millisecond/2)
				if j%11 == 0 && mode != Plain {
					a, errA := direct.Remove(key, ts)
					b, errB := located.Remove(key, ts)
					if a != b || errA != nil || errB != nil {
						t.Fatalf("%v: record %d: Remove = %v, %v after Locate, want %v, %v", mode, j, b, errB, a, errA)
					}
					continue
				}
				if a, b := direct.TestAndAdd(key, ts), located.TestAndAddAt(&probes[j-i], ts); a != b {
					t.Fatalf("%v: record %d: TestAndAddAt = %v, TestAndAdd = %v", mode, j, b, a)
				}
			}
		}
		if a, b := direct.Stats(), located.Stats(); a != b {
			t.Fatalf("%v: stats after Locate %+v, want %+v", mode, b, a)
		}
		if direct.Stats().Current.EstimatedKeys == 0 || direct.Stats().Rotations == 0 {
			t.Fatalf("%v: records not exercised", mode)
		}
		var a, b bytes.Buffer
		if _, err := direct.WriteTo(&a); err != nil {
			t.Fatal(err)
		}
		if _, err := located.WriteTo(&b); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a.Bytes(), b.Bytes()) {
			t.Fatalf("%v: snapshot after Locate differs", mode)
		}
	}
}

// TestProbeOutlivesRotationAndPair locates keys on one pair, then rotates
// it and uses the probes on it and on a clone made before the rotation: a
// probe depends on the key and the geometry only.
func TestProbeOutlivesRotationAndPair(t *testing.T) {
	for _, mode := range modes {
		o := Options{ExpectedKeys: 1000, FPRate: 0.01, Window: time.Second, Mode: mode}
		p := mustNew(t, o)
		const n = 200
		probes := make([]Probe, n)
		for i := range uint64(n) {
			p.Locate(testKey(3, i), &probes[i])
			if p.TestAndAddAt(&probes[i], epoch) {
				t.Fatalf("%v: fresh key %d reported seen", mode, i)
			}
		}
		clone := p.Clone()
		later := epoch.Add(time.Second) // one window on: the keys move to previous
		for i := range uint64(n) {
			if !p.TestAndAddAt(&probes[i], later) {
				t.Fatalf("%v: key %d lost by the rotation", mode, i)
			}
			if !clone.TestAndAddAt(&probes[i], epoch) {
				t.Fatalf("%v: key %d not found in the clone through a probe of the original", mode, i)
			}
		}
		if p.Stats().Rotations != 1 {
			t.Fatalf("%v: %d rotations, want 1", mode, p.Stats().Rotations)
		}
	}
}

// TestLocateEdgeBuckets locates keys whose bucket is the first and the
// last of the filter (no out-of-range access) on a zero-allocation path.
func TestLocateEdgeBuckets(t *testing.T) {
	p := mustNew(t, Options{ExpectedKeys: 1000, FPRate: 0.01, Window: time.Second, Mode: Counting})
	var first, last []byte
	for i := uint64(0); first == nil || last == nil; i++ {
		key := testKey(2, i)
		var pr probe
		p.cnt.locate(xxhash.Sum64(key), &pr)
		switch pr.block {
		case 0:
			first = key
		case p.cnt.blocks - 1:
			last = key
		}
	}
	var a, b Probe
	allocs := testing.AllocsPerRun(1000, func() {
		p.Locate(first, &a)
		p.Locate(last, &b)
		p.TestAndAddAt(&a, epoch)
		p.TestAndAddAt(&b, epoch)
	})
	if allocs != 0 {
		t.Errorf("Locate and TestAndAddAt: %v allocations per call, want 0", allocs)
	}
	if !p.Test(first) || !p.Test(last) {
		t.Error("edge keys not added through their probes")
	}
}
