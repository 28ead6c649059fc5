package processor

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"dedup/internal/testkit"
	"dedup/processor/metrics"
)

// TestRekeyInputTruncatedResets is docs/faults.md's "Input truncated"
// under both hops: the input topic deleted and created again under them,
// its new log's offsets at or below those hop 2's high-water marks hold
// of the old one. Hop 1 finds each input partition truncated and writes a
// reset to every repartition partition before it sends the new log; hop 2
// lowers its marks, so every record of the new log is forwarded exactly
// once (an id of the old log in the new one is a duplicate, dropped by the
// filters, not by the marks). Without the resets hop 2 drops the new log
// as re-sends.
//
// "crash after the resets": hop 1's commits are refused from the
// truncation on and hop 1 is stopped once hop 2 has read every reset,
// before the first record of the new log, its committed offsets the old
// log's. The next hop 1 finds the truncation again and sends the resets
// again, which change nothing.
func TestRekeyInputTruncatedResets(t *testing.T) {
	for _, crash := range []bool{false, true} {
		name := "running"
		if crash {
			name = "crash after the resets"
		}
		t.Run(name, func(t *testing.T) { rekeyInputTruncated(t, crash) })
	}
}

func rekeyInputTruncated(t *testing.T, crash bool) {
	const inParts, reParts int32 = 2, 3
	const oldPer, newPer = 60, 10
	e, k := twoHopEnv(t, inParts, reParts)
	const group = "trunc"
	o := e.options(group)
	o.InputTopic, o.Repartitioned, o.Key = reTopic, true, k
	o.Store = fileStore(t, group)
	out := e.collect()
	b := start(t, o)
	b.waitReady(t)
	h := startHop1(t, e, group, k, smallBatches)

	idRec := func(p int32, id string, n int) *kgo.Record {
		return &kgo.Record{Topic: inTopic, Partition: p, Value: fmt.Appendf(nil, `{"id":%q}`, id), Timestamp: t0.Add(time.Duration(n) * time.Millisecond)}
	}
	want := map[string]bool{}
	var old []*kgo.Record
	for i := range int(inParts) * oldPer {
		id := fmt.Sprintf("old-%d", i)
		want[id] = true
		old = append(old, idRec(int32(i)%inParts, id, i))
	}
	e.produce(old...)
	eventually(t, 60*time.Second, "hop 1 caught up with the old log", func() bool {
		return h.caughtUp(inParts, map[int32]int64{0: oldPer, 1: oldPer})
	})
	repartitionSentinels(e, reParts)
	out.untilSentinels(reParts)

	var refuse atomic.Bool
	refuse.Store(crash)
	e.cluster.ControlKey(int16(kmsg.OffsetCommit), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		e.cluster.KeepControl()
		req := kr.(*kmsg.OffsetCommitRequest)
		if !refuse.Load() || req.Group != group+"-repartition" {
			return nil, nil, false
		}
		res := req.ResponseKind().(*kmsg.OffsetCommitResponse)
		for _, rt := range req.Topics {
			st := kmsg.NewOffsetCommitResponseTopic()
			st.Topic = rt.Topic
			for _, rp := range rt.Partitions {
				sp := kmsg.NewOffsetCommitResponseTopicPartition()
				sp.Partition, sp.ErrorCode = rp.Partition, kerr.CoordinatorNotAvailable.Code
				st.Partitions = append(st.Partitions, sp)
			}
			res.Topics = append(res.Topics, st)
		}
		return res, nil, true
	})
	resets := func() float64 {
		var n float64
		for p := range reParts {
			n += metricValue(o.Metrics.RepartitionControl.WithLabelValues(reTopic, fmt.Sprint(p), metrics.ControlReset))
		}
		return n
	}
	if err := e.cluster.DeleteTopic(inTopic); err != nil {
		t.Fatal(err)
	}
	if err := e.cluster.CreateTopic(inTopic, inParts, nil); err != nil {
		t.Fatal(err)
	}
	// Every input partition reset on every repartition partition.
	eventually(t, 60*time.Second, "hop 2 read the resets", func() bool { return resets() == float64(inParts*reParts) })
	wantResets := float64(inParts * reParts)
	rekeyedBefore := 0.0
	for p := range inParts {
		rekeyedBefore += metricValue(h.metrics.Rekeyed.WithLabelValues(inTopic, fmt.Sprint(p)))
	}
	if crash {
		h.stop()
		refuse.Store(false)
		// The old log's offsets committed, as an unclean leader election
		// leaves them (a deleted topic's go with it: hop 1 then starts
		// from KAFKA_START_OFFSET, the new log's start here).
		commitOffsets(t, e, group+"-repartition", map[int32]int64{0: oldPer, 1: oldPer})
		h = startHop1(t, e, group, k, smallBatches)
		rekeyedBefore = 0
		eventually(t, 60*time.Second, "hop 2 read the resets sent again", func() bool { return resets() == float64(2*inParts*reParts) })
		wantResets *= 2
	}
	for p := range inParts {
		if got := metricValue(h.metrics.InputTruncations.WithLabelValues(inTopic, fmt.Sprint(p))); got != 1 {
			t.Errorf("input partition %d: %v truncations counted by the running hop 1, want 1", p, got)
		}
	}

	// The new log: fewer records than the old, so every offset is at or
	// below the old marks, and one id of the old log again.
	var fresh []*kgo.Record
	for i := range int(inParts) * newPer {
		id := fmt.Sprintf("new-%d", i)
		want[id] = true
		fresh = append(fresh, idRec(int32(i)%inParts, id, int(inParts)*oldPer+i))
	}
	fresh = append(fresh, idRec(0, "old-1", int(inParts)*(oldPer+newPer)))
	// A producer of its own: the test's knows the old topic's id.
	prod := []kgo.Opt{kgo.SeedBrokers(e.brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner())}
	testkit.Produce(t, prod, fresh...)
	eventually(t, 60*time.Second, "hop 1 re-keyed the new log", func() bool {
		n := 0.0
		for p := range inParts {
			n += metricValue(h.metrics.Rekeyed.WithLabelValues(inTopic, fmt.Sprint(p)))
		}
		return n == rekeyedBefore+float64(len(fresh))
	})
	// Barriers behind the new log on every repartition partition: once
	// hop 2 forwarded them, it decided everything before them.
	var barriers []*kgo.Record
	for p := range reParts {
		barriers = append(barriers, &kgo.Record{Topic: reTopic, Partition: p, Value: fmt.Appendf(nil, "barrier-%d", p), Timestamp: t0})
	}
	testkit.Produce(t, prod, barriers...)
	got := out.until("the barriers", func(rs []outRec) bool {
		n := 0
		for _, r := range rs {
			if strings.HasPrefix(r.Value, "barrier-") {
				n++
			}
		}
		return n == int(reParts)
	})
	ids := map[string]int{}
	for _, r := range got {
		if id, ok := strings.CutPrefix(r.Value, `{"id":"`); ok {
			ids[strings.TrimSuffix(id, `"}`)]++
		}
	}
	testkit.ForwardedOnce(t, "", want, ids)
	if got := resets(); got != wantResets {
		t.Errorf("hop 2 applied %v resets, want %v", got, wantResets)
	}
	h.stop()
	if err := b.stop(t); err != nil {
		t.Fatal(err)
	}
}

// commitOffsets commits offsets of the input for group, a group without
// members, as a client outside it.
func commitOffsets(t *testing.T, e *testEnv, group string, offsets map[int32]int64) {
	t.Helper()
	// A version that names topics (the topic's id is the new one's).
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.brokers...), kgo.MaxVersions(kversion.V3_5_0()))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	eventually(t, 30*time.Second, "offsets committed for "+group, func() bool {
		req := kmsg.NewPtrOffsetCommitRequest()
		req.Group, req.Generation = group, -1
		rt := kmsg.NewOffsetCommitRequestTopic()
		rt.Topic = inTopic
		for p, off := range offsets {
			rp := kmsg.NewOffsetCommitRequestTopicPartition()
			rp.Partition, rp.Offset = p, off
			rt.Partitions = append(rt.Partitions, rp)
		}
		req.Topics = append(req.Topics, rt)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		res, err := req.RequestWith(ctx, cl)
		if err != nil {
			t.Logf("commit: %v", err)
			return false
		}
		for _, rt := range res.Topics {
			for _, rp := range rt.Partitions {
				if rp.ErrorCode != 0 {
					t.Logf("commit %d: %v", rp.Partition, kerr.ErrorForCode(rp.ErrorCode))
					return false
				}
			}
		}
		return true
	})
}
