package partition

import (
	"fmt"
	"maps"
	"time"

	"dedup/rotation"
)

// legacy is a partition's filter state from before its filter options
// changed (DEDUP_EXPECTED_KEYS, DEDUP_FP_RATE, DEDUP_WINDOW, DEDUP_MODE). A
// filter cannot be resized, so the new pair starts empty; the old pair is
// kept, never written to, and asked after the new one until it would have
// rotated its last key out (rotation.Pair.SeenAt and Expired age it by the
// stream's event time). A key retracted meanwhile is kept exactly: the old
// pair still holds it, and the next record with that key must be forwarded
// as new.
//
// Never writing the old pair lets a saver encode it while the worker goes
// on reading it (frozen copies only the retracted keys).
type legacy struct {
	pair      *rotation.Pair
	retracted map[string]struct{}
}

func newLegacy(pair *rotation.Pair) *legacy {
	return &legacy{pair: pair, retracted: map[string]struct{}{}}
}

// seen reports whether the old pair, aged to ts, holds key and key was not
// retracted since.
func (l *legacy) seen(key []byte, ts time.Time) bool {
	if _, ok := l.retracted[string(key)]; ok {
		return false
	}
	return l.pair.SeenAt(key, ts)
}

// retract forgets key in the old pair.
func (l *legacy) retract(key []byte, ts time.Time) {
	if l.pair.SeenAt(key, ts) {
		l.retracted[string(key)] = struct{}{}
	}
}

// releaseLegacy drops the old pair once, aged to the stream's event time,
// it holds nothing. Checked every second: until then it answers nothing
// past its window anyway (SeenAt), and only its memory waits.
func (w *Worker) releaseLegacy() {
	if w.legacy == nil || !w.legacy.pair.Expired(w.lastTime) {
		return
	}
	w.log.Info("filters from before the options changed hold no key in the window any more: released",
		"snapshot_options", fmt.Sprintf("%+v", w.legacy.pair.Options()))
	w.legacy = nil
}

// frozen is l as of now, for a saver: the pair is shared (never written),
// the retracted keys are copied.
func (l *legacy) frozen() *legacy {
	if l == nil {
		return nil
	}
	return &legacy{pair: l.pair, retracted: maps.Clone(l.retracted)}
}
