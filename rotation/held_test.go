package rotation

import (
	"testing"
	"time"
)

// TestHeldBy: a key added in the current window is held by the current
// generation, one window later by the previous one, two windows later by
// neither; each generation's window is the one whose records added it.
func TestHeldBy(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			p := mustNew(t, Options{ExpectedKeys: 1000, FPRate: 1e-6, Window: time.Hour, Mode: mode})
			held := func(k []byte) Generation {
				var pr Probe
				p.Locate(k, &pr)
				return p.HeldBy(&pr)
			}
			a, b := testKey(1, 1), testKey(1, 2)
			if p.TestAndAdd(a, epoch.Add(time.Minute)) {
				t.Fatal("a new key reported seen")
			}
			if g := held(a); g != Current {
				t.Errorf("key added this window held by %v, want current", g)
			}
			if g := held(b); g != NotHeld {
				t.Errorf("key never added held by %v, want none", g)
			}
			p.AdvanceTo(epoch.Add(time.Hour + time.Minute))
			p.TestAndAdd(b, time.Time{})
			if g := held(a); g != Previous {
				t.Errorf("key added one window before held by %v, want previous", g)
			}
			if g := held(b); g != Current {
				t.Errorf("key added this window held by %v, want current", g)
			}
			start, end := p.GenerationWindow(Previous)
			if !start.Equal(epoch) || !end.Equal(epoch.Add(time.Hour)) {
				t.Errorf("previous window [%s, %s), want [%s, %s)", start, end, epoch, epoch.Add(time.Hour))
			}
			start, end = p.GenerationWindow(Current)
			if !start.Equal(epoch.Add(time.Hour)) || !end.Equal(epoch.Add(2*time.Hour)) {
				t.Errorf("current window [%s, %s), want [%s, %s)", start, end, epoch.Add(time.Hour), epoch.Add(2*time.Hour))
			}
			p.AdvanceTo(epoch.Add(3 * time.Hour))
			if g := held(a); g != NotHeld {
				t.Errorf("key added three windows before held by %v, want none", g)
			}
		})
	}
}

// TestHeldByWheneverSeen: whenever TestAndAddAt reports a key seen, false
// positives of an overfull pair included, HeldBy names a generation.
func TestHeldByWheneverSeen(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			p := mustNew(t, Options{ExpectedKeys: 200, FPRate: 0.01, Window: time.Hour, Mode: mode})
			seen, byGen := 0, map[Generation]int{}
			for i := range uint64(4000) {
				k := testKey(2, i%300) // repeats, and more keys than the pair is sized for
				var pr Probe
				p.Locate(k, &pr)
				if !p.TestAndAddAt(&pr, epoch.Add(time.Duration(i)*time.Second)) {
					continue
				}
				seen++
				g := p.HeldBy(&pr)
				byGen[g]++
				if g == NotHeld {
					t.Fatalf("key %d reported seen but held by no generation", i)
				}
			}
			if seen == 0 || byGen[Current] == 0 || byGen[Previous] == 0 {
				t.Errorf("%d seen, by generation %v: want both generations to answer", seen, byGen)
			}
		})
	}
}

// TestHeldAtIsSeenAt: HeldAt reports a generation exactly where SeenAt
// reports the key seen, and it is the generation the key is in now.
func TestHeldAtIsSeenAt(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			p := mustNew(t, Options{ExpectedKeys: 1000, FPRate: 1e-6, Window: time.Hour, Mode: mode})
			old, cur := testKey(3, 1), testKey(3, 2)
			p.TestAndAdd(old, epoch)
			p.TestAndAdd(cur, epoch.Add(time.Hour))
			for _, tc := range []struct {
				at       time.Time
				old, cur Generation
			}{
				{time.Time{}, Previous, Current},
				{epoch.Add(90 * time.Minute), Previous, Current},
				{epoch.Add(150 * time.Minute), NotHeld, Current},
				{epoch.Add(210 * time.Minute), NotHeld, NotHeld},
			} {
				for _, k := range []struct {
					key  []byte
					want Generation
				}{{old, tc.old}, {cur, tc.cur}} {
					g := p.HeldAt(k.key, tc.at)
					if g != k.want {
						t.Errorf("HeldAt(%x, %s) = %v, want %v", k.key[:2], tc.at, g, k.want)
					}
					if (g != NotHeld) != p.SeenAt(k.key, tc.at) {
						t.Errorf("HeldAt(%x, %s) = %v, SeenAt %v", k.key[:2], tc.at, g, p.SeenAt(k.key, tc.at))
					}
				}
			}
		})
	}
}
