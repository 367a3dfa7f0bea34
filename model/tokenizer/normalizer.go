package tokenizer

import (
	"encoding/json"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// normalizer rewrites text before pre-tokenization (Hugging Face's
// normalizers). Offsets are not tracked: only ids are produced.
type normalizer interface {
	normalize(s string) string
}

type normalizerJSON struct {
	Type string `json:"type"`
	// BertNormalizer
	CleanText          *bool `json:"clean_text"`
	HandleChineseChars *bool `json:"handle_chinese_chars"`
	StripAccents       *bool `json:"strip_accents"`
	Lowercase          *bool `json:"lowercase"`
	// Sequence
	Normalizers []json.RawMessage `json:"normalizers"`
	// Replace
	Pattern *patternJSON `json:"pattern"`
	Content string       `json:"content"`
	// Prepend
	Prepend string `json:"prepend"`
	// Strip
	StripLeft  bool `json:"strip_left"`
	StripRight bool `json:"strip_right"`
}

// patternJSON is a Split/Replace pattern: {"String": "..."} or {"Regex": "..."}.
type patternJSON struct {
	String *string `json:"String"`
	Regex  *string `json:"Regex"`
}

func boolOr(p *bool, def bool) bool {
	if p == nil {
		return def
	}
	return *p
}

func parseNormalizer(raw json.RawMessage) (normalizer, error) {
	j, ok, err := decodeComponent[normalizerJSON]("normalizer", raw)
	if !ok || err != nil {
		return nil, err
	}
	switch j.Type {
	case "NFC":
		return formNormalizer{norm.NFC}, nil
	case "NFD":
		return formNormalizer{norm.NFD}, nil
	case "NFKC":
		return formNormalizer{norm.NFKC}, nil
	case "NFKD":
		return formNormalizer{norm.NFKD}, nil
	case "Lowercase":
		return lowercaseNormalizer{}, nil
	case "StripAccents":
		return stripAccentsNormalizer{}, nil
	case "BertNormalizer":
		lower := boolOr(j.Lowercase, true)
		return bertNormalizer{
			cleanText:    boolOr(j.CleanText, true),
			chinese:      boolOr(j.HandleChineseChars, true),
			stripAccents: boolOr(j.StripAccents, lower),
			lowercase:    lower,
		}, nil
	case "Sequence":
		return parseSequence[sequenceNormalizer]("normalizer", j.Normalizers, func(r json.RawMessage) (normalizer, error) { return parseNormalizer(r) })
	case "Replace":
		m, err := componentPattern("normalizer Replace", j.Pattern)
		if err != nil {
			return nil, err
		}
		return replaceNormalizer{m: m, content: j.Content}, nil
	case "Prepend":
		return prependNormalizer(j.Prepend), nil
	case "Strip":
		return stripNormalizer{left: j.StripLeft, right: j.StripRight}, nil
	}
	return nil, unsupportedComponent("normalizer", j.Type)
}

// formNormalizer applies a Unicode normalization form (NFC, NFD, NFKC, NFKD).
type formNormalizer struct{ f norm.Form }

func (n formNormalizer) normalize(s string) string { return n.f.String(s) }

type sequenceNormalizer []normalizer

func (seq sequenceNormalizer) normalize(s string) string {
	return chain(seq, s, normalizer.normalize)
}

// lowercaseNormalizer maps every character to its lowercase form as Rust's
// char::to_lowercase does: the simple Unicode mapping, except U+0130 (İ)
// which lowercases to "i\u0307". No context (final sigma) is applied.
type lowercaseNormalizer struct{}

func (lowercaseNormalizer) normalize(s string) string { return lowercase(s) }

func lowercase(s string) string {
	ascii, upper := true, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf {
			ascii = false
			break
		}
		upper = upper || (c >= 'A' && c <= 'Z')
	}
	if ascii {
		if !upper {
			return s
		}
		b := []byte(s)
		for i, c := range b {
			if c >= 'A' && c <= 'Z' {
				b[i] = c + 'a' - 'A'
			}
		}
		return string(b)
	}
	var sb strings.Builder
	sb.Grow(len(s))
	for _, r := range s {
		if r == 'İ' {
			sb.WriteString("i\u0307")
			continue
		}
		sb.WriteRune(unicode.ToLower(r))
	}
	return sb.String()
}

// stripAccentsNormalizer removes nonspacing marks (category Mn).
type stripAccentsNormalizer struct{}

func (stripAccentsNormalizer) normalize(s string) string { return removeMn(s) }

func removeMn(s string) string {
	if isASCII(s) {
		return s
	}
	return strings.Map(func(r rune) rune {
		if unicode.Is(unicode.Mn, r) {
			return -1
		}
		return r
	}, s)
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// replaceNormalizer replaces every match of a pattern with content.
type replaceNormalizer struct {
	m       matcher
	content string
}

func (n replaceNormalizer) normalize(s string) string {
	var sb strings.Builder
	last := 0
	n.m.forEach(s, func(start, end int) {
		sb.WriteString(s[last:start])
		sb.WriteString(n.content)
		last = end
	})
	if last == 0 && sb.Len() == 0 {
		return s
	}
	sb.WriteString(s[last:])
	return sb.String()
}

// prependNormalizer prefixes non-empty text with a fixed string.
type prependNormalizer string

func (n prependNormalizer) normalize(s string) string {
	if s == "" {
		return s
	}
	return string(n) + s
}

// stripNormalizer trims Unicode whitespace on the chosen sides.
type stripNormalizer struct{ left, right bool }

func (n stripNormalizer) normalize(s string) string {
	if n.left {
		s = strings.TrimLeftFunc(s, unicode.IsSpace)
	}
	if n.right {
		s = strings.TrimRightFunc(s, unicode.IsSpace)
	}
	return s
}

// bertNormalizer is BERT's BasicTokenizer cleaning, in Hugging Face's order:
// clean text (drop NUL, U+FFFD and control characters Cc/Cf/Co other than
// \t \n \r; map whitespace to ' '), put spaces around CJK ideographs, strip
// accents (NFD, then drop Mn), lowercase.
type bertNormalizer struct {
	cleanText, chinese, stripAccents, lowercase bool
}

func (n bertNormalizer) normalize(s string) string {
	// Each step works character by character, except NFD, whose reordering
	// never crosses an ASCII character (a starter): so maximal ASCII and
	// non-ASCII runs are normalized separately, ASCII in a single pass.
	b := make([]byte, 0, len(s)+8)
	for i := 0; i < len(s); {
		j := i + 1
		if s[i] < utf8.RuneSelf {
			for j < len(s) && s[j] < utf8.RuneSelf {
				j++
			}
			b = n.appendASCII(b, s[i:j])
		} else {
			for j < len(s) && s[j] >= utf8.RuneSelf {
				j++
			}
			b = append(b, n.normalizeUnicode(s[i:j])...)
		}
		i = j
	}
	return string(b)
}

// normalizeUnicode applies the four steps in turn.
func (n bertNormalizer) normalizeUnicode(s string) string {
	if n.cleanText {
		s = strings.Map(func(r rune) rune {
			switch {
			case r == 0 || r == utf8.RuneError || isBertControl(r):
				return -1
			case r == '\t' || r == '\n' || r == '\r' || unicode.IsSpace(r):
				return ' '
			}
			return r
		}, s)
	}
	if n.chinese {
		var sb strings.Builder
		sb.Grow(len(s) + 16)
		for _, r := range s {
			if isCJK(r) {
				sb.WriteByte(' ')
				sb.WriteRune(r)
				sb.WriteByte(' ')
			} else {
				sb.WriteRune(r)
			}
		}
		s = sb.String()
	}
	if n.stripAccents {
		s = removeMn(norm.NFD.String(s))
	}
	if n.lowercase {
		s = lowercase(s)
	}
	return s
}

// appendASCII normalizes pure-ASCII text in one pass.
func (n bertNormalizer) appendASCII(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if n.cleanText {
			switch {
			case c == '\t' || c == '\n' || c == '\r':
				c = ' '
			case c < 0x20 || c == 0x7F: // Cc, removed before whitespace mapping
				continue
			}
		}
		if n.lowercase && c >= 'A' && c <= 'Z' {
			c += 'a' - 'A'
		}
		b = append(b, c)
	}
	return b
}

// isBertControl reports the characters BERT's clean_text removes: general
// categories Cc, Cf and Co, except \t, \n and \r (treated as whitespace).
func isBertControl(r rune) bool {
	if r == '\t' || r == '\n' || r == '\r' {
		return false
	}
	return unicode.In(r, unicode.Cc, unicode.Cf, unicode.Co)
}

// isCJK reports whether r is in a CJK Unified Ideographs block, exactly the
// ranges of Hugging Face's BertNormalizer.
func isCJK(r rune) bool {
	return (r >= 0x4E00 && r <= 0x9FFF) ||
		(r >= 0x3400 && r <= 0x4DBF) ||
		(r >= 0x20000 && r <= 0x2A6DF) ||
		(r >= 0x2A700 && r <= 0x2B73F) ||
		(r >= 0x2B740 && r <= 0x2B81F) ||
		(r >= 0x2B920 && r <= 0x2CEAF) ||
		(r >= 0xF900 && r <= 0xFAFF) ||
		(r >= 0x2F800 && r <= 0x2FA1F)
}
