package processor

import (
	"context"
	"dedup/internal/testkit"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestProduceFailureStops: when the output topic keeps failing records
// with an error that may pass (NOT_LEADER_OR_FOLLOWER, a leader that never
// settles), the stage keeps replacing its writer and restoring (Healthy
// reports ErrRecovering meanwhile) without committing past them, and after
// RecoveryTimeout Run returns the *ProduceError; a successor forwards them
// once the output accepts records again. (A refusal for good stops only its
// partition instead: TestOutputRefused.)
func TestProduceFailureStops(t *testing.T) {
	e := newTestEnv(t, 1, 1)
	o := e.storedOptions(t, "refused")
	o.RecoveryTimeout = 1500 * time.Millisecond
	out := e.collect()
	a := start(t, o)
	a.waitReady(t)

	var ok []*kgo.Record
	for i := range 10 {
		ok = append(ok, rec(0, fmt.Sprintf("ok-%d", i), fmt.Sprintf("ok-%d", i), t0))
	}
	e.produce(ok...)
	out.until("first records", func(rs []outRec) bool { return len(rs) == 10 })

	var refuse atomic.Bool
	refuse.Store(true)
	e.cluster.ControlKey(int16(kmsg.Produce), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		e.cluster.KeepControl()
		req := kr.(*kmsg.ProduceRequest)
		if !refuse.Load() || len(req.Topics) == 0 || req.Topics[0].Topic != outTopic {
			return nil, nil, false
		}
		resp, _ := errorAnswer(kerr.NotLeaderForPartition.Code)(req)
		return resp, nil, true
	})
	var refused []*kgo.Record
	for i := range 5 {
		refused = append(refused, rec(0, fmt.Sprintf("refused-%d", i), fmt.Sprintf("refused-%d", i), t0))
	}
	e.produce(refused...)

	eventually(t, 20*time.Second, "Healthy to report the recovery", func() bool {
		return errors.Is(a.p.Healthy(), ErrRecovering) || len(a.done) > 0
	})
	if len(a.done) > 0 {
		t.Fatal("Run returned before Healthy reported the recovery")
	}
	select {
	case err := <-a.done:
		var perr *ProduceError
		if !errors.As(err, &perr) {
			t.Fatalf("Run returned %v, want a *ProduceError", err)
		}
		if perr.Offset != 10 {
			t.Errorf("failed input offset %d, want 10", perr.Offset)
		}
		a.done <- err // for the cleanup's stop
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not stop on a refused output")
	}
	if a.p.Healthy() == nil || a.p.Ready() {
		t.Errorf("after a fatal error: Healthy() = %v, Ready() = %v", a.p.Healthy(), a.p.Ready())
	}
	if n := metricValue(a.p.metrics.ProduceErrors.WithLabelValues(outTopic)); n == 0 {
		t.Error("dedup_produce_errors_total not counted")
	}
	cl := testkit.KafkaClient(t, e.brokers...)
	res, err := cl.OffsetFetch(context.Background(), &kafka.OffsetFetchRequest{GroupID: "refused", Topics: map[string][]int{inTopic: {0}}})
	if err != nil {
		t.Fatal(err)
	}
	if c := res.Topics[inTopic][0].CommittedOffset; c > 10 {
		t.Fatalf("committed offset %d passes the refused record at 10", c)
	}

	refuse.Store(false)
	b := startFresh(t, o)
	e.produce(sentinels(1, t0)...)
	got := values(withoutSentinels(out.untilSentinels(1)))
	want := append(values(recsAsOut(ok)), values(recsAsOut(refused))...)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("output after recovery\n got %q\nwant %q", got, want)
	}
	if err := b.stop(t); err != nil {
		t.Fatal(err)
	}
}

func recsAsOut(rs []*kgo.Record) []outRec {
	out := make([]outRec, len(rs))
	for i, r := range rs {
		out[i] = outRec{Key: string(r.Key), Value: string(r.Value)}
	}
	return out
}

// TestHashRouting: with a different partition count on the output topic,
// records go where the Java client's default partitioner (murmur2) puts
// their key; franz-go's Kafka-compatible partitioner is the reference.
func TestHashRouting(t *testing.T) {
	e := newTestEnv(t, 3, 2)
	r := start(t, e.options("hash"))
	out := e.collect()
	r.waitReady(t)
	var in []*kgo.Record
	for i := range 60 {
		in = append(in, rec(int32(i%3), fmt.Sprintf("user-%d", i), fmt.Sprintf("v-%d", i), t0))
	}
	in = append(in, rec(2, "", "no-key", t0))
	e.produce(in...)
	ref := kgo.StickyKeyPartitioner(nil).ForTopic(outTopic)
	barrier := routedSentinels(ref, 3, 2, t0)
	e.produce(barrier...)
	for _, s := range barrier {
		out.untilValue(string(s.Value))
	}
	got := withoutSentinels(out.recs)
	if len(got) != len(in) {
		t.Fatalf("%d outputs, want %d", len(got), len(in))
	}
	for _, o := range got {
		want := int32(2 % 2) // no key: input partition modulo output partitions
		if o.Key != "" {
			want = int32(ref.Partition(&kgo.Record{Key: []byte(o.Key)}, 2))
		}
		if o.Partition != want {
			t.Errorf("key %q went to partition %d, want %d", o.Key, o.Partition, want)
		}
	}
}

// routedSentinels returns, for each input partition, one sentinel per
// output partition, keyed so that ref routes it there. With fewer output
// partitions than input ones, an input partition's records spread over
// every output partition, and one sentinel per input partition says
// nothing of the output partitions it did not go to: only a sentinel
// behind them on each output partition says they are all out.
func routedSentinels(ref kgo.TopicPartitioner, inParts, outParts int32, ts time.Time) []*kgo.Record {
	var rs []*kgo.Record
	for p := range inParts {
		for q := range outParts {
			for n := 0; ; n++ {
				k := fmt.Sprintf("sentinel-key-%d-%d-%d", p, q, n)
				if int32(ref.Partition(&kgo.Record{Key: []byte(k)}, int(outParts))) == q {
					rs = append(rs, rec(p, k, fmt.Sprintf("sentinel-%d-%d", p, q), ts))
					break
				}
			}
		}
	}
	return rs
}
