package output

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	rawproduceAPI "github.com/segmentio/kafka-go/protocol/rawproduce"

	"dedup/processor/partition"
)

// captureRT answers every produce request with fail's verdict for it (nil:
// success) and keeps the record sets it was sent.
type captureRT struct {
	mu    sync.Mutex
	sets  [][]byte
	parts []int32
	fail  func(n int) error // n: requests before this one
}

func (c *captureRT) RoundTrip(_ context.Context, _ net.Addr, req kafka.Request) (kafka.Response, error) {
	r := req.(*rawproduceAPI.Request)
	var buf bytes.Buffer
	if _, err := r.Topics[0].Partitions[0].RecordSet.WriteTo(&buf); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	n := len(c.sets)
	c.sets, c.parts = append(c.sets, buf.Bytes()), append(c.parts, r.Topics[0].Partitions[0].Partition)
	if c.fail != nil {
		if err := c.fail(n); err != nil {
			return nil, err
		}
	}
	return nil, nil
}

// completions collects a drop writer's completions.
type completions struct {
	mu   sync.Mutex
	data []any
	errs []error
	done chan struct{}
	want int
}

func newCompletions(want int) *completions {
	return &completions{done: make(chan struct{}), want: want}
}

func (c *completions) complete(msgs []kafka.Message, err error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range msgs {
		c.data, c.errs = append(c.data, m.WriterData), append(c.errs, err)
	}
	if len(c.data) == c.want {
		close(c.done)
	}
}

func (c *completions) wait(t *testing.T) {
	t.Helper()
	select {
	case <-c.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("%d of %d records completed", len(c.data), c.want)
	}
}

func testDropWriter(t *testing.T, rt kafka.RoundTripper, comp kafka.Compression, batchSize int, batchBytes int64, linger time.Duration, done func([]kafka.Message, error)) *dropWriter {
	e := &testEnv{t: t, brokers: []string{"127.0.0.1:1"}}
	c := e.config(nil, nil)
	c.DroppedTopic, c.Compression, c.BatchSize, c.BatchTimeout = "drops", comp, batchSize, linger
	w := newDropWriter(&c, batchBytes, rt, done)
	w.backoffMin, w.backoffMax = time.Millisecond, time.Millisecond
	return w
}

// dropTestMessages are rawTestRecords as messages to partition part, each
// with its index as WriterData.
func dropTestMessages(part int) []kafka.Message {
	var msgs []kafka.Message
	for i, r := range rawTestRecords() {
		m := kafka.Message{Time: r.Time, Headers: r.Headers, Partition: part, WriterData: i}
		if r.Key != nil {
			m.Key, _ = io.ReadAll(r.Key)
		}
		if r.Value != nil {
			m.Value, _ = io.ReadAll(r.Value)
		}
		msgs = append(msgs, m)
	}
	return msgs
}

// TestDropWriterAsKafkaGo: the drop writer's batches are byte for byte
// kafka-go's, compressed or not, and every record completes once, in
// order.
func TestDropWriterAsKafkaGo(t *testing.T) {
	for _, comp := range []kafka.Compression{0, kafka.Gzip, kafka.Snappy, kafka.Lz4, kafka.Zstd} {
		t.Run(fmt.Sprint(comp), func(t *testing.T) {
			msgs := dropTestMessages(2)
			rt := &captureRT{}
			done := newCompletions(len(msgs))
			w := testDropWriter(t, rt, comp, len(msgs), 10<<20, time.Hour, done.complete)
			if err := w.WriteMessages(context.Background(), msgs...); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			done.wait(t)
			rs := protocol.RecordSet{Version: 2, Attributes: protocol.Attributes(comp), Records: protocol.NewRecordReader(rawTestRecords()...)}
			var want bytes.Buffer
			if _, err := rs.WriteTo(&want); err != nil {
				t.Fatal(err)
			}
			if len(rt.sets) != 1 || rt.parts[0] != 2 {
				t.Fatalf("%d requests to partitions %v, want one to 2", len(rt.sets), rt.parts)
			}
			if got := rt.sets[0]; !bytes.Equal(got, want.Bytes()) {
				t.Fatalf("%d bytes differ from kafka-go's %d at byte %d", len(got), want.Len(), firstDiff(got, want.Bytes()))
			}
			for i, d := range done.data {
				if d != i || done.errs[i] != nil {
					t.Fatalf("completion %d: record %v, %v", i, d, done.errs[i])
				}
			}
		})
	}
}

// TestDropWriterBatches: batches close at the batch size, before the
// batch bytes, and when the linger ends; each partition's go out in
// order; a record larger than a batch fails the call as kafka.Writer's
// does, and a closed writer takes nothing.
func TestDropWriterBatches(t *testing.T) {
	const n = 40
	var msgs []kafka.Message
	for i := range n {
		msgs = append(msgs, kafka.Message{Key: fmt.Appendf(nil, "k%02d", i), Value: bytes.Repeat([]byte{'v'}, 100), Partition: i % 2, WriterData: i,
			Time: time.UnixMilli(int64(1e12 + i)), Headers: []kafka.Header{{Key: "h", Value: []byte("x")}}})
	}
	rt := &captureRT{}
	done := newCompletions(n)
	const batchBytes = 3 * 130 // three records of 130 bytes by kafka-go's measure (partition.MessageSize)
	w := testDropWriter(t, rt, 0, 5, batchBytes, time.Millisecond, done.complete)
	big := kafka.Message{Value: make([]byte, batchBytes)}
	var tooLarge kafka.MessageTooLargeError
	if err := w.WriteMessages(context.Background(), msgs[0], big); !errors.As(err, &tooLarge) {
		t.Fatalf("a record larger than a batch: %v, want kafka.MessageTooLargeError", err)
	}
	for i := 0; i < n; i += 7 {
		if err := w.WriteMessages(context.Background(), msgs[i:min(n, i+7)]...); err != nil {
			t.Fatal(err)
		}
	}
	done.wait(t) // the last batches by their linger
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.WriteMessages(context.Background(), msgs[0]); !errors.Is(err, io.ErrClosedPipe) {
		t.Errorf("write after close: %v", err)
	}
	next := [2]int{0, 1}
	for i, set := range rt.sets {
		if len(set) > batchRecordsAt+batchBytes {
			t.Errorf("request %d: %d bytes, batch bytes %d", i, len(set), batchBytes)
		}
		recs := readBatch(t, set)
		if len(recs) > 3 {
			t.Errorf("request %d: %d records", i, len(recs))
		}
		for _, r := range recs {
			p := rt.parts[i]
			if r != fmt.Sprintf("k%02d", next[p]) {
				t.Fatalf("partition %d: %s, want k%02d", p, r, next[p])
			}
			next[p] += 2
		}
	}
	if next != [2]int{n, n + 1} {
		t.Fatalf("records up to %v written, want all %d", next, n)
	}
	seen := map[any]bool{}
	for i, d := range done.data {
		if done.errs[i] != nil || seen[d] {
			t.Fatalf("completion %d: record %v (again: %v), %v", i, d, seen[d], done.errs[i])
		}
		seen[d] = true
	}
}

// TestDropWriterRetries: a batch the transport reports as certainly not
// appended (retriable) is sent again, up to the attempts; any other
// failure completes it at once, failed.
func TestDropWriterRetries(t *testing.T) {
	for _, tc := range []struct {
		name     string
		err      error
		failN    int // requests failing
		requests int
		failed   bool
	}{
		{"retriable once", &OutputError{Kind: OutputRetriable, Err: kafka.NotLeaderForPartition}, 1, 2, false},
		{"retriable always", &OutputError{Kind: OutputRetriable, Err: kafka.NotLeaderForPartition}, 5, 3, true},
		{"ambiguous", &OutputError{Kind: OutputAmbiguous, Err: kafka.RequestTimedOut}, 1, 1, true},
		{"aborted", errAborted, 1, 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rt := &captureRT{fail: func(n int) error {
				if n < tc.failN {
					return tc.err
				}
				return nil
			}}
			done := newCompletions(1)
			w := testDropWriter(t, rt, 0, 10, 1<<20, time.Hour, done.complete)
			if err := w.WriteMessages(context.Background(), kafka.Message{Value: []byte("v"), WriterData: 0}); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			done.wait(t)
			if len(rt.sets) != tc.requests || (done.errs[0] != nil) != tc.failed {
				t.Fatalf("%d requests, completed with %v; want %d, failed %v", len(rt.sets), done.errs[0], tc.requests, tc.failed)
			}
			if tc.failed && !errors.Is(done.errs[0], errors.Unwrap(tc.err)) && !errors.Is(done.errs[0], tc.err) {
				t.Fatalf("completed with %v, want %v", done.errs[0], tc.err)
			}
		})
	}
}

// TestDropWriterBroker: drops written through the stage's writer (its
// fenced, classifying transport) land on a broker as written.
func TestDropWriterBroker(t *testing.T) {
	e := newTestEnv(t, 1, 1)
	if err := e.cluster.CreateTopic("drops", 2, nil); err != nil {
		t.Fatal(err)
	}
	c := e.config(nil, func() error { return nil })
	c.DroppedTopic = "drops"
	out := newWriter(&c, c.BatchBytes, c.BatchBytes)
	defer out.close()
	msgs := dropTestMessages(1)[:50]
	done := newCompletions(len(msgs))
	out.dropped.completion = done.complete
	if err := out.Dropped().WriteMessages(context.Background(), msgs...); err != nil {
		t.Fatal(err)
	}
	done.wait(t)
	for i, err := range done.errs {
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: e.brokers, Topic: "drops", Partition: 1, MaxWait: 10 * time.Millisecond})
	defer r.Close()
	for i, want := range msgs {
		got, err := r.ReadMessage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Key, want.Key) || !bytes.Equal(got.Value, want.Value) || !got.Time.Equal(want.Time) || len(got.Headers) != len(want.Headers) {
			t.Fatalf("record %d: %+v, want %+v", i, got, want)
		}
	}
}

// TestDropMessageSize: the drop writer's measure of a message is
// partition.MessageSize, which the partitions check drops against.
func TestDropMessageSize(t *testing.T) {
	for i, m := range append(dropTestMessages(0), kafka.Message{}, kafka.Message{Headers: []kafka.Header{{Key: "k"}}}) {
		if got, want := messageSize(&m, headersLen(m.Headers)), partition.MessageSize(&m); got != want {
			t.Errorf("message %d: %d, want %d", i, got, want)
		}
	}
}

// readBatch returns the keys of the records of an uncompressed batch as
// a produce request carries it.
func readBatch(t *testing.T, set []byte) []string {
	t.Helper()
	var rs protocol.RecordSet
	if _, err := rs.ReadFrom(bytes.NewReader(set)); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for {
		r, err := rs.Records.ReadRecord()
		if errors.Is(err, io.EOF) {
			return keys
		}
		if err != nil {
			t.Fatal(err)
		}
		k, _ := io.ReadAll(r.Key)
		keys = append(keys, string(k))
	}
}
