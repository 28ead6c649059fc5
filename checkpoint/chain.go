package checkpoint

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
)

// Chains: a base (a full snapshot) and the increments that follow it, each
// naming its base (Meta.Base) and the piece it directly follows
// (Meta.Prev). Both stores share the seq space of a partition between bases
// and increments, rank and prune bases only, and walk a chain the same way
// (planChain).

// link is what planChain needs of one increment of a base.
type link struct {
	seq, prev uint64
	err       error // its metadata is unreadable or inconsistent: its place in the chain is unknown
}

// chainPlan is planChain's answer, as indexes into the increments given.
type chainPlan struct {
	path  []int // to apply, in order
	forks []int // lost a race for their place (another increment with the same Prev and a lower Seq): ignored
	rest  []int // unreachable: from the first one whose metadata is damaged or whose Prev is missing
}

// planChain decides which increments of base (sorted by ascending seq)
// Load applies: from the base, each next piece is the increment of lowest
// Seq whose Prev is the piece before. The first increment whose metadata is
// damaged, or whose Prev is neither on the path nor the piece before,
// breaks the chain: it and every later increment are unreachable.
func planChain(base uint64, incs []link) chainPlan {
	var p chainPlan
	cur := base
	onPath := map[uint64]bool{base: true}
	for i, l := range incs {
		switch {
		case l.err != nil:
			// Its Prev is unknown: it may be the next piece.
		case l.prev == cur:
			p.path = append(p.path, i)
			cur = l.seq
			onPath[cur] = true
			continue
		case onPath[l.prev]:
			p.forks = append(p.forks, i)
			continue
		}
		for j := i; j < len(incs); j++ {
			p.rest = append(p.rest, j)
		}
		break
	}
	return p
}

// checkPiece checks what a piece's metadata says of its place in a chain
// against where the store found it (base: the Base its name or key gives, 0
// for a base).
func checkPiece(m Meta, base uint64) error {
	if m.Base != base {
		return fmt.Errorf("%w: meta says base %d, stored as of base %d", ErrFormat, m.Base, base)
	}
	if m.Base == 0 {
		if m.Prev != 0 || m.ChainBytes != 0 {
			return fmt.Errorf("%w: a base with prev %d, chain bytes %d", ErrFormat, m.Prev, m.ChainBytes)
		}
		return nil
	}
	if m.Base >= m.Seq || m.Prev < m.Base || m.Prev >= m.Seq {
		return fmt.Errorf("%w: increment %d of base %d after %d", ErrFormat, m.Seq, m.Base, m.Prev)
	}
	return nil
}

// continuesOwner checks that increment m, to follow prev (an increment,
// the chain's newest piece), does not lower the chain's Owner.
func continuesOwner(m, prev Meta) *ChainError {
	if prev.Owner > m.Owner {
		return chainError(m, m.Prev, fmt.Sprintf("previous increment written by generation %d, this one by %d", prev.Owner, fenceOf(m).Generation))
	}
	return nil
}

// newerBaseError refuses increment m with an Owner: base seq, newer than
// m's, is held (newest: the chain's newest piece).
func newerBaseError(m Meta, newest, seq uint64) *ChainError {
	return chainError(m, newest, fmt.Sprintf("a newer base (seq %d) is held: a chain is continued only from the newest", seq))
}

// gapError is the verdict of an increment Load could not reach.
func gapError(path, key string, l link, brokenAt uint64) error {
	return &CorruptError{Path: path, Key: key, What: fmt.Sprintf("chain after seq %d", brokenAt),
		Err: fmt.Errorf("%w (it follows seq %d)", ErrChainGap, l.prev)}
}

// sortChains orders the entries of one store as List documents: by topic,
// partition, then chain (by base Seq, newest first), the base before its
// increments, increments by ascending Seq.
func sortChains(entries []Entry) {
	chainOf := func(e Entry) uint64 {
		if e.Meta.Base != 0 {
			return e.Meta.Base
		}
		return e.Meta.Seq
	}
	slices.SortStableFunc(entries, func(a, b Entry) int {
		if c := strings.Compare(a.Meta.Topic, b.Meta.Topic); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Meta.Partition, b.Meta.Partition); c != 0 {
			return c
		}
		if c := cmp.Compare(chainOf(b), chainOf(a)); c != 0 {
			return c
		}
		if a.Meta.Base == 0 || b.Meta.Base == 0 {
			return cmp.Compare(min(a.Meta.Base, 1), min(b.Meta.Base, 1)) // the base first
		}
		return cmp.Compare(a.Meta.Seq, b.Meta.Seq)
	})
}

// loaded is a Load's answer once a base decoded: its chain's head, from
// the newest base with its whole chain (SourceLatest) or else
// (SourceFallback), or err from reading the chain.
func loaded(topic string, partition int, head Meta, triedBases int, whole bool, err error) (Meta, Source, error) {
	if err != nil {
		return Meta{}, "", fmt.Errorf("load checkpoint %s/%d: %w", topic, partition, err)
	}
	if triedBases > 0 || !whole {
		return head, SourceFallback, nil
	}
	return head, SourceLatest, nil
}
