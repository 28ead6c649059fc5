package key

import (
	"bytes"
	"errors"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// errJSON marks input that is not well-formed JSON; callers treat it as
// unkeyed.
var errJSON = errors.New("malformed JSON")

// jsonStatus returns the scalar at path in data, which must be one
// well-formed JSON document. It reads the document once, front to back,
// validating all of it (a key taken before a syntax error further on would
// let a malformed value be dropped as a duplicate), and unmarshals nothing
// into maps.
func jsonStatus(data []byte, path []string) ([]byte, Status) {
	s := jsonScanner{data: data}
	s.skipSpace()
	key, found, err := s.find(path)
	if err != nil {
		return nil, Malformed
	}
	s.skipSpace()
	if s.i != len(s.data) {
		return nil, Malformed
	}
	if !found || len(key) == 0 {
		return nil, MissingField
	}
	return key, Keyed
}

// jsonScanner is a forward-only JSON validator that picks one value out.
type jsonScanner struct {
	data  []byte
	i     int
	depth int
}

// maxJSONDepth bounds nesting so a hostile value cannot exhaust the stack;
// deeper documents are unkeyed.
const maxJSONDepth = 512

func (s *jsonScanner) skipSpace() {
	i, data := s.i, s.data
	for i < len(data) {
		if c := data[i]; c > ' ' || (c != ' ' && c != '\t' && c != '\n' && c != '\r') {
			break
		}
		i++
	}
	s.i = i
}

// plainInString marks the bytes a string holds as they are: not the
// closing quote, a backslash, a control character or part of a multi-byte
// UTF-8 sequence. Strings are most of a document, so they are skipped a
// table lookup per byte.
var plainInString = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// skipPlain moves s.i past the plain bytes of a string.
func (s *jsonScanner) skipPlain() {
	i, data := s.i, s.data
	for i < len(data) && plainInString[data[i]] {
		i++
	}
	s.i = i
}

// find scans the value at s.i and returns the key at path inside it.
func (s *jsonScanner) find(path []string) ([]byte, bool, error) {
	if len(path) == 0 {
		return s.leaf()
	}
	if s.i < len(s.data) && (s.data[s.i] == '{' || s.data[s.i] == '[') {
		return s.container(path)
	}
	return nil, false, s.skip()
}

// leaf scans the value at s.i, the end of the path, and returns it when it
// is a scalar that can be a key.
func (s *jsonScanner) leaf() ([]byte, bool, error) {
	if s.i >= len(s.data) {
		return nil, false, errJSON
	}
	start := s.i
	switch c := s.data[s.i]; {
	case c == '"':
		str, err := s.readString()
		return str, err == nil, err
	case c == 't', c == 'f', c == '-', '0' <= c && c <= '9':
		if err := s.skip(); err != nil {
			return nil, false, err
		}
		return s.data[start:s.i], true, nil
	}
	return nil, false, s.skip() // null, object, array: no key
}

// skip moves s.i past the value that starts at s.i, validating it.
func (s *jsonScanner) skip() error {
	if s.i < len(s.data) && (s.data[s.i] == '{' || s.data[s.i] == '[') {
		return s.skipContainer()
	}
	return s.skipScalar()
}

// skipScalar moves s.i past the string, number or literal at s.i.
func (s *jsonScanner) skipScalar() error {
	if s.i >= len(s.data) {
		return errJSON
	}
	switch c := s.data[s.i]; {
	case c == '"':
		return s.skipString()
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

// skipContainer validates the object or array at s.i and moves past it,
// without looking for anything in it. It is the bulk of the work on a
// large document, so it keeps its open containers in a bit set instead of
// recursing.
func (s *jsonScanner) skipContainer() error {
	var isObj [maxJSONDepth/64 + 1]uint64 // bit d: the container at depth d is an object
	depth := 0
	for {
		// s.i is at a value.
		if c := s.data[s.i]; c == '{' || c == '[' {
			if s.depth+depth >= maxJSONDepth {
				return errJSON
			}
			if c == '{' {
				isObj[depth/64] |= 1 << (depth % 64)
			} else {
				isObj[depth/64] &^= 1 << (depth % 64)
			}
			depth++
			s.i++
			s.skipSpace()
			if s.i >= len(s.data) {
				return errJSON
			}
			if s.data[s.i] != c+2 { // not empty: '{'+2 is '}', '['+2 is ']'
				if c == '{' {
					if err := s.skipName(); err != nil {
						return err
					}
				}
				continue
			}
			s.i++
			depth--
		} else if err := s.skipScalar(); err != nil {
			return err
		}
		// After a value: separators and closing brackets.
		for {
			if depth == 0 {
				return nil
			}
			s.skipSpace()
			if s.i >= len(s.data) {
				return errJSON
			}
			obj := isObj[(depth-1)/64]&(1<<((depth-1)%64)) != 0
			c := s.data[s.i]
			if c == ',' {
				s.i++
				s.skipSpace()
				if obj {
					if err := s.skipName(); err != nil {
						return err
					}
				}
				if s.i >= len(s.data) {
					return errJSON
				}
				break
			}
			if (obj && c == '}') || (!obj && c == ']') {
				s.i++
				depth--
				continue
			}
			return errJSON
		}
	}
}

// skipName moves past an object member's name and colon, leaving s.i at
// its value.
func (s *jsonScanner) skipName() error {
	if s.i >= len(s.data) || s.data[s.i] != '"' {
		return errJSON
	}
	if err := s.skipString(); err != nil {
		return err
	}
	s.skipSpace()
	if s.i >= len(s.data) || s.data[s.i] != ':' {
		return errJSON
	}
	s.i++
	s.skipSpace()
	if s.i >= len(s.data) {
		return errJSON
	}
	return nil
}

// container scans the object or array at s.i and follows path[0] (a
// field name, or an index in an array) into the member, returning what
// find returns there; of duplicate names the last wins, as encoding/json
// keeps the last one in a map.
func (s *jsonScanner) container(path []string) (key []byte, found bool, err error) {
	if s.depth++; s.depth > maxJSONDepth {
		return nil, false, errJSON
	}
	obj := s.data[s.i] == '{'
	closer := byte(']')
	if obj {
		closer = '}'
	}
	idx := -1
	if !obj {
		if n, err := strconv.Atoi(path[0]); err == nil && n >= 0 {
			idx = n
		}
	}
	s.i++
	s.skipSpace()
	if s.i < len(s.data) && s.data[s.i] == closer {
		s.i++
		s.depth--
		return nil, false, nil
	}
	for n := 0; ; n++ {
		s.skipSpace()
		match := n == idx
		if obj {
			if s.i >= len(s.data) || s.data[s.i] != '"' {
				return nil, false, errJSON
			}
			name, err := s.readString()
			if err != nil {
				return nil, false, err
			}
			match = string(name) == path[0]
			s.skipSpace()
			if s.i >= len(s.data) || s.data[s.i] != ':' {
				return nil, false, errJSON
			}
			s.i++
			s.skipSpace()
		}
		if match {
			key, found, err = s.find(path[1:])
		} else {
			err = s.skip()
		}
		if err != nil {
			return nil, false, err
		}
		s.skipSpace()
		if s.i >= len(s.data) {
			return nil, false, errJSON
		}
		switch s.data[s.i] {
		case ',':
			s.i++
		case closer:
			s.i++
			s.depth--
			return key, found, nil
		default:
			return nil, false, errJSON
		}
	}
}

// readString reads the string at s.i and returns its unescaped content.
// Without escapes the result aliases the input (no allocation).
func (s *jsonScanner) readString() ([]byte, error) {
	s.i++ // opening quote
	start := s.i
	for {
		s.skipPlain()
		if s.i >= len(s.data) {
			return nil, errJSON
		}
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
		case c >= utf8.RuneSelf:
			if !s.skipRune() {
				return nil, errJSON
			}
			continue
		}
		s.i++
	}
}

// skipRune moves past the multi-byte UTF-8 sequence at s.i, reporting
// whether it is valid (RFC 8259 texts are UTF-8).
func (s *jsonScanner) skipRune() bool {
	r, n := utf8.DecodeRune(s.data[s.i:])
	if r == utf8.RuneError && n <= 1 {
		return false
	}
	s.i += n
	return true
}

// readEscapedString continues readString once an escape is seen. An
// unpaired surrogate escape is refused: encoding/json turns every one into
// U+FFFD, which would make different values one key.
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
		case c >= utf8.RuneSelf:
			from := s.i
			if !s.skipRune() {
				return nil, errJSON
			}
			out = append(out, s.data[from:s.i]...)
			continue
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
				if r, ok = s.lowSurrogate(r); !ok {
					return nil, errJSON
				}
			}
			out = utf8.AppendRune(out, r)
		default:
			return nil, errJSON
		}
	}
	return nil, errJSON
}

// lowSurrogate completes the high surrogate hi with the \uXXXX low
// surrogate that must follow it.
func (s *jsonScanner) lowSurrogate(hi rune) (rune, bool) {
	if s.i+1 >= len(s.data) || s.data[s.i] != '\\' || s.data[s.i+1] != 'u' {
		return 0, false
	}
	s.i += 2
	lo, ok := s.readHex4()
	if !ok {
		return 0, false
	}
	r := utf16.DecodeRune(hi, lo)
	return r, r != utf8.RuneError
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

// skipString moves past a string, validating its escapes and UTF-8
// without unescaping it.
func (s *jsonScanner) skipString() error {
	s.i++
	for {
		s.skipPlain()
		if s.i >= len(s.data) {
			return errJSON
		}
		switch c := s.data[s.i]; {
		case c == '"':
			s.i++
			return nil
		case c == '\\':
			s.i++
			if s.i >= len(s.data) {
				return errJSON
			}
			switch s.data[s.i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.i++
			case 'u':
				s.i++
				if _, ok := s.readHex4(); !ok {
					return errJSON
				}
			default:
				return errJSON
			}
			continue
		case c < 0x20:
			return errJSON
		case c >= utf8.RuneSelf:
			if !s.skipRune() {
				return errJSON
			}
			continue
		}
		s.i++
	}
}

func (s *jsonScanner) skipLiteral(lit string) error {
	if !bytes.HasPrefix(s.data[s.i:], []byte(lit)) {
		return errJSON
	}
	s.i += len(lit)
	return nil
}

// skipNumber accepts the JSON number grammar: an optional minus, 0 or a
// digit string not starting with 0, an optional fraction, an optional
// exponent. What follows is checked by the caller (a delimiter or the end).
func (s *jsonScanner) skipNumber() error {
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
	return nil
}
