package processor

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"dedup/internal/testkit"
	"dedup/key"
	"dedup/processor/repartition"
)

const reTopic = "events-repartition"

// hop1 is a running first hop.
type hop1 struct {
	cancel  context.CancelFunc
	done    chan error
	metrics repartition.Metrics
	from    map[int32]int64 // input offsets it starts at (committed before it): none = 0
}

func startHop1(t *testing.T, e *testEnv, group string, k key.Source, batch hop1Settings) *hop1 {
	t.Helper()
	labels := []string{"topic", "partition"}
	h := &hop1{done: make(chan error, 1), metrics: repartition.Metrics{
		Rekeyed:           prometheus.NewCounterVec(prometheus.CounterOpts{Name: "rekeyed"}, labels),
		Restarts:          prometheus.NewCounterVec(prometheus.CounterOpts{Name: "restarts"}, labels),
		Lag:               prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: "lag"}, labels),
		Skipped:           prometheus.NewCounterVec(prometheus.CounterOpts{Name: "skipped"}, labels),
		InputTruncations:  prometheus.NewCounterVec(prometheus.CounterOpts{Name: "input_truncations"}, labels),
		OutputTruncations: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "output_truncations"}, labels),
	}}
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() {
		h.done <- repartition.Run(ctx, repartition.Options{
			Brokers: e.brokers, GroupID: group + "-repartition", InputTopic: inTopic, Topic: reTopic, Key: k,
			SessionTimeout: time.Second, RebalanceTimeout: 2 * time.Second, HeartbeatInterval: 100 * time.Millisecond,
			BatchSize: batch.records, BatchBytes: batch.bytes, Compression: batch.codec, StartOffset: batch.start, FetchMaxWait: 50 * time.Millisecond, CommitInterval: 50 * time.Millisecond,
			RetryBackoff: 20 * time.Millisecond, Metrics: h.metrics, Logger: testLogger(),
		})
	}()
	t.Cleanup(h.stop)
	return h
}

// hop1Settings are hop 1's BatchSize, BatchBytes, Compression and
// StartOffset.
type hop1Settings struct {
	records, bytes int
	codec          kafka.Compression
	start          int64
}

// smallBatches: requests of 50 records at most.
var smallBatches = hop1Settings{records: 50}

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
		if ends[p] > 0 && metricValue(c) < float64(ends[p]-h.from[p]) {
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
	testkit.ForwardedOnce(t, "", in.ids, ids)
	testkit.ForwardedOnce(t, "unkeyed ", in.unkeyed, unkeyed)
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
// connection closes; REQUEST_TIMED_OUT), or refuses them, so hop 1 sends
// those records again. Every id is forwarded exactly once, every unkeyed
// record once, with source headers naming the input record. With requests
// of 50 records, and with requests of 3 records and 200 bytes, so that a
// repartition partition's share of a batch goes in several requests and
// the faults fall between two of them.
func TestTwoHopsLostAcknowledgements(t *testing.T) {
	for _, batch := range []hop1Settings{smallBatches, {records: 3, bytes: 200}} {
		t.Run(fmt.Sprintf("requests of %d records", batch.records), func(t *testing.T) { twoHopsLostAcknowledgements(t, batch) })
	}
}

func twoHopsLostAcknowledgements(t *testing.T, batch hop1Settings) {
	for _, tc := range []struct {
		name   string
		answer func(*kmsg.ProduceRequest) (kmsg.Response, error)
		refuse bool // answered without the append
	}{
		{"connection closed", func(*kmsg.ProduceRequest) (kmsg.Response, error) {
			return nil, errors.New("connection closed by the test after the append")
		}, false},
		{"request timed out", errorAnswer(kerr.RequestTimedOut.Code), false},
		// Not appended while the batch's requests to other partitions
		// are: the re-send must land in order after what landed.
		{"not leader, not appended", errorAnswer(kerr.NotLeaderForPartition.Code), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const inParts, reParts = 3, 4
			e, k := twoHopEnv(t, inParts, reParts)
			at := []int{2, 6, 15}
			var injected *atomic.Int32
			if tc.refuse {
				injected = refuseProduceTo(t, e, reTopic, at, tc.answer)
			} else {
				injected = afterAppendTo(t, e, reTopic, at, tc.answer)
			}

			h, b, restarts := throughTwoHops(t, e, twoHopRun{group: "twohop", key: k, batch: batch, stored: true,
				inParts: inParts, reParts: reParts, input: newTwoHopInput(inParts, 300, 3, 40, 26),
				faults: len(at), injected: injected})
			// Faults on requests of one batch (one per repartition
			// partition, sent together) fail it once.
			if restarts == 0 {
				t.Error("hop 1 never restarted a partition after a lost acknowledgement")
			}
			h.stop()
			if err := b.stop(t); err != nil {
				t.Fatal(err)
			}
			if !tc.refuse && b.p.progress.Resent.Load() == 0 {
				t.Error("hop 2 dropped no re-send: the lost acknowledgements were never re-sent")
			}
			t.Logf("hop-1 restarts %v, hop-2 re-sends dropped %d", restarts, b.p.progress.Resent.Load())
		})
	}
}

// twoHopEnv is a broker with inParts input partitions and the repartition
// topic of reParts, and the dedup key of twoHopInput (its JSON id).
func twoHopEnv(t *testing.T, inParts, reParts int32) (*testEnv, key.Source) {
	t.Helper()
	e := newTestEnv(t, inParts, reParts)
	k, err := key.Parse("json:id")
	if err != nil {
		t.Fatal(err)
	}
	if n, err := repartition.EnsureTopic(context.Background(), e.brokers, nil, reTopic, inTopic, int(reParts), testLogger()); err != nil || n != int(reParts) {
		t.Fatalf("create repartition topic: %d partitions, %v", n, err)
	}
	return e, k
}

// twoHopRun is a run of both hops through faults.
type twoHopRun struct {
	group            string
	key              key.Source
	batch            hop1Settings
	stored           bool // hop 2 with a file store
	inParts, reParts int32
	input            twoHopInput
	faults           int           // how many the test injects
	injected         *atomic.Int32 // how many it injected so far
}

// throughTwoHops starts hop 2 and hop 1, produces run.input, waits until
// every fault was injected and hop 1 is caught up, and checks the output:
// every id once, every unkeyed record once. It returns both hops, still
// running, and hop 1's restarts over all input partitions.
func throughTwoHops(t *testing.T, e *testEnv, run twoHopRun) (*hop1, *running, float64) {
	t.Helper()
	o := e.options(run.group)
	o.InputTopic, o.Repartitioned, o.Key = reTopic, true, run.key
	if run.stored {
		o.Store = fileStore(t, run.group)
	}
	out := e.collect()
	b := start(t, o)
	b.waitReady(t)
	h := startHop1(t, e, run.group, run.key, run.batch)
	in := run.input
	for i := 0; i < len(in.recs); i += 30 {
		e.produce(in.recs[i:min(i+30, len(in.recs))]...)
	}
	ends := map[int32]int64{}
	for _, r := range in.recs {
		ends[r.Partition] = max(ends[r.Partition], r.Offset+1)
	}
	eventually(t, 60*time.Second, "every fault injected and hop 1 caught up", func() bool {
		return run.injected.Load() == int32(run.faults) && h.caughtUp(run.inParts, ends)
	})
	repartitionSentinels(e, run.reParts)
	in.check(t, out.untilSentinels(run.reParts))
	var restarts float64
	for p := range run.inParts {
		restarts += metricValue(h.metrics.Restarts.WithLabelValues(inTopic, fmt.Sprint(p)))
	}
	return h, b, restarts
}

// refuseProduceTo answers the nth produce requests to topic (n in at,
// counted from 1) with answer's response without appending them.
func refuseProduceTo(t *testing.T, e *testEnv, topic string, at []int, answer func(*kmsg.ProduceRequest) (kmsg.Response, error)) *atomic.Int32 {
	t.Helper()
	var seen, injected atomic.Int32
	e.cluster.ControlKey(int16(kmsg.Produce), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		e.cluster.KeepControl()
		req := kr.(*kmsg.ProduceRequest)
		if len(req.Topics) == 0 || req.Topics[0].Topic != topic || !slices.Contains(at, int(seen.Add(1))) {
			return nil, nil, false
		}
		injected.Add(1)
		resp, err := answer(req)
		return resp, err, true
	})
	return &injected
}

// TestRepartitionPartitionsAdded is docs/repartition.md's "Adding
// partitions": the repartition topic grows from 2 to 4 partitions between
// two parts of the input; hop 1 routes by the new count from its next
// generation and hop 2 takes the new partitions. Nothing is lost: every id
// first seen after the growth is forwarded once, every unkeyed record once;
// an id seen before it may move to a partition whose filters never saw it
// and be forwarded once more, never more.
func TestRepartitionPartitionsAdded(t *testing.T) {
	const inParts = 3
	e := newTestEnv(t, inParts, 2)
	k, err := key.Parse("json:id")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := repartition.EnsureTopic(context.Background(), e.brokers, nil, reTopic, inTopic, 2, testLogger()); err != nil {
		t.Fatal(err)
	}
	o := e.options("grow")
	o.InputTopic, o.Repartitioned, o.Key = reTopic, true, k
	o.Store = fileStore(t, "grow")
	o.PartitionWatchInterval = 200 * time.Millisecond
	out := e.collect()
	b := start(t, o)
	b.waitReady(t)
	h := startHop1(t, e, "grow", k, smallBatches)

	before := newTwoHopInput(inParts, 200, 2, 20, 7) // ids 0..199
	e.produce(before.recs...)
	ends := map[int32]int64{}
	for _, r := range before.recs {
		ends[r.Partition] = max(ends[r.Partition], r.Offset+1)
	}
	eventually(t, 30*time.Second, "hop 1 caught up", func() bool { return h.caughtUp(inParts, ends) })
	repartitionSentinels(e, 2)
	out.untilSentinels(2)

	e.addPartitions(reTopic, 4)
	h.stop() // its next generation reads the new count
	h = startHop1(t, e, "grow", k, smallBatches)
	h.from = maps.Clone(ends) // committed at its predecessor's stop
	eventually(t, 30*time.Second, "hop 2 assigned the new partitions", func() bool {
		return metricValue(b.p.metrics.Assigned) == 4
	})

	// ids 100..299: half seen before the growth, half new.
	after := newTwoHopInput(inParts, 300, 2, 20, 8)
	var recs []*kgo.Record
	for _, r := range after.recs {
		if in := after.unkeyed[string(r.Value)]; in || !strings.Contains(string(r.Value), `"id":"id-`) || idNumber(r.Value) >= 100 {
			r.Value = append([]byte(`{"after":1,`), r.Value[1:]...)
			recs = append(recs, r)
		}
	}
	e.produce(recs...)
	for _, r := range recs {
		ends[r.Partition] = max(ends[r.Partition], r.Offset+1)
	}
	eventually(t, 30*time.Second, "hop 1 caught up again", func() bool { return h.caughtUp(inParts, ends) })
	var ss []*kgo.Record
	for p := range int32(4) {
		v := fmt.Sprintf("sentinel-after-%d", p)
		ss = append(ss, &kgo.Record{Topic: reTopic, Partition: p, Key: []byte(v), Value: []byte(v), Timestamp: t0})
	}
	// A new producer: the test's knows the old count.
	prod, err := kgo.NewClient(kgo.SeedBrokers(e.brokers...), kgo.RecordPartitioner(kgo.ManualPartitioner()))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	if err := prod.ProduceSync(context.Background(), ss...).FirstErr(); err != nil {
		t.Fatal(err)
	}
	for p := range 4 {
		out.untilValue(fmt.Sprintf("sentinel-after-%d", p))
	}

	ids := map[string]int{}
	unkeyed := map[string]int{}
	for _, r := range withoutSentinels(out.recs) {
		if strings.Contains(r.Value, `"n":`) {
			unkeyed[r.Value]++
			continue
		}
		id := r.Value[strings.Index(r.Value, `"id":"`)+6:]
		ids[id[:strings.IndexByte(id, '"')]]++
	}
	moved := 0
	for i := range 300 {
		id := fmt.Sprintf("id-%d", i)
		switch n := ids[id]; {
		case i >= 100 && i < 200 && (n == 1 || n == 2):
			moved += n - 1
		case n != 1:
			t.Errorf("%s forwarded %d times, want once", id, n)
		}
	}
	for v, n := range unkeyed {
		if n != 1 {
			t.Errorf("unkeyed %s forwarded %d times, want once", v, n)
		}
	}
	if want := len(before.unkeyed) + len(after.unkeyed); len(unkeyed) != want {
		t.Errorf("%d unkeyed records forwarded, want %d", len(unkeyed), want)
	}
	t.Logf("of 100 ids seen before the growth, %d forwarded once more (moved to a partition that had not seen them)", moved)
	h.stop()
	if err := b.stop(t); err != nil {
		t.Fatal(err)
	}
}

// idNumber is the number of the id in a twoHopInput value.
func idNumber(v []byte) int {
	s := string(v)
	s = s[strings.Index(s, `"id":"id-`)+9:]
	n, _ := strconv.Atoi(s[:strings.IndexByte(s, '"')])
	return n
}

// TestRekeyCompressed: hop 1 compresses its produce requests as the
// output's are (PRODUCE_COMPRESSION): the repartition topic's batches are
// zstd, and each record holds its input value and the origin trailer.
func TestRekeyCompressed(t *testing.T) {
	const inParts, reParts = 2, 2
	e, k := twoHopEnv(t, inParts, reParts)
	startHop1(t, e, "zstd", k, hop1Settings{records: 50, codec: kafka.Zstd})
	in := newTwoHopInput(inParts, 20, 1, 2, 7)
	e.produce(in.recs...)
	got := readTopic(t, e, reTopic, len(in.recs))
	if len(got) != len(in.recs) {
		t.Fatalf("%d repartition records, want %d", len(got), len(in.recs))
	}
	values := map[string]bool{}
	for _, r := range in.recs {
		values[string(r.Value)] = true
	}
	for _, r := range got {
		if c := r.Attrs.CompressionType(); c != 4 {
			t.Errorf("record at %d/%d: compression type %d, want 4 (zstd)", r.Partition, r.Offset, c)
		}
		v, _, ok := bytes.Cut(r.Value, []byte(inTopic+"/"))
		if !ok || !values[string(v)] || !bytes.HasSuffix(r.Value, []byte("\xffdO1")) {
			t.Errorf("record at %d/%d: value %q is not an input value and its trailer", r.Partition, r.Offset, r.Value)
		}
	}
}

// TestRekeyFetchFaults: the connection of hop 1's fetches of the input
// closes on the 2nd, 5th and 9th of them, while records flow. Each session
// starts again from the first record not acknowledged; every id is still
// forwarded exactly once, every unkeyed record once.
func TestRekeyFetchFaults(t *testing.T) {
	const inParts, reParts = 3, 4
	e, k := twoHopEnv(t, inParts, reParts)
	at := []int32{2, 5, 9}
	var seen, injected atomic.Int32
	e.cluster.ControlKey(int16(kmsg.Fetch), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		e.cluster.KeepControl()
		req := kr.(*kmsg.FetchRequest)
		if len(req.Topics) == 0 || req.Topics[0].Topic != inTopic || !slices.Contains(at, seen.Add(1)) {
			return nil, nil, false
		}
		injected.Add(1)
		return nil, errors.New("connection closed by the test"), true
	})
	h, b, restarts := throughTwoHops(t, e, twoHopRun{group: "fetchfault", key: k, batch: smallBatches,
		inParts: inParts, reParts: reParts, input: newTwoHopInput(inParts, 200, 3, 30, 41),
		faults: len(at), injected: &injected})
	if restarts < float64(len(at)) {
		t.Errorf("%v session restarts, want one per closed fetch (%d)", restarts, len(at))
	}
	h.stop()
	if err := b.stop(t); err != nil {
		t.Fatal(err)
	}
}

// hop1Env is a one-partition input with its repartition topic, and the
// dedup key taken from the record key.
func hop1Env(t *testing.T) (*testEnv, key.Source) {
	t.Helper()
	e := newTestEnv(t, 1, 1)
	if _, err := repartition.EnsureTopic(context.Background(), e.brokers, nil, reTopic, inTopic, 1, testLogger()); err != nil {
		t.Fatal(err)
	}
	k, err := key.Parse("key")
	if err != nil {
		t.Fatal(err)
	}
	return e, k
}

// keyedRecs are input records k<from> up to k<to> of partition 0.
func keyedRecs(from, to int) []*kgo.Record {
	var rs []*kgo.Record
	for i := from; i < to; i++ {
		rs = append(rs, &kgo.Record{Partition: 0, Key: fmt.Appendf(nil, "k%d", i), Value: []byte("v"), Timestamp: t0})
	}
	return rs
}

// TestRekeySkipsDeleted: input records deleted (DeleteRecords) after hop
// 1 committed its position and before it read them are reported: a
// warning and dedup_input_skipped_offsets_total count exactly them, and
// hop 1 goes on from the log start.
func TestRekeySkipsDeleted(t *testing.T) {
	e, k := hop1Env(t)
	recs := keyedRecs
	e.produce(recs(0, 50)...)
	h := startHop1(t, e, "skip", k, smallBatches)
	eventually(t, 30*time.Second, "hop 1 caught up", func() bool { return h.caughtUp(1, map[int32]int64{0: 50}) })
	h.stop() // commits 50
	e.produce(recs(50, 100)...)
	testkit.DeleteRecords(t, strings.Join(e.brokers, ","), inTopic, 0, 80)
	h = startHop1(t, e, "skip", k, smallBatches)
	h.from = map[int32]int64{0: 80}
	eventually(t, 30*time.Second, "hop 1 caught up after the gap", func() bool { return h.caughtUp(1, map[int32]int64{0: 100}) })
	if got := metricValue(h.metrics.Skipped.WithLabelValues(inTopic, "0")); got != 30 {
		t.Errorf("%v input offsets counted skipped, want 30 (50 to 79)", got)
	}
	if got := readTopic(t, e, reTopic, 70); len(got) != 70 {
		t.Errorf("%d repartition records, want 70 (0-49 and 80-99)", len(got))
	}
}

// TestRekeyLatestStartKept: hop 1 starts at the log's end of an empty
// input (KAFKA_START_OFFSET=latest); its first fetch is held while records
// arrive, then its connection closes. The session that follows goes on
// from where the first one started, not from the log's end by then: every
// record is re-keyed.
func TestRekeyLatestStartKept(t *testing.T) {
	e, k := twoHopEnv(t, 1, 1)
	held, release := make(chan struct{}), make(chan struct{})
	var once atomic.Bool
	e.cluster.ControlKey(int16(kmsg.Fetch), func(kr kmsg.Request) (kmsg.Response, error, bool) {
		e.cluster.KeepControl()
		req := kr.(*kmsg.FetchRequest)
		if len(req.Topics) == 0 || req.Topics[0].Topic != inTopic || !once.CompareAndSwap(false, true) {
			return nil, nil, false
		}
		close(held)
		e.cluster.SleepControl(func() { <-release })
		return nil, errors.New("connection closed by the test"), true
	})
	h := startHop1(t, e, "latest", k, hop1Settings{records: 50, start: kafka.LastOffset})
	select {
	case <-held:
	case <-time.After(20 * time.Second):
		t.Fatal("hop 1 never fetched the input")
	}
	in := newTwoHopInput(1, 10, 1, 2, 3)
	e.produce(in.recs...)
	close(release)
	eventually(t, 30*time.Second, "every record re-keyed after the failed fetch", func() bool {
		return h.caughtUp(1, map[int32]int64{0: int64(len(in.recs))})
	})
}
