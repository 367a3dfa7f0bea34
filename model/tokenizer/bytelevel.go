package tokenizer

import (
	"strings"
	"unicode/utf8"
)

// byteLevelAlphabet is GPT-2's reversible byte↔character table, as in
// Hugging Face's ByteLevel pre-tokenizer: the printable bytes '!'..'~',
// '¡'..'¬' and '®'..'ÿ' map to themselves; the remaining 68 bytes map, in
// increasing byte order, to U+0100, U+0101, … so that every byte has a
// visible, non-whitespace character.
type byteLevelAlphabet struct {
	byteToRune [256]rune
	byteToStr  [256]string
	runeToByte map[rune]byte
}

func newByteLevelAlphabet() *byteLevelAlphabet {
	a := &byteLevelAlphabet{runeToByte: make(map[rune]byte, 256)}
	printable := func(b int) bool {
		return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF)
	}
	n := 0
	for b := 0; b < 256; b++ {
		r := rune(b)
		if !printable(b) {
			r = rune(256 + n)
			n++
		}
		a.byteToRune[b] = r
		a.byteToStr[b] = string(r)
		a.runeToByte[r] = byte(b)
	}
	return a
}

// encode maps every byte of s to its alphabet character.
func (a *byteLevelAlphabet) encode(s string) string {
	var sb strings.Builder
	sb.Grow(2 * len(s))
	for i := 0; i < len(s); i++ {
		sb.WriteString(a.byteToStr[s[i]])
	}
	return sb.String()
}

// decodeToken appends the bytes a token stands for. As in Hugging Face, a
// token holding any character outside the alphabet (an added token such as
// "<|im start|>" with a space) is appended verbatim.
func (a *byteLevelAlphabet) decodeToken(dst []byte, tok string) []byte {
	mark := len(dst)
	for _, r := range tok {
		b, ok := a.runeToByte[r]
		if !ok {
			return append(dst[:mark], tok...)
		}
		dst = append(dst, b)
	}
	return dst
}

// lossyUTF8 returns s with every maximal ill-formed subsequence replaced by
// one U+FFFD, the policy of Rust's String::from_utf8_lossy (and of the
// WHATWG/Unicode "substitution of maximal subparts"). Valid input is
// returned unchanged without copying.
func lossyUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var sb strings.Builder
	sb.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r != utf8.RuneError || size > 1 {
			sb.WriteString(s[i : i+size])
			i += size
			continue
		}
		sb.WriteRune(utf8.RuneError)
		i += maximalSubpart(s[i:])
	}
	return sb.String()
}

// maximalSubpart returns the length (≥ 1) of the longest prefix of s that
// starts like a well-formed UTF-8 sequence but is not completed (Unicode
// Table 3-7); s must start with an ill-formed sequence.
func maximalSubpart(s string) int {
	b0 := s[0]
	var need int
	lo, hi := byte(0x80), byte(0xBF)
	switch {
	case b0 >= 0xC2 && b0 <= 0xDF:
		need = 1
	case b0 == 0xE0:
		need, lo = 2, 0xA0
	case b0 >= 0xE1 && b0 <= 0xEC, b0 == 0xEE, b0 == 0xEF:
		need = 2
	case b0 == 0xED:
		need, hi = 2, 0x9F
	case b0 == 0xF0:
		need, lo = 3, 0x90
	case b0 >= 0xF1 && b0 <= 0xF3:
		need = 3
	case b0 == 0xF4:
		need, hi = 3, 0x8F
	default:
		return 1
	}
	n := 1
	for k := 0; k < need && n < len(s); k++ {
		c := s[n]
		if c < lo || c > hi {
			break
		}
		lo, hi = 0x80, 0xBF
		n++
	}
	return n
}
