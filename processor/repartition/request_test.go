package repartition

import (
	"bytes"
	"io"
	"slices"
	"testing"
	"testing/iotest"

	"github.com/segmentio/kafka-go"
)

// TestRequestBounds: a repartition partition's share of a batch goes in
// requests of BatchSize records and BatchBytes at most, in order; a record
// larger than BatchBytes goes alone.
func TestRequestBounds(t *testing.T) {
	w := &worker{o: &Options{BatchSize: 3, BatchBytes: 100}}
	rec := func(value int) kafka.Record {
		return kafka.Record{Value: &payload{head: make([]byte, value/2), tail: make([]byte, value-value/2)}}
	}
	for _, c := range []struct {
		values []int
		want   []int // records per request
	}{
		{[]int{10, 10, 10, 10, 10, 10, 10}, []int{3, 3, 1}},
		{[]int{60, 30, 20, 10}, []int{2, 2}},
		{[]int{150, 10, 200}, []int{1, 1, 1}},
		{[]int{10}, []int{1}},
	} {
		var recs []kafka.Record
		for _, v := range c.values {
			recs = append(recs, rec(v))
		}
		var got []int
		for len(recs) > 0 {
			n := w.request(recs)
			got = append(got, n)
			recs = recs[n:]
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("values %v: requests of %v records, want %v", c.values, got, c.want)
		}
	}
}

// TestPayload: a payload reads and writes its head, then its tail, and
// says their length.
func TestPayload(t *testing.T) {
	for _, c := range []struct{ head, tail string }{{"value", "trailer"}, {"", "trailer"}, {"value", ""}, {"", ""}} {
		want := c.head + c.tail
		p := &payload{head: []byte(c.head), tail: []byte(c.tail)}
		if p.Len() != len(want) {
			t.Errorf("%q+%q: Len %d", c.head, c.tail, p.Len())
		}
		var b bytes.Buffer
		if n, err := p.WriteTo(&b); err != nil || n != int64(len(want)) || b.String() != want {
			t.Errorf("%q+%q: WriteTo %q, %d, %v", c.head, c.tail, b.String(), n, err)
		}
		p = &payload{head: []byte(c.head), tail: []byte(c.tail)}
		got, err := io.ReadAll(iotest.OneByteReader(p))
		if err != nil || string(got) != want {
			t.Errorf("%q+%q: Read %q, %v", c.head, c.tail, got, err)
		}
	}
}
