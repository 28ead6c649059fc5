package output

import (
	"context"
	"errors"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	metadataAPI "github.com/segmentio/kafka-go/protocol/metadata"
)

// countingTransport passes every request to a real kafka.Transport and
// counts the metadata requests that reach it.
type countingTransport struct {
	next     kafka.RoundTripper
	metadata atomic.Int64
}

func (c *countingTransport) RoundTrip(ctx context.Context, addr net.Addr, req kafka.Request) (kafka.Response, error) {
	if _, ok := req.(*metadataAPI.Request); ok {
		c.metadata.Add(1)
	}
	return c.next.RoundTrip(ctx, addr, req)
}

func TestMetadataCache(t *testing.T) {
	e := newTestEnv(t, 2, 3)
	transport := &kafka.Transport{}
	defer transport.CloseIdleConnections()
	counter := &countingTransport{next: transport}
	c := newMetadataCache(counter)
	c.ttl = time.Hour
	addr := kafka.TCP(e.brokers...)
	ask := func(topic string) *metadataAPI.Response {
		t.Helper()
		res, err := c.RoundTrip(context.Background(), addr, &metadataAPI.Request{TopicNames: []string{topic}})
		if err != nil {
			t.Fatalf("metadata of %s: %v", topic, err)
		}
		return res.(*metadataAPI.Response)
	}
	partitions := func(res *metadataAPI.Response, topic string) int {
		for _, tp := range res.Topics {
			if tp.Name == topic {
				return len(tp.Partitions)
			}
		}
		return -1
	}

	first := ask(outTopic)
	if got := partitions(first, outTopic); got != 3 {
		t.Fatalf("%s has %d partitions in the answer, want 3", outTopic, got)
	}
	if again := ask(outTopic); again != first || counter.metadata.Load() != 1 {
		t.Fatalf("second ask: same answer %v, %d requests reached the broker, want the cached answer and 1", again == first, counter.metadata.Load())
	}
	if got := partitions(ask(inTopic), inTopic); got != 2 || counter.metadata.Load() != 2 {
		t.Fatalf("other topic: %d partitions, %d requests, want 2 and 2", got, counter.metadata.Load())
	}
	ask(outTopic) // the cache holds one answer: the other topic replaced it
	if n := counter.metadata.Load(); n != 3 {
		t.Fatalf("%d requests reached the broker, want 3", n)
	}

	// An answer expires ttl after it was stored.
	c.ttl = time.Millisecond
	c.last.Store(nil)
	ask(outTopic)
	deadline := time.Now().Add(5 * time.Second)
	for c.last.Load() != nil {
		if time.Now().After(deadline) {
			t.Fatal("cached answer not dropped after its ttl")
		}
		time.Sleep(time.Millisecond) // polling interval
	}
	ask(outTopic)
	if n := counter.metadata.Load(); n != 5 {
		t.Fatalf("%d requests reached the broker, want 5 (one per expired answer)", n)
	}

	c.aborted.Store(true) // what Writer.abort does
	if _, err := c.RoundTrip(context.Background(), addr, &metadataAPI.Request{TopicNames: []string{outTopic}}); !errors.Is(err, errAborted) {
		t.Fatalf("after abort: %v, want errAborted", err)
	}
}
