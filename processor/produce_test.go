package processor

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"dedup/internal/kfaketest"
	"dedup/internal/testkit"
)

// appliedMarker is the TimeoutMillis of the copy of a produce request that
// a fault applies on its own connection: the control function lets that
// copy through to the broker and intercepts every other one.
const appliedMarker = 123_457

// afterAppend makes the broker append the nth produce requests to the
// output topic (n in at, counted from 1) and then answer the stage with
// answer's response, or, when answer returns an error, close the stage's
// connection without an answer: the acknowledgement is lost. The request
// is applied by sending a copy of it on a connection of its own and
// waiting for the broker's answer (SleepControl lets the broker serve that
// connection meanwhile). It returns the number of faults injected so far.
func afterAppend(t *testing.T, e *testEnv, at []int, answer func(*kmsg.ProduceRequest) (kmsg.Response, error)) *atomic.Int32 {
	t.Helper()
	return afterAppendTo(t, e, outTopic, at, answer)
}

// afterAppendTo is afterAppend for the produce requests to topic.
func afterAppendTo(t *testing.T, e *testEnv, topic string, at []int, answer func(*kmsg.ProduceRequest) (kmsg.Response, error)) *atomic.Int32 {
	t.Helper()
	// Produce v13 names topics by ID only; the stage's requests name them.
	applier, err := kgo.NewClient(kgo.SeedBrokers(e.brokers...), kgo.MaxVersions(kversion.V3_0_0()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(applier.Close)
	var (
		seen     atomic.Int32
		injected atomic.Int32
	)
	e.cluster.ControlKey(int16(kmsg.Produce), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		e.cluster.KeepControl()
		req := kr.(*kmsg.ProduceRequest)
		if req.TimeoutMillis == appliedMarker || len(req.Topics) == 0 || req.Topics[0].Topic != topic {
			return nil, nil, false // the copy being applied, or the test's own input
		}
		if !slices.Contains(at, int(seen.Add(1))) {
			return nil, nil, false
		}
		cp := *req
		cp.TimeoutMillis = appliedMarker
		var (
			res  kmsg.Response
			aerr error
		)
		e.cluster.SleepControl(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			res, aerr = applier.Request(ctx, &cp)
		})
		if aerr != nil {
			t.Errorf("apply produce request: %v", aerr)
		} else {
			for _, rt := range res.(*kmsg.ProduceResponse).Topics {
				for _, rp := range rt.Partitions {
					if rp.ErrorCode != 0 {
						t.Errorf("apply produce request to %s/%d: %v", rt.Topic, rp.Partition, kerr.ErrorForCode(rp.ErrorCode))
					}
				}
			}
		}
		injected.Add(1)
		resp, err := answer(req)
		return resp, err, true
	})
	return &injected
}

// startStored starts a stage with a file store on a new broker with parts
// input and output partitions, its group named after name, and a
// collector of its output.
func startStored(t *testing.T, parts int32, name string) (*testEnv, Options, *collector, *running) {
	t.Helper()
	e := newTestEnv(t, parts, parts)
	group := strings.ReplaceAll(name, " ", "-")
	o := e.storedOptions(t, group)
	out := e.collect()
	a := start(t, o)
	a.waitReady(t)
	return e, o, out, a
}

// errorAnswer answers every partition of req with code.
func errorAnswer(code int16) func(*kmsg.ProduceRequest) (kmsg.Response, error) {
	return func(req *kmsg.ProduceRequest) (kmsg.Response, error) {
		return kfaketest.ErrorResponse(req, code), nil
	}
}

// TestAmbiguousProduceNotRepeated: the broker appends a produce request of
// the stage and the stage never learns it. Whether the connection closes
// before the acknowledgement arrives (a failover, a reset) or the broker
// answers REQUEST_TIMED_OUT or NOT_ENOUGH_REPLICAS_AFTER_APPEND after the
// append, the stage does not send the request again: it restores, reads
// back what landed and forwards only the rest. Each fault hits the 1st,
// 5th and 20th produce request to the output while records flow; the
// output holds every first occurrence exactly once, counted by source
// headers.
func TestAmbiguousProduceNotRepeated(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer func(*kmsg.ProduceRequest) (kmsg.Response, error)
	}{
		{"lost acknowledgement", func(*kmsg.ProduceRequest) (kmsg.Response, error) {
			return nil, errors.New("connection closed by the test after the append")
		}},
		{"request timed out", errorAnswer(kerr.RequestTimedOut.Code)},
		{"not enough replicas after append", errorAnswer(kerr.NotEnoughReplicasAfterAppend.Code)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const parts = 2
			e, _, out, a := startStored(t, parts, tc.name)
			running := func() bool {
				if len(a.done) > 0 {
					t.Fatalf("Run returned: %v", <-a.done)
				}
				return true
			}
			at := []int{1, 5, 20}
			injected := afterAppend(t, e, at, tc.answer)

			w := newWorkload(parts, 3000, 2, 13)
			var sent atomic.Int64
			produced := producePaced(t, e, w.recs, 30, 5*time.Millisecond, &sent)
			eventually(t, 60*time.Second, "every fault injected", func() bool {
				return running() && injected.Load() == int32(len(at))
			})
			<-produced
			e.produce(sentinels(parts, t0.Add(time.Hour/2))...)
			checkExactlyOnce(t, w, out.untilSentinels(parts))
			eventually(t, 30*time.Second, "healthy again", func() bool { return running() && a.p.Healthy() == nil })
			if n := metricValue(a.p.metrics.OutputErrors.WithLabelValues(OutputAmbiguous)); n < float64(len(at)) {
				t.Errorf("dedup_output_errors_total{kind=ambiguous} = %v, want >= %d", n, len(at))
			}
			if a.p.out.Replaced() == 0 {
				t.Error("no writer replaced: the ambiguous outcomes did not go through the restore")
			}
			t.Logf("writers replaced %d, replayed records already in the output %d",
				a.p.out.Replaced(), a.p.Progress().Suppressed)
			if err := a.stop(t); err != nil {
				t.Fatalf("Run after cancel: %v", err)
			}
		})
	}
}

// TestDefiniteErrorRetried: a produce request the broker answers with
// NOT_LEADER_OR_FOLLOWER without appending it (at the 1st, 5th and 20th
// request to the output) is sent again by the writer, within the
// generation: no writer is replaced, and the output holds every first
// occurrence exactly once.
func TestDefiniteErrorRetried(t *testing.T) {
	const parts = 2
	e := newTestEnv(t, parts, parts)
	o := e.storedOptions(t, "not-leader")
	out := e.collect()
	a := start(t, o)
	a.waitReady(t)

	at := []int{1, 5, 20}
	injected := refuseProduceTo(t, e, outTopic, at, errorAnswer(kerr.NotLeaderForPartition.Code))
	w := newWorkload(parts, 3000, 2, 17)
	var sent atomic.Int64
	produced := producePaced(t, e, w.recs, 30, 5*time.Millisecond, &sent)
	eventually(t, 60*time.Second, "every fault injected", func() bool { return injected.Load() == int32(len(at)) })
	<-produced
	e.produce(sentinels(parts, t0.Add(time.Hour/2))...)
	checkExactlyOnce(t, w, out.untilSentinels(parts))
	if n := a.p.out.Replaced(); n != 0 {
		t.Errorf("%d writers replaced: a definite NOT_LEADER_OR_FOLLOWER should be retried by the writer", n)
	}
	if n := metricValue(a.p.metrics.OutputErrors.WithLabelValues(OutputRetriable)); n != float64(len(at)) {
		t.Errorf("dedup_output_errors_total{kind=retriable} = %v, want %d", n, len(at))
	}
	if err := a.p.Healthy(); err != nil {
		t.Errorf("Healthy: %v", err)
	}
	if err := a.stop(t); err != nil {
		t.Fatalf("Run after cancel: %v", err)
	}
}

// committed returns the committed offset of an input partition of group.
func committed(t *testing.T, e *testEnv, group string, partition int) int64 {
	t.Helper()
	off, ok := committedOffsets(t, e, group, inTopic, partition)[partition]
	if !ok {
		t.Fatalf("no committed offset for %s/%d", inTopic, partition)
	}
	return off
}

// committedOffsets returns group's committed offsets of partitions of
// topic, by partition, as the broker answers them (-1: none committed).
func committedOffsets(t testing.TB, e *testEnv, group, topic string, partitions ...int) map[int]int64 {
	t.Helper()
	cl := testkit.KafkaClient(t, e.brokers...)
	res, err := cl.OffsetFetch(context.Background(), &kafka.OffsetFetchRequest{GroupID: group, Topics: map[string][]int{topic: partitions}})
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]int64{}
	for _, p := range res.Topics[topic] {
		out[p.Partition] = p.CommittedOffset
	}
	return out
}

// TestOutputRefused: a refusal for good that is not about the records
// (an authorization failure of every produce request to output partition
// 0) stops its input partition, loudly, and loses nothing. The refusal is
// not retried (one refused request is counted), Healthy reports
// ErrOutputRefused with the partition and offset, Ready is false,
// dedup_partitions_stalled is 1, the other partition keeps flowing, Run
// keeps running, and nothing at or after the refused offset is committed.
// Once the cause is fixed, a restarted member forwards the refused record
// and the ones after it, none twice.
func TestOutputRefused(t *testing.T) {
	for _, tc := range []struct {
		name     string
		refuse   func(t *testing.T, e *testEnv) (lift func())
		refusals float64 // refused produce requests counted
	}{
		{"authorization", refuseProduce(kerr.TopicAuthorizationFailed.Code), 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const parts = 2
			e, o, out, a := startStored(t, parts, tc.name)

			var before []*kgo.Record
			for i := range 10 {
				before = append(before, rec(int32(i%parts), fmt.Sprintf("before-%d", i), fmt.Sprintf("before-%d", i), t0))
			}
			e.produce(before...)
			out.until("records before the refusal", func(rs []outRec) bool { return len(rs) == len(before) })

			lift := tc.refuse(t, e)
			value := "refused"
			refusedAt := int64(len(before) / parts) // partition 0's next offset
			var after []*kgo.Record
			after = append(after, rec(0, "refused", value, t0))
			for i := range 10 {
				after = append(after, rec(int32(i%parts), fmt.Sprintf("after-%d", i), fmt.Sprintf("after-%d", i), t0))
			}
			e.produce(after...)

			eventually(t, 20*time.Second, "Healthy to report the refusal", func() bool {
				return errors.Is(a.p.Healthy(), ErrOutputRefused)
			})
			var perr *ProduceError
			if err := a.p.Healthy(); !errors.As(err, &perr) || perr.Partition != 0 || perr.Offset != refusedAt {
				t.Fatalf("Healthy() = %v, want the refusal of %s/0 offset %d", err, inTopic, refusedAt)
			}
			eventually(t, 5*time.Second, "Ready to drop the stopped partition", func() bool { return !a.p.Ready() })
			if n := metricValue(a.p.metrics.Stalled); n != 1 {
				t.Errorf("dedup_partitions_stalled = %v, want 1", n)
			}
			// Partition 1 keeps flowing.
			e.produce(rec(1, "p1-later", "p1-later", t0))
			out.untilValue("p1-later")
			if len(a.done) > 0 {
				t.Fatalf("Run returned on a refusal: %v", <-a.done)
			}
			if n := metricValue(a.p.metrics.OutputErrors.WithLabelValues(OutputRefused)); n != tc.refusals {
				t.Errorf("dedup_output_errors_total{kind=refused} = %v, want %v", n, tc.refusals)
			}
			if err := a.stop(t); err != nil {
				t.Fatalf("Run after cancel: %v", err)
			}
			if c := committed(t, e, o.GroupID, 0); c > refusedAt {
				t.Fatalf("committed offset %d of partition 0 passes the refused record at %d", c, refusedAt)
			}

			lift()
			b := startFresh(t, o)
			e.produce(sentinels(parts, t0)...)
			got := out.untilSentinels(parts)
			want := map[string]bool{}
			for _, r := range append(before, after...) {
				want[string(r.Key)] = true
			}
			want["p1-later"] = true
			seen := map[string]int{}
			for _, r := range withoutSentinels(got) {
				seen[r.Key]++
			}
			for k := range want {
				if seen[k] != 1 {
					t.Errorf("key %q in the output %d times, want once", k, seen[k])
				}
			}
			if len(seen) != len(want) {
				t.Errorf("%d keys in the output, want %d", len(seen), len(want))
			}
			eventually(t, 20*time.Second, "healthy after the fix", func() bool { return b.p.Healthy() == nil })
			if n := metricValue(b.p.metrics.Stalled); n != 0 {
				t.Errorf("dedup_partitions_stalled = %v after the fix, want 0", n)
			}
			if err := b.stop(t); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// refuseProduce answers every produce request to output partition 0 with
// code until lifted.
func refuseProduce(code int16) func(t *testing.T, e *testEnv) func() {
	return func(t *testing.T, e *testEnv) func() {
		var lifted atomic.Bool
		e.cluster.ControlKey(int16(kmsg.Produce), func(kr kmsg.Request) (kmsg.Response, error, bool) {
			e.cluster.KeepControl()
			req := kr.(*kmsg.ProduceRequest)
			if lifted.Load() || len(req.Topics) == 0 || req.Topics[0].Topic != outTopic || req.Topics[0].Partitions[0].Partition != 0 {
				return nil, nil, false
			}
			resp, _ := errorAnswer(code)(req)
			return resp, nil, true
		})
		return func() { lifted.Store(true) }
	}
}
