package tokenizer

import (
	"bytes"
	"fmt"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// jsonScanner is a strict, allocation-light JSON reader for the two large
// tables of a tokenizer.json (the vocab object and the merges array, 90% of
// Qwen3's 11 MB), which encoding/json would validate and copy several times.
// The small parts are handed to encoding/json as raw slices. The input must
// already be valid UTF-8.
type jsonScanner struct {
	data []byte
	pos  int
}

func (s *jsonScanner) errorf(format string, args ...any) error {
	return fmt.Errorf("JSON at byte %d: %s", s.pos, fmt.Sprintf(format, args...))
}

func (s *jsonScanner) ws() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// peek returns the next non-space byte, or 0 at the end.
func (s *jsonScanner) peek() byte {
	s.ws()
	if s.pos >= len(s.data) {
		return 0
	}
	return s.data[s.pos]
}

func (s *jsonScanner) expect(c byte) error {
	if s.peek() != c {
		if s.pos >= len(s.data) {
			return s.errorf("unexpected end, want %q", c)
		}
		return s.errorf("got %q, want %q", s.data[s.pos], c)
	}
	s.pos++
	return nil
}

// end checks that only whitespace is left.
func (s *jsonScanner) end() error {
	if s.peek() != 0 {
		return s.errorf("unexpected %q after the top-level value", s.data[s.pos])
	}
	return nil
}

// strBytes reads a string; without escapes the result aliases the input.
func (s *jsonScanner) strBytes() ([]byte, error) {
	if err := s.expect('"'); err != nil {
		return nil, err
	}
	start := s.pos
	for s.pos < len(s.data) {
		c := s.data[s.pos]
		switch {
		case c == '"':
			s.pos++
			return s.data[start : s.pos-1], nil
		case c == '\\':
			v, err := s.strEscaped(start)
			return []byte(v), err
		case c < 0x20:
			return nil, s.errorf("control character %#x in string", c)
		}
		s.pos++
	}
	return nil, s.errorf("unterminated string")
}

// str reads a string.
func (s *jsonScanner) str() (string, error) {
	if err := s.expect('"'); err != nil {
		return "", err
	}
	start := s.pos
	for s.pos < len(s.data) {
		c := s.data[s.pos]
		switch {
		case c == '"':
			v := string(s.data[start:s.pos])
			s.pos++
			return v, nil
		case c == '\\':
			return s.strEscaped(start)
		case c < 0x20:
			return "", s.errorf("control character %#x in string", c)
		}
		s.pos++
	}
	return "", s.errorf("unterminated string")
}

// strEscaped finishes a string that has escapes, from its first escape.
func (s *jsonScanner) strEscaped(start int) (string, error) {
	buf := append([]byte(nil), s.data[start:s.pos]...)
	for s.pos < len(s.data) {
		c := s.data[s.pos]
		switch {
		case c == '"':
			s.pos++
			return string(buf), nil
		case c < 0x20:
			return "", s.errorf("control character %#x in string", c)
		case c != '\\':
			buf = append(buf, c)
			s.pos++
			continue
		}
		if s.pos+1 >= len(s.data) {
			return "", s.errorf("unterminated escape")
		}
		e := s.data[s.pos+1]
		s.pos += 2
		switch e {
		case '"', '\\', '/':
			buf = append(buf, e)
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			r, err := s.hex4()
			if err != nil {
				return "", err
			}
			if utf16.IsSurrogate(r) {
				r2 := utf8.RuneError
				if s.pos+1 < len(s.data) && s.data[s.pos] == '\\' && s.data[s.pos+1] == 'u' {
					save := s.pos
					s.pos += 2
					lo, err := s.hex4()
					if err != nil {
						return "", err
					}
					if r2 = utf16.DecodeRune(r, lo); r2 == utf8.RuneError {
						s.pos = save // not a pair: the second escape stands alone
					}
				}
				r = r2
			}
			buf = utf8.AppendRune(buf, r)
		default:
			return "", s.errorf("invalid escape \\%c", e)
		}
	}
	return "", s.errorf("unterminated string")
}

func (s *jsonScanner) hex4() (rune, error) {
	if s.pos+4 > len(s.data) {
		return 0, s.errorf("short \\u escape")
	}
	v, err := strconv.ParseUint(string(s.data[s.pos:s.pos+4]), 16, 32)
	if err != nil {
		return 0, s.errorf("bad \\u escape %q", s.data[s.pos:s.pos+4])
	}
	s.pos += 4
	return rune(v), nil
}

// number reads a JSON number and returns its text.
func (s *jsonScanner) number() ([]byte, error) {
	s.ws()
	start := s.pos
	digits := func() int {
		n := 0
		for s.pos < len(s.data) && s.data[s.pos] >= '0' && s.data[s.pos] <= '9' {
			s.pos++
			n++
		}
		return n
	}
	if s.pos < len(s.data) && s.data[s.pos] == '-' {
		s.pos++
	}
	if s.pos < len(s.data) && s.data[s.pos] == '0' {
		s.pos++
	} else if digits() == 0 {
		return nil, s.errorf("invalid number")
	}
	if s.pos < len(s.data) && s.data[s.pos] == '.' {
		s.pos++
		if digits() == 0 {
			return nil, s.errorf("invalid number")
		}
	}
	if s.pos < len(s.data) && (s.data[s.pos] == 'e' || s.data[s.pos] == 'E') {
		s.pos++
		if s.pos < len(s.data) && (s.data[s.pos] == '+' || s.data[s.pos] == '-') {
			s.pos++
		}
		if digits() == 0 {
			return nil, s.errorf("invalid number")
		}
	}
	return s.data[start:s.pos], nil
}

// integer reads a number that must be an integer.
func (s *jsonScanner) integer() (int, error) {
	text, err := s.number()
	if err != nil {
		return 0, err
	}
	v, err := strconv.Atoi(string(text))
	if err != nil {
		return 0, s.errorf("want an integer, got %s", text)
	}
	return v, nil
}

// object calls member for every key; member must consume the value.
func (s *jsonScanner) object(member func(key string) error) error {
	return s.members('{', '}', "object", func(int) error {
		key, err := s.str()
		if err != nil {
			return err
		}
		if err := s.expect(':'); err != nil {
			return err
		}
		return member(key)
	})
}

// array calls elem for every element; elem must consume the value.
func (s *jsonScanner) array(elem func(i int) error) error {
	return s.members('[', ']', "array", elem)
}

// members reads start, then calls elem for each comma-separated member
// (elem consumes it) until end; what names the container in errors.
func (s *jsonScanner) members(start, end byte, what string, elem func(i int) error) error {
	if err := s.expect(start); err != nil {
		return err
	}
	if s.peek() == end {
		s.pos++
		return nil
	}
	for i := 0; ; i++ {
		if err := elem(i); err != nil {
			return err
		}
		switch s.peek() {
		case ',':
			s.pos++
		case end:
			s.pos++
			return nil
		default:
			return s.errorf("want ',' or '%c' in %s", end, what)
		}
	}
}

// maxDepth bounds nesting so hostile input cannot exhaust the stack.
const maxDepth = 1000

// skip validates and skips one value.
func (s *jsonScanner) skip(depth int) error {
	if depth > maxDepth {
		return s.errorf("nesting deeper than %d", maxDepth)
	}
	switch c := s.peek(); {
	case c == '{':
		return s.object(func(string) error { return s.skip(depth + 1) })
	case c == '[':
		return s.array(func(int) error { return s.skip(depth + 1) })
	case c == '"':
		_, err := s.str()
		return err
	case c == '-' || (c >= '0' && c <= '9'):
		_, err := s.number()
		return err
	default:
		for _, lit := range []string{"true", "false", "null"} {
			if len(s.data)-s.pos >= len(lit) && string(s.data[s.pos:s.pos+len(lit)]) == lit {
				s.pos += len(lit)
				return nil
			}
		}
		if c == 0 {
			return s.errorf("unexpected end of input")
		}
		return s.errorf("unexpected %q", c)
	}
}

// raw validates and returns the bytes of the next value.
func (s *jsonScanner) raw() ([]byte, error) {
	s.ws()
	start := s.pos
	if err := s.skip(0); err != nil {
		return nil, err
	}
	return s.data[start:s.pos], nil
}

// vocabObject reads a token → id object of non-negative integer ids
// (distinctness is checked by vocabByID). sizeHint presizes the map.
func (s *jsonScanner) vocabObject(sizeHint int) (map[string]int, error) {
	vocab := make(map[string]int, sizeHint)
	err := s.object(func(tok string) error {
		id, err := s.integer()
		if err != nil {
			return fmt.Errorf("vocab %q: %w", tok, err)
		}
		if id < 0 || id > maxTokenID {
			return fmt.Errorf("vocab: token %q has id %d outside [0, %d]", tok, id, maxTokenID)
		}
		vocab[tok] = id
		return nil
	})
	return vocab, err
}

// mergesArray reads the merges table in either form Hugging Face writes:
// ["a b", ...] (two tokens separated by one space) or [["a", "b"], ...],
// as pairs of vocab ids.
func (s *jsonScanner) mergesArray(vocab map[string]int, sizeHint int) ([][2]int32, error) {
	out := make([][2]int32, 0, sizeHint)
	lookup := func(i int, a, b []byte) error {
		ia, okA := vocab[string(a)]
		ib, okB := vocab[string(b)]
		if !okA || !okB {
			return fmt.Errorf("merges[%d] (%q %q): token not in the vocab", i, a, b)
		}
		out = append(out, [2]int32{int32(ia), int32(ib)})
		return nil
	}
	err := s.array(func(i int) error {
		switch s.peek() {
		case '"':
			line, err := s.strBytes()
			if err != nil {
				return err
			}
			a, b, ok := bytes.Cut(line, []byte{' '})
			if !ok || bytes.IndexByte(b, ' ') >= 0 {
				return fmt.Errorf("merges[%d] %q: want two tokens separated by one space", i, line)
			}
			return lookup(i, a, b)
		case '[':
			s.pos++
			a, err := s.strBytes()
			if err != nil {
				return fmt.Errorf("merges[%d]: %w", i, err)
			}
			if err := s.expect(','); err != nil {
				return fmt.Errorf("merges[%d]: want a pair: %w", i, err)
			}
			b, err := s.strBytes()
			if err != nil {
				return fmt.Errorf("merges[%d]: %w", i, err)
			}
			if err := s.expect(']'); err != nil {
				return fmt.Errorf("merges[%d]: want a pair: %w", i, err)
			}
			return lookup(i, a, b)
		}
		return fmt.Errorf("merges[%d]: want a string or a [a, b] pair", i)
	})
	return out, err
}
