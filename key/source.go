package key

import (
	"fmt"
	"strings"

	"github.com/segmentio/kafka-go"
)

// keyKind says where a Source finds the dedup key.
type keyKind uint8

const (
	keyFromKey keyKind = iota + 1
	keyFromValue
	keyFromHeader
	keyFromJSON
)

// Source is a parsed DEDUP_KEY: where the dedup key of a record comes
// from. The zero value is invalid; build one with Parse.
// A Source is immutable and safe for concurrent use.
type Source struct {
	kind   keyKind
	header string   // keyFromHeader
	path   []string // keyFromJSON: object field names (or array indexes)
	spec   string   // the text it was parsed from
}

// Parse parses "key", "value", "header:NAME" or "json:dotted.path".
func Parse(s string) (Source, error) {
	spec := strings.TrimSpace(s)
	switch {
	case spec == "key":
		return Source{kind: keyFromKey, spec: spec}, nil
	case spec == "value":
		return Source{kind: keyFromValue, spec: spec}, nil
	case strings.HasPrefix(spec, "header:"):
		name := strings.TrimPrefix(spec, "header:")
		if name == "" {
			return Source{}, fmt.Errorf("parse key source %q: empty header name", s)
		}
		return Source{kind: keyFromHeader, header: name, spec: spec}, nil
	case strings.HasPrefix(spec, "json:"):
		p := strings.TrimPrefix(spec, "json:")
		if p == "" {
			return Source{}, fmt.Errorf("parse key source %q: empty JSON path", s)
		}
		path := strings.Split(p, ".")
		for _, seg := range path {
			if seg == "" {
				return Source{}, fmt.Errorf("parse key source %q: empty segment in JSON path", s)
			}
		}
		return Source{kind: keyFromJSON, path: path, spec: spec}, nil
	}
	return Source{}, fmt.Errorf("parse key source %q: want key, value, header:NAME or json:dotted.path", s)
}

// String returns the DEDUP_KEY text the Source was parsed from.
func (k Source) String() string { return k.spec }

// IsZero reports whether k was never set (so Options can refuse it).
func (k Source) IsZero() bool { return k.kind == 0 }

// Extract returns the dedup key of m. ok is false when the record has no
// key: empty record key or value, missing or empty header, or, for a JSON
// source, anything but one well-formed JSON document (RFC 8259, UTF-8,
// nothing but whitespace around it) holding a non-empty string, a number or
// true/false at the path. A string yields its unescaped text, a number its
// literal text (1 and 1.0 are different keys), true/false their text; null,
// objects and arrays are unkeyed. Of duplicate field names the last wins, as
// in encoding/json. The returned slice may alias m's memory.
func (k Source) Extract(m *kafka.Message) (key []byte, ok bool) {
	switch k.kind {
	case keyFromKey:
		key = m.Key
	case keyFromValue:
		key = m.Value
	case keyFromHeader:
		for i := range m.Headers {
			if m.Headers[i].Key == k.header {
				key = m.Headers[i].Value
				break
			}
		}
	case keyFromJSON:
		key, ok = jsonKey(m.Value, k.path)
		if !ok {
			return nil, false
		}
	default:
		return nil, false
	}
	return key, len(key) > 0
}
