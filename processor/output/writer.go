package output

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync/atomic"
	"time"

	"github.com/segmentio/kafka-go"
	metadataAPI "github.com/segmentio/kafka-go/protocol/metadata"

	"dedup/internal/leader"
	"dedup/processor/cluster"
	"dedup/processor/partition"
)

// metadataCache is the writer's transport. kafka.Writer.WriteMessages asks
// the transport for the topic's metadata once per message (to count
// partitions), and kafka.Transport answers each ask by filtering its cached
// metadata into a freshly allocated response: in profiles that was the
// largest single cost of a consume→produce loop on an in-process broker,
// more than decoding the records. This keeps the last answer for one
// single-topic request shape for metadataTTL and hands it out read-only
// (the writer only reads it); everything else goes to the transport.
//
// It also lets a broken writer be closed quickly: once aborted, every
// request fails at once with errAborted, which kafka-go does not retry.
//
// An answer is dropped by a timer metadataTTL after it was stored, not by
// comparing clocks on each ask: the writer asks once per message, and a
// clock read per message shows in the stage's profiles.
type metadataCache struct {
	next    kafka.RoundTripper
	ttl     time.Duration
	last    atomic.Pointer[cachedMetadata]
	aborted atomic.Bool
	// fence, when set, is asked right before each produce request is
	// sent (also for batches queued before the member stalled, which
	// kafka-go's goroutines send on wake-up): an error fails the request
	// unsent. See docs/fencing.md.
	fence func() error
}

// errAborted fails the batches still queued in a writer that is being
// replaced after a produce failure: they are never sent, and the partitions
// restore from before them.
var errAborted = errors.New("writer aborted after a produce failure")

// metadataTTL bounds how late the writer sees partitions added to the
// output topic (kafka.Transport's own cache keeps metadata for 6s).
const metadataTTL = time.Second

type cachedMetadata struct {
	topic string
	auto  bool
	res   *metadataAPI.Response
}

func newMetadataCache(next kafka.RoundTripper) *metadataCache {
	if next == nil {
		next = kafka.DefaultTransport
	}
	return &metadataCache{next: next, ttl: metadataTTL}
}

func (c *metadataCache) RoundTrip(ctx context.Context, addr net.Addr, req kafka.Request) (kafka.Response, error) {
	if c.aborted.Load() {
		return nil, errAborted
	}
	if isProduce(req) && c.fence != nil {
		if err := c.fence(); err != nil {
			return nil, fmt.Errorf("produce not sent: %w", err)
		}
	}
	m, ok := req.(*metadataAPI.Request)
	if !ok || len(m.TopicNames) != 1 {
		return c.next.RoundTrip(ctx, addr, req)
	}
	if e := c.last.Load(); e != nil && e.topic == m.TopicNames[0] && e.auto == m.AllowAutoTopicCreation {
		return e.res, nil
	}
	res, err := c.next.RoundTrip(ctx, addr, req)
	if err != nil {
		return nil, err
	}
	if r, ok := res.(*metadataAPI.Response); ok {
		e := &cachedMetadata{topic: m.TopicNames[0], auto: m.AllowAutoTopicCreation, res: r}
		c.last.Store(e)
		// Only this entry: a newer one keeps its own full ttl.
		time.AfterFunc(c.ttl, func() { c.last.CompareAndSwap(e, nil) })
	}
	return res, nil
}

// Writer is one writer with its own transport (its own connections):
// kafka.Writer → metadataCache → outcomes → kafka.Transport. A
// produce failure breaks it: the generation ends, the group runner has the
// Output replace it (closing it waits for every batch still in it, so
// nothing it holds lands after the next restore's replay scan) and starts
// the next generation with a new one. Acknowledgements of a writer only
// ever reach the ack trackers of the workers that wrote to it (each slot
// points to its own tracker), and those workers end with its generation.
type Writer struct {
	w         *kafka.Writer
	rt        *metadataCache
	transport *kafka.Transport
	c         *Config
	// dropped writes DROPPED_TOPIC (nil without one) beside w, through the
	// same classifying, fenced transport and its own metadata cache (which
	// keeps one topic): a failure of either breaks the Writer, and an
	// abort or a close applies to both.
	dropped   *dropWriter
	droppedRT *metadataCache
}

// newWriter returns the stage's one asynchronous writer, shared by all
// partitions, its batches at most batchBytes (droppedBytes for the drop
// topic's).
func newWriter(c *Config, batchBytes, droppedBytes int64) *Writer {
	out := &Writer{transport: cluster.NewTransport(c.Transport), c: c}
	oc := newOutcomes(leader.Follow(out.transport), c, out.abort)
	out.rt = newMetadataCache(oc)
	if c.Plain {
		oc.blind = true
	} else {
		fenceConns(out.transport, c.Fence)
		out.rt.fence = c.Fence
	}
	out.w = out.kafkaWriter(c.Topic, batchBytes, out.rt, out.completion, "writer")
	if c.DroppedTopic != "" {
		out.droppedRT = newMetadataCache(oc)
		out.droppedRT.fence = out.rt.fence
		out.dropped = newDropWriter(c, droppedBytes, out.droppedRT, out.droppedCompletion)
	}
	return out
}

// kafkaWriter is one asynchronous kafka.Writer of out to topic.
func (out *Writer) kafkaWriter(topic string, batchBytes int64, rt *metadataCache, completion func([]kafka.Message, error), component string) *kafka.Writer {
	c := out.c
	return &kafka.Writer{
		Addr:     kafka.TCP(c.Brokers...),
		Topic:    topic,
		Balancer: kafka.BalancerFunc(routeChosen),
		// The zero value means no acknowledgement at all.
		RequiredAcks: kafka.RequireAll,
		// Async with Completion: a worker never waits per record; acks are
		// tracked per input partition (ackTracker).
		Async:        true,
		Completion:   completion,
		BatchSize:    c.BatchSize,
		BatchBytes:   batchBytes,
		BatchTimeout: c.BatchTimeout, // the default 1s would hold partial batches far too long
		Compression:  c.Compression,
		// kafka.Writer retries a batch whose error is temporary, whatever
		// became of the first copy. The transport (outcomes) hands it only
		// failures that certainly appended nothing as retriable; an
		// ambiguous outcome fails the batch, the generation ends and the
		// restore's replay scan reads back what landed (docs/delivery.md).
		MaxAttempts:     3,
		WriteBackoffMin: 50 * time.Millisecond,
		WriteBackoffMax: 500 * time.Millisecond,
		Transport:       rt,
		ErrorLogger:     cluster.Logger{Log: c.Log.With("component", component)},
	}
}

// Dropped is the writer of the drop topic the partitions write to
// (partition.Drops.Writer), nil without one.
func (out *Writer) Dropped() partition.Writer {
	if out.dropped == nil {
		return nil
	}
	return out.dropped
}

// Kafka is the kafka.Writer the partitions write to (partition.Deps.Writer).
func (out *Writer) Kafka() *kafka.Writer { return out.w }

// abort makes every request not yet sent fail at once, so that close does
// not wait for retries of batches queued behind a dead connection (each
// would take the writer's full attempts). A request already sent completes
// (or fails) before close returns.
func (out *Writer) abort() {
	out.rt.aborted.Store(true)
	if out.droppedRT != nil {
		out.droppedRT.aborted.Store(true)
	}
}

// close waits for the writers' batches, then drops their connections.
func (out *Writer) close() error {
	err := out.w.Close()
	if out.dropped != nil {
		err = errors.Join(err, out.dropped.Close())
	}
	out.transport.CloseIdleConnections()
	if err != nil {
		return fmt.Errorf("close writer: %w", err)
	}
	return nil
}

// NewMetadataCache is the writer's metadata cache over next (nil:
// kafka.DefaultTransport), without fence or classification: the stage's
// transport as the copy-loop reference of the benchmarks runs it.
func NewMetadataCache(next kafka.RoundTripper) kafka.RoundTripper { return newMetadataCache(next) }
