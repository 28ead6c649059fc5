package partition

import (
	"maps"
	"testing"
)

// TestScanStart: a checkpoint below the last input offset the restore's
// scan found in the output records the restore's scan start; at or past
// it, the end offsets read for the checkpoint.
func TestScanStart(t *testing.T) {
	w := &Worker{suppressTo: 100, replayFrom: map[int]int64{0: 5, 1: 7}}
	ends := map[int]int64{0: 50, 1: 70}
	for _, tc := range []struct {
		pos  int64
		want map[int]int64
	}{
		{0, w.replayFrom},
		{99, w.replayFrom},
		{100, ends},
		{1000, ends},
	} {
		if got := w.scanStart(tc.pos, ends); !maps.Equal(got, tc.want) {
			t.Errorf("scanStart(%d) = %v, want %v", tc.pos, got, tc.want)
		}
	}
	fresh := &Worker{} // no restore, nothing replayed
	if got := fresh.scanStart(0, ends); !maps.Equal(got, ends) {
		t.Errorf("without a replay: scanStart(0) = %v, want %v", got, ends)
	}
}
