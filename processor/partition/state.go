package partition

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"

	"dedup/rotation"
)

// A partition's snapshot payload is its pair's encoding (rotation.Pair's
// WriterTo), followed, while a legacy pair is kept, by a legacy section:
//
//	magic "DLEG", version uint16 (little endian)
//	the legacy pair's own encoding
//	count uint32, then count × (length uint32, key): the retracted keys, sorted
//
// and nothing after it: a reader rejects trailing bytes.
//
// A payload without the section is exactly a pair's encoding, so
// snapshots from before legacy pairs existed, and readers that know only
// the pair (dedup inspect), read as before.
const (
	legacyMagic   = "DLEG"
	legacyVersion = 1
)

// ErrLegacyFormat is a legacy section that cannot be decoded.
var ErrLegacyFormat = errors.New("bad legacy section")

// partitionState is what a snapshot of the partition holds.
type partitionState struct {
	pair   *rotation.Pair
	legacy *legacy // nil: none
}

// payload is what a store saves: the pair itself when there is no legacy
// pair (its encoding is the whole payload), else the state.
func (s partitionState) payload() io.WriterTo {
	if s.legacy == nil {
		return s.pair
	}
	return s
}

// WriteTo implements io.WriterTo.
func (s partitionState) WriteTo(w io.Writer) (int64, error) {
	n, err := s.pair.WriteTo(w)
	if err != nil || s.legacy == nil {
		return n, err
	}
	var hdr [6]byte
	copy(hdr[:], legacyMagic)
	binary.LittleEndian.PutUint16(hdr[4:], legacyVersion)
	m, err := w.Write(hdr[:])
	n += int64(m)
	if err != nil {
		return n, err
	}
	k, err := s.legacy.pair.WriteTo(w)
	n += k
	if err != nil {
		return n, err
	}
	keys := slices.Sorted(maps.Keys(s.legacy.retracted))
	var b bytes.Buffer
	b.Write(binary.LittleEndian.AppendUint32(nil, uint32(len(keys))))
	for _, k := range keys {
		if uint64(len(k)) > math.MaxUint32 {
			return n, fmt.Errorf("write legacy section: retracted key of %d bytes", len(k))
		}
		b.Write(binary.LittleEndian.AppendUint32(nil, uint32(len(k))))
		b.WriteString(k)
	}
	k, err = b.WriteTo(w)
	return n + k, err
}

// readState decodes a snapshot payload into pair and returns its legacy
// section (nil when it has none).
func readState(r io.Reader, pair *rotation.Pair) (*legacy, error) {
	if _, err := pair.ReadFrom(r); err != nil {
		return nil, fmt.Errorf("decode filter pair: %w", err)
	}
	var hdr [6]byte
	switch n, err := io.ReadFull(r, hdr[:]); {
	case n == 0 && errors.Is(err, io.EOF):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("%w: header: %w", ErrLegacyFormat, err)
	}
	if string(hdr[:4]) != legacyMagic || binary.LittleEndian.Uint16(hdr[4:]) != legacyVersion {
		return nil, fmt.Errorf("%w: header %q", ErrLegacyFormat, hdr[:])
	}
	old := new(rotation.Pair)
	if _, err := old.ReadFrom(r); err != nil {
		return nil, fmt.Errorf("%w: pair: %w", ErrLegacyFormat, err)
	}
	// The retracted keys end the payload: read them whole, so that a key's
	// declared length is checked against the bytes actually present (any
	// key the writer wrote reads back, a corrupt length allocates nothing)
	// and bytes past the last key are seen.
	rest, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("%w: retracted keys: %w", ErrLegacyFormat, err)
	}
	if len(rest) < 4 {
		return nil, fmt.Errorf("%w: retracted count: %w", ErrLegacyFormat, io.ErrUnexpectedEOF)
	}
	l := newLegacy(old)
	count := binary.LittleEndian.Uint32(rest)
	rest = rest[4:]
	for i := range count {
		if len(rest) < 4 {
			return nil, fmt.Errorf("%w: retracted key %d: %w", ErrLegacyFormat, i, io.ErrUnexpectedEOF)
		}
		size := uint64(binary.LittleEndian.Uint32(rest))
		rest = rest[4:]
		if size > uint64(len(rest)) {
			return nil, fmt.Errorf("%w: retracted key %d of %d bytes, %d left", ErrLegacyFormat, i, size, len(rest))
		}
		l.retracted[string(rest[:size])] = struct{}{}
		rest = rest[size:]
	}
	if len(rest) > 0 {
		return nil, fmt.Errorf("%w: %d bytes after the retracted keys", ErrLegacyFormat, len(rest))
	}
	return l, nil
}

// Snapshot is a decoded snapshot payload, for readers outside the worker
// (dedup inspect, dedup explain).
type Snapshot struct {
	Pair *rotation.Pair
	// Legacy is the pair kept from before the filter options changed (nil:
	// none), Retracted the keys retracted from it since.
	Legacy    *rotation.Pair
	Retracted int
	// Origins are a repartitioned partition's high-water marks
	// ("topic/partition:offset ..."), empty for any other.
	Origins string

	legacy *legacy // Legacy with its retracted keys, for Ask
}

// ReadSnapshot decodes a snapshot payload.
func ReadSnapshot(r io.Reader) (Snapshot, error) {
	s := Snapshot{Pair: new(rotation.Pair)}
	marks, r, err := readOrigins(r)
	if err != nil {
		return Snapshot{}, err
	}
	l, err := readState(r, s.Pair)
	if err != nil {
		return Snapshot{}, err
	}
	if marks != nil {
		s.Origins = marks.String()
	}
	if l != nil {
		s.Legacy, s.Retracted, s.legacy = l.pair, len(l.retracted), l
	}
	return s, nil
}

// ApplyIncrement applies an increment's payload to pair (dedup inspect,
// dedup explain): its high-water-mark section, if any, is skipped.
func ApplyIncrement(pair *rotation.Pair, r io.Reader) error {
	_, r, err := readOrigins(r)
	if err != nil {
		return err
	}
	_, err = pair.ApplyDelta(r)
	return err
}
