package processor

import (
	"context"
	"net"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"
	metadataAPI "github.com/segmentio/kafka-go/protocol/metadata"
)

// metadataCache is the writer's transport. kafka.Writer.WriteMessages asks
// the transport for the topic's metadata once per message (to count
// partitions), and kafka.Transport answers each ask by filtering its cached
// metadata into a freshly allocated response: in profiles that was the
// largest single cost of a consume→produce loop on an in-process broker,
// more than decoding the records. This keeps the last answer for one
// single-topic request shape for metadataTTL and hands it out read-only
// (the writer only reads it); everything else goes to the transport.
type metadataCache struct {
	next kafka.RoundTripper
	last atomic.Pointer[cachedMetadata]
}

// metadataTTL bounds how late the writer sees partitions added to the
// output topic (kafka.Transport's own cache keeps metadata for 6s).
const metadataTTL = time.Second

type cachedMetadata struct {
	topic   string
	auto    bool
	res     *metadataAPI.Response
	expires time.Time
}

func newMetadataCache(next kafka.RoundTripper) *metadataCache {
	if next == nil {
		next = kafka.DefaultTransport
	}
	return &metadataCache{next: next}
}

func (c *metadataCache) RoundTrip(ctx context.Context, addr net.Addr, req kafka.Request) (kafka.Response, error) {
	m, ok := req.(*metadataAPI.Request)
	if !ok || len(m.TopicNames) != 1 {
		return c.next.RoundTrip(ctx, addr, req)
	}
	if e := c.last.Load(); e != nil && e.topic == m.TopicNames[0] && e.auto == m.AllowAutoTopicCreation && time.Now().Before(e.expires) {
		return e.res, nil
	}
	res, err := c.next.RoundTrip(ctx, addr, req)
	if err != nil {
		return nil, err
	}
	if r, ok := res.(*metadataAPI.Response); ok {
		c.last.Store(&cachedMetadata{topic: m.TopicNames[0], auto: m.AllowAutoTopicCreation, res: r, expires: time.Now().Add(metadataTTL)})
	}
	return res, nil
}

// newWriter returns the stage's one asynchronous writer, shared by all
// partitions.
func newWriter(o Options, log kafka.Logger, completion func([]kafka.Message, error)) *kafka.Writer {
	return &kafka.Writer{
		Addr:     kafka.TCP(o.Brokers...),
		Topic:    o.OutputTopic,
		Balancer: kafka.BalancerFunc(routeChosen),
		// The zero value means no acknowledgement at all.
		RequiredAcks: kafka.RequireAll,
		// Async with Completion: a worker never waits per record; acks are
		// tracked per input partition (ackTracker).
		Async:        true,
		Completion:   completion,
		BatchSize:    o.BatchSize,
		BatchBytes:   o.BatchBytes,
		BatchTimeout: o.BatchTimeout, // the default 1s would hold partial batches far too long
		// kafka-go has no idempotent producer: a retried batch whose first
		// acknowledgement was lost lands twice. Few, quick retries keep that
		// window small; after them the stage stops (see Run) and a
		// restart's replay scan finds what did land.
		MaxAttempts:     3,
		WriteBackoffMin: 50 * time.Millisecond,
		WriteBackoffMax: 500 * time.Millisecond,
		Transport:       newMetadataCache(transportOf(o)),
		ErrorLogger:     log,
	}
}

// transportOf returns o.Transport as a RoundTripper, or nil (not a typed
// nil) for kafka-go's default.
func transportOf(o Options) kafka.RoundTripper {
	if o.Transport == nil {
		return nil
	}
	return o.Transport
}
