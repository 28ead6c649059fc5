package rotation

import (
	"testing"
	"time"
)

// TestAskByGeneration: Ask names the generation holding each key and the
// window it covers, agrees with SeenAt at every asked time, and changes
// nothing: a key it was asked about is new to the next TestAndAdd.
func TestAskByGeneration(t *testing.T) {
	for _, mode := range modes {
		t.Run(mode.String(), func(t *testing.T) {
			p := mustNew(t, Options{ExpectedKeys: 2000, FPRate: 1e-6, Window: time.Hour, Mode: mode})
			if g := p.Ask(testKey(1, 0), time.Time{}); g[0].Held || g[1].Held || !g[0].Start.IsZero() {
				t.Fatalf("a pair no record reached answers %+v", g)
			}
			const n = 500
			for i := range uint64(n) {
				p.TestAndAdd(testKey(1, i), epoch.Add(time.Minute))
			}
			for i := range uint64(n) {
				p.TestAndAdd(testKey(2, i), epoch.Add(time.Hour+time.Minute)) // rotates: space 1 is previous
			}
			before := p.Stats()
			for _, c := range []struct {
				at               time.Time
				curStart         time.Time
				space1, space2   [2]bool // held in (current, previous)
				curFill, preFill bool
			}{
				{time.Time{}, epoch.Add(time.Hour), [2]bool{false, true}, [2]bool{true, false}, true, true},
				{epoch.Add(time.Hour + 30*time.Minute), epoch.Add(time.Hour), [2]bool{false, true}, [2]bool{true, false}, true, true},
				{epoch.Add(2*time.Hour + time.Minute), epoch.Add(2 * time.Hour), [2]bool{}, [2]bool{false, true}, false, true},
				{epoch.Add(5*time.Hour + time.Minute), epoch.Add(5 * time.Hour), [2]bool{}, [2]bool{}, false, false},
			} {
				for _, space := range []byte{1, 2} {
					want := c.space1
					if space == 2 {
						want = c.space2
					}
					for i := range uint64(n) {
						k := testKey(space, i)
						g := p.Ask(k, c.at)
						if g[0].Held != want[0] || g[1].Held != want[1] {
							t.Fatalf("at %v, key %d of space %d: held (current %v, previous %v), want %v", c.at, i, space, g[0].Held, g[1].Held, want)
						}
						if seen := p.SeenAt(k, c.at); seen != (g[0].Held || g[1].Held) {
							t.Fatalf("at %v: SeenAt %v, Ask %+v", c.at, seen, g)
						}
					}
				}
				g := p.Ask(testKey(3, 0), c.at)
				if !g[0].Start.Equal(c.curStart) || !g[1].Start.Equal(c.curStart.Add(-time.Hour)) {
					t.Errorf("at %v: windows start %v and %v, want %v and an hour before", c.at, g[0].Start, g[1].Start, c.curStart)
				}
				if (g[0].Filter.FPRate > 0) != c.curFill || (g[1].Filter.FPRate > 0) != c.preFill {
					t.Errorf("at %v: false-positive rates %g (current), %g (previous); want non-zero %v, %v",
						c.at, g[0].Filter.FPRate, g[1].Filter.FPRate, c.curFill, c.preFill)
				}
				if g[0].Filter.M == 0 || g[1].Filter.M == 0 {
					t.Errorf("at %v: generation sizes %d, %d", c.at, g[0].Filter.M, g[1].Filter.M)
				}
			}
			if after := p.Stats(); after != before {
				t.Errorf("Ask changed the pair: %+v, then %+v", before, after)
			}
			asked := 0
			for i := range uint64(n) {
				k := testKey(3, i)
				if g := p.Ask(k, time.Time{}); g[0].Held || g[1].Held {
					continue // a false positive: nothing to learn from it
				}
				asked++
				if p.TestAndAdd(k, time.Time{}) {
					t.Fatalf("key %d, asked and not held, is seen by the next TestAndAdd", i)
				}
			}
			if asked < n*9/10 {
				t.Errorf("only %d of %d keys never added read as not held", asked, n)
			}
		})
	}
}
