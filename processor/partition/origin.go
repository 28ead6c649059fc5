package partition

import (
	"bufio"
	"bytes"
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
)

// Origin names an input record as hop 1 (the re-key hop,
// processor/repartition) sends it to the repartition topic: it appends
// this trailer to the record's value (AppendTrailer), and hop 2 takes it off
// again (unwrap):
//
//	<value> <origin text> <flags, 1 byte> <origin text length, uint32 BE> "\xffdO1"
//
// with the origin text
//
//	<input topic>/<input partition>/<input offset>/<partition count>[/<input key>]
//
// The partition count is the repartition topic's count hop 1 routed the
// record by: the marks are kept per count, so that a record routed anew
// after partitions were added is never taken for a re-send (see origins).
// The key part, slash included, is absent when the input record had a
// null key or when its key is the dedup key (flag 2: the repartition
// record's own key, not repeated); a topic name cannot hold a slash, so
// everything after the fourth slash is the key, whatever its bytes. Flag 1
// is a null value.
//
// Flag 4 makes the record a reset, not a copy of an input record: hop 1
// found the input partition's log gone back (truncated, or the topic
// created again) and reads on from offset E, the origin's offset; hop 2
// lowers every mark of that input partition to E-1 (resetMarks) and
// forwards nothing. A reset has no value bytes and no key part. Hop 1
// writes one to every repartition partition and has them all acknowledged
// before it sends anything of the new log, so on each partition the reset
// is behind every record of the old log and ahead of every record of the
// new one. Any other flag is refused loudly by hop 2 (a record of a newer
// hop 1), never forwarded.
//
// In the value, not in headers: kafka-go decodes every header with two
// allocations and a headers slice per record, and hop 2 would pay them
// for every record (the repartition record's own key is the dedup key).
type Origin struct {
	Topic     string
	Partition int32
	Offset    int64
	Count     int    // the repartition topic's partition count the record is routed by
	Key       []byte // the input record's key; nil when it had none
	// Dedup is the repartition record's key: an input key equal to it is
	// not repeated in the trailer.
	Dedup []byte
	// Reset: the trailer of a reset record (flag 4, no value, no key):
	// the input partition reads on from Offset.
	Reset bool
}

// The trailer's fixed end: flags, length and magic.
const (
	originMagic      = "\xffdO1"
	originFooterLen  = 1 + 4 + len(originMagic)
	originNullValue  = 1 // flag: the input record's value was null
	originKeyIsDedup = 2 // flag: the input record's key is the repartition record's
	originReset      = 4 // flag: a reset record (hop 1's input went back), no input record
	originKnown      = originNullValue | originKeyIsDedup | originReset
)

// AppendTrailer appends to b the trailer naming o that follows value in
// the repartition record's value (value itself is not appended).
func (o *Origin) AppendTrailer(b, value []byte) []byte {
	start := len(b)
	b = append(b, o.Topic...)
	b = append(b, '/')
	b = strconv.AppendInt(b, int64(o.Partition), 10)
	b = append(b, '/')
	b = strconv.AppendInt(b, o.Offset, 10)
	b = append(b, '/')
	b = strconv.AppendInt(b, int64(o.Count), 10)
	var flags byte
	switch {
	case o.Reset:
		flags |= originReset
	case o.Key != nil && o.Dedup != nil && bytes.Equal(o.Key, o.Dedup):
		flags |= originKeyIsDedup
	case o.Key != nil:
		b = append(b, '/')
		b = append(b, o.Key...)
	}
	n := len(b) - start
	if value == nil && !o.Reset {
		flags |= originNullValue
	}
	b = append(b, flags)
	b = binary.BigEndian.AppendUint32(b, uint32(n))
	return append(b, originMagic...)
}

// splitOrigin splits a repartition record's value into the input record's
// value and the fields of its trailer, without allocating; ok is false
// when the value does not end in a well-formed trailer. A trailer well
// formed but for flags this build does not know is not ok, with
// f.unknown set to its flags.
func splitOrigin(v []byte) (value []byte, f originFields, ok bool) {
	n := len(v)
	if n < originFooterLen || string(v[n-len(originMagic):]) != originMagic {
		return nil, f, false
	}
	flags := v[n-originFooterLen]
	l := binary.BigEndian.Uint32(v[n-originFooterLen+1:])
	if uint64(l) > uint64(n-originFooterLen) {
		return nil, f, false
	}
	start := n - originFooterLen - int(l)
	if f, ok = parseOrigin(v[start : n-originFooterLen]); !ok {
		return nil, f, false
	}
	if flags&^originKnown != 0 {
		return nil, originFields{unknown: flags}, false
	}
	if f.keyed && flags&originKeyIsDedup != 0 {
		return nil, f, false
	}
	if flags&originReset != 0 {
		// A reset carries nothing else: any other flag, a key or value
		// bytes make it malformed.
		if flags != originReset || f.keyed || start != 0 {
			return nil, originFields{}, false
		}
		f.reset = true
		return nil, f, true
	}
	f.keyIsDedup = flags&originKeyIsDedup != 0
	switch {
	case flags&originNullValue == 0:
		value = v[:start:start]
	case start != 0:
		return nil, f, false // a null value has no bytes
	}
	return value, f, true
}

// originFields are the parts of an origin text: the texts the source
// headers take (sub-slices of the value), their numbers, and the input
// record's key.
type originFields struct {
	text                     [3][]byte // topic, partition, offset
	partition, offset, count int64
	keyIsDedup               bool // the key is the repartition record's
	key                      []byte
	keyed                    bool
	reset                    bool // a reset record (flag 4)
	unknown                  byte // flags this build does not know (then nothing else is set)
}

// parseOrigin splits an origin text without allocating, in one pass;
// ok is false when it is not well formed.
func parseOrigin(v []byte) (f originFields, ok bool) {
	i := bytes.IndexByte(v, '/')
	if i <= 0 {
		return f, false
	}
	f.text[0] = v[:i]
	var n [3]int64
	for k := range n {
		start := i + 1
		j := start
		for ; j < len(v) && v[j] != '/'; j++ {
			d := v[j] - '0'
			if d > 9 {
				return f, false
			}
			n[k] = n[k]*10 + int64(d)
		}
		if j == start || j-start > 18 || (k < 2 && j == len(v)) {
			return f, false
		}
		if k < 2 {
			f.text[k+1] = v[start:j]
		}
		i = j
	}
	if i < len(v) { // the slash before the key
		f.key, f.keyed = v[i+1:], true // empty, never nil, for an empty key
	}
	f.partition, f.offset, f.count = n[0], n[1], n[2]
	if f.partition > math.MaxInt32 || f.count > math.MaxInt32 {
		return f, false
	}
	return f, true
}

// HeaderRepartition: hop 2 adds it to every output, naming the
// repartition record it was decided from, "<topic>/<partition>/<offset>".
// The restore's replay scan matches outputs to repartition offsets by it
// (the source headers name the input, which a repartitioned partition does
// not read). One header rather than three: each costs an encoding.
const HeaderRepartition = "dedup-repartition"

// origin is an input partition, as a repartitioned record's origin
// trailer names it, and the repartition partition count hop 1 routed it by
// (0: not named).
type origin struct {
	topic     string
	partition int32
	count     int32
}

// origins is a repartitioned partition's high-water marks: per input
// partition, the highest input offset it has taken. Hop 1 sends an input
// partition's records to each repartition partition in input order and,
// after a failure, sends again from its committed offset, after what
// landed: a record at or below the mark is such a re-send.
//
// That order holds under one routing only. After partitions are added to
// the repartition topic, a record hop 1 sends again may go to another
// partition than its first copy, one that took later records of the same
// input partition under the old count: its mark would drop the record,
// which that partition never took. So the marks are kept per partition
// count: a record routed by a new count is compared with marks of that
// count only (at worst it is taken twice, never lost).
type origins map[origin]int64

// originOf is what unwrap found of a record's origin.
type originOf struct {
	at     origin
	offset int64
	ok     bool // the record's value ends in a well-formed origin trailer
	// source is the values of the source headers its output carries:
	// the input topic, partition and offset, as the trailer spells them.
	source [3][]byte
	// dedup is the repartition record's key: the dedup key hop 1 took
	// from the input record (empty when it had none), not taken again.
	dedup []byte
	// control is a record that copies no input record: a reset (at and
	// offset name the input partition and where hop 1 reads on), or one
	// with trailer flags this build does not know (ok false).
	control control
}

// control is the kind of a repartition record that is not a copy.
type control uint8

const (
	controlNone    control = iota
	controlReset           // hop 1's input partition went back: lower its marks
	controlUnknown         // trailer flags of a newer hop 1: the partition stops at it
)

// unwrap turns a record read from the repartition topic back into the
// input record it copies, in place: its value without the origin trailer
// and its key the input record's again; its input coordinates are kept
// for the source headers its output carries (headerArena). A record
// without a well-formed trailer (not written by hop 1) keeps its key and
// value and has no origin.
func (w *Worker) unwrap(r *record) {
	m := &r.msg
	value, f, ok := splitOrigin(m.Value)
	if !ok {
		r.origin = originOf{}
		if f.unknown != 0 {
			r.origin.control = controlUnknown
			return
		}
		w.counts.unmarked++
		return
	}
	m.Value = value
	if string(f.text[0]) != w.originTopic { // compared without allocating
		w.originTopic = string(f.text[0])
	}
	r.origin = originOf{
		at:     origin{topic: w.originTopic, partition: int32(f.partition), count: int32(f.count)},
		offset: f.offset, ok: true, source: f.text, dedup: m.Key,
	}
	if f.reset {
		r.origin.ok, r.origin.control, r.origin.dedup = false, controlReset, nil
		return
	}
	switch {
	case f.keyIsDedup: // the repartition record's key is the input's
	case f.keyed:
		m.Key = f.key
	default:
		m.Key = nil
	}
}

// resent reports whether r is a re-send by hop 1 of an input record this
// partition already took, and otherwise raises its origin's mark.
func (w *Worker) resent(r *record) bool {
	if !r.origin.ok {
		return false
	}
	if hwm, ok := w.origins[r.origin.at]; ok && r.origin.offset <= hwm {
		return true
	}
	w.origins[r.origin.at] = r.origin.offset
	return false
}

// resetMarks lowers every mark of input partition at (whatever the
// partition count) to offset-1, the last offset of the old log hop 1 may
// have sent from below where it reads on: records of the new log, from
// offset on, are then taken. A mark already lower stays: a reset sent
// again (hop 1 failed or crashed before committing offset) names the
// same offset, or, when hop 1 sent records of the new log meanwhile, the
// new log's end, above them. With offset 0 the mark goes, nothing below
// being taken. It returns how many marks it lowered.
func (w *Worker) resetMarks(at origin, offset int64) int {
	n := 0
	for k, hwm := range w.origins {
		if k.topic != at.topic || k.partition != at.partition || hwm < offset {
			continue
		}
		n++
		if offset == 0 {
			delete(w.origins, k)
		} else {
			w.origins[k] = offset - 1
		}
	}
	return n
}

// controlRecord applies a reset: it lowers its input partition's marks
// and forwards nothing.
func (w *Worker) controlRecord(r *record) {
	w.counts.resets++
	n := w.resetMarks(r.origin.at, r.origin.offset)
	w.log.Warn("input partition reset by the re-key hop: its high-water marks lowered, the new log's records taken",
		"offset", r.msg.Offset, "input_topic", r.origin.at.topic, "input_partition", r.origin.at.partition,
		"input_offset", r.origin.offset, "marks_lowered", n)
}

// ErrUnknownRecord is what an *UnknownRecordError unwraps to.
var ErrUnknownRecord = errors.New("repartition record with origin trailer flags this build does not know")

// UnknownRecordError stops a partition at a repartition record whose
// origin trailer has flags this build does not know: written by a newer
// re-key hop (hop 2 is to be upgraded first). Neither forwarded with its
// trailer as its value nor skipped: the partition waits at it, its
// position not past it, until a hop 2 that knows the flags takes it.
type UnknownRecordError struct {
	Topic     string
	Partition int
	Offset    int64
	Flags     byte
}

func (e *UnknownRecordError) Error() string {
	return fmt.Sprintf("stop %s/%d at offset %d: origin trailer flags %#x: %v (written by a newer re-key hop: upgrade hop 2 first)",
		e.Topic, e.Partition, e.Offset, e.Flags, ErrUnknownRecord)
}

func (e *UnknownRecordError) Unwrap() error { return ErrUnknownRecord }

// unknownRecord stops the partition at r, a record of a newer hop 1:
// named at error, counted, nothing of it or after it decided.
func (w *Worker) unknownRecord(r *record) error {
	if c := w.d.Metrics.RepartitionUnknown; c != nil {
		c.Inc()
	}
	err := &UnknownRecordError{Topic: w.d.Topic, Partition: w.d.Partition, Offset: r.msg.Offset,
		Flags: r.msg.Value[len(r.msg.Value)-originFooterLen]}
	w.log.Error("repartition record with origin trailer flags this build does not know (written by a newer re-key hop): "+
		"the partition stops at it, nothing lost; upgrade hop 2 and it goes on",
		"offset", err.Offset, "flags", err.Flags)
	return err
}

// The high-water marks go into every checkpoint piece of a repartitioned
// partition, base and increment alike, as a section in front of the
// piece's own encoding (a pair's, with its legacy section, or a delta's):
//
//	magic "DHWM", version uint16, count uint32 (little endian)
//	count × (topic length uint16, topic, partition int32, partition count int32, offset int64), sorted
//	crc32c of everything before it, uint32
//
// In front, not behind: an increment is then decoded whole before its
// delta is applied, so a damaged section refuses the increment without
// having changed the pair. A piece without the section (a partition that
// is not repartitioned, and every piece written before the section
// existed) starts with the pair's or the delta's own magic.
const (
	originsMagic   = "DHWM"
	originsVersion = 1
	maxOrigins     = 1 << 20
)

// ErrOriginsFormat is a high-water-mark section that cannot be decoded.
var ErrOriginsFormat = errors.New("bad high-water-mark section")

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// withOrigins writes the section, then the piece.
type withOrigins struct {
	marks origins
	piece io.WriterTo
}

// WriteTo implements io.WriterTo.
func (s withOrigins) WriteTo(w io.Writer) (int64, error) {
	var b bytes.Buffer
	b.WriteString(originsMagic)
	b.Write(binary.LittleEndian.AppendUint16(nil, originsVersion))
	keys := slices.SortedFunc(maps.Keys(s.marks), compareOrigin)
	b.Write(binary.LittleEndian.AppendUint32(nil, uint32(len(keys))))
	for _, k := range keys {
		if len(k.topic) > math.MaxUint16 {
			return 0, fmt.Errorf("write high-water marks: topic name of %d bytes", len(k.topic))
		}
		b.Write(binary.LittleEndian.AppendUint16(nil, uint16(len(k.topic))))
		b.WriteString(k.topic)
		b.Write(binary.LittleEndian.AppendUint32(nil, uint32(k.partition)))
		b.Write(binary.LittleEndian.AppendUint32(nil, uint32(k.count)))
		b.Write(binary.LittleEndian.AppendUint64(nil, uint64(s.marks[k])))
	}
	b.Write(binary.LittleEndian.AppendUint32(nil, crc32.Checksum(b.Bytes(), castagnoli)))
	n, err := b.WriteTo(w)
	if err != nil {
		return n, err
	}
	m, err := s.piece.WriteTo(w)
	return n + m, err
}

// readOrigins reads a piece's high-water-mark section, if it has one, and
// returns the reader of the rest of the piece. marks is nil for a piece
// without the section.
func readOrigins(r io.Reader) (marks origins, rest io.Reader, err error) {
	br := bufio.NewReader(r)
	head, err := br.Peek(len(originsMagic))
	if err != nil || string(head) != originsMagic {
		// Too short for the section: the piece's own decoder says why.
		return nil, br, nil
	}
	crc := crc32.New(castagnoli)
	tr := io.TeeReader(br, crc)
	fail := func(what string, err error) (origins, io.Reader, error) {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, nil, fmt.Errorf("%w: %s: %w", ErrOriginsFormat, what, err)
	}
	var hdr [10]byte
	if _, err := io.ReadFull(tr, hdr[:]); err != nil {
		return fail("header", err)
	}
	if v := binary.LittleEndian.Uint16(hdr[4:]); v != originsVersion {
		return fail("header", fmt.Errorf("version %d (this build reads %d)", v, originsVersion))
	}
	count := binary.LittleEndian.Uint32(hdr[6:])
	if count > maxOrigins {
		return fail("count", fmt.Errorf("%d entries", count))
	}
	marks = make(origins, count)
	var entry [16]byte
	for i := range count {
		var l [2]byte
		if _, err := io.ReadFull(tr, l[:]); err != nil {
			return fail("entry "+strconv.Itoa(int(i)), err)
		}
		topic := make([]byte, binary.LittleEndian.Uint16(l[:]))
		if _, err := io.ReadFull(tr, topic); err != nil {
			return fail("entry "+strconv.Itoa(int(i)), err)
		}
		if _, err := io.ReadFull(tr, entry[:]); err != nil {
			return fail("entry "+strconv.Itoa(int(i)), err)
		}
		p, n := int32(binary.LittleEndian.Uint32(entry[:])), int32(binary.LittleEndian.Uint32(entry[4:]))
		off := int64(binary.LittleEndian.Uint64(entry[8:]))
		if p < 0 || n < 0 || off < 0 {
			return fail("entry "+strconv.Itoa(int(i)), fmt.Errorf("partition %d count %d offset %d", p, n, off))
		}
		marks[origin{topic: string(topic), partition: p, count: n}] = off
	}
	sum := crc.Sum32()
	var stored [4]byte
	if _, err := io.ReadFull(br, stored[:]); err != nil {
		return fail("checksum", err)
	}
	if got := binary.LittleEndian.Uint32(stored[:]); got != sum {
		return fail("checksum", fmt.Errorf("stored %08x, computed %08x", got, sum))
	}
	return marks, br, nil
}

// originsOf returns a copy of the worker's marks for a checkpoint (nil
// when the partition is not repartitioned).
func (w *Worker) originsOf() origins {
	if w.origins == nil {
		return nil
	}
	return maps.Clone(w.origins)
}

// String is the marks as text, for logs and tests.
func (o origins) String() string {
	keys := slices.SortedFunc(maps.Keys(o), compareOrigin)
	var b bytes.Buffer
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(' ')
		}
		fmt.Fprintf(&b, "%s/%d:%d", k.topic, k.partition, o[k])
		if k.count > 0 {
			fmt.Fprintf(&b, "(of %d)", k.count)
		}
	}
	return b.String()
}

func compareOrigin(a, b origin) int {
	return cmp.Or(cmp.Compare(a.topic, b.topic), cmp.Compare(a.partition, b.partition), cmp.Compare(a.count, b.count))
}
