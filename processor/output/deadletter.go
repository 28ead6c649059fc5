package output

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"

	"dedup/internal/leader"
	"dedup/processor/cluster"
	"dedup/processor/partition"
)

// deadLetter writes the records the output refuses to DEAD_LETTER_TOPIC,
// one at a time, each waited for: refused records are rare, and the
// partition's commit must not pass one before it is acknowledged. Writes
// are at least once: kafka.Writer retries a failed request whatever became
// of it, and a partition restored after a failure writes the record again.
type deadLetter struct {
	w         *kafka.Writer
	transport *kafka.Transport
	limit     int64 // largest record (partition.MessageSize) the topic takes
	fence     func() error
}

// aloneTimeout bounds one single-record write (dead-letter, probe) with
// the writer's retries.
const aloneTimeout = 30 * time.Second

// writeAlone writes msgs (one record) with w, a synchronous writer of one
// record per request, and returns that record's own error.
func writeAlone(ctx context.Context, w *kafka.Writer, msgs ...kafka.Message) error {
	ctx, cancel := context.WithTimeout(ctx, aloneTimeout)
	defer cancel()
	err := w.WriteMessages(ctx, msgs...)
	var werrs kafka.WriteErrors
	if errors.As(err, &werrs) && len(werrs) == 1 {
		return werrs[0]
	}
	return err
}

// deadLetterLimit is the largest record the dead-letter topic takes: its
// max.message.bytes less the batch header, or 1 MiB (the broker default)
// until it is read. PRODUCE_BATCH_BYTES does not apply: records are there
// because they did not fit it.
func (o *Output) deadLetterLimit() int64 {
	if m := o.limits.deadLetter; m > 0 {
		return m - batchOverhead
	}
	return 1<<20 - batchOverhead
}

func (o *Output) newDeadLetter() *deadLetter {
	d := &deadLetter{transport: cluster.NewTransport(o.c.Transport), limit: o.deadLetterLimit(), fence: o.c.Fence}
	d.w = &kafka.Writer{
		Addr:         kafka.TCP(o.c.Brokers...),
		Topic:        o.c.DeadLetterTopic,
		Balancer:     &kafka.Hash{}, // a key's records stay in order
		RequiredAcks: kafka.RequireAll,
		BatchSize:    1, // one record per request: sent at once, refused alone
		BatchBytes:   d.limit,
		MaxAttempts:  3,
		Compression:  o.c.Compression,
		Transport:    leader.Follow(d.transport),
		ErrorLogger:  cluster.Logger{Log: o.c.Log.With("component", "dead-letter writer")},
	}
	if o.c.Plain {
		d.fence = nil
	}
	return d
}

// Write writes m and waits for its acknowledgement (partition.DeadLetter).
func (d *deadLetter) Write(ctx context.Context, m kafka.Message) error {
	if size := partition.MessageSize(&m); size > d.limit {
		return fmt.Errorf("%w: record of %d bytes exceeds its limit %d (max.message.bytes of topic %s less %d bytes of batch header)",
			partition.ErrDeadLetterRefused, size, d.limit, d.w.Topic, batchOverhead)
	}
	if d.fence != nil {
		if err := d.fence(); err != nil {
			return fmt.Errorf("dead-letter write not sent: %w", err)
		}
	}
	err := writeAlone(ctx, d.w, m)
	if err == nil {
		return nil
	}
	var code kafka.Error
	var tooLarge kafka.MessageTooLargeError
	if errors.As(err, &tooLarge) || (errors.As(err, &code) && codeKind(code) == OutputRefused) {
		return fmt.Errorf("%w: %s: %w", partition.ErrDeadLetterRefused, d.w.Topic, err)
	}
	return fmt.Errorf("write to dead-letter topic %s: %w", d.w.Topic, err)
}

func (d *deadLetter) close() {
	_ = d.w.Close() // synchronous writes: nothing is left in it
	d.transport.CloseIdleConnections()
}
