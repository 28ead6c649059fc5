package partition

import (
	"bytes"
	"errors"
	"log/slog"
	"maps"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
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
// its value without the origin trailer, its key, its input coordinates
// kept for the source headers (the last trailer counts); a null origin key
// stays null, an empty one empty, and so do values; a record without a
// well-formed trailer is left as it is and counted.
func TestUnwrap(t *testing.T) {
	w := &Worker{origins: origins{}}
	wrap := func(value []byte, o Origin) []byte { return o.AppendTrailer(bytes.Clone(value), value) }
	hs := []kafka.Header{{Key: "a", Value: []byte("1")}}
	r := record{msg: kafka.Message{Key: []byte("dedup-id"), Headers: hs,
		Value: wrap([]byte("v"), Origin{Topic: "raw", Partition: 3, Offset: 1234, Key: []byte("user-7")})}}
	w.unwrap(&r)
	if string(r.msg.Key) != "user-7" || string(r.msg.Value) != "v" || !r.origin.ok || r.origin.at != (origin{"raw", 3, 0}) || r.origin.offset != 1234 {
		t.Fatalf("unwrapped %q %q %+v", r.msg.Key, r.msg.Value, r.origin)
	}
	if src := r.source(); src == nil || string(src[0]) != "raw" || string(src[1]) != "3" || string(src[2]) != "1234" {
		t.Fatalf("source %q", src)
	}
	if len(r.msg.Headers) != 1 {
		t.Fatalf("headers %v", r.msg.Headers)
	}
	for _, c := range []struct {
		key, value []byte
	}{
		{nil, []byte("v")},                      // a null key
		{[]byte{}, []byte("v")},                 // an empty one
		{[]byte("a/b/"), nil},                   // slashes in the key, a null value
		{[]byte("\x00\xff"), []byte{}},          // any bytes, an empty value
		{[]byte("k"), []byte("\xffdO1\xffdO1")}, // a value that ends in the magic
	} {
		r = record{msg: kafka.Message{Key: []byte("k"), Value: wrap(c.value, Origin{Topic: "raw", Partition: 3, Offset: 1234, Count: 8, Key: c.key})}}
		w.unwrap(&r)
		if !r.origin.ok || r.origin.at != (origin{"raw", 3, 8}) || (r.msg.Key == nil) != (c.key == nil) || !bytes.Equal(r.msg.Key, c.key) ||
			(r.msg.Value == nil) != (c.value == nil) || !bytes.Equal(r.msg.Value, c.value) {
			t.Errorf("key %q value %q: unwrapped key %q value %q, origin %+v", c.key, c.value, r.msg.Key, r.msg.Value, r.origin)
		}
	}
	// An input record keyed by the dedup key: the key is not repeated in
	// the trailer, the repartition record's own is the input's.
	same := Origin{Topic: "raw", Partition: 3, Offset: 9, Count: 8, Key: []byte("id-1"), Dedup: []byte("id-1")}
	differs := Origin{Topic: "raw", Partition: 3, Offset: 9, Count: 8, Key: []byte("user-1"), Dedup: []byte("id-1")}
	if a, b := wrap([]byte("v"), same), wrap([]byte("v"), differs); len(b)-len(a) != len("/user-1") {
		t.Errorf("trailer with the key = dedup key %q, with another key %q", a, b)
	}
	r = record{msg: kafka.Message{Key: []byte("id-1"), Value: wrap([]byte("v"), same)}}
	w.unwrap(&r)
	if !r.origin.ok || string(r.msg.Key) != "id-1" || string(r.origin.dedup) != "id-1" || string(r.msg.Value) != "v" {
		t.Fatalf("key = dedup key: key %q, dedup %q, value %q, %+v", r.msg.Key, r.origin.dedup, r.msg.Value, r.origin)
	}

	// An input record that carries a trailer of an earlier stage keeps it.
	inner := wrap([]byte("v"), Origin{Topic: "in", Partition: 1, Offset: 5, Count: 2})
	r = record{msg: kafka.Message{Key: []byte("k"), Value: wrap(inner, Origin{Topic: "raw", Partition: 3, Offset: 7, Count: 8})}}
	w.unwrap(&r)
	if r.origin.at != (origin{"raw", 3, 8}) || r.origin.offset != 7 || !bytes.Equal(r.msg.Value, inner) {
		t.Fatalf("nested trailers: %+v %q", r.origin, r.msg.Value)
	}
	good := wrap([]byte("v"), Origin{Topic: "raw", Partition: 3, Offset: 7, Count: 8})
	footer := len(good) - originFooterLen
	damage := func(at int, b byte) []byte { d := bytes.Clone(good); d[at] = b; return d }
	for i, bad := range [][]byte{
		nil, []byte("plain value"), []byte(originMagic), good[:len(good)-1],
		damage(len(good)-1, '2'),                               // magic
		damage(footer, originNullValue),                        // a null value with bytes
		damage(footer, originReset),                            // a reset with value bytes
		damage(footer+1, 1),                                    // length beyond the value
		damage(footer-2, 'x'),                                  // a slash lost: three fields
		[]byte("raw/3/1234\x00\x00\x00\x00\x0a" + originMagic), // three fields
	} {
		r = record{msg: kafka.Message{Key: []byte("k"), Value: bad}}
		w.unwrap(&r)
		if r.origin.ok || string(r.msg.Key) != "k" || !bytes.Equal(r.msg.Value, bad) || w.counts.unmarked != uint64(i+1) {
			t.Fatalf("malformed %q: %+v key %q value %q, unmarked %d", bad, r.origin, r.msg.Key, r.msg.Value, w.counts.unmarked)
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

// TestOriginReset: a reset trailer (hop 1's input partition went back)
// reads back as a reset naming the input partition and where hop 1 reads
// on, with no value and no key; applied, it lowers every mark of that
// input partition above offset-1 (of any partition count) to offset-1,
// leaves lower marks and other partitions' alone, and forwards nothing.
// A reset with anything else, and a trailer with flags this build does
// not know, are never taken for an input record: the partition stops at
// the unknown one, counted, rather than forward it as unmarked.
func TestOriginReset(t *testing.T) {
	var logs bytes.Buffer
	w := &Worker{origins: origins{}, log: slog.New(slog.NewTextHandler(&logs, nil))}
	reset := Origin{Topic: "raw", Partition: 3, Offset: 2, Count: 8, Reset: true}
	v := reset.AppendTrailer(nil, nil)
	if want := "raw/3/2/8\x04\x00\x00\x00\x09" + originMagic; string(v) != want || string(reset.AppendTrailer(nil, []byte{})) != want {
		t.Fatalf("reset trailer %q, want %q whatever the value", v, want)
	}
	value, f, ok := splitOrigin(v)
	if !ok || !f.reset || value != nil || f.keyed || f.offset != 2 || f.partition != 3 || f.count != 8 || string(f.text[0]) != "raw" {
		t.Fatalf("reset read back as %q %+v, %v", value, f, ok)
	}
	// An input record's trailer is never a reset.
	if _, f, ok := splitOrigin((&Origin{Topic: "raw", Partition: 3, Offset: 2, Count: 8}).AppendTrailer(nil, nil)); !ok || f.reset {
		t.Fatalf("record read back as %+v, %v", f, ok)
	}

	// Marks of the old log: partition 3 under two counts, partition 4.
	w.origins = origins{{"raw", 3, 8}: 9, {"raw", 3, 4}: 1, {"raw", 3, 2}: 5, {"raw", 4, 8}: 9, {"other", 3, 8}: 9}
	r := record{msg: kafka.Message{Offset: 77, Key: []byte("k"), Value: v}}
	w.unwrap(&r)
	if r.origin.ok || r.origin.control != controlReset || r.source() != nil || r.origin.at != (origin{"raw", 3, 8}) || r.origin.offset != 2 {
		t.Fatalf("reset unwrapped as %+v", r.origin)
	}
	w.controlRecord(&r)
	want := origins{{"raw", 3, 8}: 1, {"raw", 3, 4}: 1, {"raw", 3, 2}: 1, {"raw", 4, 8}: 9, {"other", 3, 8}: 9}
	if !maps.Equal(w.origins, want) || w.counts.resets != 1 || w.counts.unmarked != 0 {
		t.Fatalf("after the reset: marks %v, want %v; resets %d unmarked %d", w.origins, want, w.counts.resets, w.counts.unmarked)
	}
	if !strings.Contains(logs.String(), "input_partition=3 input_offset=2 marks_lowered=2") {
		t.Errorf("log %q", logs.String())
	}
	// The new log's records are taken, from offset 2 on; a reset sent
	// again after hop 1 sent some leaves the mark where they raised it.
	for i, c := range []struct {
		off  int64
		want bool
	}{{2, false}, {3, false}, {3, true}} {
		r := record{origin: originOf{at: origin{"raw", 3, 8}, offset: c.off, ok: true}}
		if got := w.resent(&r); got != c.want {
			t.Fatalf("new log record %d (offset %d): resent %v, want %v", i, c.off, got, c.want)
		}
	}
	// Hop 1 crashed before committing them: it finds the truncation
	// again, at the new log's end, past what it sent.
	r = record{msg: kafka.Message{Value: (&Origin{Topic: "raw", Partition: 3, Offset: 4, Count: 8, Reset: true}).AppendTrailer(nil, nil)}}
	w.unwrap(&r)
	w.controlRecord(&r)
	if w.origins[origin{"raw", 3, 8}] != 3 || w.counts.resets != 2 {
		t.Fatalf("a reset sent again moved the mark: %v", w.origins)
	}
	// From offset 0: the marks go.
	r = record{msg: kafka.Message{Value: (&Origin{Topic: "raw", Partition: 4, Offset: 0, Count: 8, Reset: true}).AppendTrailer(nil, nil)}}
	w.unwrap(&r)
	w.controlRecord(&r)
	if _, ok := w.origins[origin{"raw", 4, 8}]; ok {
		t.Fatalf("a reset from 0 left a mark: %v", w.origins)
	}

	// A reset with a key part or other flags is malformed: unmarked.
	footer := len(v) - originFooterLen
	keyed := (&Origin{Topic: "raw", Partition: 3, Offset: 2, Count: 8, Key: []byte("k")}).AppendTrailer(nil, []byte{})
	keyed[len(keyed)-originFooterLen] = originReset
	for i, bad := range [][]byte{keyed, func() []byte { d := bytes.Clone(v); d[footer] |= originNullValue; return d }()} {
		r = record{msg: kafka.Message{Value: bad}}
		w.unwrap(&r)
		if r.origin.ok || r.origin.control != controlNone || w.counts.unmarked != uint64(i+1) {
			t.Fatalf("malformed reset %q: %+v, unmarked %d", bad, r.origin, w.counts.unmarked)
		}
	}

	// Flags this build does not know, on an otherwise good trailer: the
	// partition stops at the record (an *UnknownRecordError naming it),
	// named at error and counted; the marks stay.
	unknown := prometheus.NewCounter(prometheus.CounterOpts{Name: "unknown"})
	w.d = Deps{Topic: "raw-by-key", Partition: 1, Metrics: &Metrics{RepartitionUnknown: unknown}}
	for _, flags := range []byte{0x08, 0x80, 0x08 | originReset} {
		d := (&Origin{Topic: "raw", Partition: 3, Offset: 12, Count: 8}).AppendTrailer([]byte("v"), []byte("v"))
		d[len(d)-originFooterLen] = flags
		r = record{msg: kafka.Message{Offset: 78, Key: []byte("k"), Value: d}}
		w.unwrap(&r)
		if r.origin.ok || r.origin.control != controlUnknown {
			t.Fatalf("flags %#x: %+v", flags, r.origin)
		}
		before := maps.Clone(w.origins)
		err := w.unknownRecord(&r)
		var ue *UnknownRecordError
		if !errors.As(err, &ue) || !errors.Is(err, ErrUnknownRecord) || ue.Offset != 78 || ue.Flags != flags ||
			ue.Topic != "raw-by-key" || ue.Partition != 1 {
			t.Fatalf("flags %#x: %v (%+v), want an *UnknownRecordError at offset 78", flags, err, ue)
		}
		if !maps.Equal(before, w.origins) {
			t.Fatalf("flags %#x moved the marks: %v", flags, w.origins)
		}
	}
	var m dto.Metric
	if err := unknown.Write(&m); err != nil || m.GetCounter().GetValue() != 3 || w.counts.unmarked != 2 ||
		!strings.Contains(logs.String(), "level=ERROR") || !strings.Contains(logs.String(), "offset=78 flags=8") {
		t.Fatalf("unknown %v unmarked %d, log %q", m.GetCounter().GetValue(), w.counts.unmarked, logs.String())
	}
}

// FuzzOrigin: whatever hop 1 writes (the value and AppendTrailer), hop 2
// reads back (splitOrigin): the value, the coordinates, the partition
// count and the key, a null key or value as null and an empty one as
// empty. And no value at all makes it panic.
func FuzzOrigin(f *testing.F) {
	f.Add("raw", int32(3), int64(1234), 8, []byte("user-7"), true, false, []byte("v"), true)
	f.Add("raw", int32(3), int64(1234), 8, []byte("id-7"), true, true, []byte("v"), true)
	f.Add("a.b_c-d", int32(0), int64(0), 0, []byte(nil), false, false, []byte(nil), false)
	f.Add("t", int32(math.MaxInt32), int64(999999999999999999), math.MaxInt32, []byte("/x/"), true, false, []byte("\xffdO1"), true)
	f.Fuzz(func(t *testing.T, topic string, p int32, off int64, count int, key []byte, keyed, dedupKey bool, value []byte, valued bool) {
		splitOrigin(value) // anything at all: no panic
		if topic == "" || strings.ContainsRune(topic, '/') || p < 0 || off < 0 || off > 999999999999999999 || count < 0 || count > math.MaxInt32 {
			return // not what hop 1 writes
		}
		switch {
		case !keyed:
			key = nil
		case key == nil:
			key = []byte{}
		}
		switch {
		case !valued:
			value = nil
		case value == nil:
			value = []byte{}
		}
		o := Origin{Topic: topic, Partition: p, Offset: off, Count: count, Key: key}
		if dedupKey && keyed {
			o.Dedup = bytes.Clone(key) // the input is keyed by the dedup key: not repeated
		}
		v := o.AppendTrailer(bytes.Clone(value), value)
		gotValue, got, ok := splitOrigin(v)
		if o.Dedup != nil {
			if !ok || !got.keyIsDedup || got.keyed {
				t.Fatalf("%q: input key = dedup key read back as %+v, %v", v, got, ok)
			}
			got.key, got.keyed = key, true
		}
		if !ok || string(got.text[0]) != topic || got.partition != int64(p) || got.offset != off || got.count != int64(count) ||
			got.keyed != keyed || !bytes.Equal(got.key, key) || (got.key == nil) != (key == nil) ||
			!bytes.Equal(gotValue, value) || (gotValue == nil) != (value == nil) {
			t.Fatalf("%q read back as %q %+v, %v", v, gotValue, got, ok)
		}
		if string(got.text[1]) != strconv.Itoa(int(p)) || string(got.text[2]) != strconv.FormatInt(off, 10) {
			t.Fatalf("%q: source texts %q", v, got.text)
		}
	})
}

// BenchmarkUnwrap: hop 2's per-record cost of taking the origin trailer
// off a repartition record (16-byte keys, 100-byte values), against which
// the one-pass parser was written.
//
//	go test ./processor/partition -run '^$' -bench Unwrap
func BenchmarkUnwrap(b *testing.B) {
	w := &Worker{origins: origins{}}
	o := Origin{Topic: "events", Partition: 3, Offset: 123456789, Count: 4, Key: []byte("0123456789abcdef")}
	value := make([]byte, 100)
	v := o.AppendTrailer(bytes.Clone(value), value)
	key := []byte("0123456789abcdef")
	for b.Loop() {
		r := record{msg: kafka.Message{Key: key, Value: v}}
		w.unwrap(&r)
		if !r.origin.ok {
			b.Fatal("no origin")
		}
	}
}
