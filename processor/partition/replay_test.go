package partition

import (
	"maps"
	"testing"
)

// TestScanStart: a checkpoint below the last input offset the restore's
// scan found in the output records the restore's scan start, with the
// partition counts it was read under; at or past it, the mark read for the
// checkpoint.
func TestScanStart(t *testing.T) {
	r := replayMark{to: 100, from: outputMark{ends: map[int]int64{0: 5, 1: 7}, inputs: 2, outputs: 2}}
	ends := outputMark{ends: map[int]int64{0: 50, 1: 70, 2: 3}, inputs: 3, outputs: 3}
	same := func(a, b outputMark) bool {
		return maps.Equal(a.ends, b.ends) && a.inputs == b.inputs && a.outputs == b.outputs
	}
	for _, tc := range []struct {
		pos  int64
		want outputMark
	}{
		{0, r.from},
		{99, r.from},
		{100, ends},
		{1000, ends},
	} {
		if got := r.scanStart(tc.pos, ends); !same(got, tc.want) {
			t.Errorf("scanStart(%d) = %+v, want %+v", tc.pos, got, tc.want)
		}
	}
	fresh := replayMark{} // no restore, nothing replayed
	if got := fresh.scanStart(0, ends); !same(got, ends) {
		t.Errorf("without a replay: scanStart(0) = %+v, want %+v", got, ends)
	}
}
