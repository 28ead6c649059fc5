package partition

import (
	"context"
	"errors"
	"fmt"
	"math/bits"
	"time"

	"github.com/segmentio/kafka-go"
)

// HeaderError names why a record went to the dead-letter topic.
const HeaderError = "dedup-error"

// ErrDeadLetterRefused is what DeadLetter.Write returns (wrapped) when the
// dead-letter topic refuses a record for good.
var ErrDeadLetterRefused = errors.New("dead-letter topic refused the record")

// ErrRecordRefused is what Deps.Probe returns (wrapped) when the output
// refuses the lone record for good.
var ErrRecordRefused = errors.New("output refused the record")

// Limit is the largest output record the writer can deliver, in the size
// kafka.Writer compares with its BatchBytes (MessageSize), and what sets it.
type Limit struct {
	Bytes   int64
	Setting string // e.g. "PRODUCE_BATCH_BYTES=1048576"
	// KeyRequired, when set, names the setting that makes the output
	// refuse a record without a key ("cleanup.policy=compact of topic
	// X"): such a record is refused before it is written.
	KeyRequired string
}

// DeadLetter takes the records the output cannot take.
type DeadLetter interface {
	// Write writes m and returns once it is acknowledged. An error wrapping
	// ErrDeadLetterRefused: the dead-letter topic refuses m for good; any
	// other error: m may not be written.
	Write(ctx context.Context, m kafka.Message) error
}

// refuseLogEvery bounds the refused-record lines of one partition: a flood
// of refused records logs one line per interval, with how many were
// refused since the previous one (each is counted).
const refuseLogEvery = 2 * time.Second

// refusals are a worker's refused records since its last line.
type refusals struct {
	loggedAt time.Time
	unlogged int
}

// MessageSize is kafka-go's size of m, the one kafka.Writer holds against
// BatchBytes (a MessageTooLargeError above it) and sums into its batches.
// It is at least a v2 record's encoded size in practice, so a batch within
// a topic's max.message.bytes less the 61-byte batch header fits it.
func MessageSize(m *kafka.Message) int64 {
	n := int64(4+1+1+8) + 4 + int64(len(m.Key)) + 4 + int64(len(m.Value)) + varintLen(int64(len(m.Headers)))
	for i := range m.Headers {
		n += headerSize(m.Headers[i].Key, len(m.Headers[i].Value))
	}
	return n
}

func headerSize(key string, valueLen int) int64 {
	return varintLen(int64(len(key))) + int64(len(key)) + varintLen(int64(valueLen)) + int64(valueLen)
}

// varintLen is the length of i as a zig-zag varint.
func varintLen(i int64) int64 {
	u := uint64((i << 1) ^ (i >> 63))
	return int64(bits.Len64(u|1)+6) / 7
}

// offsetDigits is the length of off's decimal text (off >= 0).
func offsetDigits(off int64) int {
	n := 1
	for p := int64(10); n < 19 && off >= p; p *= 10 {
		n++
	}
	return n
}

// outputSize is MessageSize of r's output: its message with the headers
// the worker adds (headerArena.appendAdded). Computed without building the
// output, so that the check costs the hot path a few additions per record.
func (w *Worker) outputSize(r *record) int64 {
	m, source := &r.msg, r.source()
	n := int64(4+1+1+8) + 4 + int64(len(m.Key)) + 4 + int64(len(m.Value)) + varintLen(int64(len(m.Headers)+w.arena.added(source)))
	for i := range m.Headers {
		n += headerSize(m.Headers[i].Key, len(m.Headers[i].Value))
	}
	return n + w.arena.addedSize(source, w.srcTop, w.srcPart, m.Offset)
}

// tooLarge is the reason a record of size bytes is refused.
func (w *Worker) tooLarge(size int64) string {
	return fmt.Sprintf("record of %d bytes exceeds output limit %d (%s)", size, w.d.Limit.Bytes, w.d.Limit.Setting)
}

// keyless is the reason a record without a key is refused.
func (w *Worker) keyless() string {
	return "record without a key refused by a compacted output (" + w.d.Limit.KeyRequired + ")"
}

// outputRefused tells the owner that an output is refused before it is
// written.
func (w *Worker) outputRefused() {
	if w.d.Owner != nil {
		w.d.Owner.OutputRefused()
	}
}

// refuse settles a record the output cannot take: it is never forwarded.
// With a dead-letter topic it goes there, with why in its dedup-error
// header, and the worker waits for the acknowledgement, so no commit passes
// it before; without one it is logged and counted, and the partition moves
// on.
func (w *Worker) refuse(r *record, size int64, why string) error {
	m := &r.msg
	if w.d.DeadLetter == nil {
		w.counts.refused++
		w.logRefused(m, size, "record refused by the output: skipped, not forwarded (no DEAD_LETTER_TOPIC)", why, nil)
		return w.flushIfCaughtUp()
	}
	err := w.d.DeadLetter.Write(context.Background(), w.copyOut(r, kafka.Header{Key: HeaderError, Value: []byte(why)}))
	switch {
	case err == nil:
		w.counts.deadLettered++
		w.log.Debug("record dead-lettered", "offset", m.Offset, "bytes", size, "err", why)
	case errors.Is(err, ErrDeadLetterRefused):
		w.counts.refused++
		w.logRefused(m, size, "record refused by the output and the dead-letter topic: skipped, not forwarded", why, err)
	default:
		// Not known to be written: nothing at or after it is committed, and
		// the partition's next restore writes it again (at least once).
		w.acks.fail(m.Offset, fmt.Errorf("dead-letter: %w", err))
		return w.acks.failed()
	}
	return w.flushIfCaughtUp()
}

// copyOut is r as the stage writes it outside the hot path (to the
// dead-letter topic, or alone after a refusal): its key, value and headers,
// the headers process adds and extra, stamped as process stamps its
// outputs.
func (w *Worker) copyOut(r *record, extra ...kafka.Header) kafka.Message {
	m := &r.msg
	source := r.source()
	hdrs := make([]kafka.Header, 0, len(m.Headers)+w.arena.added(source)+len(extra))
	hdrs = append(hdrs, m.Headers...)
	hdrs = w.arena.appendAdded(hdrs, source, w.srcTop, w.srcPart, w.arena.text(nil, m.Offset))
	hdrs = append(hdrs, extra...)
	out := m.Time
	if out.IsZero() {
		out = noTimestamp
	}
	return kafka.Message{Key: m.Key, Value: m.Value, Headers: hdrs, Time: out}
}

// logRefused logs a refused record: at most one line per refuseLogEvery,
// naming the latest and how many went unlogged before it.
func (w *Worker) logRefused(m *kafka.Message, size int64, msg, why string, err error) {
	now := time.Now()
	if now.Sub(w.refused.loggedAt) < refuseLogEvery {
		w.refused.unlogged++
		return
	}
	// The worker's logger names the topic and partition.
	args := []any{"offset", m.Offset, "bytes", size,
		"limit", w.d.Limit.Bytes, "setting", w.d.Limit.Setting, "why", why}
	if w.refused.unlogged > 0 {
		args = append(args, "refused_unlogged", w.refused.unlogged)
	}
	if err != nil {
		args = append(args, "err", err)
	}
	w.log.Warn(msg, args...)
	w.refused = refusals{loggedAt: now}
}

// probe writes the output of m alone and waits for it, once every output
// before it is acknowledged (so that the partition's outputs stay in
// order). A refusal of the lone record names it: it is refused as a too
// large one is, with the broker's answer as the reason.
func (w *Worker) probe(r *record, outcome *uint64, ts time.Time, size int64) error {
	m := &r.msg
	w.isolate--
	if err := w.flush(); err != nil {
		return err
	}
	if err := w.acks.waitAcknowledged(context.Background(), m.Offset); err != nil {
		return err
	}
	out := w.copyOut(r)
	out.Partition = w.d.Route.partition(w.d.Partition, m.Key)
	err := w.d.Probe.WriteMessages(context.Background(), out)
	switch {
	case err == nil:
		*outcome++
		if m.Time.IsZero() {
			w.counts.rewritten++
		}
		return w.flushIfCaughtUp()
	case errors.Is(err, ErrRecordRefused):
		return w.refuse(r, size, err.Error())
	}
	// Not known to be written: as a failed output, nothing at or after it
	// is committed and the restore's replay scan finds it if it landed.
	w.acks.fail(m.Offset, err)
	return w.acks.failed()
}
