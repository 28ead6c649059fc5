package partition

import (
	"time"

	"dedup/rotation"
)

// The generations a KeyAnswer names, in the order the stage asks them: the
// pair's, then a legacy pair's (legacy.go).
const (
	GenCurrent        = "current"
	GenPrevious       = "previous"
	GenLegacyCurrent  = "legacy-current"
	GenLegacyPrevious = "legacy-previous"
)

// GenerationAnswer is what one generation says of a key.
type GenerationAnswer struct {
	Generation string
	Held       bool
	// Start and Window are the event-time window the generation covers,
	// [Start, Start+Window); Start is zero before any record.
	Start  time.Time
	Window time.Duration
	// FalsePositive is the chance that a key never seen reads as held in
	// this generation, at its fill.
	FalsePositive float64
}

// KeyAnswer is what a partition's filters say of one dedup key, asked
// without adding it (rotation.Pair.Ask).
type KeyAnswer struct {
	Held bool
	// Generation is the first generation, in the stage's order, that holds
	// the key ("" when none does): the one a record would be dropped by.
	Generation  string
	Generations []GenerationAnswer
	// FalsePositive is the chance that a key never seen reads as held by
	// any generation asked: 1-(1-c)(1-p) for a pair.
	FalsePositive float64
	// Offset is the input offset the filters cover: every input below it
	// is in them, none at or above (-1: not known).
	Offset int64
}

// KeyQuestion asks a partition's worker what its live filters say of Key
// (Deps.Questions). Answer must be buffered: the worker never waits on it.
type KeyQuestion struct {
	Key    []byte
	Answer chan<- KeyAnswer
}

// askFilters asks pair, then the legacy pair l (nil: none) aged to its
// stream time, as the hot path would (legacyFilters.seen), without adding
// anything.
func askFilters(pair *rotation.Pair, l *legacy, key []byte) KeyAnswer {
	a := KeyAnswer{Offset: -1}
	add := func(names [2]string, gens [2]rotation.Held, window time.Duration, retracted bool) {
		for i, g := range gens {
			held := g.Held && !retracted
			a.Generations = append(a.Generations, GenerationAnswer{Generation: names[i], Held: held,
				Start: g.Start, Window: window, FalsePositive: g.Filter.FPRate})
			if held && !a.Held {
				a.Held, a.Generation = true, names[i]
			}
		}
	}
	add([2]string{GenCurrent, GenPrevious}, pair.Ask(key, time.Time{}), pair.Options().Window, false)
	if l != nil {
		_, retracted := l.retracted[string(key)]
		add([2]string{GenLegacyCurrent, GenLegacyPrevious}, l.pair.Ask(key, l.at), l.pair.Options().Window, retracted)
	}
	none := 1.0
	for _, g := range a.Generations {
		none *= 1 - g.FalsePositive
	}
	a.FalsePositive = 1 - none
	return a
}

// Ask is what the snapshot's filters say of key, as a partition restored
// from it would answer before its first record: the legacy pair aged to
// the pair's window (Start does the same). Offset is left -1: the
// snapshot's metadata holds it.
func (s Snapshot) Ask(key []byte) KeyAnswer {
	var l *legacy
	if s.legacy != nil {
		l = s.legacy.frozen()
		l.age(s.Pair.Stats().WindowStart)
	}
	return askFilters(s.Pair, l, key)
}

// answerQuestions answers every question waiting in Deps.Questions from
// the live filters. The worker's goroutine alone touches its pair, so it
// answers them itself, between batches (periodic).
func (w *Worker) answerQuestions() {
	for {
		select {
		case q := <-w.d.Questions:
			a := askFilters(w.pair, w.legacy, q.Key)
			a.Offset = w.position
			select {
			case q.Answer <- a:
			default: // an asker that gave up left no room: never block the partition
			}
		default:
			return
		}
	}
}
