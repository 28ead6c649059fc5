package partition

import (
	"bytes"
	"errors"
	"maps"
	"math"
	"strconv"
	"strings"
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
// its key, its headers without the origin header, its input coordinates
// kept for the source headers (the last origin header counts); a null
// origin key stays null, an empty one empty; a record without a
// well-formed origin header is left as it is and counted.
func TestUnwrap(t *testing.T) {
	w := &Worker{origins: origins{}}
	hs := func(origin string, extra ...kafka.Header) []kafka.Header {
		return append([]kafka.Header{{Key: "a", Value: []byte("1")}, {Key: HeaderOrigin, Value: []byte(origin)}}, extra...)
	}
	r := record{msg: kafka.Message{Key: []byte("dedup-id"), Headers: hs("raw/3/1234/0/user-7", kafka.Header{Key: "b"})}}
	w.unwrap(&r)
	if string(r.msg.Key) != "user-7" || !r.origin.ok || r.origin.at != (origin{"raw", 3, 0}) || r.origin.offset != 1234 {
		t.Fatalf("unwrapped %q %+v", r.msg.Key, r.origin)
	}
	if src := r.source(); src == nil || string(src[0]) != "raw" || string(src[1]) != "3" || string(src[2]) != "1234" {
		t.Fatalf("source %q", src)
	}
	if len(r.msg.Headers) != 2 || r.msg.Headers[0].Key != "a" || r.msg.Headers[1].Key != "b" {
		t.Fatalf("headers %v", r.msg.Headers)
	}
	for _, c := range []struct {
		origin string
		key    []byte
	}{
		{"raw/3/1234/8", nil},                         // a null key
		{"raw/3/1234/8/", []byte{}},                   // an empty one
		{"raw/3/1234/8/a/b/", []byte("a/b/")},         // slashes in the key
		{"raw/3/1234/8/\x00\xff", []byte("\x00\xff")}, // any bytes
	} {
		r = record{msg: kafka.Message{Key: []byte("k"), Headers: hs(c.origin)}}
		w.unwrap(&r)
		if !r.origin.ok || r.origin.at != (origin{"raw", 3, 8}) || (r.msg.Key == nil) != (c.key == nil) || !bytes.Equal(r.msg.Key, c.key) {
			t.Errorf("%q: key %q, origin %+v", c.origin, r.msg.Key, r.origin)
		}
	}
	// An input record's own origin header (an earlier stage's) stays.
	r = record{msg: kafka.Message{Key: []byte("k"), Headers: hs("raw/3/7/8", kafka.Header{Key: HeaderOrigin, Value: []byte("in/1/5/2")})}}
	w.unwrap(&r)
	if r.origin.at != (origin{"in", 1, 2}) || r.origin.offset != 5 || len(r.msg.Headers) != 2 || string(r.msg.Headers[1].Value) != "raw/3/7/8" {
		t.Fatalf("two origin headers: %+v %v", r.origin, r.msg.Headers)
	}
	for i, bad := range []string{"", "raw", "raw/3/1234", "/3/1234/8", "raw/x/1234/8", "raw/3/-1/8", "raw/3/1234/", "raw/3/1234/8x", "raw/99999999999/1/1"} {
		r = record{msg: kafka.Message{Key: []byte("k"), Headers: hs(bad)}}
		w.unwrap(&r)
		if r.origin.ok || string(r.msg.Key) != "k" || len(r.msg.Headers) != 2 || w.counts.unmarked != uint64(i+1) {
			t.Fatalf("malformed origin %q: %+v %q, unmarked %d", bad, r.origin, r.msg.Key, w.counts.unmarked)
		}
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

// FuzzOrigin: whatever hop 1 writes (AppendOrigin), hop 2 reads back
// (parseOrigin): the coordinates, the partition count and the key, a null
// key as null and an empty one as empty.
func FuzzOrigin(f *testing.F) {
	f.Add("raw", int32(3), int64(1234), 8, []byte("user-7"), true)
	f.Add("a.b_c-d", int32(0), int64(0), 0, []byte(nil), false)
	f.Add("t", int32(math.MaxInt32), int64(999999999999999999), math.MaxInt32, []byte("/x/"), true)
	f.Fuzz(func(t *testing.T, topic string, p int32, off int64, count int, key []byte, keyed bool) {
		if topic == "" || strings.ContainsRune(topic, '/') || p < 0 || off < 0 || off > 999999999999999999 || count < 0 || count > math.MaxInt32 {
			return // not what hop 1 writes
		}
		switch {
		case !keyed:
			key = nil
		case key == nil:
			key = []byte{}
		}
		v := AppendOrigin(nil, topic, p, off, count, key)
		got, ok := parseOrigin(v)
		if !ok || string(got.text[0]) != topic || got.partition != int64(p) || got.offset != off || got.count != int64(count) ||
			got.keyed != keyed || !bytes.Equal(got.key, key) || (got.key == nil) != (key == nil) {
			t.Fatalf("%q read back as %+v, %v", v, got, ok)
		}
		if string(got.text[1]) != strconv.Itoa(int(p)) || string(got.text[2]) != strconv.FormatInt(off, 10) {
			t.Fatalf("%q: source texts %q", v, got.text)
		}
	})
}
