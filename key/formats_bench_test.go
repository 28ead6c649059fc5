package key

import (
	"context"
	"testing"
	"time"

	"github.com/segmentio/kafka-go"

	"dedup/bench/keyformats"
	"dedup/registry"
	"dedup/registry/registrytest"
)

// formatCase is one format's record and the Source that reads its id.
type formatCase struct {
	spec  string // DEDUP_KEY
	src   Source
	msg   kafka.Message
	value int // the value's size in bytes
}

// keyFormatsRegistry starts a test registry holding keyformats' schemas
// under subject "events" and a client of it; both close with tb.
func keyFormatsRegistry(tb testing.TB) (*keyformats.Encoder, *registry.Client) {
	tb.Helper()
	reg := registrytest.New()
	tb.Cleanup(reg.Close)
	enc, err := keyformats.Register(reg, "events")
	if err != nil {
		tb.Fatal(err)
	}
	client, err := registry.New(registry.Options{URLs: []string{reg.URL()}})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(client.Close)
	return enc, client
}

// keyFormatCases are the same event (keyformats: ten fields, the id the
// fifth) as a plain JSON value for json:id and framed by the registry in
// Avro, Protobuf and JSON Schema for the others, each Source bound to a
// registry client, its schema cached and its plan compiled: every case
// has had one Extract, waited for its schema, and taken the event's id.
func keyFormatCases(tb testing.TB) []formatCase {
	tb.Helper()
	enc, client := keyFormatsRegistry(tb)
	ev := keyformats.New(0, 42)
	var cases []formatCase
	for _, f := range keyformats.Formats {
		value, err := enc.Value(f, &ev)
		if err != nil {
			tb.Fatal(err)
		}
		spec := f + ":" + keyformats.Path
		src, err := Parse(spec)
		if err != nil {
			tb.Fatal(err)
		}
		c := formatCase{spec: spec, src: src.WithRegistry(client), msg: kafka.Message{Value: value}, value: len(value)}
		var a Arena
		c.src.Extract(&c.msg, &a) // a framed value's first Extract starts its schema's fetch
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = c.src.Await(ctx, &c.msg)
		cancel()
		if err != nil {
			tb.Fatalf("%s: %v", spec, err)
		}
		if k, st := c.src.Extract(&c.msg, &a); st != Keyed || string(k) != ev.ID {
			tb.Fatalf("%s: key %q, %v; want %q", spec, k, st, ev.ID)
		}
		cases = append(cases, c)
	}
	return cases
}

// BenchmarkKeyFormats measures the key extraction of each DEDUP_KEY format
// side by side, on the same event, as the partition worker runs it: the
// schema known, the arena reset and the key extracted. Besides ns/op it
// reports cpu-ns/op, the process's CPU time per extraction.
//
//	go test ./key -run '^$' -bench KeyFormats -benchmem -count 5
func BenchmarkKeyFormats(b *testing.B) {
	for _, c := range keyFormatCases(b) {
		b.Run(c.spec, func(b *testing.B) {
			var a Arena
			c.src.Extract(&c.msg, &a) // the arena's array, as a worker's after its first batch
			b.SetBytes(int64(c.value))
			b.ReportAllocs()
			cpu := processCPU(b)
			for b.Loop() {
				a.Reset()
				if _, st := c.src.Extract(&c.msg, &a); st != Keyed {
					b.Fatal(st)
				}
			}
			b.ReportMetric(float64(processCPU(b)-cpu)/float64(b.N), "cpu-ns/op")
		})
	}
}

// TestKeyFormatsNoAllocs: with the schemas known, extracting a key
// allocates nothing in any format.
func TestKeyFormatsNoAllocs(t *testing.T) {
	for _, c := range keyFormatCases(t) {
		var a Arena
		allocs := testing.AllocsPerRun(1000, func() {
			a.Reset()
			if _, st := c.src.Extract(&c.msg, &a); st != Keyed {
				t.Fatal(st)
			}
		})
		if allocs != 0 {
			t.Errorf("%s: %v allocations per key", c.spec, allocs)
		}
	}
}
