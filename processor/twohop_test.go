package processor

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"dedup/key"
	"dedup/processor/repartition"
)

const reTopic = "events-repartition"

// hop1 is a running first hop.
type hop1 struct {
	cancel  context.CancelFunc
	done    chan error
	metrics repartition.Metrics
}

func startHop1(t *testing.T, e *testEnv, group string, k key.Source) *hop1 {
	t.Helper()
	labels := []string{"topic", "partition"}
	h := &hop1{done: make(chan error, 1), metrics: repartition.Metrics{
		Rekeyed:  prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rekeyed"}, labels),
		Restarts: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "restarts"}, labels),
		Lag:      prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "lag"}, labels),
	}}
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() {
		h.done <- repartition.Run(ctx, repartition.Options{
			Brokers: e.brokers, GroupID: group + "-repartition", InputTopic: inTopic, Topic: reTopic, Key: k,
			SessionTimeout: time.Second, RebalanceTimeout: 2 * time.Second, HeartbeatInterval: 100 * time.Millisecond,
			BatchSize: 50, FetchMaxWait: 50 * time.Millisecond, CommitInterval: 50 * time.Millisecond,
			RetryBackoff: 20 * time.Millisecond, Metrics: h.metrics, Logger: testLogger(),
		})
	}()
	t.Cleanup(h.stop)
	return h
}

func (h *hop1) stop() {
	if h.cancel != nil {
		h.cancel()
		<-h.done
		h.cancel = nil
	}
}

// caughtUp reports whether hop 1 has every input record of parts
// acknowledged by the repartition topic.
func (h *hop1) caughtUp(parts int32, ends map[int32]int64) bool {
	for p := range parts {
		g, err := h.metrics.Lag.GetMetricWithLabelValues(inTopic, fmt.Sprint(p))
		if err != nil || ends[p] > 0 && metricValue(g) != 0 {
			return false
		}
		c, _ := h.metrics.Rekeyed.GetMetricWithLabelValues(inTopic, fmt.Sprint(p))
		if ends[p] > 0 && metricValue(c) < float64(ends[p]) {
			return false
		}
	}
	return true
}

// twoHopInput is input keyed at random or not at all, the dedup id in a
// JSON field, copies of each id on different input partitions, and
// records without the field (unkeyed).
type twoHopInput struct {
	recs    []*kgo.Record
	ids     map[string]bool
	unkeyed map[string]bool
}

func newTwoHopInput(parts int32, ids, copies, unkeyed int, seed uint64) twoHopInput {
	rng := rand.New(rand.NewPCG(seed, seed))
	in := twoHopInput{ids: map[string]bool{}, unkeyed: map[string]bool{}}
	n := 0
	add := func(p int32, value string) {
		r := &kgo.Record{Partition: p, Value: []byte(value), Timestamp: t0.Add(time.Duration(n) * time.Millisecond)}
		if rng.IntN(3) > 0 {
			r.Key = fmt.Appendf(nil, "user-%d", rng.IntN(1000))
		}
		in.recs = append(in.recs, r)
		n++
	}
	for i := range ids {
		id := fmt.Sprintf("id-%d", i)
		in.ids[id] = true
		for c := range copies {
			add((int32(i)+int32(c))%parts, fmt.Sprintf(`{"id":%q,"copy":%d}`, id, c))
		}
		if i%(ids/unkeyed+1) == 0 && len(in.unkeyed) < unkeyed {
			v := fmt.Sprintf(`{"n":%d}`, i)
			in.unkeyed[v] = true
			add(int32(rng.IntN(int(parts))), v)
		}
	}
	// Copies of one id are spread over the stream, not adjacent.
	rng.Shuffle(len(in.recs), func(i, j int) { in.recs[i], in.recs[j] = in.recs[j], in.recs[i] })
	for i, r := range in.recs {
		r.Timestamp = t0.Add(time.Duration(i) * time.Millisecond)
	}
	return in
}

// check checks the output: every id exactly once, every unkeyed record
// once, source headers naming the input record, the input key kept.
func (in twoHopInput) check(t *testing.T, got []outRec) {
	t.Helper()
	type at struct {
		p   int32
		off int64
		key string
	}
	where := map[string]at{}
	for _, r := range in.recs {
		where[string(r.Value)] = at{r.Partition, r.Offset, string(r.Key)}
	}
	ids, unkeyed := map[string]int{}, map[string]int{}
	for _, r := range withoutSentinels(got) {
		w, ok := where[r.Value]
		if !ok {
			t.Errorf("output %q was never input", r.Value)
			continue
		}
		if r.Headers[HeaderSourceTopic] != inTopic || r.SrcPart != w.p || r.SrcOffset != w.off {
			t.Errorf("%s: source %s/%d/%d, want %s/%d/%d", r.Value, r.Headers[HeaderSourceTopic], r.SrcPart, r.SrcOffset, inTopic, w.p, w.off)
		}
		if r.Key != w.key {
			t.Errorf("%s: key %q, want the input's %q", r.Value, r.Key, w.key)
		}
		if in.unkeyed[r.Value] {
			unkeyed[r.Value]++
			continue
		}
		id := r.Value[strings.Index(r.Value, `"id":"`)+6:]
		ids[id[:strings.IndexByte(id, '"')]]++
	}
	for id := range in.ids {
		if ids[id] != 1 {
			t.Errorf("%s forwarded %d times, want once", id, ids[id])
		}
	}
	for v := range in.unkeyed {
		if unkeyed[v] != 1 {
			t.Errorf("unkeyed %s forwarded %d times, want once", v, unkeyed[v])
		}
	}
}

// repartitionSentinels are written straight to every repartition
// partition once hop 1 is caught up: once hop 2 forwarded them, it has
// decided everything before them.
func repartitionSentinels(e *testEnv, parts int32) {
	e.t.Helper()
	var rs []*kgo.Record
	for p := range parts {
		rs = append(rs, &kgo.Record{Topic: reTopic, Partition: p, Key: []byte(sentinelValue(p)), Value: []byte(sentinelValue(p)), Timestamp: t0})
	}
	e.produce(rs...)
}

// TestTwoHopsLostAcknowledgements: input keyed at random or not at all,
// the dedup id in a JSON field, copies of each id on different input
// partitions. The broker appends the 2nd, 6th and 15th produce requests of
// hop 1 to the repartition topic and loses the acknowledgement (the
// connection closes; REQUEST_TIMED_OUT), so hop 1 sends those records
// again. Every id is forwarded exactly once, every unkeyed record once,
// with source headers naming the input record.
func TestTwoHopsLostAcknowledgements(t *testing.T) {
	for _, tc := range []struct {
		name   string
		answer func(*kmsg.ProduceRequest) (kmsg.Response, error)
	}{
		{"connection closed", func(*kmsg.ProduceRequest) (kmsg.Response, error) {
			return nil, errors.New("connection closed by the test after the append")
		}},
		{"request timed out", errorAnswer(kerr.RequestTimedOut.Code)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const inParts, reParts = 3, 4
			e := newTestEnv(t, inParts, reParts)
			k, err := key.Parse("json:id")
			if err != nil {
				t.Fatal(err)
			}
			if n, err := repartition.EnsureTopic(context.Background(), e.brokers, nil, reTopic, inTopic, reParts, testLogger()); err != nil || n != reParts {
				t.Fatalf("create repartition topic: %d partitions, %v", n, err)
			}
			at := []int{2, 6, 15}
			injected := afterAppendTo(t, e, reTopic, at, tc.answer)

			o := e.options("twohop")
			o.InputTopic, o.Repartitioned, o.Key = reTopic, true, k
			o.Store = fileStore(t, "twohop")
			out := e.collect()
			b := start(t, o)
			b.waitReady(t)
			h := startHop1(t, e, "twohop", k)

			in := newTwoHopInput(inParts, 300, 3, 40, 26)
			for i := 0; i < len(in.recs); i += 30 {
				e.produce(in.recs[i:min(i+30, len(in.recs))]...)
			}
			ends := map[int32]int64{}
			for _, r := range in.recs {
				ends[r.Partition] = max(ends[r.Partition], r.Offset+1)
			}
			eventually(t, 60*time.Second, "every fault injected and hop 1 caught up", func() bool {
				return injected.Load() == int32(len(at)) && h.caughtUp(inParts, ends)
			})
			repartitionSentinels(e, reParts)
			got := out.untilSentinels(reParts)
			in.check(t, got)
			var restarts float64
			for p := range inParts {
				restarts += metricValue(h.metrics.Restarts.WithLabelValues(inTopic, fmt.Sprint(p)))
			}
			// Faults on requests of one batch (one per repartition
			// partition, sent together) fail it once.
			if restarts == 0 {
				t.Error("hop 1 never restarted a partition after a lost acknowledgement")
			}
			h.stop()
			if err := b.stop(t); err != nil {
				t.Fatal(err)
			}
			if b.p.progress.Resent.Load() == 0 {
				t.Error("hop 2 dropped no re-send: the lost acknowledgements were never re-sent")
			}
			t.Logf("hop-1 restarts %v, hop-2 re-sends dropped %d", restarts, b.p.progress.Resent.Load())
		})
	}
}
