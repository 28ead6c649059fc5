package partition

import (
	"context"
)

// testOwner stands in for the partition's owner (Deps.Group and
// Deps.Owner): commits succeed and are forgotten, the group has no
// committed offset, nothing handed back is kept.
type testOwner struct {
	crashed bool // Crashed's answer
}

func (testOwner) Commit(context.Context, int64, map[int]int64) error { return nil }
func (testOwner) CommittedEnds(context.Context) (int64, map[int]int64, error) {
	return -1, nil, nil
}
func (testOwner) Delivered(int64) {}
func (testOwner) Keep(Kept)       {}
func (o testOwner) Crashed() bool { return o.crashed }
func (testOwner) OutputRefused()  {}
