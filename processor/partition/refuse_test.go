package partition

import (
	"dedup/internal/testkit"
	"encoding/binary"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"
)

// TestMessageSize: MessageSize is the size kafka.Writer holds against
// BatchBytes: a writer whose BatchBytes is the size takes the record, one
// byte less refuses it.
func TestMessageSize(t *testing.T) {
	tr := testkit.KafkaTransport(t)
	tr.DialTimeout = 100 * time.Millisecond
	for _, m := range []kafka.Message{
		{},
		{Key: []byte("k"), Value: []byte("v")},
		{Key: []byte(strings.Repeat("k", 200)), Value: []byte(strings.Repeat("v", 70_000)),
			Headers: []kafka.Header{{Key: "a", Value: []byte("b")}, {Key: strings.Repeat("h", 130), Value: make([]byte, 300)}}},
	} {
		size := MessageSize(&m)
		w := &kafka.Writer{Addr: kafka.TCP("127.0.0.1:1"), Topic: "t", Async: true, BatchBytes: size - 1, Transport: tr}
		var tooLarge kafka.MessageTooLargeError
		if err := w.WriteMessages(t.Context(), m); !errors.As(err, &tooLarge) {
			t.Errorf("record of MessageSize %d: writer with BatchBytes %d answered %v, want MessageTooLargeError", size, size-1, err)
		}
		w.Close()
		// At the size it passes the check and fails later (no broker there).
		w = &kafka.Writer{Addr: kafka.TCP("127.0.0.1:1"), Topic: "t", BatchBytes: size, Transport: tr}
		if err := w.WriteMessages(t.Context(), m); errors.As(err, &tooLarge) || err == nil {
			t.Errorf("record of MessageSize %d: writer with BatchBytes %d answered %v, want a dial error", size, size, err)
		}
		w.Close()
	}
}

// TestOutputSize: the worker's size of an output, computed without
// building it, is MessageSize of the output as the worker builds it (in
// the hot path and outside it), for one hop and for hop 2, whose outputs
// carry the source headers of their origin and the repartition headers.
func TestOutputSize(t *testing.T) {
	for _, repart := range []bool{false, true} {
		w := &Worker{srcTop: []byte("events"), srcPart: []byte("12")}
		if repart {
			w.arena.prefix = []byte("events/12/")
		}
		for _, m := range []kafka.Message{
			{Offset: 0},
			{Offset: 9, Key: []byte("k"), Value: []byte("v")},
			{Offset: 1234567890123, Key: []byte("key"), Value: make([]byte, 5000),
				Headers: []kafka.Header{{Key: "trace", Value: []byte("t-1")}, {Key: "big", Value: make([]byte, 200)}}},
		} {
			r := record{msg: m}
			if repart {
				r.origin = originOf{ok: true, source: [3][]byte{[]byte("raw"), []byte("3"), []byte("98765")}}
			}
			out := kafka.Message{Key: m.Key, Value: m.Value, Headers: w.arena.headers(&r.msg, r.source(), w.srcTop, w.srcPart, 0, 0)}
			if got, want := w.outputSize(&r), MessageSize(&out); got != want {
				t.Errorf("repartitioned %v, offset %d: outputSize %d, MessageSize of the output %d", repart, m.Offset, got, want)
			}
			alone := w.copyOut(&r)
			if got, want := MessageSize(&alone), MessageSize(&out); got != want || len(alone.Headers) != len(out.Headers) {
				t.Errorf("repartitioned %v, offset %d: copyOut %d bytes, %d headers; hot path %d, %d", repart, m.Offset, got, len(alone.Headers), want, len(out.Headers))
			}
		}
	}
}

// BenchmarkOutputSize: the per-record cost of the refused-record check on
// the hot path (outputSize and its comparison with the limit), for a
// record shaped like the produce-path benchmark's (16-byte key, 100-byte
// value, no headers) and one with three headers of its own. Compare with
// the per-record time of BenchmarkProducePath (processor).
//
//	go test ./processor/partition -run '^$' -bench OutputSize
func BenchmarkOutputSize(b *testing.B) {
	w := &Worker{srcTop: []byte("events"), srcPart: []byte("3"), d: Deps{Limit: Limit{Bytes: 1 << 20}}}
	for _, bc := range []struct {
		name string
		m    kafka.Message
	}{
		{"plain", kafka.Message{Offset: 123456789, Key: make([]byte, 16), Value: make([]byte, 100)}},
		{"headers", kafka.Message{Offset: 123456789, Key: make([]byte, 16), Value: make([]byte, 100), Headers: []kafka.Header{
			{Key: "trace-id", Value: make([]byte, 32)}, {Key: "content-type", Value: []byte("application/json")}, {Key: "tenant", Value: []byte("t-42")}}}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			refused := 0
			r := record{msg: bc.m}
			for i := 0; b.Loop(); i++ {
				r.msg.Offset = int64(i)
				if w.outputSize(&r) > w.d.Limit.Bytes {
					refused++
				}
			}
			if refused != 0 {
				b.Fatal("refused")
			}
		})
	}
}

func TestSizeHelpers(t *testing.T) {
	for _, v := range []int64{0, 1, 63, 64, 65, 8191, 8192, 1 << 20, -1, -64, -65, 1<<62 + 5, -1 << 63} {
		want := int64(len(binaryAppendVarint(v)))
		if got := varintLen(v); got != want {
			t.Errorf("varintLen(%d) = %d, want %d", v, got, want)
		}
	}
	for _, v := range []int64{0, 9, 10, 99, 100, 123456789, 999999999999, 1000000000000, 1<<63 - 1} {
		if got, want := offsetDigits(v), len(strconv.FormatInt(v, 10)); got != want {
			t.Errorf("offsetDigits(%d) = %d, want %d", v, got, want)
		}
	}
}

func binaryAppendVarint(v int64) []byte { return binary.AppendVarint(nil, v) }
