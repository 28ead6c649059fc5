package partition

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"dedup/key"
	"dedup/rotation"
)

type nopWriter struct{}

func (nopWriter) WriteMessages(context.Context, ...kafka.Message) error { return nil }

type keyIsKey struct{}

func (keyIsKey) Extract(m *kafka.Message, _ *key.Arena) ([]byte, key.Status) {
	if len(m.Key) == 0 {
		return nil, key.Empty
	}
	return m.Key, key.Keyed
}

func (keyIsKey) Wait(context.Context, *kafka.Message) error { return nil }

const legacyWindow = time.Minute

// legacyBase is a window boundary: window n is [legacyBase+n·w, legacyBase+(n+1)·w).
var legacyBase = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func inWindow(n int, offset time.Duration) time.Time {
	return legacyBase.Add(time.Duration(n)*legacyWindow + offset)
}

// legacyWorker is a worker with a new, empty counting pair and, as legacy,
// a pair of other options that saw "old" in window 0 and "other" in window
// 1: its current window is 1, "old" is in its previous generation.
type legacyWorker struct {
	*Worker
	offset int64
}

func newLegacyWorker(t *testing.T) *legacyWorker {
	t.Helper()
	newOpts := rotation.Options{ExpectedKeys: 1000, FPRate: 1e-6, Window: legacyWindow, Mode: rotation.Counting}
	oldOpts := rotation.Options{ExpectedKeys: 2000, FPRate: 1e-6, Window: legacyWindow, Mode: rotation.Counting}
	p, err := rotation.New(newOpts)
	if err != nil {
		t.Fatal(err)
	}
	o, err := rotation.New(oldOpts)
	if err != nil {
		t.Fatal(err)
	}
	o.TestAndAdd([]byte("old"), inWindow(0, time.Second))
	o.TestAndAdd([]byte("other"), inWindow(1, time.Second))
	w := &legacyWorker{Worker: &Worker{
		d: Deps{Keys: keyIsKey{}, RetractHeader: "retract", Writer: nopWriter{}, Route: NewRouter(1, 1),
			FlushAt: 1 << 20, Filter: newOpts, Limit: Limit{Bytes: 1 << 20}},
		log:         slog.New(slog.DiscardHandler),
		pair:        p,
		legacy:      newLegacy(o),
		acks:        newAckTracker(0, 1024),
		futureAfter: inWindow(1000, 0),
		srcTop:      []byte("in"), srcPart: []byte("0"),
	}}
	w.setFilters()
	return w
}

// feed decides one record and reports whether it was forwarded.
func (w *legacyWorker) feed(t *testing.T, key string, ts time.Time, retract bool) bool {
	t.Helper()
	w.offset++
	r := record{msg: kafka.Message{Offset: w.offset, HighWaterMark: 1 << 40, Key: []byte(key), Time: ts}}
	if retract {
		r.msg.Headers = []kafka.Header{{Key: "retract"}}
	}
	w.locate(&r)
	before := w.counts.duplicates
	if err := w.process(&r); err != nil {
		t.Fatal(err)
	}
	return w.counts.duplicates == before
}

// TestLegacyAgedByStreamTime: the legacy pair answers as if rotated along
// with the stream, whatever the record asking it is stamped with. Once the
// stream's event time is past the generation holding a key, a record of
// that key is new (the new pair never saw it), also when it is late, has
// no timestamp, is stamped too far ahead, or when the record that moved
// the stream was a duplicate the new pair answered alone. A legacy pair
// still aged by each record's own time drops it.
func TestLegacyAgedByStreamTime(t *testing.T) {
	for name, c := range map[string]struct {
		move     []string // keys fed to move event time to window 2 (the last one moves it)
		key      string   // then fed with ts
		ts       time.Time
		stillOld bool // the legacy pair still holds key at the stream's time: a duplicate
	}{
		"late record":         {move: []string{"x"}, key: "old", ts: inWindow(1, 30*time.Second)},
		"no timestamp":        {move: []string{"x"}, key: "old", ts: time.Time{}},
		"stamped too far":     {move: []string{"x"}, key: "old", ts: inWindow(2000, 0)},
		"moved by duplicate":  {move: []string{"x@1", "x"}, key: "old", ts: time.Time{}},
		"current generation":  {move: []string{"x"}, key: "other", ts: time.Time{}, stillOld: true},
		"late, held by other": {move: []string{"x"}, key: "other", ts: inWindow(1, 30*time.Second), stillOld: true},
	} {
		t.Run(name, func(t *testing.T) {
			w := newLegacyWorker(t)
			for _, k := range c.move {
				ts := inWindow(2, time.Second)
				if k == "x@1" { // x first in window 1: the move to window 2 is then a duplicate
					k, ts = "x", inWindow(1, 2*time.Second)
				}
				w.feed(t, k, ts, false)
			}
			if got := w.feed(t, c.key, c.ts, false); got == c.stillOld {
				t.Errorf("%s at %v forwarded %v, want %v", c.key, c.ts, got, !c.stillOld)
			}
		})
	}
}

// TestLegacyExpiredAnswersNothing: with the stream two windows past the
// legacy pair, it holds nothing even before the tick releases it: a
// record without a timestamp is not tested against its generations as
// they were.
func TestLegacyExpiredAnswersNothing(t *testing.T) {
	w := newLegacyWorker(t)
	w.feed(t, "x", inWindow(5, 0), false)
	if !w.feed(t, "other", time.Time{}, false) {
		t.Error("record without timestamp dropped by an expired, not yet released, legacy pair")
	}
}

// TestLegacyRetractionAtStreamTime: a retraction is recorded against the
// legacy pair aged to the stream's time, not to the retraction's own:
// "other" (the legacy pair's current generation) retracted by a record
// stamped one window on is recorded, and a later record of it is new.
// "old" retracted then, already rotated out in stream time, needs no
// record; a late record of it is new all the same.
func TestLegacyRetractionAtStreamTime(t *testing.T) {
	w := newLegacyWorker(t)
	w.feed(t, "x", inWindow(2, time.Second), false)
	w.feed(t, "other", inWindow(1, 10*time.Second), true) // late retraction
	w.feed(t, "old", inWindow(2, 2*time.Second), true)
	if _, ok := w.legacy.retracted["other"]; !ok {
		t.Error("late retraction of a key the legacy pair holds at the stream's time not recorded")
	}
	for _, c := range []struct {
		key       string
		ts        time.Time
		forwarded bool
	}{
		{"old", inWindow(1, 50*time.Second), true},
		{"other", inWindow(1, 50*time.Second), true},
		{"other", time.Time{}, false}, // the new pair saw it just now
	} {
		if got := w.feed(t, c.key, c.ts, false); got != c.forwarded {
			t.Errorf("record of %s at %v after its retraction: forwarded %v, want %v", c.key, c.ts, got, c.forwarded)
		}
	}
}

// TestLegacyReleaseIsMonotone: once the stream is two windows past the
// legacy pair, a late record (stamped back inside its windows) does not
// keep the tick from releasing it.
func TestLegacyReleaseIsMonotone(t *testing.T) {
	w := newLegacyWorker(t)
	w.feed(t, "x", inWindow(3, 0), false)
	w.feed(t, "y", inWindow(1, 0), false) // late
	w.releaseLegacy()
	if w.legacy != nil {
		t.Error("legacy pair not released after a late record: the stream is two windows past it")
	}
}

// TestLegacyResume: moving back to the legacy pair's options resumes it
// advanced to the stream's time and with the retractions made since
// applied where the mode applies retractions. Plain mode applies none, as
// documented: it reports them all as not applied and still holds the key,
// as a plain member that saw the retraction itself would.
func TestLegacyResume(t *testing.T) {
	for _, mode := range []rotation.Mode{rotation.Counting, rotation.Fingerprint, rotation.Plain} {
		t.Run(mode.String(), func(t *testing.T) {
			p, err := rotation.New(rotation.Options{ExpectedKeys: 1000, FPRate: 1e-6, Window: legacyWindow, Mode: mode})
			if err != nil {
				t.Fatal(err)
			}
			p.TestAndAdd([]byte("old"), inWindow(0, time.Second))
			p.TestAndAdd([]byte("kr"), inWindow(1, time.Second))
			p.TestAndAdd([]byte("kept"), inWindow(1, time.Second))
			l := newLegacy(p)
			l.retract([]byte("kr"))
			got, notApplied, err := l.resume(inWindow(2, 0))
			if err != nil {
				t.Fatal(err)
			}
			if got.Test([]byte("old")) {
				t.Error("resumed pair not advanced to the stream's time: still holds a key of window 0")
			}
			if !got.Test([]byte("kept")) {
				t.Error("resumed pair lost a key of the window before the stream's")
			}
			wantHeld, wantNotApplied := mode == rotation.Plain, 0
			if mode == rotation.Plain {
				wantNotApplied = 1
			}
			if held := got.Test([]byte("kr")); held != wantHeld || notApplied != wantNotApplied {
				t.Errorf("retracted key held %v, %d retractions not applied; want %v, %d", held, notApplied, wantHeld, wantNotApplied)
			}
		})
	}
}
