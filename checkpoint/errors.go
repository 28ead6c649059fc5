package checkpoint

import (
	"errors"
	"fmt"
	"strings"
)

// ErrNotFound is returned by Load when no snapshot of the partition exists.
var ErrNotFound = errors.New("checkpoint not found")

// Sentinels wrapped by *CorruptError so callers can tell the kinds apart.
var (
	ErrChecksum  = errors.New("checksum mismatch")
	ErrTruncated = errors.New("truncated")
	ErrMissing   = errors.New("missing part")
	ErrFormat    = errors.New("bad format")
)

// CorruptError says which stored snapshot is damaged and how. Exactly one of
// Path (file store) and Key (Kafka store) is set.
type CorruptError struct {
	Path string
	Key  string
	What string // the part that failed: "footer", "meta", "payload", "chunk 3", ...
	Err  error
}

func (e *CorruptError) Error() string {
	where := e.Path
	if where == "" {
		where = e.Key
	}
	return fmt.Sprintf("corrupt checkpoint %s: %s: %v", where, e.What, e.Err)
}

func (e *CorruptError) Unwrap() error { return e.Err }

// Rejection is one snapshot Load tried and did not use.
type Rejection struct {
	Seq   uint64
	Where string // file path or Kafka manifest key
	Err   error
}

// LoadError is returned by Load when snapshots exist but every one was
// rejected (corrupt, unreadable or refused by decode).
type LoadError struct {
	Topic     string
	Partition int
	Rejected  []Rejection // newest first
}

func (e *LoadError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "load checkpoint %s/%d: all %d snapshots rejected", e.Topic, e.Partition, len(e.Rejected))
	for _, r := range e.Rejected {
		fmt.Fprintf(&b, "; seq %d (%s): %v", r.Seq, r.Where, r.Err)
	}
	return b.String()
}

// Unwrap exposes every rejection's error to errors.Is and errors.As.
func (e *LoadError) Unwrap() []error {
	errs := make([]error, len(e.Rejected))
	for i, r := range e.Rejected {
		errs[i] = r.Err
	}
	return errs
}

// ReadError is returned when a read of a partition that must reach an
// offset (the replay scan, the Kafka store's index and chunks) cannot: the
// restore that needs it fails instead of going on with part of the data.
type ReadError struct {
	Topic     string
	Partition int
	Reached   int64 // next offset the read would have read
	Target    int64 // the end offset it had to reach, read before the read began
	Err       error
}

func (e *ReadError) Error() string {
	return fmt.Sprintf("read %s/%d: stopped at offset %d of %d: %v", e.Topic, e.Partition, e.Reached, e.Target, e.Err)
}

func (e *ReadError) Unwrap() error { return e.Err }

// ErrStale is wrapped by *StaleError.
var ErrStale = errors.New("a snapshot of a newer group generation exists")

// StaleError is Save's refusal: the store holds a snapshot of the
// partition taken in a newer (Epoch, Generation) than the one offered, so
// the saving member has lost the partition (or the group's generation
// numbering started over: see Meta.Epoch).
type StaleError struct {
	Topic          string
	Partition      int
	Epoch          uint32 // of the refused snapshot
	Generation     int32
	HeldEpoch      uint32 // of the newest held snapshot
	HeldGeneration int32
	Where          string // the held snapshot: file path or Kafka manifest key
}

func (e *StaleError) Error() string {
	return fmt.Sprintf("save checkpoint %s/%d of generation %d (epoch %d): %s is of generation %d (epoch %d): %v",
		e.Topic, e.Partition, e.Generation, e.Epoch, e.Where, e.HeldGeneration, e.HeldEpoch, ErrStale)
}

func (e *StaleError) Unwrap() error { return ErrStale }

func staleError(m, held Meta, where string) *StaleError {
	mf, hf := fenceOf(m), fenceOf(held)
	return &StaleError{Topic: m.Topic, Partition: m.Partition, Epoch: mf.Epoch, Generation: mf.Generation,
		HeldEpoch: hf.Epoch, HeldGeneration: hf.Generation, Where: where}
}

// ErrChainBroken is wrapped by *ChainError.
var ErrChainBroken = errors.New("increment does not continue its chain")

// ChainError is Save's refusal of an increment that does not continue the
// chain it names: its base is not held (pruned, kept aside as damaged,
// never written, or not a base), is of another (Epoch, Generation),
// m.Prev is not the newest piece of the chain, m.Owner is below that
// piece's, or (m.Owner set) a newer base is held. Nothing was published; the
// caller writes a new base.
type ChainError struct {
	Topic     string
	Partition int
	Base      uint64 // of the refused increment
	Prev      uint64
	Newest    uint64 // newest piece of the chain the store holds (0: no such base)
	Reason    string
}

func (e *ChainError) Error() string {
	return fmt.Sprintf("save increment of %s/%d on base %d after %d: %s (newest piece held: %d): %v",
		e.Topic, e.Partition, e.Base, e.Prev, e.Reason, e.Newest, ErrChainBroken)
}

func (e *ChainError) Unwrap() error { return ErrChainBroken }

func chainError(m Meta, newest uint64, reason string) *ChainError {
	return &ChainError{Topic: m.Topic, Partition: m.Partition, Base: m.Base, Prev: m.Prev, Newest: newest, Reason: reason}
}

// ErrChainGap is wrapped by the *CorruptError of an increment Load could
// not reach from its base: a piece before it is missing or damaged.
var ErrChainGap = errors.New("a piece before it in its chain is missing or damaged")
