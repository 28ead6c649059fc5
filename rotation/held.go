package rotation

import (
	"time"

	"github.com/cespare/xxhash/v2"
)

// Generation names a generation of a pair, as the pair stands: which one
// holds a key.
type Generation uint8

const (
	NotHeld  Generation = iota // neither generation holds the key
	Current                    // the current generation
	Previous                   // the previous generation
)

func (g Generation) String() string {
	switch g {
	case Current:
		return "current"
	case Previous:
		return "previous"
	}
	return "none"
}

// HeldBy reports which generation holds the key pr was located for,
// changing nothing: Current when the current one does (whether or not the
// previous one does too), else Previous when that one does, else NotHeld.
// Asked right after TestAndAddAt reported the key seen, it names the
// generation that made the record a duplicate, never NotHeld. It is a
// second look at the memory that test just loaded, so only the records
// that ask pay for it; TestAndAddAt itself is unchanged.
func (p *Pair) HeldBy(pr *Probe) Generation {
	var cur, prev bool
	switch {
	case p.fp != nil:
		cur, prev = p.fp.contains(p.fp.cur, &pr.fpr), p.fp.contains(1-p.fp.cur, &pr.fpr)
	case p.cnt != nil:
		cur, prev = p.cnt.contains(p.cnt.cur, &pr.loc), p.cnt.contains(1-p.cnt.cur, &pr.loc)
	default:
		cur, prev = p.pl.cur.f.Test(pr.key), p.pl.prev.f.Test(pr.key)
	}
	switch {
	case cur:
		return Current
	case prev:
		return Previous
	}
	return NotHeld
}

// HeldAt is SeenAt naming the generation that holds key: NotHeld where
// SeenAt reports false, else the generation as the pair stands (not as it
// would be once advanced to ts), so that GenerationWindow gives the window
// whose records added the key. Like SeenAt it changes nothing, so it may be
// asked of a pair a saver encodes meanwhile.
func (p *Pair) HeldAt(key []byte, ts time.Time) Generation {
	ahead := p.windowsAhead(ts)
	if ahead >= 2 {
		return NotHeld
	}
	// Not Locate: its prefetch fallback writes p.sink.
	pr := Probe{key: key}
	switch h := xxhash.Sum64(key); {
	case p.fp != nil:
		p.fp.locate(h, &pr.fpr)
	case p.cnt != nil:
		p.cnt.locate(h, &pr.loc)
	}
	g := p.HeldBy(&pr)
	if g == Previous && ahead == 1 {
		return NotHeld // rotated out once advanced to ts
	}
	return g
}

// GenerationWindow returns the event-time window [start, end) whose
// records a generation took in: the current window for Current, the one
// before it for Previous (zero times for NotHeld). After an early rotation
// (a full fingerprint stash, Stats.EarlyRotations) the previous generation
// also holds keys of the current window; the window named is still the
// one before, as window boundaries alone decide it.
func (p *Pair) GenerationWindow(g Generation) (start, end time.Time) {
	s := p.start
	switch g {
	case Current:
	case Previous:
		s -= p.window
	default:
		return time.Time{}, time.Time{}
	}
	return time.Unix(0, s).UTC(), time.Unix(0, s+p.window).UTC()
}
