package processor

import (
	"context"
	"dedup/internal/testkit"
	"fmt"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/twmb/franz-go/pkg/kgo"
)

// TestKafkaGoTimestamps pins the kafka-go behaviour the stage works around
// (docs/time.md): its reader reports a timestamp of 0 and every negative
// one as the zero time.Time; its writer stamps a zero time, and any time
// whose Unix milliseconds are 0, with the wall clock, and writes negative
// milliseconds as they are. If a kafka-go upgrade changes one of these,
// this test says which, and the stage's choice of -1 for a record read
// without a timestamp is to be revisited.
func TestKafkaGoTimestamps(t *testing.T) {
	e := newTestEnv(t, 1, 1)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	// Reader: franz-go writes exact milliseconds.
	in := []int64{t0.UnixMilli(), 0, -1, -5, 1}
	for i, ms := range in {
		e.produce(rec(0, fmt.Sprint(i), fmt.Sprint(i), time.UnixMilli(ms)))
	}
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: e.brokers, Topic: inTopic, Partition: 0, MaxWait: 50 * time.Millisecond})
	defer r.Close()
	for i, ms := range in {
		m, err := r.FetchMessage(ctx)
		if err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
		zero := ms <= 0
		if m.Time.IsZero() != zero || !zero && m.Time.UnixMilli() != ms {
			t.Errorf("kafka-go read timestamp %d as %v (zero %v), want zero=%v", ms, m.Time, m.Time.IsZero(), zero)
		}
	}

	// Writer: read back by franz-go.
	w := &kafka.Writer{Addr: kafka.TCP(e.brokers...), Topic: outTopic, RequiredAcks: kafka.RequireAll, BatchTimeout: time.Millisecond, Transport: testkit.KafkaTransport(t)}
	defer w.Close()
	written := []time.Time{{}, time.UnixMilli(0), time.UnixMilli(-1), time.UnixMilli(-5), time.UnixMilli(1), t0}
	before := time.Now().Add(-time.Second).UnixMilli() // the broker's clock is this machine's
	for i, ts := range written {
		if err := w.WriteMessages(ctx, kafka.Message{Value: []byte(fmt.Sprint(i)), Time: ts}); err != nil {
			t.Fatalf("write %d: %v", i, err)
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(e.brokers...), kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{
		outTopic: {0: kgo.NewOffset().AtStart()},
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	var got []*kgo.Record
	for len(got) < len(written) && ctx.Err() == nil {
		got = append(got, cl.PollFetches(ctx).Records()...)
	}
	if len(got) != len(written) {
		t.Fatalf("read back %d records, want %d", len(got), len(written))
	}
	for i, ts := range written {
		ms := got[i].Timestamp.UnixMilli()
		switch wallClock := ts.IsZero() || ts.UnixMilli() == 0; {
		case wallClock && ms < before:
			t.Errorf("kafka-go wrote %v as %d, want the wall clock (>= %d)", ts, ms, before)
		case !wallClock && ms != ts.UnixMilli():
			t.Errorf("kafka-go wrote %v as %d, want %d", ts, ms, ts.UnixMilli())
		}
	}
}

// TestTimestampsKept: a forwarded record keeps its timestamp. One read
// without a timestamp (0 or negative: kafka-go reports them alike) is
// written with -1, Kafka's "no timestamp", never with the wall clock, and
// counted in dedup_timestamp_rewritten_total.
func TestTimestampsKept(t *testing.T) {
	e := newTestEnv(t, 1, 1)
	o := e.options("kept")
	o.Now = fixedClock(t0.Add(time.Minute))
	r := start(t, o)
	out := e.collect()
	r.waitReady(t)

	year := t0.AddDate(1, 0, 0)
	cases := []struct {
		in, want time.Time
	}{
		{t0, t0},
		{time.UnixMilli(0), time.UnixMilli(-1)},
		{time.UnixMilli(-1), time.UnixMilli(-1)},
		{time.UnixMilli(-5), time.UnixMilli(-1)},
		{time.UnixMilli(1), time.UnixMilli(1)},
		{t0.Add(1234 * time.Millisecond), t0.Add(1234 * time.Millisecond)},
		{year, year}, // ahead of the clock: decided in the current window, forwarded as it is
	}
	for i, c := range cases {
		e.produce(rec(0, fmt.Sprint("key-", i), fmt.Sprint(i), c.in))
	}
	e.produce(sentinels(1, t0.Add(2*time.Second))...)
	got := withoutSentinels(out.untilSentinels(1))
	if len(got) != len(cases) {
		t.Fatalf("got %d outputs, want %d: %q", len(got), len(cases), values(got))
	}
	for i, c := range cases {
		if g := got[i].Time.UnixMilli(); g != c.want.UnixMilli() {
			t.Errorf("input stamped %d: output stamped %d, want %d", c.in.UnixMilli(), g, c.want.UnixMilli())
		}
	}
	eventually(t, 10*time.Second, "timestamp counters published", func() bool {
		return metricValue(r.p.metrics.TimestampRewritten.WithLabelValues(inTopic, "0")) == 3 &&
			anomalies(r, AnomalyMissing) == 3 && anomalies(r, AnomalyFuture) == 1
	})
}
