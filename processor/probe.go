package processor

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/segmentio/kafka-go"

	"dedup/internal/leader"
	"dedup/processor/partition"
)

// probeWriter writes single outputs synchronously, each in a request of
// its own, through the same classifying, fenced transport as the writer:
// after the broker refused a batch of records, the partitions that had a
// record in it write their next outputs alone, so that a refusal names
// the record it is about (partition.Deps.Probe). Ambiguous outcomes are
// not retried, as in the writer.
type probeWriter struct {
	w         *kafka.Writer
	transport *kafka.Transport
}

func (p *Processor) newProbe() *probeWriter {
	pw := &probeWriter{transport: newTransport(p.o)}
	oc := newOutcomes(leader.Follow(pw.transport), p.metrics.outputErrors, func() {})
	rt := newMetadataCache(oc)
	if p.plainProduce {
		oc.blind = true
	} else {
		fenceConns(pw.transport, p.fenceProduce)
		rt.fence = p.fenceProduce
	}
	o := p.writerOptions()
	pw.w = &kafka.Writer{
		Addr:            kafka.TCP(o.Brokers...),
		Topic:           o.OutputTopic,
		Balancer:        kafka.BalancerFunc(routeChosen),
		RequiredAcks:    kafka.RequireAll,
		BatchSize:       1,
		BatchBytes:      o.BatchBytes,
		Compression:     o.Compression,
		MaxAttempts:     3,
		WriteBackoffMin: 50 * time.Millisecond, // as the writer's
		WriteBackoffMax: 500 * time.Millisecond,
		Transport:       rt,
		ErrorLogger:     kafkaLogger{log: p.log.With("component", "probe writer")},
	}
	return pw
}

// WriteMessages writes msgs (one) and waits for the acknowledgement; a
// refusal of the record for good wraps partition.ErrRecordRefused.
func (pw *probeWriter) WriteMessages(ctx context.Context, msgs ...kafka.Message) error {
	err := writeAlone(ctx, pw.w, msgs...)
	switch {
	case err == nil:
		return nil
	case recordRefused(err) && (errors.Is(err, ErrRefused) || errors.Is(err, kafka.InvalidMessage)):
		return fmt.Errorf("%w: %w", partition.ErrRecordRefused, err)
	}
	return fmt.Errorf("write output alone: %w", err)
}

func (pw *probeWriter) close() {
	_ = pw.w.Close() // synchronous writes: nothing is left in it
	pw.transport.CloseIdleConnections()
}
