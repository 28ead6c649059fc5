package partition

import (
	"maps"
	"testing"
)

// TestScanFromDuringReplay: a checkpoint taken while the replay after a
// restore has not passed the inputs whose outputs the restore found keeps
// the restored scan start (those outputs precede ends read now); from
// suppressTo on, the ends read for the checkpoint.
func TestScanFromDuringReplay(t *testing.T) {
	restored := map[int]int64{0: 100, 1: 200}
	now := map[int]int64{0: 180, 1: 260}
	w := &Worker{suppressTo: 50}
	w.cp.replayEnds = restored
	for _, c := range []struct {
		pos  int64
		want map[int]int64
	}{{10, restored}, {49, restored}, {50, now}, {70, now}} {
		if got := w.scanFrom(c.pos, now); !maps.Equal(got, c.want) {
			t.Errorf("checkpoint at %d scans from %v, want %v", c.pos, got, c.want)
		}
	}
	fresh := &Worker{} // not restored, or nothing found: nothing to keep
	if got := fresh.scanFrom(0, now); !maps.Equal(got, now) {
		t.Errorf("without a replay: %v, want %v", got, now)
	}
}
