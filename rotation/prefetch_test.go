package rotation

import (
	"bytes"
	"testing"
	"time"

	"github.com/cespare/xxhash/v2"
)

// TestPrefetchChangesNothing runs the same records through two pairs, one of
// them prefetching every key (in batches, as a caller would) before deciding
// it: every answer, the stats and the snapshot bytes must be the same.
func TestPrefetchChangesNothing(t *testing.T) {
	for _, mode := range modes {
		o := Options{ExpectedKeys: 2000, FPRate: 0.01, Window: time.Second, Mode: mode}
		plain, hinted := mustNew(t, o), mustNew(t, o)
		const n, batch = 6000, 7
		for i := uint64(0); i < n; i += batch {
			for j := i; j < min(i+batch, n); j++ {
				hinted.Prefetch(testKey(1, j%2500))
			}
			for j := i; j < min(i+batch, n); j++ {
				key, ts := testKey(1, j%2500), epoch.Add(time.Duration(j)*time.Millisecond/2)
				if j%11 == 0 && mode == Counting {
					a, errA := plain.Remove(key, ts)
					b, errB := hinted.Remove(key, ts)
					if a != b || errA != nil || errB != nil {
						t.Fatalf("%v: record %d: Remove = %v, %v with prefetch, want %v, %v", mode, j, b, errB, a, errA)
					}
					continue
				}
				if a, b := plain.TestAndAdd(key, ts), hinted.TestAndAdd(key, ts); a != b {
					t.Fatalf("%v: record %d: TestAndAdd = %v with prefetch, want %v", mode, j, b, a)
				}
			}
		}
		if a, b := plain.Stats(), hinted.Stats(); a != b {
			t.Fatalf("%v: stats with prefetch %+v, want %+v", mode, b, a)
		}
		if plain.Stats().Current.EstimatedKeys == 0 || plain.Stats().Rotations == 0 {
			t.Fatalf("%v: records not exercised", mode)
		}
		var a, b bytes.Buffer
		if _, err := plain.WriteTo(&a); err != nil {
			t.Fatal(err)
		}
		if _, err := hinted.WriteTo(&b); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a.Bytes(), b.Bytes()) {
			t.Fatalf("%v: snapshot with prefetch differs", mode)
		}
	}
}

// TestPrefetchEdgeBuckets prefetches keys whose bucket is the first and the
// last of the filter (no out-of-range access) on a zero-allocation path.
func TestPrefetchEdgeBuckets(t *testing.T) {
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
	allocs := testing.AllocsPerRun(1000, func() {
		p.Prefetch(first)
		p.Prefetch(last)
	})
	if allocs != 0 {
		t.Errorf("Prefetch: %v allocations per call, want 0", allocs)
	}
}
