package output

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/segmentio/kafka-go/protocol"
	produceAPI "github.com/segmentio/kafka-go/protocol/produce"
	rawproduceAPI "github.com/segmentio/kafka-go/protocol/rawproduce"
)

// The writer's produce requests are encoded here, not by kafka-go:
// kafka-go renders a record batch through an io.Writer chain, four small
// writes per header (each through two interface calls and a page copy),
// and the outputs carry three headers of their own, the drops seven, so
// that chain was the larger part of what a written record costs the
// stage. rawBatch appends the same batch to one buffer and hands it to the
// transport as a raw record set (protocol/rawproduce), byte for byte what
// kafka-go would have sent (TestRawBatchAsKafkaGo): the broker, the fence
// (fencedConn frames requests by their bytes) and the classification of
// the outcome see no difference.

// rawBatch is one produce request's record batch as rawProduce encoded it.
type rawBatch struct {
	b   []byte
	off int // read up to here (Read, WriteTo)
}

var rawBatches = sync.Pool{New: func() any { return new(rawBatch) }}

// release returns the buffer for reuse. Only once the request was written
// whole: a round trip that failed may have left the transport's
// connection still copying it.
func (rb *rawBatch) release() {
	if cap(rb.b) > 4<<20 {
		return // a batch far above the stage's batch bytes: not kept
	}
	rb.b, rb.off = rb.b[:0], 0
	rawBatches.Put(rb)
}

// castagnoli is the record batch checksum's table.
var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errRecordSize is a record whose Bytes yielded fewer bytes than its Len.
var errRecordSize = errors.New("record bytes shorter than their length")

// rawProduce returns pr as a raw produce request with its records
// encoded, and the batch to release once it is written. ok is false when
// pr is not what kafka.Writer sends uncompressed (one topic, one
// partition, record set version 2 or unset, no compression): pr is then
// untouched, for kafka-go to encode. Its records are read (the reader is
// spent) whenever ok is true.
func rawProduce(pr *produceAPI.Request) (raw *rawproduceAPI.Request, rb *rawBatch, ok bool, err error) {
	if len(pr.Topics) != 1 || len(pr.Topics[0].Partitions) != 1 {
		return nil, nil, false, nil
	}
	p := &pr.Topics[0].Partitions[0]
	rs := &p.RecordSet
	if rs.Records == nil || rs.Attributes != 0 || (rs.Version != 0 && rs.Version != 2) {
		return nil, nil, false, nil
	}
	rb = rawBatches.Get().(*rawBatch)
	n, err := rb.encode(rs.Records)
	if err != nil || n == 0 {
		// No records: kafka-go's own encoding of the spent reader answers
		// as it would have (ErrNoRecord, nothing sent).
		rb.release()
		return nil, nil, false, err
	}
	return &rawproduceAPI.Request{
		TransactionalID: pr.TransactionalID,
		Acks:            pr.Acks,
		Timeout:         pr.Timeout,
		Topics: []rawproduceAPI.RequestTopic{{
			Topic: pr.Topics[0].Topic,
			Partitions: []rawproduceAPI.RequestPartition{{
				Partition: p.Partition,
				RecordSet: protocol.RawRecordSet{Reader: rb},
			}},
		}},
	}, rb, true, nil
}

// Read makes the batch the raw record set's reader; the transport copies
// it with WriteTo, in one write to the request's buffer.
func (rb *rawBatch) Read(p []byte) (int, error) {
	if rb.off == len(rb.b) {
		return 0, io.EOF
	}
	n := copy(p, rb.b[rb.off:])
	rb.off += n
	return n, nil
}

func (rb *rawBatch) WriteTo(w io.Writer) (int64, error) {
	n, err := w.Write(rb.b[rb.off:])
	rb.off += n
	return int64(n), err
}

// Offsets in a v2 record batch, after the 4-byte size that precedes it in
// a produce request (protocol.RecordSet.WriteTo's layout).
const (
	batchLengthAt     = 4 + 8
	batchCRCAt        = 4 + 17
	batchAttributesAt = 4 + 21
	batchLastDeltaAt  = 4 + 23
	batchFirstTimeAt  = 4 + 27
	batchMaxTimeAt    = 4 + 35
	batchCountAt      = 4 + 57
	batchRecordsAt    = 4 + 61
)

// encode appends the records of r to rb as one uncompressed v2 record
// batch, preceded by its size, as protocol.RecordSet.WriteTo writes it,
// and returns how many records it holds.
func (rb *rawBatch) encode(r protocol.RecordReader) (int, error) {
	b := appendBatchHeader(rb.b[:0])
	var (
		now, first, maxTime int64
		n                   int
	)
	for ; ; n++ {
		rec, err := r.ReadRecord()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			rb.b = b[:0]
			return 0, err
		}
		t := int64(0)
		if !rec.Time.IsZero() {
			t = rec.Time.UnixNano() / int64(time.Millisecond)
		}
		if t == 0 { // as kafka-go: no timestamp is the time of encoding
			if now == 0 {
				now = time.Now().UnixNano() / int64(time.Millisecond)
			}
			t = now
		}
		if n == 0 {
			first = t
		}
		maxTime = max(maxTime, t)
		delta := t - first
		length := 1 + varintLen(delta) + varintLen(int64(n)) + bytesLen(rec.Key) + bytesLen(rec.Value) +
			varintLen(int64(len(rec.Headers)))
		for _, h := range rec.Headers {
			length += varintLen(int64(len(h.Key))) + len(h.Key) + nullBytesLen(h.Value)
		}
		b = binary.AppendVarint(b, int64(length))
		b = append(b, 0) // record attributes
		b = binary.AppendVarint(b, delta)
		b = binary.AppendVarint(b, int64(n))
		b, err = appendBytes(b, rec.Key)
		if err == nil {
			b, err = appendBytes(b, rec.Value)
		}
		if err != nil {
			rb.b = b[:0]
			return 0, err
		}
		b = binary.AppendVarint(b, int64(len(rec.Headers)))
		for _, h := range rec.Headers {
			b = binary.AppendVarint(b, int64(len(h.Key)))
			b = append(b, h.Key...)
			if h.Value == nil {
				b = binary.AppendVarint(b, -1)
			} else {
				b = binary.AppendVarint(b, int64(len(h.Value)))
				b = append(b, h.Value...)
			}
		}
	}
	rb.b = b
	if n == 0 {
		return 0, nil
	}
	finishBatch(b, n, first, maxTime)
	return n, nil
}

// appendBytes appends v as a record's key or value: its length as a
// varint (-1: null), then its bytes. v is closed, as kafka-go closes it.
func appendBytes(b []byte, v protocol.Bytes) ([]byte, error) {
	if v == nil {
		return binary.AppendVarint(b, -1), nil
	}
	defer v.Close()
	n := v.Len()
	b = binary.AppendVarint(b, int64(n))
	at := len(b)
	b = slices.Grow(b, n)[:at+n]
	// One Read takes all of kafka.Writer's bytes.Reader; ReadFull only
	// for another Bytes.
	if m, err := v.Read(b[at:]); m < n {
		if _, err = io.ReadFull(v, b[at+m:]); err != nil {
			return b, fmt.Errorf("%w: %w", errRecordSize, err)
		}
	}
	return b, nil
}

func varintLen(v int64) int { return uvarintLen(uint64(v<<1) ^ uint64(v>>63)) }

func uvarintLen(v uint64) int {
	n := 1
	for ; v >= 0x80; v >>= 7 {
		n++
	}
	return n
}

func bytesLen(v protocol.Bytes) int {
	if v == nil {
		return varintLen(-1)
	}
	n := v.Len()
	return varintLen(int64(n)) + n
}

func nullBytesLen(v []byte) int {
	if v == nil {
		return varintLen(-1)
	}
	return varintLen(int64(len(v))) + len(v)
}
