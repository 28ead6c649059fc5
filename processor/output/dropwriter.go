package output

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"sync"
	"syscall"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	produceAPI "github.com/segmentio/kafka-go/protocol/produce"
	rawproduceAPI "github.com/segmentio/kafka-go/protocol/rawproduce"

	"dedup/processor/cluster"
	"dedup/processor/partition"
)

// dropWriter writes DROPPED_TOPIC. It batches, lingers, sends each drop
// partition's batches one at a time in order, retries and completes as
// kafka.Writer does with the output writer's settings, but encodes each
// drop into its partition's open batch (rawBatch's format) when the worker
// hands it over: the drop's key, value and headers are still in the
// worker's cache then, where kafka.Writer copies the message, asks the
// metadata, balances and sizes it, and the encoding reads it all back
// cold in another goroutine. The requests go through the drop topic's
// metadata cache like kafka.Writer's (fence, abort, classified outcomes).
type dropWriter struct {
	topic      string
	addr       net.Addr
	rt         kafka.RoundTripper
	batchSize  int
	BatchBytes int64 // as kafka.Writer.BatchBytes: ApplyLimits compares it
	linger     time.Duration
	attempts   int
	backoffMin time.Duration
	backoffMax time.Duration
	timeout    time.Duration // a produce request's, as kafka.Writer's WriteTimeout
	compress   kafka.Compression
	completion func([]kafka.Message, error)
	errLog     kafka.Logger
	// truncated is told each acknowledged batch's last offset, for the
	// drop topic's end offsets read every few seconds (nil: not checked).
	truncated *cluster.Truncations

	// mu is held to read while WriteMessages queues, to write by Close:
	// once closed, nothing more is queued.
	mu      sync.RWMutex
	closed  bool
	partsMu sync.Mutex
	parts   []*dropPartition // by partition
	sends   sync.WaitGroup
}

// dropPartition is one drop partition's open batch and its queue of
// closed batches, sent in order by at most one goroutine.
type dropPartition struct {
	w       *dropWriter
	part    int32
	mu      sync.Mutex
	open    *dropBatch
	queue   []*dropBatch
	sending bool
	settle  []kafka.Message // the sender's scratch for completion
}

// dropBatch is a batch being filled or sent: the encoded records behind
// the batch header (rawBatch), and each record's ack slot.
type dropBatch struct {
	rb          *rawBatch
	n           int
	bytes       int64 // partition.MessageSize of its messages
	first, last int64 // first and largest timestamp (ms)
	slots       []any // the records' WriterData
	timer       *time.Timer
}

// kafka.Writer's default WriteTimeout.
const dropWriteTimeout = 10 * time.Second

func newDropWriter(c *Config, batchBytes int64, rt kafka.RoundTripper, completion func([]kafka.Message, error)) *dropWriter {
	// kafka.Writer's defaults for settings left zero.
	or := func(v, def int64) int64 {
		if v > 0 {
			return v
		}
		return def
	}
	return &dropWriter{
		topic: c.DroppedTopic, addr: kafka.TCP(c.Brokers...), rt: rt,
		batchSize: int(or(int64(c.BatchSize), 100)), BatchBytes: or(batchBytes, 1<<20),
		linger:   time.Duration(or(int64(c.BatchTimeout), int64(time.Second))),
		attempts: 3, backoffMin: 50 * time.Millisecond, backoffMax: 500 * time.Millisecond, timeout: dropWriteTimeout,
		compress:   c.Compression,
		completion: completion, errLog: cluster.Logger{Log: c.Log.With("component", "drop writer")},
		truncated: c.droppedTruncated,
	}
}

// WriteMessages queues msgs, each to its Partition, and returns without
// waiting: the completion settles them. A record too large for a batch
// fails the call as kafka.Writer's does (kafka.MessageTooLargeError),
// before any of msgs is queued.
func (w *dropWriter) WriteMessages(_ context.Context, msgs ...kafka.Message) error {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.closed {
		return io.ErrClosedPipe
	}
	for i := range msgs {
		if partition.MessageSize(&msgs[i]) > w.BatchBytes {
			return kafka.MessageTooLargeError{Message: msgs[i], Remaining: msgs[i+1:]}
		}
	}
	var p *dropPartition
	for i := range msgs {
		m := &msgs[i]
		if p == nil || p.part != int32(m.Partition) {
			if p != nil {
				p.mu.Unlock()
			}
			var err error
			if p, err = w.partition(m.Partition); err != nil {
				return err
			}
			p.mu.Lock()
		}
		p.add(m)
	}
	if p != nil {
		p.mu.Unlock()
	}
	return nil
}

func (w *dropWriter) partition(part int) (*dropPartition, error) {
	w.partsMu.Lock()
	defer w.partsMu.Unlock()
	if part < 0 {
		return nil, fmt.Errorf("write drops: partition %d", part)
	}
	for len(w.parts) <= part {
		w.parts = append(w.parts, nil)
	}
	if w.parts[part] == nil {
		w.parts[part] = &dropPartition{w: w, part: int32(part)}
	}
	return w.parts[part], nil
}

// add encodes m into the open batch, closing it first when m would take
// it past the batch bytes, and after when it is full. p.mu is held.
func (p *dropPartition) add(m *kafka.Message) {
	w := p.w
	t := int64(0)
	if !m.Time.IsZero() {
		t = m.Time.UnixNano() / int64(time.Millisecond)
	}
	if t == 0 { // as kafka-go: no timestamp is the time of encoding
		t = time.Now().UnixNano() / int64(time.Millisecond)
	}
	// A batch is held against the batch bytes by kafka-go's measure of
	// its messages, as kafka.Writer holds it, the one the partitions check
	// drops against (Drops.Limit): at least each record's encoded size.
	hs := headersLen(m.Headers) // summed once for both measures
	size := messageSize(m, hs)
	b := p.open
	if b != nil && b.bytes+size > w.BatchBytes {
		p.closeLocked()
		b = nil
	}
	if b == nil {
		b = &dropBatch{rb: rawBatches.Get().(*rawBatch), slots: (*dropSlots.Get().(*[]any))[:0]}
		b.rb.b = appendBatchHeader(b.rb.b[:0])
		b.first, b.last = t, t
		p.open = b
		b.timer = time.AfterFunc(w.linger, func() { p.expire(b) })
	}
	delta, n := t-b.first, int64(b.n)
	b.rb.b = appendRecord(b.rb.b, m, recordBodyLen(m, hs, delta, n), delta, n)
	b.n++
	b.bytes += size
	b.last = max(b.last, t)
	b.slots = append(b.slots, m.WriterData)
	if b.n >= w.batchSize || b.bytes >= w.BatchBytes {
		p.closeLocked()
	}
}

// expire closes b when its linger ends while it is still open.
func (p *dropPartition) expire(b *dropBatch) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.open == b {
		p.closeLocked()
	}
}

// closeLocked queues the open batch for sending.
func (p *dropPartition) closeLocked() {
	b := p.open
	p.open = nil
	b.timer.Stop()
	p.queue = append(p.queue, b)
	if !p.sending {
		p.sending = true
		p.w.sends.Add(1)
		go p.run()
	}
}

// run sends the queued batches in order until none is left.
func (p *dropPartition) run() {
	defer p.w.sends.Done()
	for {
		p.mu.Lock()
		if len(p.queue) == 0 {
			p.sending = false
			p.mu.Unlock()
			return
		}
		b := p.queue[0]
		p.queue[0] = nil
		p.queue = p.queue[1:]
		p.mu.Unlock()
		p.send(b)
	}
}

// send writes b and completes its records.
func (p *dropPartition) send(b *dropBatch) {
	w := p.w
	err := w.compressBatch(b)
	base := int64(-1)
	if err == nil {
		finishBatch(b.rb.b, b.n, b.first, b.last)
		base, err = w.write(p.part, b.rb)
	}
	if err == nil {
		b.rb.release()
		if base >= 0 {
			w.truncated.Written(p.part, base+int64(b.n)-1)
		}
	} // else the transport's connection may still be reading it
	b.rb = nil
	ms := p.settle[:0]
	for _, s := range b.slots {
		ms = append(ms, kafka.Message{Topic: w.topic, Partition: int(p.part), WriterData: s})
	}
	w.completion(ms, err)
	clear(ms)
	p.settle = ms[:0]
	clear(b.slots)
	dropSlots.Put(&b.slots)
}

// dropSlots are the batches' slices of ack slots, reused.
var dropSlots = sync.Pool{New: func() any { return new([]any) }}

// write sends rb to partition part, retrying as kafka.Writer retries (a
// temporary error or a transient network one: the classifying transport
// hands only failures that appended nothing as such).
func (w *dropWriter) write(part int32, rb *rawBatch) (base int64, err error) {
	for attempt := range w.attempts {
		if attempt > 0 {
			time.Sleep(min(time.Duration(attempt*attempt)*w.backoffMin, w.backoffMax)) // kafka-go's backoff
		}
		rb.off = 0
		if base, err = w.produce(part, rb); err == nil {
			return base, nil
		}
		w.errLog.Printf("error writing messages to %s (partition %d, attempt %d): %s", w.topic, part, attempt, err)
		if !retriable(err) {
			break
		}
	}
	return -1, err
}

// compressBatch compresses the records of b with the writer's codec, as
// kafka-go compresses a batch (the records behind the header, the
// attributes naming the codec).
func (w *dropWriter) compressBatch(b *dropBatch) error {
	codec := w.compress.Codec()
	if codec == nil {
		return nil
	}
	out := rawBatches.Get().(*rawBatch)
	buf := bytes.NewBuffer(append(out.b[:0], b.rb.b[:batchRecordsAt]...))
	cw := codec.NewWriter(buf)
	_, err := cw.Write(b.rb.b[batchRecordsAt:])
	if cerr := cw.Close(); err == nil {
		err = cerr
	}
	b.rb.release()
	out.b, b.rb = buf.Bytes(), out
	if err != nil {
		return fmt.Errorf("compress drops: %w", err)
	}
	binary.BigEndian.PutUint16(out.b[batchAttributesAt:], uint16(w.compress)&7)
	return nil
}

// produce sends rb to part once and returns the batch's base offset (-1
// when the answer gives none).
func (w *dropWriter) produce(part int32, rb *rawBatch) (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), w.timeout)
	defer cancel()
	req := &rawproduceAPI.Request{Acks: int16(kafka.RequireAll), Timeout: int32(w.timeout / time.Millisecond),
		Topics: []rawproduceAPI.RequestTopic{{Topic: w.topic,
			Partitions: []rawproduceAPI.RequestPartition{{Partition: part, RecordSet: protocol.RawRecordSet{Reader: rb}}}}}}
	res, err := w.rt.RoundTrip(ctx, w.addr, req)
	if errors.Is(err, protocol.ErrNoTopic) {
		// The topic is gone: what kafka.Writer reports of it before
		// sending (its partition count), so that Refused holds.
		err = fmt.Errorf("%w: %w", kafka.UnknownTopicOrPartition, err)
	}
	if err != nil {
		return -1, fmt.Errorf("kafka.(*Client).Produce: %w", err)
	}
	if r, ok := res.(*produceAPI.Response); ok {
		for _, t := range r.Topics {
			for _, p := range t.Partitions {
				if t.Topic == w.topic && p.Partition == part {
					return p.BaseOffset, nil
				}
			}
		}
	}
	return -1, nil
}

// retriable is kafka.Writer's test of a failed batch to be sent again.
func retriable(err error) bool {
	var temp interface{ Temporary() bool }
	if errors.As(err, &temp) && temp.Temporary() {
		return true
	}
	return errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}

// Close sends the open batches and waits for every batch to complete.
func (w *dropWriter) Close() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	w.mu.Unlock()
	w.partsMu.Lock()
	parts := w.parts
	w.partsMu.Unlock()
	for _, p := range parts {
		if p == nil {
			continue
		}
		p.mu.Lock()
		if p.open != nil {
			p.closeLocked()
		}
		p.mu.Unlock()
	}
	w.sends.Wait()
	return nil
}

// appendBatchHeader appends the size and batch header of an uncompressed
// v2 record batch, the fields finishBatch fills left zero.
func appendBatchHeader(b []byte) []byte {
	at := len(b)
	b = append(b, make([]byte, batchRecordsAt)...)
	h := b[at:]
	be := binary.BigEndian
	be.PutUint32(h[batchLengthAt+4:], ^uint32(0)) // partition leader epoch -1
	h[batchLengthAt+8] = 2                        // magic
	be.PutUint64(h[batchFirstTimeAt+16:], ^uint64(0))
	be.PutUint16(h[batchFirstTimeAt+24:], ^uint16(0))
	be.PutUint32(h[batchFirstTimeAt+26:], ^uint32(0))
	return b
}

// finishBatch fills the header of the batch b holds: n records, the first
// and largest timestamps, sizes and checksum.
func finishBatch(b []byte, n int, first, maxTime int64) {
	be := binary.BigEndian
	be.PutUint32(b, uint32(len(b)-4))
	be.PutUint32(b[batchLengthAt:], uint32(len(b)-4-12))
	be.PutUint32(b[batchLastDeltaAt:], uint32(n-1))
	be.PutUint64(b[batchFirstTimeAt:], uint64(first))
	be.PutUint64(b[batchMaxTimeAt:], uint64(maxTime))
	be.PutUint32(b[batchCountAt:], uint32(n))
	be.PutUint32(b[batchCRCAt:], crc32.Checksum(b[batchAttributesAt:], castagnoli))
}

func recordBodyLen(m *kafka.Message, headers int, delta, n int64) int {
	return 1 + varintLen(delta) + varintLen(n) + nullBytesLen(m.Key) + nullBytesLen(m.Value) + varintLen(int64(len(m.Headers))) + headers
}

// headersLen is the encoded size of the headers hs, a record's and a
// message's alike.
func headersLen(hs []kafka.Header) int {
	l := 0
	for i := range hs {
		l += varintLen(int64(len(hs[i].Key))) + len(hs[i].Key) + nullBytesLen(hs[i].Value)
	}
	return l
}

// messageSize is partition.MessageSize of m, whose headers' encoded size
// is headers (TestDropMessageSize).
func messageSize(m *kafka.Message, headers int) int64 {
	return int64(22 + len(m.Key) + len(m.Value) + varintLen(int64(len(m.Headers))) + headers)
}

// appendRecord appends m as a v2 record of body bytes after its length
// (recordBodyLen) at timestamp delta delta and offset delta n.
func appendRecord(b []byte, m *kafka.Message, body int, delta, n int64) []byte {
	b = binary.AppendVarint(b, int64(body))
	b = append(b, 0) // record attributes
	b = binary.AppendVarint(b, delta)
	b = binary.AppendVarint(b, n)
	b = appendNullBytes(b, m.Key)
	b = appendNullBytes(b, m.Value)
	b = binary.AppendVarint(b, int64(len(m.Headers)))
	for i := range m.Headers {
		h := &m.Headers[i]
		b = binary.AppendVarint(b, int64(len(h.Key)))
		b = append(b, h.Key...)
		b = appendNullBytes(b, h.Value)
	}
	return b
}

func appendNullBytes(b, v []byte) []byte {
	if v == nil {
		return binary.AppendVarint(b, -1)
	}
	return append(binary.AppendVarint(b, int64(len(v))), v...)
}
