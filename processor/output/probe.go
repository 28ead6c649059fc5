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

// Probe writes single outputs synchronously, each in a request of
// its own, through the same classifying, fenced transport as the writer:
// after the broker refused a batch of records, the partitions that had a
// record in it write their next outputs alone, so that a refusal names
// the record it is about (partition.Deps.Probe). Ambiguous outcomes are
// not retried, as in the writer.
type Probe struct {
	w         *kafka.Writer
	transport *kafka.Transport
}

// NewProbe returns a probe writer; Close it when the partitions that use
// it have stopped.
func (o *Output) NewProbe() *Probe {
	c := &o.c
	pw := &Probe{transport: cluster.NewTransport(c.Transport)}
	oc := newOutcomes(leader.Follow(pw.transport), c, func() {})
	// Its requests run beside the writer's, on other connections: their
	// acknowledgements may come in any order, so base offsets are compared
	// only along the writer's own (one request per partition at a time).
	oc.truncated = nil
	rt := newMetadataCache(oc)
	if c.Plain {
		oc.blind = true
	} else {
		fenceConns(pw.transport, c.Fence)
		rt.fence = c.Fence
	}
	pw.w = &kafka.Writer{
		Addr:            kafka.TCP(c.Brokers...),
		Topic:           c.Topic,
		Balancer:        kafka.BalancerFunc(routeChosen),
		RequiredAcks:    kafka.RequireAll,
		BatchSize:       1,
		BatchBytes:      o.Limit().Bytes,
		Compression:     c.Compression,
		MaxAttempts:     3,
		WriteBackoffMin: 50 * time.Millisecond, // as the writer's
		WriteBackoffMax: 500 * time.Millisecond,
		Transport:       rt,
		ErrorLogger:     cluster.Logger{Log: c.Log.With("component", "probe writer")},
	}
	return pw
}

// WriteMessages writes msgs (one) and waits for the acknowledgement; a
// refusal of the record for good wraps partition.ErrRecordRefused.
func (pw *Probe) WriteMessages(ctx context.Context, msgs ...kafka.Message) error {
	err := writeAlone(ctx, pw.w, msgs...)
	switch {
	case err == nil:
		return nil
	case RecordRefused(err) && (errors.Is(err, ErrRefused) || errors.Is(err, kafka.InvalidMessage)):
		return fmt.Errorf("%w: %w", partition.ErrRecordRefused, err)
	}
	return fmt.Errorf("write output alone: %w", err)
}

// Close drops the probe's connections.
func (pw *Probe) Close() {
	_ = pw.w.Close() // synchronous writes: nothing is left in it
	pw.transport.CloseIdleConnections()
}
