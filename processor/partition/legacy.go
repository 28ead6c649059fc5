package partition

import (
	"errors"
	"fmt"
	"maps"
	"time"

	"dedup/rotation"
)

// legacy is a partition's filter state from before its filter options
// changed (DEDUP_EXPECTED_KEYS, DEDUP_FP_RATE, DEDUP_WINDOW, DEDUP_MODE). A
// filter cannot be resized, so the new pair starts empty; the old pair is
// kept, never written to, and asked after the new one until it would have
// rotated its last key out. A key retracted meanwhile is kept exactly: the
// old pair still holds it, and the next record with that key must be
// forwarded as new.
//
// The old pair must answer as if it had been rotated along with the
// stream: at is the event time it is aged to (rotation.Pair.SeenAt and
// Expired), moved by age exactly as the main pair's time is moved (forward
// only; a zero time changes nothing). Asking it at a record's own
// timestamp instead would test generations the stream has rotated out
// whenever that record is late or has no usable timestamp: a new record
// dropped.
//
// Never writing the old pair lets a saver encode it while the worker goes
// on reading it (frozen copies only the retracted keys).
type legacy struct {
	pair      *rotation.Pair
	retracted map[string]struct{}
	at        time.Time // zero: the pair's own frozen time
}

// legacyFilters are the partition's pair with a legacy pair asked behind
// it: what the hot path asks while one is kept (Worker.filters).
type legacyFilters struct {
	pair   *rotation.Pair
	legacy *legacy
}

// seen tests and adds r's key in the pair at event time ts and, when the
// pair has not seen it, asks the legacy pair. The legacy pair is aged by
// ts whenever the pair is, also when the pair answers alone: it must be
// rotated along with the stream, not only by the records that reach it.
func (f legacyFilters) seen(r *record, ts time.Time) bool {
	dup := f.pair.TestAndAddAt(&r.probe, ts)
	f.legacy.age(ts)
	if dup {
		return true
	}
	r.byLegacy = f.legacy.seen(r.key)
	return r.byLegacy
}

// held names the pair's generation that held r's key, or the legacy pair
// with the window of its generation that did.
func (f legacyFilters) held(r *record) ([]byte, time.Time, time.Time) {
	if !r.byLegacy {
		return heldIn(f.pair, f.pair.HeldBy(&r.probe))
	}
	_, start, end := heldIn(f.legacy.pair, f.legacy.pair.HeldAt(r.key, f.legacy.at))
	return dropGenLegacy, start, end
}

// retract removes key from the pair and, once the pair applied it, records
// it retracted from the legacy pair.
func (f legacyFilters) retract(key []byte, ts time.Time) error {
	if _, err := f.pair.Remove(key, ts); err != nil {
		return err
	}
	f.legacy.age(ts)
	f.legacy.retract(key)
	return nil
}

func newLegacy(pair *rotation.Pair) *legacy {
	return &legacy{pair: pair, retracted: map[string]struct{}{}}
}

// age moves the time the old pair is aged to forward to ts, as the main
// pair's advance does: never backwards, and not for a zero ts.
func (l *legacy) age(ts time.Time) {
	if ts.After(l.at) {
		l.at = ts
	}
}

// seen reports whether the old pair, aged to l.at, holds key and key was
// not retracted since.
func (l *legacy) seen(key []byte) bool {
	if _, ok := l.retracted[string(key)]; ok {
		return false
	}
	return l.pair.SeenAt(key, l.at)
}

// retract forgets key in the old pair, aged to l.at.
func (l *legacy) retract(key []byte) {
	if l.pair.SeenAt(key, l.at) {
		l.retracted[string(key)] = struct{}{}
	}
}

// resume makes the old pair a partition's pair again (a rolling deploy
// moved the partition back to a member with its options): advanced to at,
// the stream's time, so that its first records (late ones, or ones without
// a timestamp, which do not move it) are not tested against generations
// the stream has rotated out, and with the retractions since applied. It
// returns how many retractions it did not apply: all of them in plain
// mode, which applies no retraction (they are forwarded but not applied),
// so the resumed pair behaves as a plain member that saw them itself.
func (l *legacy) resume(at time.Time) (*rotation.Pair, int, error) {
	l.pair.AdvanceTo(at)
	for k := range l.retracted {
		_, err := l.pair.Remove([]byte(k), time.Time{})
		switch {
		case errors.Is(err, rotation.ErrRemoveUnsupported):
			return l.pair, len(l.retracted), nil
		case err != nil:
			return nil, 0, fmt.Errorf("apply retraction: %w", err)
		}
	}
	return l.pair, 0, nil
}

// releaseLegacy drops the old pair once, aged to the stream's event time,
// it holds nothing. Checked every second: until then it answers nothing
// past its window anyway (SeenAt), and only its memory waits. l.at never
// moves backwards, so neither does this decision (a late record cannot
// delay it).
func (w *Worker) releaseLegacy() {
	if w.legacy == nil || !w.legacy.pair.Expired(w.legacy.at) {
		return
	}
	w.log.Info("filters from before the options changed hold no key in the window any more: released",
		"snapshot_options", fmt.Sprintf("%+v", w.legacy.pair.Options()))
	w.legacy = nil
	w.setFilters()
	w.cp.legacyHeld.Store(false)
}

// frozen is l as of now, for a saver: the pair is shared (never written),
// the retracted keys are copied.
func (l *legacy) frozen() *legacy {
	if l == nil {
		return nil
	}
	return &legacy{pair: l.pair, retracted: maps.Clone(l.retracted), at: l.at}
}
