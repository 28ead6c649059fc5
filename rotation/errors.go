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
)

// CorruptError reports a snapshot that was refused: What names the part
// (e.g. "header", "current generation"), Offset is the byte offset in the
// stream where the problem was found, Err is one of the sentinels above.
type CorruptError struct {
	What   string
	Offset int64
	Err    error
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("decode snapshot: %s at offset %d: %v", e.What, e.Offset, e.Err)
}

func (e *CorruptError) Unwrap() error { return e.Err }
