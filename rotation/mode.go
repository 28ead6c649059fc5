package rotation

import (
	"fmt"
	"strings"
)

// Mode selects the filter kind of both generations.
type Mode uint8

const (
	// Counting uses counting Bloom filters with 4-bit saturating counters:
	// keys can be removed (retractions).
	Counting Mode = iota + 1
	// Plain uses bits-and-blooms/bloom/v3 bit filters: a fraction of the
	// memory (docs/filters.md), but keys cannot be removed.
	Plain
	// Fingerprint uses cuckoo filters of short fingerprints: keys can be
	// removed, in a fraction of the counting filter's memory at the same
	// rate.
	Fingerprint
)

// Incremental reports whether the mode's pairs track the words they write,
// so that a delta (TakeDelta) carries only what changed. A plain pair's bit
// filters place their bits inside bits-and-blooms, so its deltas carry
// every word: as large as a snapshot.
func (m Mode) Incremental() bool { return m == Counting || m == Fingerprint }

// ParseMode parses "fingerprint", "counting" or "plain" (case-insensitive).
func ParseMode(s string) (Mode, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "counting":
		return Counting, nil
	case "plain":
		return Plain, nil
	case "fingerprint":
		return Fingerprint, nil
	}
	return 0, fmt.Errorf("parse mode %q: want fingerprint, counting or plain", s)
}

func (m Mode) String() string {
	switch m {
	case Counting:
		return "counting"
	case Plain:
		return "plain"
	case Fingerprint:
		return "fingerprint"
	}
	return fmt.Sprintf("Mode(%d)", uint8(m))
}
