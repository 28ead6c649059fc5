package partition

import (
	"bytes"
	"testing"
	"time"

	"dedup/rotation"
)

// TestSnapshotAskLegacy: a snapshot holding a legacy pair answers as the
// partition restored from it would decide: the pair first, then the legacy
// pair aged to the pair's window (its previous generation rotated out
// once the pair is a window ahead, its keys forgotten two windows ahead),
// a key retracted from it since not held. Each generation names its
// window, and the whole answer's false-positive chance is that of every
// generation asked together.
func TestSnapshotAskLegacy(t *testing.T) {
	o := rotation.Options{ExpectedKeys: 1000, FPRate: 1e-3, Window: time.Hour, Mode: rotation.Fingerprint}
	old := rotation.Options{ExpectedKeys: 500, FPRate: 1e-3, Window: time.Hour, Mode: rotation.Counting}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	snapshot := func(pairAt time.Time) Snapshot {
		t.Helper()
		lp, err := rotation.New(old)
		if err != nil {
			t.Fatal(err)
		}
		lp.TestAndAdd([]byte("early"), t0.Add(time.Minute))          // legacy previous, once it rotated
		lp.TestAndAdd([]byte("late"), t0.Add(time.Hour+time.Minute)) // legacy current
		lp.TestAndAdd([]byte("retracted"), t0.Add(time.Hour+time.Minute))
		l := newLegacy(lp)
		l.age(t0.Add(time.Hour + time.Minute))
		l.retract([]byte("retracted"))
		pair, err := rotation.New(o)
		if err != nil {
			t.Fatal(err)
		}
		pair.TestAndAdd([]byte("new"), pairAt)
		var b bytes.Buffer
		if _, err := (partitionState{pair: pair, legacy: l}).WriteTo(&b); err != nil {
			t.Fatal(err)
		}
		s, err := ReadSnapshot(&b)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}

	s := snapshot(t0.Add(time.Hour + 2*time.Minute)) // the pair in the legacy pair's window
	for _, c := range []struct {
		key  string
		want string
	}{{"new", GenCurrent}, {"late", GenLegacyCurrent}, {"early", GenLegacyPrevious}, {"retracted", ""}, {"never", ""}} {
		a := s.Ask([]byte(c.key))
		if a.Held != (c.want != "") || a.Generation != c.want {
			t.Errorf("%s: held %v by %q, want %q", c.key, a.Held, a.Generation, c.want)
		}
		if len(a.Generations) != 4 {
			t.Fatalf("%s: %d generations answered, want the pair's two and the legacy pair's two", c.key, len(a.Generations))
		}
		none := 1.0
		for _, g := range a.Generations {
			none *= 1 - g.FalsePositive
		}
		if d := a.FalsePositive - (1 - none); d > 1e-15 || d < -1e-15 {
			t.Errorf("%s: false positive %g, the generations' together %g", c.key, a.FalsePositive, 1-none)
		}
	}
	a := s.Ask([]byte("late"))
	for i, want := range []time.Time{t0.Add(time.Hour), t0, t0.Add(time.Hour), t0} {
		if g := a.Generations[i]; !g.Start.Equal(want) || g.Window != time.Hour {
			t.Errorf("generation %s: window from %v for %v, want from %v", g.Generation, g.Start, g.Window, want)
		}
	}
	if a.Generations[0].FalsePositive <= 0 || a.Generations[2].FalsePositive <= 0 {
		t.Errorf("generations holding keys have no false-positive chance: %+v", a.Generations)
	}

	// The pair a window ahead: the legacy current generation is its
	// previous one now; two windows ahead it holds nothing.
	s = snapshot(t0.Add(2*time.Hour + time.Minute))
	if a := s.Ask([]byte("late")); a.Generation != GenLegacyPrevious {
		t.Errorf("late, the pair a window ahead: held by %q, want %s", a.Generation, GenLegacyPrevious)
	}
	if a := s.Ask([]byte("early")); a.Held {
		t.Errorf("early, the pair a window ahead: held by %q, want rotated out", a.Generation)
	}
	s = snapshot(t0.Add(3*time.Hour + time.Minute))
	if a := s.Ask([]byte("late")); a.Held {
		t.Errorf("late, the pair two windows ahead: held by %q, want forgotten", a.Generation)
	}
}
