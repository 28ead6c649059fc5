package partition

import (
	"bytes"
	"errors"
	"maps"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"dedup/rotation"
)

// TestOriginsSection: a piece with high-water marks reads back with the
// same marks and the same piece, base (with and without a legacy section)
// and increment; a piece without the section reads as before (nil marks);
// any damage to the section refuses the piece, and an increment whose
// section is damaged leaves the pair as it was.
func TestOriginsSection(t *testing.T) {
	o := rotation.Options{ExpectedKeys: 1000, FPRate: 1e-6, Window: time.Hour, Mode: rotation.Counting}
	marks := origins{{"raw", 0, 4}: 41, {"raw", 3, 4}: 7, {"raw", 3, 8}: 2, {"other", 1, 0}: 1 << 40}
	pair := testPair(t, o, "a", "b")

	for _, st := range []partitionState{{pair: pair}, {pair: pair, legacy: newLegacy(testPair(t, o, "x"))}} {
		var b bytes.Buffer
		if _, err := (piece{state: st, marks: marks}).payload().WriteTo(&b); err != nil {
			t.Fatal(err)
		}
		got, rest, err := readOrigins(bytes.NewReader(b.Bytes()))
		if err != nil || !maps.Equal(got, marks) {
			t.Fatalf("marks %v, %v; want %v", got, err, marks)
		}
		var p rotation.Pair
		l, err := readState(rest, &p)
		if err != nil || (l != nil) != (st.legacy != nil) || !p.Test([]byte("a")) || !p.Test([]byte("b")) {
			t.Fatalf("state after the section: legacy %v, %v", l != nil, err)
		}
		s, err := ReadSnapshot(bytes.NewReader(b.Bytes()))
		if err != nil || s.Origins != "other/1:1099511627776 raw/0:41(of 4) raw/3:7(of 4) raw/3:2(of 8)" {
			t.Fatalf("ReadSnapshot: origins %q, %v", s.Origins, err)
		}

		// Every damage of the section is refused.
		sec := b.Len() - func() int { var x bytes.Buffer; st.payload().WriteTo(&x); return x.Len() }()
		for i := 4; i < sec; i++ {
			d := bytes.Clone(b.Bytes())
			d[i] ^= 0x40
			if _, _, err := readOrigins(bytes.NewReader(d)); !errors.Is(err, ErrOriginsFormat) {
				t.Fatalf("byte %d of the section flipped: %v, want ErrOriginsFormat", i, err)
			}
		}
		if _, _, err := readOrigins(bytes.NewReader(b.Bytes()[:sec-1])); !errors.Is(err, ErrOriginsFormat) {
			t.Fatalf("truncated section: %v", err)
		}
	}

	// Without the section: nil marks, the piece untouched.
	var plain bytes.Buffer
	if _, err := (piece{state: partitionState{pair: pair}}).payload().WriteTo(&plain); err != nil {
		t.Fatal(err)
	}
	got, rest, err := readOrigins(bytes.NewReader(plain.Bytes()))
	if err != nil || got != nil {
		t.Fatalf("no section: marks %v, %v", got, err)
	}
	var p rotation.Pair
	if _, err := readState(rest, &p); err != nil {
		t.Fatal(err)
	}

	// An increment: applied with its section; with a damaged section the
	// increment is refused before the pair changes.
	base := testPair(t, o, "a")
	var bb bytes.Buffer
	if _, err := base.WriteTo(&bb); err != nil {
		t.Fatal(err)
	}
	base.ResetDelta()
	base.TestAndAdd([]byte("c"), time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	var delta rotation.Delta
	base.TakeDelta(&delta)
	var inc bytes.Buffer
	if _, err := (piece{delta: &delta, marks: marks}).payload().WriteTo(&inc); err != nil {
		t.Fatal(err)
	}
	restore := func() *rotation.Pair {
		var r rotation.Pair
		if _, err := r.ReadFrom(bytes.NewReader(bb.Bytes())); err != nil {
			t.Fatal(err)
		}
		return &r
	}
	r := restore()
	if err := ApplyIncrement(r, bytes.NewReader(inc.Bytes())); err != nil {
		t.Fatal(err)
	}
	if !r.Test([]byte("c")) {
		t.Fatal("increment with marks not applied")
	}
	d := bytes.Clone(inc.Bytes())
	d[12] ^= 1
	r = restore()
	if err := ApplyIncrement(r, bytes.NewReader(d)); !errors.Is(err, ErrOriginsFormat) {
		t.Fatalf("damaged section: %v", err)
	}
	if r.Test([]byte("c")) {
		t.Fatal("an increment whose section is damaged changed the pair")
	}
}

// TestUnwrap: a repartition record is turned back into the input record:
// its key, its headers with the origin headers renamed to the source
// headers, the origin key header gone; a null origin key stays null, an
// empty one empty; a record without origin headers is left as it is.
func TestUnwrap(t *testing.T) {
	w := &Worker{origins: origins{}}
	hs := func(extra ...kafka.Header) []kafka.Header {
		return append([]kafka.Header{
			{Key: "a", Value: []byte("1")},
			{Key: HeaderOriginTopic, Value: []byte("raw")},
			{Key: HeaderOriginPartition, Value: []byte("3")},
			{Key: HeaderOriginOffset, Value: []byte("1234")},
		}, extra...)
	}
	r := record{msg: kafka.Message{Key: []byte("dedup-id"), Headers: hs(kafka.Header{Key: HeaderOriginKey, Value: []byte("user-7")})}}
	w.unwrap(&r)
	if string(r.msg.Key) != "user-7" || !r.origin.ok || r.origin.at != (origin{"raw", 3, 0}) || r.origin.offset != 1234 {
		t.Fatalf("unwrapped %q %+v", r.msg.Key, r.origin)
	}
	want := []string{"a", HeaderSourceTopic, HeaderSourcePartition, HeaderSourceOffset}
	if len(r.msg.Headers) != len(want) {
		t.Fatalf("headers %v", r.msg.Headers)
	}
	for i, h := range r.msg.Headers {
		if h.Key != want[i] {
			t.Fatalf("header %d %q, want %q", i, h.Key, want[i])
		}
	}
	r = record{msg: kafka.Message{Key: []byte("p3"), Headers: hs()}}
	w.unwrap(&r)
	if r.msg.Key != nil || !r.origin.ok {
		t.Fatalf("null origin key: %q %+v", r.msg.Key, r.origin)
	}
	r = record{msg: kafka.Message{Key: []byte("x"), Headers: hs(kafka.Header{Key: HeaderOriginKey})}}
	w.unwrap(&r)
	if r.msg.Key == nil || len(r.msg.Key) != 0 {
		t.Fatalf("empty origin key: %v", r.msg.Key)
	}
	r = record{msg: kafka.Message{Key: []byte("k"), Headers: []kafka.Header{{Key: HeaderOriginOffset, Value: []byte("x1")}}}}
	w.unwrap(&r)
	if r.origin.ok || string(r.msg.Key) != "k" || w.counts.unmarked != 1 {
		t.Fatalf("malformed origin: %+v %q, unmarked %d", r.origin, r.msg.Key, w.counts.unmarked)
	}

	// The partition count hop 1 routed by is read and the header dropped.
	r = record{msg: kafka.Message{Key: []byte("k"), Headers: hs(kafka.Header{Key: HeaderOriginPartitions, Value: []byte("8")})}}
	w.unwrap(&r)
	if !r.origin.ok || r.origin.at != (origin{"raw", 3, 8}) || len(r.msg.Headers) != 4 {
		t.Fatalf("routed by 8 partitions: %+v %v", r.origin, r.msg.Headers)
	}

	// The marks: a re-send is at or below its origin's mark, of the same
	// partition count.
	for _, c := range []struct {
		part  int32
		off   int64
		want  bool
		count int32
	}{{3, 5, false, 0}, {3, 6, false, 0}, {3, 6, true, 0}, {3, 2, true, 0}, {4, 2, false, 0}, {3, 7, false, 0},
		{3, 4, false, 8}, {3, 4, true, 8}, {3, 8, false, 0}} {
		r := record{origin: originOf{at: origin{"raw", c.part, c.count}, offset: c.off, ok: true}}
		if got := w.resent(&r); got != c.want {
			t.Errorf("%d/%d resent %v, want %v", c.part, c.off, got, c.want)
		}
	}
}
