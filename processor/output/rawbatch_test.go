package output

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
	"github.com/segmentio/kafka-go/protocol"
	produceAPI "github.com/segmentio/kafka-go/protocol/produce"
	rawproduceAPI "github.com/segmentio/kafka-go/protocol/rawproduce"
)

// rawTestRecords are records of every shape the encoding distinguishes:
// null and empty keys and values, null and empty header values, no
// headers, timestamps out of order, a value larger than kafka-go's 64 KiB
// buffer pages, and varint lengths of one to three bytes.
func rawTestRecords() []protocol.Record {
	t0 := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	big := bytes.Repeat([]byte("v"), 70000)
	hdrs := []protocol.Header{{Key: "dedup-source-topic", Value: []byte("events")}, {Key: "empty", Value: []byte{}},
		{Key: "null", Value: nil}, {Key: "dedup-drop-window-start", Value: []byte("2026-11-27T12:00:00Z")}}
	var recs []protocol.Record
	for i := range 300 {
		r := protocol.Record{Time: t0.Add(time.Duration(i%7-3) * time.Millisecond * 100), Headers: hdrs[:i%5]}
		switch i % 4 {
		case 0:
			r.Key, r.Value = protocol.NewBytes([]byte(fmt.Sprint("key-", i))), protocol.NewBytes(bytes.Repeat([]byte{byte(i)}, i))
		case 1:
			r.Value = protocol.NewBytes([]byte{})
		case 2:
			r.Key = protocol.NewBytes([]byte{})
		}
		recs = append(recs, r)
	}
	recs[17].Value = protocol.NewBytes(big)
	return recs
}

// kafkaGoBatch is the record set as kafka-go encodes it in a produce
// request.
func kafkaGoBatch(t *testing.T, recs []protocol.Record) []byte {
	t.Helper()
	var buf bytes.Buffer
	rs := protocol.RecordSet{Version: 2, Records: protocol.NewRecordReader(recs...)}
	if _, err := rs.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// TestRawBatchAsKafkaGo: rawProduce's batch is byte for byte kafka-go's.
func TestRawBatchAsKafkaGo(t *testing.T) {
	recs := rawTestRecords()
	for _, n := range []int{1, 2, 5, len(recs)} {
		want := kafkaGoBatch(t, rawTestRecords()[:n])
		pr := produceRequest(recs[:n])
		raw, rb, ok, err := rawProduce(pr)
		if err != nil || !ok {
			t.Fatalf("%d records: ok %v, %v", n, ok, err)
		}
		var got bytes.Buffer
		if _, err := raw.Topics[0].Partitions[0].RecordSet.WriteTo(&got); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Bytes(), want) {
			t.Fatalf("%d records: %d bytes differ from kafka-go's %d at byte %d", n, got.Len(), len(want), firstDiff(got.Bytes(), want))
		}
		if raw.Acks != pr.Acks || raw.Timeout != pr.Timeout || raw.Topics[0].Topic != "t" || raw.Topics[0].Partitions[0].Partition != 3 {
			t.Fatalf("request fields not carried over: %+v", raw)
		}
		rb.release()
		recs = rawTestRecords() // the readers are spent
	}
}

// TestRawBatchNoTimestamp: a record without a timestamp is stamped with
// the time of encoding, as kafka-go stamps it.
func TestRawBatchNoTimestamp(t *testing.T) {
	before := time.Now().UnixMilli()
	_, rb, ok, err := rawProduce(produceRequest([]protocol.Record{{Value: protocol.NewBytes([]byte("v"))}}))
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	first := int64(binary.BigEndian.Uint64(rb.b[batchFirstTimeAt:]))
	if after := time.Now().UnixMilli(); first < before || first > after {
		t.Fatalf("first timestamp %d, want within [%d, %d]", first, before, after)
	}
}

// TestRawProduceLeavesOthers: requests rawProduce does not encode are
// left for kafka-go, their records unread.
func TestRawProduceLeavesOthers(t *testing.T) {
	compressed := produceRequest(rawTestRecords()[:3])
	compressed.Topics[0].Partitions[0].RecordSet.Attributes = protocol.Attributes(kafka.Snappy)
	v1 := produceRequest(rawTestRecords()[:3])
	v1.Topics[0].Partitions[0].RecordSet.Version = 1
	two := produceRequest(rawTestRecords()[:3])
	two.Topics[0].Partitions = append(two.Topics[0].Partitions, two.Topics[0].Partitions[0])
	for name, pr := range map[string]*produceAPI.Request{"compressed": compressed, "v1": v1, "two partitions": two} {
		if _, _, ok, err := rawProduce(pr); ok || err != nil {
			t.Errorf("%s: encoded (%v)", name, err)
		}
		if r, err := pr.Topics[0].Partitions[0].RecordSet.Records.ReadRecord(); err != nil || r == nil {
			t.Errorf("%s: records read", name)
		}
	}
	empty := produceRequest(nil)
	if _, _, ok, err := rawProduce(empty); ok || err != nil {
		t.Errorf("no records: encoded (%v)", err)
	}
}

// TestRawRouteRetriable: a raw request that finds no leader to go to was
// never sent, as a produce request's.
func TestRawRouteRetriable(t *testing.T) {
	err := fmt.Errorf("wrapped: %w", rawproduceAPI.NewError(errors.New("no leader")))
	if got, _ := classifyProduce(nil, err); got != OutputRetriable {
		t.Fatalf("%q, want %q", got, OutputRetriable)
	}
}

// TestRawProduceBroker: the writer's requests, encoded here, land on a
// broker as written (headers, keys, values, timestamps) and through the
// writer's transport.
func TestRawProduceBroker(t *testing.T) {
	e := newTestEnv(t, 1, 1)
	c := e.config(nil, func() error { return nil })
	out := newWriter(&c, c.BatchBytes, c.BatchBytes)
	defer out.close()
	var msgs []kafka.Message
	t0 := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
	for i := range 50 {
		m := kafka.Message{Key: []byte(fmt.Sprint("k", i)), Value: []byte(fmt.Sprint("value ", i)), Time: t0.Add(time.Duration(i) * time.Second),
			Headers: []kafka.Header{{Key: "h", Value: []byte(fmt.Sprint(i))}, {Key: "null", Value: nil}}}
		if i%10 == 0 {
			m.Key = nil
		}
		msgs = append(msgs, m)
	}
	w := &kafka.Writer{Addr: kafka.TCP(e.brokers...), Topic: outTopic, RequiredAcks: kafka.RequireAll, BatchTimeout: time.Millisecond,
		Transport: out.rt}
	defer w.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := w.WriteMessages(ctx, msgs...); err != nil {
		t.Fatal(err)
	}
	r := kafka.NewReader(kafka.ReaderConfig{Brokers: e.brokers, Topic: outTopic, Partition: 0, MaxWait: 10 * time.Millisecond})
	defer r.Close()
	for i, want := range msgs {
		got, err := r.ReadMessage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.Key, want.Key) || (got.Key == nil) != (want.Key == nil) || !bytes.Equal(got.Value, want.Value) ||
			!got.Time.Equal(want.Time) || len(got.Headers) != 2 || string(got.Headers[0].Value) != fmt.Sprint(i) || got.Headers[1].Key != "null" {
			t.Fatalf("record %d: %+v, want %+v", i, got, want)
		}
	}
}

func produceRequest(recs []protocol.Record) *produceAPI.Request {
	return &produceAPI.Request{Acks: -1, Timeout: 1000, Topics: []produceAPI.RequestTopic{{Topic: "t",
		Partitions: []produceAPI.RequestPartition{{Partition: 3, RecordSet: protocol.RecordSet{Records: protocol.NewRecordReader(recs...)}}}}}}
}

func firstDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}
