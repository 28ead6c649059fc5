package rotation

import (
	"errors"
	"fmt"
)

// Sentinel errors. Snapshot decoding errors come wrapped in a *CorruptError
// that says what was wrong and where; test them with errors.Is.
var (
	// ErrRemoveUnsupported is returned by Remove in Plain mode: bit filters
	// cannot forget a key.
	ErrRemoveUnsupported = errors.New("remove unsupported in plain mode (fingerprint and counting modes retract keys)")
	// ErrVersion means the snapshot has a format version this code does not know.
	ErrVersion = errors.New("unknown snapshot format version")
	// ErrChecksum means the snapshot's bytes do not match its checksum.
	ErrChecksum = errors.New("snapshot checksum mismatch")
	// ErrTruncated means the snapshot ended before its declared length.
	ErrTruncated = errors.New("snapshot truncated")
	// ErrInvalid means a snapshot field holds a value that cannot be right
	// (bad magic, options out of range, counts that disagree with the data).
	ErrInvalid = errors.New("invalid snapshot field")
	// ErrMismatch means two pairs with different options or geometry were
	// combined (CopyTo).
	ErrMismatch = errors.New("pair options mismatch")
	// ErrDeltaMismatch means an intact delta was offered to a pair it does
	// not apply to: another mode, options or geometry, or a state other
	// than the one it was taken from (its From is not the pair's
	// rotations), or a pair with no state (ApplyDelta). It is not wrapped in
	// a *CorruptError: the delta is sound, the chain is wrong.
	ErrDeltaMismatch = errors.New("delta does not apply to this pair")
)

// CorruptError reports a snapshot or delta that was refused: What names the
// part (e.g. "header", "current generation", "delta header"), Offset is the
// byte offset in the stream where the problem was found, Err is one of the
// sentinels above.
type CorruptError struct {
	What   string
	Offset int64
	Err    error

	delta bool // a delta (ApplyDelta), not a snapshot
}

func (e *CorruptError) Error() string {
	kind := "snapshot"
	if e.delta {
		kind = "delta"
	}
	return fmt.Sprintf("decode %s: %s at offset %d: %v", kind, e.What, e.Offset, e.Err)
}

func (e *CorruptError) Unwrap() error { return e.Err }
