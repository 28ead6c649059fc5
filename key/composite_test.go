package key

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"dedup/bench/keyformats"
)

// TestCompositeUnambiguous: the parts of a composite key are kept apart,
// so that moving bytes from one part to the next makes another key, and
// equal ids under different tenants are different keys.
func TestCompositeUnambiguous(t *testing.T) {
	ks, err := Parse("header:tenant,json:id")
	if err != nil {
		t.Fatal(err)
	}
	msg := func(tenant, value string) *kafka.Message {
		return &kafka.Message{Value: []byte(value), Headers: []kafka.Header{{Key: "tenant", Value: []byte(tenant)}}}
	}
	keyOf := func(m *kafka.Message) []byte {
		t.Helper()
		k, st := ks.Extract(m, nil)
		if st != Keyed {
			t.Fatalf("%v: %v", m, st)
		}
		return k
	}
	if a, b := keyOf(msg("a", `{"id":"bc"}`)), keyOf(msg("ab", `{"id":"c"}`)); bytes.Equal(a, b) {
		t.Errorf("a,bc and ab,c made the same key %q", a)
	}
	if a, b := keyOf(msg("t1", `{"id":7}`)), keyOf(msg("t2", `{"id":7}`)); bytes.Equal(a, b) {
		t.Errorf("id 7 under tenants t1 and t2 made the same key %q", a)
	}
	if a, b := keyOf(msg("t1", `{"id":7}`)), keyOf(msg("t1", `{"x":0,"id":7}`)); !bytes.Equal(a, b) {
		t.Errorf("the same tenant and id made keys %q and %q", a, b)
	}
	// A part without a key makes the record unkeyed, with that part's reason.
	for _, c := range []struct {
		m    *kafka.Message
		want Status
	}{
		{&kafka.Message{Value: []byte(`{"id":7}`)}, Empty},
		{msg("t1", `{"id":null}`), MissingField},
		{msg("t1", `{"id":7`), Malformed},
	} {
		if k, st := ks.Extract(c.m, nil); st != c.want || k != nil {
			t.Errorf("%q: got %q, %v; want unkeyed %v", c.m.Value, k, st, c.want)
		}
	}
}

// TestCompositeParse: any sources, any number, blanks around commas
// allowed; an empty part is refused.
func TestCompositeParse(t *testing.T) {
	ks, err := Parse("key, header:tenant ,json:a.b,value")
	if err != nil || ks.Parts() != 4 {
		t.Fatalf("Parse: %v parts, %v", ks.Parts(), err)
	}
	for _, s := range []string{"key,", ",key", "key,,value", "key,json:", "key,nope"} {
		if _, err := Parse(s); err == nil {
			t.Errorf("Parse(%q) accepted", s)
		}
	}
}

// TestArenaNoAllocs: a composite key built into a reused arena allocates
// nothing per record, and keys taken before a later append stay intact.
func TestArenaNoAllocs(t *testing.T) {
	ks, _ := Parse("header:tenant,key")
	m := &kafka.Message{Key: []byte("id-1"), Headers: []kafka.Header{{Key: "tenant", Value: []byte("t")}}}
	var a Arena
	first, _ := ks.Extract(m, &a)
	keep := string(first)
	m2 := &kafka.Message{Key: []byte("id-2"), Headers: m.Headers}
	for range 100 {
		ks.Extract(m2, &a) // grows the arena past its first array
	}
	if string(first) != keep {
		t.Fatalf("first key changed from %q to %q", keep, first)
	}
	a.Reset()
	allocs := testing.AllocsPerRun(1000, func() {
		a.Reset()
		ks.Extract(m2, &a)
	})
	if allocs != 0 {
		t.Errorf("%v allocations per composite key", allocs)
	}
}

// TestKeyOfParts: a key named by its parts is the key Extract takes from
// a record with those parts, composite or single; parts that no record
// could have are refused.
func TestKeyOfParts(t *testing.T) {
	for _, c := range []struct {
		spec  string
		parts []string
		m     kafka.Message
	}{
		{"header:tenant,json:id", []string{"tenant-a", "42"},
			kafka.Message{Value: []byte(`{"id":42}`), Headers: []kafka.Header{{Key: "tenant", Value: []byte("tenant-a")}}}},
		{"key,value,header:h", []string{"k", "v", "x"},
			kafka.Message{Key: []byte("k"), Value: []byte("v"), Headers: []kafka.Header{{Key: "h", Value: []byte("x")}}}},
		{"json:user.id", []string{"u\u00e9"}, kafka.Message{Value: []byte(`{"user":{"id":"u\u00e9"}}`)}},
		{"key", []string{"plain"}, kafka.Message{Key: []byte("plain")}},
	} {
		ks, err := Parse(c.spec)
		if err != nil {
			t.Fatal(err)
		}
		parts := make([][]byte, len(c.parts))
		for i, p := range c.parts {
			parts[i] = []byte(p)
		}
		got, err := ks.KeyOf(parts)
		if err != nil {
			t.Fatalf("%s %q: %v", c.spec, c.parts, err)
		}
		want, st := ks.Extract(&c.m, nil)
		if st != Keyed || !bytes.Equal(got, want) {
			t.Errorf("%s %q: KeyOf %q, Extract %q (%v)", c.spec, c.parts, got, want, st)
		}
	}
	ks, _ := Parse("header:tenant,json:id")
	for _, parts := range [][][]byte{{[]byte("a")}, {[]byte("a"), []byte("b"), []byte("c")}, {[]byte("a"), {}}} {
		if k, err := ks.KeyOf(parts); !errors.Is(err, ErrKeyParts) {
			t.Errorf("%q: key %q, err %v; want ErrKeyParts", parts, k, err)
		}
	}
}

// TestKeyOfSchemaFramed: for every format, a key given as its canonical
// text (a string as it is, a long in decimal) is the key Extract takes
// from a record framed by the registry, alone and as a composite part.
func TestKeyOfSchemaFramed(t *testing.T) {
	enc, client := keyFormatsRegistry(t)
	ev := keyformats.New(3, 42)
	for _, f := range keyformats.Formats {
		value, err := enc.Value(f, &ev)
		if err != nil {
			t.Fatal(err)
		}
		m := kafka.Message{Value: value, Headers: []kafka.Header{{Key: "tenant", Value: []byte("t1")}}}
		for _, c := range []struct {
			path string
			text string
		}{{"id", ev.ID}, {"created_at", strconv.FormatInt(ev.CreatedAt, 10)}} {
			for _, spec := range []string{f + ":" + c.path, "header:tenant," + f + ":" + c.path} {
				src, err := Parse(spec)
				if err != nil {
					t.Fatal(err)
				}
				src = src.WithRegistry(client)
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				src.Extract(&m, nil) // starts the schema's fetch
				err = src.Await(ctx, &m)
				cancel()
				if err != nil {
					t.Fatalf("%s: %v", spec, err)
				}
				want, st := src.Extract(&m, nil)
				parts := [][]byte{[]byte(c.text)}
				if src.Parts() == 2 {
					parts = [][]byte{[]byte("t1"), []byte(c.text)}
				}
				got, err := src.KeyOf(parts)
				if st != Keyed || err != nil || !bytes.Equal(got, want) {
					t.Errorf("%s, %q: KeyOf %q (%v), Extract %q (%v)", spec, parts, got, err, want, st)
				}
			}
		}
	}
}
