package processor

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"
	"unicode/utf8"

	"github.com/segmentio/kafka-go"
)

func TestParseKeySource(t *testing.T) {
	for _, s := range []string{"key", "value", "header:id", "json:a", "json:a.b.0.c"} {
		ks, err := ParseKeySource(s)
		if err != nil || ks.String() != s {
			t.Errorf("ParseKeySource(%q) = %v, %v", s, ks, err)
		}
	}
	for _, s := range []string{"", "keys", "header:", "json:", "json:a..b", "json:.a", "Value"} {
		if _, err := ParseKeySource(s); err == nil {
			t.Errorf("ParseKeySource(%q) accepted", s)
		}
	}
}

func TestExtract(t *testing.T) {
	msg := func(key, value string, headers ...kafka.Header) *kafka.Message {
		m := &kafka.Message{Value: []byte(value), Headers: headers}
		if key != "" {
			m.Key = []byte(key)
		}
		return m
	}
	cases := []struct {
		source string
		m      *kafka.Message
		want   string
		ok     bool
	}{
		{"key", msg("k", "v"), "k", true},
		{"key", msg("", "v"), "", false},
		{"value", msg("k", "v"), "v", true},
		{"value", msg("k", ""), "", false},
		{"header:id", msg("k", "v", kafka.Header{Key: "x", Value: []byte("1")}, kafka.Header{Key: "id", Value: []byte("7")}), "7", true},
		{"header:id", msg("k", "v", kafka.Header{Key: "ID", Value: []byte("7")}), "", false},
		{"header:id", msg("k", "v", kafka.Header{Key: "id"}), "", false},
		{"json:id", msg("", `{"id":"a"}`), "a", true},
		{"json:id", msg("", ` { "x" : [ 1 , 2 , { "id" : "no" } ] , "id" : "yes" } `), "yes", true},
		{"json:a.b", msg("", `{"a":{"b":{"c":[1,2]}}}`), `{"c":[1,2]}`, true},
		{"json:a.1", msg("", `{"a":["x","y"]}`), "y", true},
		{"json:a.2", msg("", `{"a":["x","y"]}`), "", false},
		{"json:a.b", msg("", `{"a":"b"}`), "", false},
		{"json:id", msg("", `{"id":true}`), "true", true},
		{"json:id", msg("", `{"id":-1.5e3}`), "-1.5e3", true},
		{"json:id", msg("", `{"id":""}`), "", false},
		{"json:id", msg("", `{"id":null}`), "", false},
		{"json:id", msg("", `{"id":"tab\there \"q\" \u00e9 \ud83d\ude00"}`), "tab\there \"q\" é 😀", true},
		{"json:i\"d", msg("", `{"i\"d":1}`), "1", true},
		{"json:id", msg("", `{"id":01}`), "0", true}, // scanning stops at the field: "0" is its value
		{"json:id", msg("", `{"x":01,"id":1}`), "", false},
		{"json:id", msg("", `{"id" 1}`), "", false},
		{"json:id", msg("", `["id"]`), "", false},
		{"json:id", msg("", ``), "", false},
		{"json:id", msg("", `{"id":"unterminated`), "", false},
		{"json:id", msg("", `{"x":{"y":[`), "", false},
	}
	for _, c := range cases {
		ks, err := ParseKeySource(c.source)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := ks.Extract(c.m)
		if ok != c.ok || string(got) != c.want {
			t.Errorf("%s of key %q value %q: got %q, %v; want %q, %v", c.source, c.m.Key, c.m.Value, got, ok, c.want, c.ok)
		}
	}
}

// TestExtractDeepNesting: a hostile value cannot exhaust the stack.
func TestExtractDeepNesting(t *testing.T) {
	v := bytes.Repeat([]byte("["), 1<<20)
	ks, _ := ParseKeySource("json:x.y")
	if _, ok := ks.Extract(&kafka.Message{Value: append([]byte(`{"a":`), v...)}); ok {
		t.Fatal("keyed a malformed value")
	}
}

// FuzzJSONPath checks the scanner against encoding/json on valid documents:
// whenever encoding/json finds a string at the path, the scanner returns the
// same text; a non-string value comes back as valid JSON equal to it. On
// any input it must not panic.
func FuzzJSONPath(f *testing.F) {
	for _, s := range []string{
		`{"a":{"b":"x"}}`, `{"a":{"b":1}}`, `{"a":[{"b":"y"}]}`, `{"a":{"b":"\u00e9\n"}}`,
		`{"b":1,"a":{"c":null,"b":[1,{"d":2}]}}`, `{"a":"b"}`, `[]`, `{`, `{"a":{"b":"\ud800"}}`,
	} {
		f.Add([]byte(s))
	}
	ks, _ := ParseKeySource("json:a.b")
	f.Fuzz(func(t *testing.T, data []byte) {
		got, ok := ks.Extract(&kafka.Message{Value: data})
		if !json.Valid(data) || !utf8.Valid(data) {
			return
		}
		var doc any
		if err := json.Unmarshal(data, &doc); err != nil {
			return
		}
		obj, _ := doc.(map[string]any)
		inner, _ := obj["a"].(map[string]any)
		want, found := inner["b"]
		if !found {
			if ok && obj != nil && inner != nil {
				t.Fatalf("%q: found %q where encoding/json finds no field", data, got)
			}
			return
		}
		if obj == nil || inner == nil {
			return
		}
		// encoding/json keeps the last of duplicate names, the scanner the
		// first; only compare unambiguous documents.
		if bytes.Count(data, []byte(`"b"`)) > 1 || bytes.Count(data, []byte(`"a"`)) > 1 {
			return
		}
		switch w := want.(type) {
		case nil:
			if ok {
				t.Fatalf("%q: null keyed as %q", data, got)
			}
		case string:
			if w == "" {
				if ok {
					t.Fatalf("%q: empty string keyed", data)
				}
				return
			}
			if !ok || string(got) != w {
				t.Fatalf("%q: got %q, %v; want %q", data, got, ok, w)
			}
		default:
			var v any
			if !ok || json.Unmarshal(got, &v) != nil || fmt.Sprint(v) != fmt.Sprint(w) {
				t.Fatalf("%q: got %q, %v; want %v", data, got, ok, w)
			}
		}
	})
}

func BenchmarkExtractJSON(b *testing.B) {
	ks, _ := ParseKeySource("json:user.id")
	m := &kafka.Message{Value: []byte(`{"event":"click","ts":1700000000,"tags":["a","b"],"user":{"name":"someone","id":"u-1234567"},"payload":{"x":1}}`)}
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := ks.Extract(m); !ok {
			b.Fatal("no key")
		}
	}
}
