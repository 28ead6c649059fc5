package processor

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"

	"dedup/internal/testkit"
	"dedup/key"
	"dedup/rotation"
)

const (
	inTopic  = "events"
	outTopic = "events-deduped"
	retract  = "dedup-retract"
)

// testEnv is an in-process kfake broker with an input and an output topic,
// and a franz-go client to produce input and read output: a different
// client from the stage's, on purpose.
type testEnv struct {
	t       testing.TB
	cluster *kfake.Cluster
	brokers []string
	prod    *kgo.Client
	opts    []kfake.Opt // to reopen the cluster (restart)
}

func newTestEnv(t testing.TB, inParts, outParts int32, extra ...kfake.Opt) *testEnv {
	t.Helper()
	opts := []kfake.Opt{
		kfake.NumBrokers(1),
		kfake.GroupMinSessionTimeout(100 * time.Millisecond),
	}
	opts = append(opts, extra...)
	if inParts == outParts {
		opts = append(opts, kfake.SeedTopics(inParts, inTopic, outTopic))
	} else {
		opts = append(opts, kfake.SeedTopics(inParts, inTopic), kfake.SeedTopics(outParts, outTopic))
	}
	c := testkit.NewCluster(t, opts...)
	brokers := c.ListenAddrs()
	prod, err := kgo.NewClient(
		kgo.SeedBrokers(brokers...),
		kgo.DefaultProduceTopic(inTopic),
		kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ProducerLinger(0),
	)
	if err != nil {
		t.Fatalf("producer: %v", err)
	}
	t.Cleanup(prod.Close)
	return &testEnv{t: t, cluster: c, brokers: brokers, prod: prod, opts: opts}
}

// restart closes the broker and opens it again with the same options; with
// kfake.DataDir and kfake.Ports it comes back on the same address with its
// logs, groups and offsets.
func (e *testEnv) restart() time.Duration {
	e.t.Helper()
	began := time.Now()
	e.cluster.Close()
	c, err := kfake.NewCluster(e.opts...)
	if err != nil {
		e.t.Fatalf("reopen kfake: %v", err)
	}
	e.t.Cleanup(c.Close)
	e.cluster = c
	return time.Since(began)
}

// produce writes records to the input topic synchronously, in order.
func (e *testEnv) produce(recs ...*kgo.Record) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := e.prod.ProduceSync(ctx, recs...).FirstErr(); err != nil {
		e.t.Fatalf("produce: %v", err)
	}
}

// rec builds an input record for partition p at event time ts.
func rec(p int32, key string, value string, ts time.Time, headers ...kgo.RecordHeader) *kgo.Record {
	r := &kgo.Record{Partition: p, Value: []byte(value), Timestamp: ts, Headers: headers}
	if key != "" {
		r.Key = []byte(key)
	}
	return r
}

// options returns processor options for the test broker; tweak before New.
func (e *testEnv) options(group string) Options {
	keys, _ := key.Parse("key")
	return Options{
		Brokers:            e.brokers,
		GroupID:            group,
		InputTopic:         inTopic,
		OutputTopic:        outTopic,
		SessionTimeout:     time.Second,
		RebalanceTimeout:   2 * time.Second,
		HeartbeatInterval:  100 * time.Millisecond,
		Key:                keys,
		RetractHeader:      retract,
		Filter:             rotation.Options{ExpectedKeys: 10000, FPRate: 1e-6, Window: time.Hour, Mode: rotation.Counting},
		BatchTimeout:       2 * time.Millisecond,
		FetchMaxWait:       50 * time.Millisecond,
		CheckpointInterval: 200 * time.Millisecond,
		Metrics:            NewMetrics(prometheus.NewRegistry()),
		Logger:             testLogger(),
	}
}

func testLogger() *slog.Logger {
	if os.Getenv("DEDUP_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}

// running is a processor started in the background.
type running struct {
	p      *Processor
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	err    error
}

func start(t testing.TB, o Options) *running {
	t.Helper()
	p := mustNew(t, o)
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{p: p, cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- p.Run(ctx) }()
	t.Cleanup(func() { r.stop(t) })
	return r
}

// stop cancels Run (SIGTERM) and returns its error.
func (r *running) stop(t testing.TB) error {
	r.once.Do(func() {
		r.cancel()
		select {
		case r.err = <-r.done:
		case <-time.After(30 * time.Second):
			r.err = errors.New("Run did not return within 30s of cancel")
			t.Error(r.err)
		}
	})
	return r.err
}

// waitReady polls until the processor reports ready.
func (r *running) waitReady(t testing.TB) {
	t.Helper()
	eventually(t, 20*time.Second, "processor ready", func() bool { return r.p.Ready() })
}

// mustNew is New(o), failing t on an error.
func mustNew(t testing.TB, o Options) *Processor {
	t.Helper()
	p, err := New(o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	// Run closes the admin client's connections when it returns; a
	// processor the test never runs would leave them open.
	t.Cleanup(p.admin.CloseIdleConnections)
	return p
}

// startFresh starts a member with o and metrics of its own, as a new
// process has.
func startFresh(t testing.TB, o Options) *running {
	t.Helper()
	o.Metrics = NewMetrics(newRegistry())
	return start(t, o)
}

// startAfter produces w, then starts a member with o and waits until it
// has read w; what names w.
func (e *testEnv) startAfter(t testing.TB, o Options, w *workload, what string) *running {
	t.Helper()
	e.produce(w.recs...)
	r := start(t, o)
	r.waitRead(t, what, len(w.recs))
	return r
}

// checkpointAfter runs a member with o over w (startAfter) and stops it
// gracefully, so that its final checkpoint and commit cover w.
func (e *testEnv) checkpointAfter(t testing.TB, o Options, w *workload, what string) {
	t.Helper()
	if err := e.startAfter(t, o, w, what).stop(t); err != nil {
		t.Fatal(err)
	}
}

// waitRead waits until r has read n input records; what names them.
func (r *running) waitRead(t testing.TB, what string, n int) {
	t.Helper()
	eventually(t, 20*time.Second, what, func() bool { return r.p.Progress().In == uint64(n) })
}

func eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(10 * time.Millisecond) // polling interval, not synchronisation
	}
}

// outRec is one output record as read back by franz-go.
type outRec struct {
	Partition int32
	Offset    int64
	Key       string
	Value     string
	Time      time.Time
	Headers   map[string]string
	SrcPart   int32
	SrcOffset int64
}

// collector reads the output topic from the start, accumulating records.
type collector struct {
	t    testing.TB
	cl   *kgo.Client
	recs []outRec
	wait time.Duration // how long until waits (0: 30 s)
}

// runMember runs one member of a sequence sharing a checkpoint store: it
// starts o with metrics of its own, produces recs once the member is ready,
// waits until out holds the last of them, and stops the member.
func (e *testEnv) runMember(t *testing.T, out *collector, o Options, recs ...*kgo.Record) *running {
	t.Helper()
	r := startFresh(t, o)
	r.waitReady(t)
	e.produce(recs...)
	out.untilValue(string(recs[len(recs)-1].Value))
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	return r
}

func (e *testEnv) collect() *collector {
	e.t.Helper()
	cl, err := kgo.NewClient(
		kgo.SeedBrokers(e.brokers...),
		kgo.ConsumeTopics(outTopic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchMaxWait(50*time.Millisecond),
	)
	if err != nil {
		e.t.Fatalf("consumer: %v", err)
	}
	e.t.Cleanup(cl.Close)
	return &collector{t: e.t, cl: cl}
}

// until polls the output until cond holds over everything read so far.
func (c *collector) until(what string, cond func([]outRec) bool) []outRec {
	c.t.Helper()
	deadline := time.Now().Add(cmp.Or(c.wait, 30*time.Second))
	for !cond(c.recs) {
		if time.Now().After(deadline) {
			c.t.Fatalf("timed out waiting for output: %s (have %d records)", what, len(c.recs))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
		fs := c.cl.PollFetches(ctx)
		cancel()
		fs.EachRecord(func(r *kgo.Record) {
			o := outRec{Partition: r.Partition, Offset: r.Offset, Key: string(r.Key), Value: string(r.Value),
				Time: r.Timestamp, Headers: map[string]string{}}
			for _, h := range r.Headers {
				o.Headers[h.Key] = string(h.Value)
			}
			sp, _ := strconv.Atoi(o.Headers[HeaderSourcePartition])
			so, _ := strconv.ParseInt(o.Headers[HeaderSourceOffset], 10, 64)
			o.SrcPart, o.SrcOffset = int32(sp), so
			c.recs = append(c.recs, o)
		})
	}
	return c.recs
}

// untilValue waits for an output record with the given value (a sentinel
// produced last: once it is out, everything before it on its partition is).
func (c *collector) untilValue(v string) []outRec {
	c.t.Helper()
	return c.until("sentinel "+v, func(rs []outRec) bool {
		for _, r := range rs {
			if r.Value == v {
				return true
			}
		}
		return false
	})
}

// untilSentinels waits for one sentinel per input partition: enough when
// the output has the input's partition count (each input partition's
// records go to the output partition of its number); otherwise they spread
// over the output partitions and routedSentinels is the barrier.
func (c *collector) untilSentinels(parts int32) []outRec {
	c.t.Helper()
	for p := range parts {
		c.untilValue(sentinelValue(p))
	}
	return c.recs
}

func sentinelValue(p int32) string { return fmt.Sprintf("sentinel-%d", p) }

// sentinels returns one uniquely keyed record per partition, to produce last.
func sentinels(parts int32, ts time.Time) []*kgo.Record {
	var rs []*kgo.Record
	for p := range parts {
		rs = append(rs, rec(p, fmt.Sprintf("sentinel-key-%d", p), sentinelValue(p), ts))
	}
	return rs
}

// values lists the values of records, in output order.
func values(rs []outRec) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.Value
	}
	return out
}

// withoutSentinels drops sentinel records.
func withoutSentinels(rs []outRec) []outRec {
	var out []outRec
	for _, r := range rs {
		if len(r.Value) >= 9 && r.Value[:9] == "sentinel-" {
			continue
		}
		out = append(out, r)
	}
	return out
}

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// metricValue reads a counter or gauge.
func metricValue(m prometheus.Metric) float64 {
	var d dto.Metric
	if err := m.Write(&d); err != nil {
		panic(err)
	}
	switch {
	case d.Counter != nil:
		return d.Counter.GetValue()
	case d.Gauge != nil:
		return d.Gauge.GetValue()
	}
	panic("not a counter or gauge")
}

func newRegistry() *prometheus.Registry { return prometheus.NewRegistry() }

// storedOptions are e.options(group) with a file checkpoint store of the
// group's own.
func (e *testEnv) storedOptions(t testing.TB, group string) Options {
	t.Helper()
	o := e.options(group)
	o.Store = fileStore(t, group)
	return o
}

// stopSuppressed stops r, the successor of a crashed member that forwarded
// forwarded records, and checks that its replay scan suppressed exactly
// those.
func (r *running) stopSuppressed(t testing.TB, forwarded uint64) {
	t.Helper()
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
	if s := r.p.Progress().Suppressed; s != forwarded {
		t.Errorf("successor suppressed %d replayed records, want %d (what the crashed member forwarded)", s, forwarded)
	}
}

// crash stops r like a killed process: no final checkpoint, no final
// commit.
func (r *running) crash(t testing.TB) {
	t.Helper()
	r.p.crashed.Store(true)
	if err := r.stop(t); err != nil {
		t.Fatal(err)
	}
}
