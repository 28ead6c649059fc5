package rotation

import (
	"time"

	"github.com/cespare/xxhash/v2"
)

// Held is what one generation of a pair says of a key (Pair.Ask).
type Held struct {
	Held bool
	// Start is the start of the window the generation covers, [Start,
	// Start+Window); zero when no record has started a window.
	Start time.Time
	// Filter is the generation's fill and false-positive rate: the chance
	// that a key never added reads as held in it. Zero but M and K for a
	// generation the asked time has emptied.
	Filter FilterStats
}

// Ask reports, for each generation (current first), whether it holds key,
// the window it covers and its false-positive rate, as the pair would once
// advanced to event time at (SeenAt, generation by generation): one window
// past the current one the current generation is the previous one and the
// current is empty, two or more windows past both are empty. A zero at, or
// one inside or before the current window, asks the pair as it is. Nothing
// changes, not even time: asking never adds the key, so an operator's
// question cannot make the next record with that key a duplicate.
func (p *Pair) Ask(key []byte, at time.Time) [2]Held {
	var gens [2]Held
	if p.gens == nil {
		return gens
	}
	h := xxhash.Sum64(key)
	for g := range gens {
		gens[g] = Held{Held: p.holdsIn(g, h, key), Filter: p.gens.stats(g)}
		if p.started {
			gens[g].Start = time.Unix(0, p.start-int64(g)*p.window).UTC()
		}
	}
	empty := func(start int64) Held {
		st := gens[0].Filter
		return Held{Start: time.Unix(0, start).UTC(), Filter: FilterStats{M: st.M, K: st.K}}
	}
	switch p.windowsAhead(at) {
	case 0:
	case 1:
		gens = [2]Held{empty(p.start + p.window), gens[0]}
	default:
		t := unixNanos(at)
		w := t / p.window
		if t%p.window < 0 {
			w--
		}
		w *= p.window
		gens = [2]Held{empty(w), empty(w - p.window)}
	}
	return gens
}

// holdsIn reports whether logical generation g (0 current, 1 previous)
// holds key, whose hash is h.
func (p *Pair) holdsIn(g int, h uint64, key []byte) bool {
	switch {
	case p.fp != nil:
		var pr fprobe
		p.fp.locate(h, &pr)
		return p.fp.contains(g^p.fp.cur, &pr) // logical to physical, as stats does
	case p.cnt != nil:
		var pr probe
		p.cnt.locate(h, &pr)
		return p.cnt.contains(g^p.cnt.cur, &pr)
	default:
		return p.pl.gen(g).f.Test(key)
	}
}
