// Package bpe trains a small byte-level BPE tokenizer (GPT-2 style) and
// writes it as a Hugging Face tokenizer.json: model.type "BPE", a ByteLevel
// pre-tokenizer (GPT-2's regex, no prefix space), a ByteLevel decoder, and
// added tokens matched before pre-tokenization.
//
// The vocabulary is the 256 byte symbols (ids 0–255, id = byte value,
// written with GPT-2's byte-to-character table), then the tokens the merges
// make in order of first appearance, then the added tokens. Training is the classic
// algorithm (Sennrich et al., 2016): count pre-tokenized words, repeatedly
// merge the most frequent adjacent symbol pair — ties broken by the
// lexicographically smallest (left, right) token strings, so the result does
// not depend on map order — until the vocabulary is full or the best pair
// occurs fewer than MinFrequency times.
package bpe

import (
	"unicode"
	"unicode/utf8"
)

// GPT2Pattern is the regex of GPT-2's (and Hugging Face's ByteLevel
// pre-tokenizer's) word split. SplitWords implements it without a regex
// engine.
const GPT2Pattern = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`

// SplitWords cuts s into the pieces GPT2Pattern matches, calling emit for
// each in order; the pieces concatenate back to s. Invalid UTF-8 bytes are
// treated as symbols (neither letters, digits nor spaces).
func SplitWords(s string, emit func(string)) {
	for i := 0; i < len(s); {
		n := matchAt(s, i)
		emit(s[i : i+n])
		i += n
	}
}

type class int

const (
	clsLetter class = iota
	clsNumber
	clsSpace
	clsOther
)

func classAt(s string, i int) (class, int) {
	r, size := utf8.DecodeRuneInString(s[i:])
	switch {
	case r == utf8.RuneError && size <= 1:
		return clsOther, 1
	case unicode.IsLetter(r):
		return clsLetter, size
	case unicode.IsNumber(r):
		return clsNumber, size
	case unicode.IsSpace(r):
		return clsSpace, size
	}
	return clsOther, size
}

// run returns the byte length of the run of class c starting at i.
func run(s string, i int, c class) int {
	j := i
	for j < len(s) {
		k, size := classAt(s, j)
		if k != c {
			break
		}
		j += size
	}
	return j - i
}

// matchAt returns the length of the leftmost-first match of GPT2Pattern at i
// (always > 0 for i < len(s)).
func matchAt(s string, i int) int {
	// 's|'t|'re|'ve|'m|'ll|'d
	if s[i] == '\'' {
		for _, c := range [...]string{"s", "t", "re", "ve", "m", "ll", "d"} {
			if len(s)-i-1 >= len(c) && s[i+1:i+1+len(c)] == c {
				return 1 + len(c)
			}
		}
	}
	// ' ?\p{L}+', ' ?\p{N}+', ' ?[^\s\p{L}\p{N}]+'
	start := i
	if s[i] == ' ' && i+1 < len(s) {
		if c, _ := classAt(s, i+1); c != clsSpace {
			start = i + 1
		}
	}
	c, _ := classAt(s, start)
	if c != clsSpace {
		return start - i + run(s, start, c)
	}
	// '\s+(?!\S)|\s+': a whitespace run, less its last character when a
	// non-space follows (that character then prefixes the next word).
	n := run(s, i, clsSpace)
	if i+n < len(s) {
		if _, last := utf8.DecodeLastRuneInString(s[i : i+n]); last < n {
			return n - last
		}
	}
	return n
}
