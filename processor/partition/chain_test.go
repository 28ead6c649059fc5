package partition

import (
	"testing"
	"time"

	"dedup/checkpoint"
)

// TestChainExtend: an increment extends a chain that has a base, while its
// increments stay below ratio times the base and, with a bound, while the
// base is younger than it; a ratio of 0 never extends.
func TestChainExtend(t *testing.T) {
	created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := chain{base: checkpoint.Meta{Seq: 7, StoredBytes: 1000, Created: created}, head: 9, bytes: 400}
	for _, tc := range []struct {
		name  string
		c     chain
		p     chainPolicy
		after time.Duration // now, after the base's creation
		want  bool
	}{
		{"within ratio, no age bound", c, chainPolicy{ratio: 1}, 48 * time.Hour, true},
		{"no base", chain{}, chainPolicy{ratio: 1}, 0, false},
		{"ratio 0", c, chainPolicy{}, 0, false},
		{"increments reached the ratio", c, chainPolicy{ratio: 0.4}, 0, false},
		{"base younger than the bound", c, chainPolicy{ratio: 1, maxAge: time.Hour}, 59 * time.Minute, true},
		{"base as old as the bound", c, chainPolicy{ratio: 1, maxAge: time.Hour}, time.Hour, false},
		{"base older than the bound", c, chainPolicy{ratio: 1, maxAge: time.Hour}, 2 * time.Hour, false},
	} {
		if got := tc.c.extend(tc.p, created.Add(tc.after)); got != tc.want {
			t.Errorf("%s: extend = %v, want %v", tc.name, got, tc.want)
		}
	}
}
