package key

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"testing"
	"unicode/utf8"

	"github.com/segmentio/kafka-go"
)

// extractOK is Extract as a key or none.
func extractOK(ks Source, m *kafka.Message) ([]byte, bool) {
	k, st := ks.Extract(m, nil)
	return k, st == Keyed
}

func TestParse(t *testing.T) {
	for _, s := range []string{"key", "value", "header:id", "json:a", "json:a.b.0.c"} {
		ks, err := Parse(s)
		if err != nil || ks.String() != s {
			t.Errorf("Parse(%q) = %v, %v", s, ks, err)
		}
	}
	for _, s := range []string{"", "keys", "header:", "json:", "json:a..b", "json:.a", "Value"} {
		if _, err := Parse(s); err == nil {
			t.Errorf("Parse(%q) accepted", s)
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
		{"json:a.b", msg("", `{"a":{"b":{"c":[1,2]}}}`), "", false}, // an object is not a key
		{"json:a.1", msg("", `{"a":["x","y"]}`), "y", true},
		{"json:a.2", msg("", `{"a":["x","y"]}`), "", false},
		{"json:a.b", msg("", `{"a":"b"}`), "", false},
		{"json:id", msg("", `{"id":true}`), "true", true},
		{"json:id", msg("", `{"id":-1.5e3}`), "-1.5e3", true},
		{"json:id", msg("", `{"id":""}`), "", false},
		{"json:id", msg("", `{"id":null}`), "", false},
		{"json:id", msg("", `{"id":"tab\there \"q\" \u00e9 \ud83d\ude00"}`), "tab\there \"q\" é 😀", true},
		{"json:i\"d", msg("", `{"i\"d":1}`), "1", true},
		{"json:id", msg("", `{"x":01,"id":1}`), "", false},
		{"json:id", msg("", `{"id" 1}`), "", false},
		{"json:id", msg("", `["id"]`), "", false},
		{"json:id", msg("", ``), "", false},
		{"json:id", msg("", `{"id":"unterminated`), "", false},
		{"json:id", msg("", `{"x":{"y":[`), "", false},
	}
	for _, c := range cases {
		ks, err := Parse(c.source)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := extractOK(ks, c.m)
		if ok != c.ok || string(got) != c.want {
			t.Errorf("%s of key %q value %q: got %q, %v; want %q, %v", c.source, c.m.Key, c.m.Value, got, ok, c.want, c.ok)
		}
	}
}

// TestExtractDeepNesting: a hostile value cannot exhaust the stack.
func TestExtractDeepNesting(t *testing.T) {
	v := bytes.Repeat([]byte("["), 1<<20)
	ks, _ := Parse("json:x.y")
	if _, ok := extractOK(ks, &kafka.Message{Value: append([]byte(`{"a":`), v...)}); ok {
		t.Fatal("keyed a malformed value")
	}
}

// strictJSONCases are documents and the key the extractor must take from
// them (ok false: unkeyed).
var strictJSONCases = []struct {
	path, value, want string
	ok                bool
}{
	// The six malformed values that were once keyed.
	{"id", `{"id":01}`, "", false},
	{"id", `{"id":02}`, "", false},
	{"id", `{"id":0x}`, "", false},
	{"id", `{"id":12ab}`, "", false},
	{"id", `{"id":"a"`, "", false},
	{"id", `{"id":"a"}x`, "", false},
	// More malformed documents, the error before, at or after the field.
	{"id", `{"x":01,"id":1}`, "", false},
	{"id", `{"id":"a","x":01}`, "", false},
	{"id", `{"id":"a","x":[1,2,]}`, "", false},
	{"id", `{"id":1,}`, "", false},
	{"id", `{"id":1}{}`, "", false},
	{"id", `{"id":1} {"id":2}`, "", false},
	{"id", "\ufeff" + `{"id":1}`, "", false},
	{"id", `{"id":-}`, "", false},
	{"id", `{"id":1.}`, "", false},
	{"id", `{"id":.5}`, "", false},
	{"id", `{"id":1e}`, "", false},
	{"id", `{"id":+1}`, "", false},
	{"id", `{"id":-01}`, "", false},
	{"id", `{"id":tru}`, "", false},
	{"id", `{"id":truex}`, "", false},
	{"id", `{"id":nul}`, "", false},
	{"id", `{'id':1}`, "", false},
	{"id", `{id:1}`, "", false},
	{"id", `{"id":1 "x":2}`, "", false},
	{"id", `{"id":"a\x"}`, "", false},
	{"id", `{"id":"a","x":"\q"}`, "", false},
	{"id", `{"id":"a","x":"\u12"}`, "", false},
	{"id", "{\"id\":\"a\tb\"}", "", false},   // raw control character
	{"id", "{\"id\":\"a\xffb\"}", "", false}, // not UTF-8
	{"id", "{\"id\":\"a\",\"x\":\"\xc3\"}", "", false},
	{"id", `{"id":"\ud800"}`, "", false},       // unpaired surrogate
	{"id", `{"id":"\ud800\u0041"}`, "", false}, // high surrogate, no low one
	{"id", `{"id":"\udc00"}`, "", false},
	{"id", ``, "", false},
	{"id", ` `, "", false},
	// Not a key: null, empty string, containers, missing field.
	{"id", `{"id":null}`, "", false},
	{"id", `{"id":""}`, "", false},
	{"id", `{"id":{}}`, "", false},
	{"id", `{"id":[1]}`, "", false},
	{"id", `{"ID":1}`, "", false},
	{"id", `[{"id":1}]`, "", false},
	{"id", `"id"`, "", false},
	// Valid documents.
	{"id", `{"id":"a"}`, "a", true},
	{"id", " \t\r\n{\"id\":\"a\"} \n", "a", true},
	{"id", `{"id":0}`, "0", true},
	{"id", `{"id":-0.5e+10}`, "-0.5e+10", true},
	{"id", `{"id":1E3}`, "1E3", true},
	{"id", `{"id":42.0}`, "42.0", true},
	{"id", `{"id":true}`, "true", true},
	{"id", `{"id":false}`, "false", true},
	{"id", `{"id":"\ud83d\ude00 \u00e9 \/ é"}`, "😀 é / é", true},
	{"id", `{"x":{"id":"no"},"id":"yes","y":[{},[],"",0,-1.5,true,false,null]}`, "yes", true},
	{"\u00e9", `{"\u00e9":"e-acute"}`, "e-acute", true},
	{"a.b.1", `{"a":{"b":[0,"one",2]}}`, "one", true},
	{"a.1", `{"a":{"1":"field"}}`, "field", true},
	// Duplicate names: the last wins, as in encoding/json.
	{"id", `{"id":"a","id":"b"}`, "b", true},
	{"id", `{"id":"a","id":null}`, "", false},
	{"id", `{"id":null,"id":"a"}`, "a", true},
	{"a.b", `{"a":{"b":"x"},"a":{"c":"y"}}`, "", false},
	{"a.b", `{"a":{"c":"y"},"a":{"b":"x"}}`, "x", true},
	{"id", `{"id":"a","i\u0064":"b"}`, "b", true},
}

// TestExtractStrictJSON: a JSON key comes only from one well-formed
// document, and a key that is returned is the one encoding/json reads.
func TestExtractStrictJSON(t *testing.T) {
	for _, c := range strictJSONCases {
		ks, err := Parse("json:" + c.path)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := extractOK(ks, &kafka.Message{Value: []byte(c.value)})
		if ok != c.ok || string(got) != c.want {
			t.Errorf("json:%s of %q: got %q, %v; want %q, %v", c.path, c.value, got, ok, c.want, c.ok)
		}
		ref, refOK := referenceJSONKey([]byte(c.value), ks.parts[0].path)
		if ok && (!refOK || ref != string(got)) {
			t.Errorf("json:%s of %q: keyed %q where encoding/json reads %q, %v", c.path, c.value, got, ref, refOK)
		}
	}
}

// referenceJSONKey reads the key at path as encoding/json sees it: the
// document must be valid, and the value a non-empty string, a number (its
// literal text) or a boolean.
func referenceJSONKey(data []byte, path []string) (string, bool) {
	if !json.Valid(data) {
		return "", false
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var cur any
	if err := dec.Decode(&cur); err != nil {
		return "", false
	}
	for _, seg := range path {
		switch v := cur.(type) {
		case map[string]any:
			var found bool
			if cur, found = v[seg]; !found {
				return "", false
			}
		case []any:
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(v) {
				return "", false
			}
			cur = v[i]
		default:
			return "", false
		}
	}
	switch v := cur.(type) {
	case string:
		return v, v != ""
	case json.Number:
		return string(v), true
	case bool:
		return strconv.FormatBool(v), true
	}
	return "", false
}

// FuzzJSONKey checks the extractor against encoding/json on any input:
// whenever it returns a key, encoding/json accepts the document and reads
// the same value at the path (strings unescaped, numbers by their literal
// text). Conversely, on a document encoding/json reads a key from, the
// extractor returns it too, unless the document holds what the extractor
// refuses on purpose: invalid UTF-8 or surrogate escapes (which
// encoding/json turns into U+FFFD), or nesting deeper than maxJSONDepth.
func FuzzJSONKey(f *testing.F) {
	var sources []Source
	for _, p := range []string{"json:id", "json:a.b", "json:a.1"} {
		ks, err := Parse(p)
		if err != nil {
			f.Fatal(err)
		}
		sources = append(sources, ks)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		refusedOnPurpose := !utf8.Valid(data) ||
			bytes.Contains(bytes.ToLower(data), []byte(`\ud`)) ||
			bytes.Count(data, []byte("{"))+bytes.Count(data, []byte("[")) > maxJSONDepth
		for _, ks := range sources {
			got, ok := extractOK(ks, &kafka.Message{Value: data})
			want, wantOK := referenceJSONKey(data, ks.parts[0].path)
			switch {
			case ok && !wantOK:
				t.Fatalf("%s of %q: keyed %q, encoding/json reads no key", ks, data, got)
			case ok && string(got) != want:
				t.Fatalf("%s of %q: keyed %q, encoding/json reads %q", ks, data, got, want)
			case !ok && wantOK && !refusedOnPurpose:
				t.Fatalf("%s of %q: unkeyed, encoding/json reads %q", ks, data, want)
			}
		}
	})
}

// TestPartNames: the sources of a DEDUP_KEY as written, one per part, in
// order; one for a single source.
func TestPartNames(t *testing.T) {
	for spec, want := range map[string][]string{
		"key":                          {"key"},
		"header:tenant, json:order.id": {"header:tenant", "json:order.id"},
		"avro:id,value":                {"avro:id", "value"},
	} {
		k, err := Parse(spec)
		if err != nil {
			t.Fatal(err)
		}
		if got := k.PartNames(); !slices.Equal(got, want) || len(got) != k.Parts() {
			t.Errorf("%q: parts %q, want %q", spec, got, want)
		}
	}
}
