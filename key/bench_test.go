package key

import (
	"bytes"
	"encoding/json"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/buger/jsonparser"
	"github.com/segmentio/kafka-go"
	"github.com/tidwall/gjson"
	"github.com/valyala/fastjson"
)

// jsonKeyCandidate is one way to take a strict JSON key: the extractor
// in use, or a library doing the same job (validate the whole document,
// then read the scalar at the path). The libraries appear only here, to be
// measured beside the extractor.
type jsonKeyCandidate struct {
	name string
	new  func(path []string) func(data []byte) ([]byte, bool)
}

var jsonKeyCandidates = []jsonKeyCandidate{
	{"scanner", func(path []string) func([]byte) ([]byte, bool) {
		ks := Source{parts: []part{{kind: fromJSON, path: path}}}
		var m kafka.Message
		var a Arena
		return func(data []byte) ([]byte, bool) {
			m.Value = data
			a.Reset()
			k, st := ks.Extract(&m, &a)
			return k, st == Keyed
		}
	}},
	{"gjson", func(path []string) func([]byte) ([]byte, bool) {
		p := strings.Join(path, ".")
		return func(data []byte) ([]byte, bool) {
			if !gjson.ValidBytes(data) {
				return nil, false
			}
			r := gjson.GetBytes(data, p)
			switch r.Type {
			case gjson.String:
				return []byte(r.Str), r.Str != ""
			case gjson.Number, gjson.True, gjson.False:
				return []byte(r.Raw), true
			}
			return nil, false
		}
	}},
	{"fastjson", func(path []string) func([]byte) ([]byte, bool) {
		var p fastjson.Parser // one per worker, as the parser is reused
		return func(data []byte) ([]byte, bool) {
			// The parser alone accepts 01, 1. or "\q": validate first.
			if fastjson.ValidateBytes(data) != nil {
				return nil, false
			}
			v, err := p.ParseBytes(data)
			if err != nil {
				return nil, false
			}
			v = v.Get(path...)
			if v == nil {
				return nil, false
			}
			switch v.Type() {
			case fastjson.TypeString:
				s, _ := v.StringBytes()
				return s, len(s) > 0
			case fastjson.TypeNumber, fastjson.TypeTrue, fastjson.TypeFalse:
				return v.MarshalTo(nil), true
			}
			return nil, false
		}
	}},
	{"jsonparser+json.Valid", func(path []string) func([]byte) ([]byte, bool) {
		// jsonparser does not validate: encoding/json does it first.
		return func(data []byte) ([]byte, bool) {
			if !json.Valid(data) {
				return nil, false
			}
			v, typ, _, err := jsonparser.Get(data, path...)
			if err != nil {
				return nil, false
			}
			switch typ {
			case jsonparser.String:
				s, err := jsonparser.ParseString(v)
				return []byte(s), err == nil && s != ""
			case jsonparser.Number, jsonparser.Boolean:
				return v, true
			}
			return nil, false
		}
	}},
	{"encoding/json", func(path []string) func([]byte) ([]byte, bool) {
		return func(data []byte) ([]byte, bool) {
			k, ok := referenceJSONKey(data, path)
			return []byte(k), ok
		}
	}},
}

// jsonKeyDocs are the benchmark's values: a small event with the key
// nested, and a larger one with the key near the front (a strict reader
// still has to validate all of it).
var jsonKeyDocs = []struct {
	name, path, doc, key string
}{
	{"small", "user.id", `{"event":"click","ts":1700000000,"tags":["a","b"],"user":{"name":"someone","id":"u-1234567"},"payload":{"x":1}}`, "u-1234567"},
	{"1KiB", "id", `{"id":"order-8f14e45f","customer":{"name":"A. N. Other","email":"a.n.other@example.com","address":{"street":"1 Long Road","city":"Somewhere","zip":"12345"}},` +
		`"lines":[` + strings.Repeat(`{"sku":"SKU-000123","qty":2,"price":19.99,"tags":["x","y"],"note":"gift wrap \u00e9"},`, 9) +
		`{"sku":"SKU-000999","qty":1,"price":5.5,"tags":[],"note":null}],"total":185.41,"paid":true}`, "order-8f14e45f"},
}

// TestJSONKeyCandidates: every candidate the benchmark measures takes the
// right key from the benchmark's documents, so the figures compare the same
// work. It logs how many of the strict cases each candidate decides
// differently from the extractor.
func TestJSONKeyCandidates(t *testing.T) {
	for _, c := range jsonKeyCandidates {
		for _, d := range jsonKeyDocs {
			key, ok := c.new(strings.Split(d.path, "."))([]byte(d.doc))
			if !ok || string(key) != d.key {
				t.Errorf("%s on %s: got %q, %v; want %q", c.name, d.name, key, ok, d.key)
			}
		}
		var differ []string
		for _, s := range strictJSONCases {
			key, ok := c.new(strings.Split(s.path, "."))([]byte(s.value))
			if ok != s.ok || !bytes.Equal(key, []byte(s.want)) {
				differ = append(differ, s.value)
			}
		}
		if c.name == "scanner" && len(differ) > 0 {
			t.Errorf("the extractor differs from its own cases: %q", differ)
		}
		t.Logf("%s: %d of %d strict cases decided otherwise: %q", c.name, len(differ), len(strictJSONCases), differ)
	}
}

// BenchmarkJSONKey measures the key extraction of each candidate side by
// side, per document. Besides ns/op (wall time) it reports cpu-ns/op, the
// process's CPU time per extraction, which other processes sharing the
// machine disturb less.
func BenchmarkJSONKey(b *testing.B) {
	for _, d := range jsonKeyDocs {
		data := []byte(d.doc)
		for _, c := range jsonKeyCandidates {
			extract := c.new(strings.Split(d.path, "."))
			b.Run(d.name+"/"+c.name, func(b *testing.B) {
				b.SetBytes(int64(len(data)))
				b.ReportAllocs()
				cpu := processCPU(b)
				for b.Loop() {
					if _, ok := extract(data); !ok {
						b.Fatal("no key")
					}
				}
				b.ReportMetric(float64(processCPU(b)-cpu)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}

// processCPU returns the user and system CPU time the process has used.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
