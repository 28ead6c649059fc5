package copyloop

import (
	"bytes"
	"context"
	"dedup/internal/testkit"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
)

const (
	parts = 3
	in    = "in"
	out   = "out"
)

var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// seed writes n records round-robin over the input partitions, with a
// header each, and returns the partitions' end offsets.
func seed(t *testing.T, cl *kgo.Client, n int) []int64 {
	t.Helper()
	ends := make([]int64, parts)
	for i := range n {
		r := &kgo.Record{
			Topic:     in,
			Partition: int32(i % parts),
			Key:       fmt.Appendf(nil, "k%d", i%(n/2)), // every key twice
			Value:     fmt.Appendf(nil, "v%d", i),
			Timestamp: t0.Add(time.Duration(i) * time.Millisecond),
			Headers:   []kgo.RecordHeader{{Key: "h", Value: []byte("x")}},
		}
		if err := cl.ProduceSync(context.Background(), r).FirstErr(); err != nil {
			t.Fatal(err)
		}
		ends[i%parts]++
	}
	return ends
}

// output reads every record of the output topic.
func output(t *testing.T, cl *kgo.Client, want int) []*kgo.Record {
	t.Helper()
	cl.AddConsumeTopics(out)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var recs []*kgo.Record
	for len(recs) < want {
		fs := cl.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("output holds %d records, want %d: %v", len(recs), want, err)
		}
		recs = append(recs, fs.Records()...)
	}
	return recs
}

func setup(t *testing.T) (brokers []string, cl *kgo.Client) {
	t.Helper()
	c := testkit.NewCluster(t, kfake.NumBrokers(1), kfake.SeedTopics(parts, in, out))
	cl, err := kgo.NewClient(kgo.SeedBrokers(c.ListenAddrs()...), kgo.RecordPartitioner(kgo.ManualPartitioner()),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(cl.Close)
	return c.ListenAddrs(), cl
}

func options(brokers []string, ends []int64) Options {
	return Options{
		Brokers: brokers, InputTopic: in, OutputTopic: out, Ends: ends,
		FetchMinBytes: 1, FetchMaxBytes: 1 << 20, FetchMaxWait: 50 * time.Millisecond, QueueCapacity: 64,
		BatchSize: 7, BatchBytes: 1 << 20, BatchTimeout: time.Millisecond, MaxAttempts: 3,
		MaxInFlight: 10,
	}
}

// TestCopiesEveryRecordWithSourceHeaders: every input record lands once in
// the output partition of its number, with its key, value, timestamp and
// headers, and the three source headers naming it.
func TestCopiesEveryRecordWithSourceHeaders(t *testing.T) {
	brokers, cl := setup(t)
	const n = 300
	ends := seed(t, cl, n)
	o := options(brokers, ends)
	o.SourceHeaders = &SourceHeaders{Topic: "st", Partition: "sp", Offset: "so"}
	var read atomic.Int64
	o.Read = func() { read.Add(1) }
	res, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if res.In != n || res.Out != n || read.Load() != n {
		t.Fatalf("in %d, out %d, Read called %d times; want %d each", res.In, res.Out, read.Load(), n)
	}
	if res.FirstRead.IsZero() || res.LastAck.Before(res.FirstRead) {
		t.Errorf("first read %v, last ack %v", res.FirstRead, res.LastAck)
	}
	seen := map[string]bool{}
	for _, r := range output(t, cl, n) {
		hs := map[string]string{}
		for _, h := range r.Headers {
			hs[h.Key] = string(h.Value)
		}
		if len(r.Headers) != 4 || hs["h"] != "x" || hs["st"] != in || hs["sp"] != strconv.Itoa(int(r.Partition)) {
			t.Fatalf("record %s at %d/%d: headers %v", r.Value, r.Partition, r.Offset, r.Headers)
		}
		i, err := strconv.Atoi(string(bytes.TrimPrefix(r.Value, []byte("v"))))
		if err != nil {
			t.Fatal(err)
		}
		wantOffset := strconv.Itoa(i / parts)
		if int(r.Partition) != i%parts || hs["so"] != wantOffset || string(r.Key) != fmt.Sprintf("k%d", i%(n/2)) ||
			!r.Timestamp.Equal(t0.Add(time.Duration(i)*time.Millisecond)) {
			t.Fatalf("record %d: partition %d, key %s, source offset %s, time %v", i, r.Partition, r.Key, hs["so"], r.Timestamp)
		}
		if seen[string(r.Value)] {
			t.Fatalf("record %d written twice", i)
		}
		seen[string(r.Value)] = true
	}
}

// TestSeenDropsRecords: a record the partition's decider reports seen is
// not written; the others are, without source headers when none are asked.
func TestSeenDropsRecords(t *testing.T) {
	brokers, cl := setup(t)
	const n = 300
	ends := seed(t, cl, n)
	o := options(brokers, ends)
	o.Seen = func(int) func([]byte, time.Time) bool {
		keys := map[string]bool{}
		return func(k []byte, _ time.Time) bool {
			s := keys[string(k)]
			keys[string(k)] = true
			return s
		}
	}
	res, err := Run(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	// Key i%(n/2) occurs at i and i+n/2; n/2 = 150 is a multiple of parts,
	// so both land in the same partition and the second is dropped.
	if res.In != n || res.Out != n/2 {
		t.Fatalf("in %d, out %d; want %d and %d", res.In, res.Out, n, n/2)
	}
	for _, r := range output(t, cl, n/2) {
		i, err := strconv.Atoi(string(bytes.TrimPrefix(r.Value, []byte("v"))))
		if err != nil {
			t.Fatal(err)
		}
		if i >= n/2 || len(r.Headers) != 1 {
			t.Fatalf("record %d forwarded with headers %v: want only first occurrences, headers untouched", i, r.Headers)
		}
	}
}
