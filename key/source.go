package key

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"

	"github.com/segmentio/kafka-go"
)

// partKind says where one part of a Source finds its bytes.
type partKind uint8

const (
	fromKey partKind = iota + 1
	fromValue
	fromHeader
	fromJSON
	fromAvro
	fromProtobuf
	fromJSONSchema
)

// part is one comma-separated source of DEDUP_KEY.
type part struct {
	kind   partKind
	header string   // fromHeader
	path   []string // fromJSON and the schema-framed kinds: field names (or JSON array indexes)
	framed *framed  // the schema-framed kinds: their registry and compiled plans
}

// Source is a parsed DEDUP_KEY: where the dedup key of a record comes
// from, one source or several forming one identity. The zero value is
// invalid; build one with Parse, and give a Source that reads
// schema-framed values its registry with WithRegistry.
// A Source is immutable and safe for concurrent use.
type Source struct {
	parts []part
	spec  string // the text it was parsed from
}

// ErrSyntax is a DEDUP_KEY that does not parse.
var ErrSyntax = errors.New("want key, value, header:NAME, json:PATH, avro:PATH, protobuf:PATH or jsonschema:PATH, several separated by commas")

// Parse parses DEDUP_KEY: "key", "value", "header:NAME", "json:dotted.path",
// "avro:dotted.path", "protobuf:dotted.path", "jsonschema:dotted.path", or
// several of them separated by commas (a header name cannot hold a comma).
func Parse(s string) (Source, error) {
	spec := strings.TrimSpace(s)
	if spec == "" {
		return Source{}, fmt.Errorf("parse key source %q: empty: %w", s, ErrSyntax)
	}
	texts := strings.Split(spec, ",")
	parts := make([]part, 0, len(texts))
	for _, t := range texts {
		p, err := parsePart(strings.TrimSpace(t))
		if err != nil {
			return Source{}, fmt.Errorf("parse key source %q: %w", s, err)
		}
		parts = append(parts, p)
	}
	return Source{parts: parts, spec: spec}, nil
}

func parsePart(t string) (part, error) {
	switch t {
	case "":
		return part{}, fmt.Errorf("empty source between commas: %w", ErrSyntax)
	case "key":
		return part{kind: fromKey}, nil
	case "value":
		return part{kind: fromValue}, nil
	}
	prefix, rest, ok := strings.Cut(t, ":")
	if !ok {
		return part{}, fmt.Errorf("%q: %w", t, ErrSyntax)
	}
	kinds := map[string]partKind{"json": fromJSON, "avro": fromAvro, "protobuf": fromProtobuf, "jsonschema": fromJSONSchema}
	switch kind, isPath := kinds[prefix]; {
	case prefix == "header":
		if rest == "" {
			return part{}, fmt.Errorf("%q: empty header name", t)
		}
		return part{kind: fromHeader, header: rest}, nil
	case isPath:
		if rest == "" {
			return part{}, fmt.Errorf("%q: empty path", t)
		}
		path := strings.Split(rest, ".")
		for _, seg := range path {
			if seg == "" {
				return part{}, fmt.Errorf("%q: empty segment in path", t)
			}
		}
		p := part{kind: kind, path: path}
		if kind != fromJSON {
			p.framed = &framed{}
		}
		return p, nil
	}
	return part{}, fmt.Errorf("%q: %w", t, ErrSyntax)
}

// String returns the DEDUP_KEY text the Source was parsed from.
func (k Source) String() string { return k.spec }

// PartNames returns each source of k as DEDUP_KEY writes it, in order:
// what the parts of a composite key (KeyOf) stand for.
func (k Source) PartNames() []string {
	names := strings.Split(k.spec, ",")
	for i := range names {
		names[i] = strings.TrimSpace(names[i])
	}
	return names
}

// IsZero reports whether k was never set (so Options can refuse it).
func (k Source) IsZero() bool { return len(k.parts) == 0 }

// Parts is the number of sources that form the identity.
func (k Source) Parts() int { return len(k.parts) }

// Extract returns the dedup key of m, or why it has none.
//
// One source: the record key, value or header as it is (absent or empty:
// Empty); for json:, anything but one well-formed JSON document (RFC 8259,
// UTF-8, nothing but whitespace around it) is Malformed, and the path must
// hold a non-empty string (its unescaped text), a number (its literal text:
// 1 and 1.0 are different keys) or true/false; null, objects and arrays
// are MissingField (of duplicate field names the last wins, as in
// encoding/json). The schema-framed sources read the field as package
// schema says (its canonical key bytes) and return Waiting while the
// value's schema is not known yet.
//
// Several sources: the key is every part's bytes, each preceded by its
// length as a uvarint, so that no two different tuples of parts make the
// same key. A part without a key makes the record unkeyed; Waiting is
// returned only when every other part has a key.
//
// The key may alias m's memory or a's; a may be nil (the key is then
// allocated when it has to be built).
func (k Source) Extract(m *kafka.Message, a *Arena) ([]byte, Status) {
	if a == nil {
		a = new(Arena)
	}
	if len(k.parts) == 1 {
		return k.parts[0].extract(m, a)
	}
	return k.composite(m, a)
}

// maxStackParts is how many parts a composite key collects without
// allocating.
const maxStackParts = 8

func (k Source) composite(m *kafka.Message, a *Arena) ([]byte, Status) {
	var stack [maxStackParts][]byte
	keys := stack[:0]
	waiting := false
	for i := range k.parts {
		b, st := k.parts[i].extract(m, a)
		switch st {
		case Keyed:
		case Waiting:
			waiting = true
		default:
			return nil, st
		}
		keys = append(keys, b)
	}
	if waiting {
		return nil, Waiting
	}
	start := len(a.b)
	a.b = appendComposite(a.b, keys)
	return a.take(start), Keyed
}

// Compose is the composite key of parts, as Extract builds it from a
// record with several sources: each part preceded by its length as a
// uvarint. It lets a key be named by its parts (dedup explain).
func Compose(parts [][]byte) []byte { return appendComposite(nil, parts) }

// appendComposite appends the composite key of parts to dst.
func appendComposite(dst []byte, parts [][]byte) []byte {
	for _, b := range parts {
		dst = binary.AppendUvarint(dst, uint64(len(b)))
		dst = append(dst, b...)
	}
	return dst
}

// ErrKeyParts is a key given by parts that DEDUP_KEY would never extract:
// another number of parts than it has sources, or an empty part.
var ErrKeyParts = errors.New("key parts do not match DEDUP_KEY")

// KeyOf is the dedup key Extract returns for a record whose parts (one
// per source of k, in order) are parts: a single source's bytes as they
// are, several composed (Compose). An empty part, or another number of
// parts than k has sources, is ErrKeyParts: no record has that key.
func (k Source) KeyOf(parts [][]byte) ([]byte, error) {
	if len(parts) != len(k.parts) {
		return nil, fmt.Errorf("%w: %d part(s) for %d source(s) in %q", ErrKeyParts, len(parts), len(k.parts), k.spec)
	}
	for i, b := range parts {
		if len(b) == 0 {
			return nil, fmt.Errorf("%w: part %d is empty (a record with an empty key part is unkeyed)", ErrKeyParts, i+1)
		}
	}
	if len(parts) == 1 {
		return parts[0], nil
	}
	return Compose(parts), nil
}

// extract is one part's key of m.
func (p *part) extract(m *kafka.Message, a *Arena) ([]byte, Status) {
	var b []byte
	switch p.kind {
	case fromKey:
		b = m.Key
	case fromValue:
		b = m.Value
	case fromHeader:
		for i := range m.Headers {
			if m.Headers[i].Key == p.header {
				b = m.Headers[i].Value
				break
			}
		}
	case fromJSON:
		return jsonStatus(m.Value, p.path)
	case fromAvro, fromProtobuf, fromJSONSchema:
		return p.framedKey(m.Value, a)
	}
	if len(b) == 0 {
		return nil, Empty
	}
	return b, Keyed
}

// Schemas reports whether k reads schema-framed values, and so needs a
// registry.
func (k Source) Schemas() bool {
	for _, p := range k.parts {
		if p.framed != nil {
			return true
		}
	}
	return false
}

// Wait blocks until the schemas of m that Extract found unknown are known
// (or known not to exist), or ctx ends (ctx.Err()). Extract m again after
// it: it may still say Waiting if the schema was evicted meanwhile.
func (k Source) Wait(ctx context.Context, m *kafka.Message) error {
	for i := range k.parts {
		if p := &k.parts[i]; p.framed != nil {
			if err := p.framed.wait(ctx, m.Value); err != nil {
				return err
			}
		}
	}
	return nil
}

// Pending reports whether Extract would say Waiting for m: a schema m
// needs is not known yet (its fetch is started). Cheaper than Extract: it
// decodes nothing.
func (k Source) Pending(m *kafka.Message) bool {
	for i := range k.parts {
		if p := &k.parts[i]; p.framed != nil && !p.framed.known(m.Value) {
			return true
		}
	}
	return false
}

// Await blocks until Pending(m) is false or ctx ends (ctx.Err()).
func (k Source) Await(ctx context.Context, m *kafka.Message) error {
	for k.Pending(m) {
		if err := k.Wait(ctx, m); err != nil {
			return err
		}
	}
	return nil
}
