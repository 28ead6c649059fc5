package partition

import (
	"errors"
	"testing"
)

// TestKeepable: a stopped partition keeps its pair only when checkpointed
// and committed exactly at its position with every output acknowledged,
// and never while it is still replaying outputs an earlier generation
// forwarded (those are found again only by a restore's scan).
func TestKeepable(t *testing.T) {
	base := func() *Worker {
		w := &Worker{
			d:        Deps{Owner: testOwner{}, Store: nil},
			position: 40,
			acks:     newAckTracker(0, 8),
		}
		w.cp.last, w.cp.exact = 40, true
		return w
	}
	if !base().keepable() {
		t.Fatal("a clean stop at the committed position is not kept")
	}
	for name, change := range map[string]func(*Worker){
		"still replaying":     func(w *Worker) { w.suppressTo = 41 },
		"replaying from 0":    func(w *Worker) { w.position, w.cp.last, w.suppressTo = 0, 0, 14 },
		"committed elsewhere": func(w *Worker) { w.cp.last = 39 },
		"crashed":             func(w *Worker) { w.d.Owner = testOwner{crashed: true} },
		"no keeper":           func(w *Worker) { w.d.Owner = nil },
		"output failed":       func(w *Worker) { w.acks.fail(39, errors.New("lost")) },
		"never started":       func(w *Worker) { w.position, w.cp.last = -1, -1 },
	} {
		w := base()
		change(w)
		if w.keepable() {
			t.Errorf("%s: kept", name)
		}
	}
	w := base()
	w.suppressTo = 40 // the replay ended at the position
	if !w.keepable() {
		t.Error("a partition whose replay ended at its position is not kept")
	}
}
