package assignment

import (
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sort"
)

// userDataVersion is the first byte of the user data; a member that reads
// another version ignores the report.
const userDataVersion = 1

// ErrMalformedUserData marks user data that cannot be decoded.
var ErrMalformedUserData = errors.New("malformed user data")

// ownership is what one member reports: the partitions it was assigned in
// generation gen, by topic, each list sorted without repeats.
type ownership struct {
	gen    int32
	topics map[string][]int
}

// appendTo encodes o (big-endian, as Kafka's own protocol):
//
//	version int8 | generation int32 | topic count int32 |
//	per topic, by name: name length int16 | name | partition count int32 | partitions int32...
func (o ownership) appendTo(b []byte) []byte {
	b = append(b, userDataVersion)
	b = binary.BigEndian.AppendUint32(b, uint32(o.gen))
	names := make([]string, 0, len(o.topics))
	for t := range o.topics {
		names = append(names, t)
	}
	sort.Strings(names)
	b = binary.BigEndian.AppendUint32(b, uint32(len(names)))
	for _, t := range names {
		b = binary.BigEndian.AppendUint16(b, uint16(len(t)))
		b = append(b, t...)
		ps := o.topics[t]
		b = binary.BigEndian.AppendUint32(b, uint32(len(ps)))
		for _, p := range ps {
			b = binary.BigEndian.AppendUint32(b, uint32(p))
		}
	}
	return b
}

// decodeOwnership reads what appendTo wrote. Anything else (another
// version, a truncated or overlong buffer, a negative partition or
// generation, a topic twice) is ErrMalformedUserData.
func decodeOwnership(b []byte) (ownership, error) {
	r := reader{b: b}
	if v := r.uint8(); v != userDataVersion {
		return ownership{}, fmt.Errorf("decode user data: version %d: %w", v, ErrMalformedUserData)
	}
	o := ownership{gen: int32(r.uint32()), topics: map[string][]int{}}
	n := r.uint32()
	for i := uint32(0); i < n && r.err == nil; i++ {
		name := string(r.bytes(int(r.uint16())))
		if _, dup := o.topics[name]; dup && r.err == nil {
			return ownership{}, fmt.Errorf("decode user data: topic %q twice: %w", name, ErrMalformedUserData)
		}
		count := r.uint32()
		if uint64(count)*4 > uint64(len(r.b)) {
			r.fail()
			break
		}
		ps := make([]int, 0, count)
		for j := uint32(0); j < count; j++ {
			p := int32(r.uint32())
			if p < 0 {
				r.fail()
			}
			ps = append(ps, int(p))
		}
		slices.Sort(ps)
		o.topics[name] = slices.Compact(ps)
	}
	switch {
	case r.err != nil:
		return ownership{}, fmt.Errorf("decode user data: %w", r.err)
	case len(r.b) != 0:
		return ownership{}, fmt.Errorf("decode user data: %d bytes after the end: %w", len(r.b), ErrMalformedUserData)
	case o.gen < 0:
		return ownership{}, fmt.Errorf("decode user data: generation %d: %w", o.gen, ErrMalformedUserData)
	}
	return o, nil
}

// reader consumes b front to back; past the end it records
// ErrMalformedUserData and yields zeros.
type reader struct {
	b   []byte
	err error
}

func (r *reader) fail() {
	r.err = ErrMalformedUserData
	r.b = nil
}

func (r *reader) bytes(n int) []byte {
	if r.err != nil || n > len(r.b) {
		r.fail()
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *reader) uint8() uint8 {
	if b := r.bytes(1); b != nil {
		return b[0]
	}
	return 0
}

func (r *reader) uint16() uint16 {
	if b := r.bytes(2); b != nil {
		return binary.BigEndian.Uint16(b)
	}
	return 0
}

func (r *reader) uint32() uint32 {
	if b := r.bytes(4); b != nil {
		return binary.BigEndian.Uint32(b)
	}
	return 0
}
