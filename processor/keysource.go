package processor

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/segmentio/kafka-go"
)

// keyKind says where a KeySource finds the dedup key.
type keyKind uint8

const (
	keyFromKey keyKind = iota + 1
	keyFromValue
	keyFromHeader
	keyFromJSON
)

// KeySource is a parsed DEDUP_KEY: where the dedup key of a record comes
// from. The zero value is invalid; build one with ParseKeySource.
// A KeySource is immutable and safe for concurrent use.
type KeySource struct {
	kind   keyKind
	header string   // keyFromHeader
	path   []string // keyFromJSON: object field names (or array indexes)
	spec   string   // the text it was parsed from
}

// ParseKeySource parses "key", "value", "header:NAME" or "json:dotted.path".
func ParseKeySource(s string) (KeySource, error) {
	spec := strings.TrimSpace(s)
	switch {
	case spec == "key":
		return KeySource{kind: keyFromKey, spec: spec}, nil
	case spec == "value":
		return KeySource{kind: keyFromValue, spec: spec}, nil
	case strings.HasPrefix(spec, "header:"):
		name := strings.TrimPrefix(spec, "header:")
		if name == "" {
			return KeySource{}, fmt.Errorf("parse key source %q: empty header name", s)
		}
		return KeySource{kind: keyFromHeader, header: name, spec: spec}, nil
	case strings.HasPrefix(spec, "json:"):
		p := strings.TrimPrefix(spec, "json:")
		if p == "" {
			return KeySource{}, fmt.Errorf("parse key source %q: empty JSON path", s)
		}
		path := strings.Split(p, ".")
		for _, seg := range path {
			if seg == "" {
				return KeySource{}, fmt.Errorf("parse key source %q: empty segment in JSON path", s)
			}
		}
		return KeySource{kind: keyFromJSON, path: path, spec: spec}, nil
	}
	return KeySource{}, fmt.Errorf("parse key source %q: want key, value, header:NAME or json:dotted.path", s)
}

// String returns the DEDUP_KEY text the KeySource was parsed from.
func (k KeySource) String() string { return k.spec }

// IsZero reports whether k was never set (so Options can refuse it).
func (k KeySource) IsZero() bool { return k.kind == 0 }

// Extract returns the dedup key of m. ok is false when the record has no
// key: empty record key or value, missing or empty header, a JSON value that
// is malformed (up to the field), lacks the field or holds null or "" there.
// A JSON string field yields its unescaped text; any other JSON value yields
// its raw text. The returned slice may alias m's memory.
func (k KeySource) Extract(m *kafka.Message) (key []byte, ok bool) {
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
		key, ok = jsonLookup(m.Value, k.path)
		if !ok {
			return nil, false
		}
	default:
		return nil, false
	}
	return key, len(key) > 0
}

// errJSON marks input the scanner cannot follow; callers treat it as unkeyed.
var errJSON = errors.New("malformed JSON")

// jsonLookup walks data along path and returns the value found there. It
// scans only as far as the field: what follows is never looked at, and
// nothing is unmarshalled into maps.
func jsonLookup(data []byte, path []string) ([]byte, bool) {
	s := jsonScanner{data: data}
	for _, seg := range path {
		s.skipSpace()
		if s.i >= len(s.data) {
			return nil, false
		}
		var found bool
		var err error
		switch s.data[s.i] {
		case '{':
			found, err = s.findField(seg)
		case '[':
			found, err = s.findIndex(seg)
		default:
			return nil, false
		}
		if err != nil || !found {
			return nil, false
		}
	}
	s.skipSpace()
	if s.i >= len(s.data) {
		return nil, false
	}
	start := s.i
	if s.data[s.i] == '"' {
		str, err := s.readString()
		if err != nil {
			return nil, false
		}
		return str, true
	}
	if err := s.skipValue(); err != nil {
		return nil, false
	}
	raw := s.data[start:s.i]
	if bytes.Equal(raw, []byte("null")) {
		return nil, false
	}
	return raw, true
}

// jsonScanner is a minimal forward-only JSON reader over one value.
type jsonScanner struct {
	data  []byte
	i     int
	depth int
}

// maxJSONDepth bounds nesting so a hostile value cannot exhaust the stack.
const maxJSONDepth = 512

func (s *jsonScanner) skipSpace() {
	for s.i < len(s.data) {
		switch s.data[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

// findField expects an object at s.i and leaves s.i at the value of the
// first member named name.
func (s *jsonScanner) findField(name string) (bool, error) {
	s.i++ // '{'
	s.skipSpace()
	if s.i < len(s.data) && s.data[s.i] == '}' {
		s.i++
		return false, nil
	}
	for {
		s.skipSpace()
		if s.i >= len(s.data) || s.data[s.i] != '"' {
			return false, errJSON
		}
		field, err := s.readString()
		if err != nil {
			return false, err
		}
		s.skipSpace()
		if s.i >= len(s.data) || s.data[s.i] != ':' {
			return false, errJSON
		}
		s.i++
		if string(field) == name {
			return true, nil
		}
		if err := s.skipValue(); err != nil {
			return false, err
		}
		if more, err := s.next('}'); !more {
			return false, err
		}
	}
}

// findIndex expects an array at s.i and leaves s.i at element seg (a
// decimal index).
func (s *jsonScanner) findIndex(seg string) (bool, error) {
	idx, err := strconv.Atoi(seg)
	if err != nil || idx < 0 {
		return false, nil
	}
	s.i++ // '['
	s.skipSpace()
	if s.i < len(s.data) && s.data[s.i] == ']' {
		s.i++
		return false, nil
	}
	for n := 0; ; n++ {
		s.skipSpace()
		if n == idx {
			return true, nil
		}
		if err := s.skipValue(); err != nil {
			return false, err
		}
		if more, err := s.next(']'); !more {
			return false, err
		}
	}
}

// readString reads the string at s.i and returns its unescaped content.
// Without escapes the result aliases the input (no allocation).
func (s *jsonScanner) readString() ([]byte, error) {
	s.i++ // opening quote
	start := s.i
	for s.i < len(s.data) {
		c := s.data[s.i]
		switch {
		case c == '"':
			out := s.data[start:s.i]
			s.i++
			return out, nil
		case c == '\\':
			return s.readEscapedString(start)
		case c < 0x20:
			return nil, errJSON
		}
		s.i++
	}
	return nil, errJSON
}

// readEscapedString continues readString once an escape is seen.
func (s *jsonScanner) readEscapedString(start int) ([]byte, error) {
	out := make([]byte, 0, s.i-start+16)
	out = append(out, s.data[start:s.i]...)
	for s.i < len(s.data) {
		c := s.data[s.i]
		switch {
		case c == '"':
			s.i++
			return out, nil
		case c < 0x20:
			return nil, errJSON
		case c != '\\':
			out = append(out, c)
			s.i++
			continue
		}
		s.i++ // backslash
		if s.i >= len(s.data) {
			return nil, errJSON
		}
		e := s.data[s.i]
		s.i++
		switch e {
		case '"', '\\', '/':
			out = append(out, e)
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, ok := s.readHex4()
			if !ok {
				return nil, errJSON
			}
			if utf16.IsSurrogate(r) {
				// A pair is two \u escapes; a lone half becomes U+FFFD, as
				// encoding/json does.
				r = s.lowSurrogate(r)
			}
			out = utf8.AppendRune(out, r)
		default:
			return nil, errJSON
		}
	}
	return nil, errJSON
}

// lowSurrogate completes the high surrogate hi with a following \uXXXX
// low surrogate, or returns U+FFFD and leaves s.i alone.
func (s *jsonScanner) lowSurrogate(hi rune) rune {
	if s.i+1 >= len(s.data) || s.data[s.i] != '\\' || s.data[s.i+1] != 'u' {
		return utf8.RuneError
	}
	save := s.i
	s.i += 2
	lo, ok := s.readHex4()
	if ok {
		if d := utf16.DecodeRune(hi, lo); d != utf8.RuneError {
			return d
		}
	}
	s.i = save
	return utf8.RuneError
}

func (s *jsonScanner) readHex4() (rune, bool) {
	if s.i+4 > len(s.data) {
		return 0, false
	}
	var r rune
	for _, c := range s.data[s.i : s.i+4] {
		r <<= 4
		switch {
		case '0' <= c && c <= '9':
			r |= rune(c - '0')
		case 'a' <= c && c <= 'f':
			r |= rune(c - 'a' + 10)
		case 'A' <= c && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, false
		}
	}
	s.i += 4
	return r, true
}

// skipValue moves s.i past the value that starts at s.i.
func (s *jsonScanner) skipValue() error {
	s.skipSpace()
	if s.i >= len(s.data) {
		return errJSON
	}
	switch c := s.data[s.i]; {
	case c == '"':
		_, err := s.skipString()
		return err
	case c == '{' || c == '[':
		return s.skipContainer()
	case c == 't':
		return s.skipLiteral("true")
	case c == 'f':
		return s.skipLiteral("false")
	case c == 'n':
		return s.skipLiteral("null")
	case c == '-' || ('0' <= c && c <= '9'):
		return s.skipNumber()
	}
	return errJSON
}

// skipString moves past a string without unescaping it.
func (s *jsonScanner) skipString() (int, error) {
	s.i++
	for s.i < len(s.data) {
		switch c := s.data[s.i]; {
		case c == '"':
			s.i++
			return s.i, nil
		case c == '\\':
			s.i += 2
			continue
		case c < 0x20:
			return 0, errJSON
		}
		s.i++
	}
	return 0, errJSON
}

func (s *jsonScanner) skipContainer() error {
	s.depth++
	defer func() { s.depth-- }()
	if s.depth > maxJSONDepth {
		return errJSON
	}
	obj := s.data[s.i] == '{'
	closer := byte(']')
	if obj {
		closer = '}'
	}
	s.i++
	s.skipSpace()
	if s.i < len(s.data) && s.data[s.i] == closer {
		s.i++
		return nil
	}
	for {
		s.skipSpace()
		if obj {
			if s.i >= len(s.data) || s.data[s.i] != '"' {
				return errJSON
			}
			if _, err := s.skipString(); err != nil {
				return err
			}
			s.skipSpace()
			if s.i >= len(s.data) || s.data[s.i] != ':' {
				return errJSON
			}
			s.i++
		}
		if err := s.skipValue(); err != nil {
			return err
		}
		if more, err := s.next(closer); !more {
			return err
		}
	}
}

// next reads the separator after a member of an object or an element of an
// array that closer ends: true when another one follows, false (and nil) at
// the closing bracket, errJSON otherwise.
func (s *jsonScanner) next(closer byte) (bool, error) {
	s.skipSpace()
	if s.i >= len(s.data) {
		return false, errJSON
	}
	switch s.data[s.i] {
	case ',':
		s.i++
		return true, nil
	case closer:
		s.i++
		return false, nil
	}
	return false, errJSON
}

func (s *jsonScanner) skipLiteral(lit string) error {
	if !bytes.HasPrefix(s.data[s.i:], []byte(lit)) {
		return errJSON
	}
	s.i += len(lit)
	return nil
}

// skipNumber accepts the JSON number grammar.
func (s *jsonScanner) skipNumber() error {
	start := s.i
	if s.data[s.i] == '-' {
		s.i++
	}
	digits := func() int {
		n := 0
		for s.i < len(s.data) && '0' <= s.data[s.i] && s.data[s.i] <= '9' {
			s.i++
			n++
		}
		return n
	}
	if s.i < len(s.data) && s.data[s.i] == '0' {
		s.i++
	} else if digits() == 0 {
		return errJSON
	}
	if s.i < len(s.data) && s.data[s.i] == '.' {
		s.i++
		if digits() == 0 {
			return errJSON
		}
	}
	if s.i < len(s.data) && (s.data[s.i] == 'e' || s.data[s.i] == 'E') {
		s.i++
		if s.i < len(s.data) && (s.data[s.i] == '+' || s.data[s.i] == '-') {
			s.i++
		}
		if digits() == 0 {
			return errJSON
		}
	}
	if s.i == start {
		return errJSON
	}
	return nil
}
