package schema

import (
	"testing"
	"time"

	"github.com/hamba/avro/v2"
)

// avroBenchSchema is a typical event: ten fields of mixed types, the id (a
// UUID's text) the fifth.
const avroBenchSchema = `{"type":"record","name":"OrderEvent","namespace":"com.acme.orders","fields":[
	{"name":"source","type":"string"},
	{"name":"seq","type":"long"},
	{"name":"tenant","type":"string"},
	{"name":"created_at","type":{"type":"long","logicalType":"timestamp-millis"}},
	{"name":"id","type":"string"},
	{"name":"amount","type":"double"},
	{"name":"active","type":"boolean"},
	{"name":"meta","type":{"type":"record","name":"Meta","fields":[
		{"name":"region","type":"string"},
		{"name":"zone","type":"int"},
		{"name":"host","type":"string"}]}},
	{"name":"tags","type":{"type":"array","items":"string"}},
	{"name":"note","type":"string"}]}`

// avroBenchEvent is the Go struct a generator (avrogen) makes of
// avroBenchSchema.
type avroBenchEvent struct {
	Source    string        `avro:"source"`
	Seq       int64         `avro:"seq"`
	Tenant    string        `avro:"tenant"`
	CreatedAt time.Time     `avro:"created_at"`
	ID        string        `avro:"id"`
	Amount    float64       `avro:"amount"`
	Active    bool          `avro:"active"`
	Meta      avroBenchMeta `avro:"meta"`
	Tags      []string      `avro:"tags"`
	Note      string        `avro:"note"`
}

type avroBenchMeta struct {
	Region string `avro:"region"`
	Zone   int32  `avro:"zone"`
	Host   string `avro:"host"`
}

const avroBenchID = "3f2b8c1e-9d4a-4e7b-a6c5-1f0e2d3c4b5a"

func avroBenchRecord(tb testing.TB) (avro.Schema, []byte) {
	tb.Helper()
	s := avroParse(tb, avroBenchSchema)
	payload, err := avro.Marshal(s, avroBenchEvent{
		Source:    "checkout-service",
		Seq:       918273645,
		Tenant:    "tenant-eu-0042",
		CreatedAt: time.UnixMilli(1767225600123).UTC(),
		ID:        avroBenchID,
		Amount:    1249.95,
		Active:    true,
		Meta:      avroBenchMeta{Region: "eu-central-1", Zone: 3, Host: "ip-10-0-3-17.internal"},
		Tags:      []string{"priority", "gift", "eu"},
		Note:      "leave at the door, ring twice",
	})
	if err != nil {
		tb.Fatal(err)
	}
	return s, payload
}

// BenchmarkAvroKey takes the id out of one record three ways: the Plan
// (skips four fields, reads one, leaves the rest unread), hamba decoding
// the whole record into the generated struct, and hamba decoding it into
// a map[string]any.
func BenchmarkAvroKey(b *testing.B) {
	s, payload := avroBenchRecord(b)
	p, err := CompileAvro(avroBenchSchema, nil, []string{"id"})
	if err != nil {
		b.Fatal(err)
	}
	dst := make([]byte, 0, 64)

	b.Run("path", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(payload)))
		var st Status
		for b.Loop() {
			dst, st = p.Append(dst[:0], payload)
		}
		if st != Found || string(dst) != avroBenchID {
			b.Fatalf("got %q %v", dst, st)
		}
	})

	b.Run("hamba-unmarshal", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(payload)))
		for b.Loop() {
			var ev avroBenchEvent
			if err := avro.Unmarshal(s, payload, &ev); err != nil {
				b.Fatal(err)
			}
			dst = append(dst[:0], ev.ID...)
		}
		if string(dst) != avroBenchID {
			b.Fatalf("got %q", dst)
		}
	})

	b.Run("hamba-map", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(payload)))
		for b.Loop() {
			var m map[string]any
			if err := avro.Unmarshal(s, payload, &m); err != nil {
				b.Fatal(err)
			}
			id, _ := m["id"].(string)
			dst = append(dst[:0], id...)
		}
		if string(dst) != avroBenchID {
			b.Fatalf("got %q", dst)
		}
	})
}
