package rotation

import (
	"time"

	"github.com/cespare/xxhash/v2"
)

// A pair kept read-only after the filter options changed (the partition's
// state from before the change) must forget its keys on the same schedule
// as if it were still rotated by the stream, without being written to, so
// that a saver may encode it while the worker reads it. SeenAt and Expired
// compute that schedule instead of rotating.

// SeenAt reports whether the pair holds key as it would once advanced to
// event time ts, without changing it: one window past the current one only
// the current generation still holds keys (it would be the previous one),
// two or more windows past nothing does. A zero ts, or one inside or
// before the current window, tests both generations as they are.
func (p *Pair) SeenAt(key []byte, ts time.Time) bool {
	switch p.windowsAhead(ts) {
	case 0:
		return p.Test(key)
	case 1:
		return p.testCurrent(key)
	default:
		return false
	}
}

// AdvanceTo moves time forward to ts as a record stamped ts would
// (TestAndAdd), without testing or adding a key: a pair resumed after
// being kept read-only catches up with the stream before its first record,
// which may be late or carry no timestamp and so would not move it.
func (p *Pair) AdvanceTo(ts time.Time) { p.advance(ts) }

// Expired reports whether the pair, advanced to ts, would hold nothing: ts
// lies two windows or more past its current window, or no record ever
// started a window.
func (p *Pair) Expired(ts time.Time) bool { return !p.started || p.windowsAhead(ts) >= 2 }

// windowsAhead is how many windows (at most 2) ts lies past the current
// one; 0 for a zero ts or one inside or before the current window.
func (p *Pair) windowsAhead(ts time.Time) int64 {
	if ts.IsZero() || !p.started {
		return 0
	}
	t := unixNanos(ts)
	if t < p.start {
		return 0
	}
	return min((t-p.start)/p.window, 2)
}

// testCurrent reports whether the current generation holds key.
func (p *Pair) testCurrent(key []byte) bool {
	switch {
	case p.fp != nil:
		var pr fprobe
		p.fp.locate(xxhash.Sum64(key), &pr)
		return p.fp.contains(p.fp.cur, &pr)
	case p.cnt != nil:
		var pr probe
		p.cnt.locate(xxhash.Sum64(key), &pr)
		return p.cnt.contains(p.cnt.cur, &pr)
	default:
		return p.pl.testCurrent(key)
	}
}
