package e2e_test

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"dedup/internal/kfaketest"
)

// The broker-side faults of the nemesis suite are kfake control functions.
// Each is installed once per broker (and again after a broker restart, see
// restartable.onOpen), stays installed (KeepControl), and does nothing until
// the runner arms it at an injection point.

// forwardMark is the TimeoutMillis of the produce requests the ack loser
// sends itself: its own copy of an intercepted request must reach the broker
// untouched, and the control function sees it like any other request.
const forwardMark = 28_731

// testFetchMaxBytes is the MaxBytes of every fetch the test's own consumers
// send (the observer and the checker's reader): the fetch fault recognises
// them by it and spares them, so that its counts measure what the stage
// suffered, and so that the checker reads the whole topic.
const testFetchMaxBytes = 50<<20 + 1

// ackLoser loses produce acknowledgements after the append: it takes a
// produce request for the output topic off the stage's connection, sends the
// same request to the broker on a connection of its own, and, once the
// broker answered that every partition was appended, closes the stage's
// connection instead of answering. To the stage this is a broker failover or
// a connection reset between the append and the acknowledgement: the outcome
// is unknown, and the records are in the log.
type ackLoser struct {
	c       *kfake.Cluster
	fwd     *kgo.Client
	armed   atomic.Int64 // losses still to inject
	lost    atomic.Int64 // acknowledgements lost after a confirmed append
	records atomic.Int64 // records in the requests whose acknowledgement was lost
	failed  atomic.Int64 // interceptions whose own copy was not confirmed
}

func newAckLoser(brokers string) (*ackLoser, error) {
	// Produce v9 and below name topics (v13 would need topic IDs, which
	// the stage's requests do not carry).
	fwd, err := kgo.NewClient(kgo.SeedBrokers(brokers), kgo.MaxVersions(kversion.V3_0_0()))
	if err != nil {
		return nil, fmt.Errorf("create ack loser client: %w", err)
	}
	return &ackLoser{fwd: fwd}, nil
}

func (a *ackLoser) install(c *kfake.Cluster) {
	a.c = c
	c.ControlKey(int16(kmsg.Produce), a.control)
}

func (a *ackLoser) close() { a.fwd.Close() }

// arm makes the next n produce requests for the output topic lose their
// acknowledgement.
func (a *ackLoser) arm(n int) { a.armed.Add(int64(n)) }

// take consumes one armed loss, if any is left.
func (a *ackLoser) take() bool {
	for {
		n := a.armed.Load()
		if n <= 0 {
			return false
		}
		if a.armed.CompareAndSwap(n, n-1) {
			return true
		}
	}
}

func (a *ackLoser) control(kreq kmsg.Request) (kmsg.Response, error, bool) {
	a.c.KeepControl()
	req := kreq.(*kmsg.ProduceRequest)
	if req.TimeoutMillis == forwardMark || !kfaketest.ProducesTo(req, outputTopic) || !a.take() {
		return nil, nil, false
	}
	node := a.c.CurrentNode()
	var (
		resp kmsg.Response
		err  error
	)
	// Sleeping yields the broker's loop, so that it can serve the copy
	// sent here on another connection while the stage's request waits.
	a.c.SleepControl(func() {
		cp := *req
		cp.TimeoutMillis = forwardMark
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		resp, err = a.fwd.Broker(int(node)).Request(ctx, &cp)
	})
	if err == nil {
		err = produceErr(resp.(*kmsg.ProduceResponse))
	}
	if err != nil {
		// Not confirmed: the loss did not happen as intended. Re-arm it
		// and let the stage's request go through normally.
		a.failed.Add(1)
		a.armed.Add(1)
		return nil, nil, false
	}
	a.lost.Add(1)
	a.records.Add(int64(producedRecords(req)))
	return nil, errors.New("nemesis: connection closed after the append, before the acknowledgement"), true
}

func produceErr(resp *kmsg.ProduceResponse) error {
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return fmt.Errorf("produce %s/%d: %w", t.Topic, p.Partition, err)
			}
		}
	}
	return nil
}

// producedRecords counts the records of a produce request from its record
// batch headers (magic 2: batch length at bytes 8..11, record count at
// 57..60).
func producedRecords(req *kmsg.ProduceRequest) int {
	n := 0
	for _, t := range req.Topics {
		for _, p := range t.Partitions {
			for raw := p.Records; len(raw) >= 61; {
				n += int(int32(binary.BigEndian.Uint32(raw[57:61])))
				end := 12 + int(int32(binary.BigEndian.Uint32(raw[8:12])))
				if end <= 12 || end > len(raw) {
					break
				}
				raw = raw[end:]
			}
		}
	}
	return n
}

// fetchFault answers the stage's fetches, while armed, in a fixed rotation
// of four: two empty answers (no records, no error, the partition's real
// watermarks: what a broker sends when it has nothing ready or is
// throttling), one answer held back slowDelay before it is served, and one
// served normally. A reader that takes an empty answer for the end of the
// data stops short; a reader that retries still gets every record.
type fetchFault struct {
	c       *kfake.Cluster
	armed   atomic.Bool
	seq     atomic.Int64
	empties atomic.Int64
	slows   atomic.Int64
}

// slowDelay is how long a slow fetch is held: longer than the stage's fetch
// max wait, shorter than its read deadline.
const slowDelay = 700 * time.Millisecond

func (f *fetchFault) install(c *kfake.Cluster) {
	f.c = c
	c.ControlKey(int16(kmsg.Fetch), f.control)
}

func (f *fetchFault) control(kreq kmsg.Request) (kmsg.Response, error, bool) {
	f.c.KeepControl()
	req := kreq.(*kmsg.FetchRequest)
	if !f.armed.Load() || req.MaxBytes == testFetchMaxBytes {
		return nil, nil, false
	}
	switch f.seq.Add(1) % 4 {
	case 0, 1:
		resp := f.empty(req)
		f.empties.Add(1)
		return resp, nil, true
	case 2:
		f.slows.Add(1)
		// A fault injection, not a synchronisation: the broker holds
		// this answer for a while, then serves it normally.
		f.c.SleepControl(func() { time.Sleep(slowDelay) })
		return nil, nil, false
	default:
		return nil, nil, false
	}
}

// empty builds an answer to req with every partition present, no error, no
// records and the partition's current watermarks.
func (f *fetchFault) empty(req *kmsg.FetchRequest) kmsg.Response {
	resp := req.ResponseKind().(*kmsg.FetchResponse)
	resp.SessionID = req.SessionID
	for _, rt := range req.Topics {
		t := kmsg.NewFetchResponseTopic()
		t.Topic, t.TopicID = rt.Topic, rt.TopicID
		name := rt.Topic
		if name == "" {
			if ti := f.c.TopicIDInfo(rt.TopicID); ti != nil {
				name = ti.Topic
			}
		}
		for _, rp := range rt.Partitions {
			p := kmsg.NewFetchResponseTopicPartition()
			p.Partition = rp.Partition
			if pi := f.c.PartitionInfo(name, rp.Partition); pi != nil {
				p.HighWatermark = pi.HighWatermark
				p.LastStableOffset = pi.LastStableOffset
				p.LogStartOffset = pi.LogStartOffset
			} else {
				p.ErrorCode = kerr.UnknownTopicOrPartition.Code
			}
			t.Partitions = append(t.Partitions, p)
		}
		resp.Topics = append(resp.Topics, t)
	}
	return resp
}
