package tokenizer

import (
	"encoding/json"
	"fmt"
	"strings"
	"unicode"
)

// preTokenizer cuts normalized text into words that the model encodes
// independently (Hugging Face's pre_tokenizers): it calls emit on every
// non-empty word of s, in order. Words stream to the model without being
// collected.
type preTokenizer interface {
	preTokenize(s string, emit func(string))
}

type preTokenizerJSON struct {
	Type string `json:"type"`
	// Split
	Pattern  *patternJSON `json:"pattern"`
	Behavior string       `json:"behavior"`
	Invert   bool         `json:"invert"`
	// ByteLevel
	AddPrefixSpace bool  `json:"add_prefix_space"`
	UseRegex       *bool `json:"use_regex"`
	// Digits
	IndividualDigits bool `json:"individual_digits"`
	// Sequence
	PreTokenizers []json.RawMessage `json:"pretokenizers"`
}

func parsePreTokenizer(raw json.RawMessage, alpha *byteLevelAlphabet) (preTokenizer, error) {
	j, ok, err := decodeComponent[preTokenizerJSON]("pre_tokenizer", raw)
	if !ok || err != nil {
		return nil, err
	}
	switch j.Type {
	case "Sequence":
		return parseSequence[sequencePreTokenizer]("pre_tokenizer", j.PreTokenizers, func(r json.RawMessage) (preTokenizer, error) { return parsePreTokenizer(r, alpha) })
	case "Split":
		m, err := componentPattern("pre_tokenizer Split", j.Pattern)
		if err != nil {
			return nil, err
		}
		b, err := parseBehavior(j.Behavior)
		if err != nil {
			return nil, fmt.Errorf("pre_tokenizer Split: %w", err)
		}
		return splitPreTokenizer{m: m, behavior: b, invert: j.Invert}, nil
	case "ByteLevel":
		return &byteLevelPreTokenizer{
			addPrefixSpace: j.AddPrefixSpace,
			useRegex:       boolOr(j.UseRegex, true),
			alpha:          alpha,
		}, nil
	case "BertPreTokenizer":
		return bertPreTokenizer{}, nil
	case "Whitespace":
		return splitPreTokenizer{m: whitespaceWordMatcher{}, behavior: removed, invert: true}, nil
	case "WhitespaceSplit":
		return splitPreTokenizer{m: runeMatcher(unicode.IsSpace), behavior: removed}, nil
	case "Punctuation":
		b := isolated
		if j.Behavior != "" {
			var err error
			if b, err = parseBehavior(j.Behavior); err != nil {
				return nil, fmt.Errorf("pre_tokenizer Punctuation: %w", err)
			}
		}
		return splitPreTokenizer{m: runeMatcher(isBertPunct), behavior: b}, nil
	case "Digits":
		b := contiguous
		if j.IndividualDigits {
			b = isolated
		}
		return splitPreTokenizer{m: runeMatcher(unicode.IsNumber), behavior: b}, nil
	}
	return nil, unsupportedComponent("pre_tokenizer", j.Type)
}

type sequencePreTokenizer []preTokenizer

// preTokenize chains the stages with one closure per stage and call.
func (seq sequencePreTokenizer) preTokenize(s string, emit func(string)) {
	stage := emit
	for k := len(seq) - 1; k >= 0; k-- {
		p, next := seq[k], stage
		stage = func(w string) { p.preTokenize(w, next) }
	}
	stage(s)
}

// splitBehavior is what Split does with the pieces a pattern matches.
type splitBehavior uint8

const (
	removed splitBehavior = iota
	isolated
	mergedWithPrevious
	mergedWithNext
	contiguous
)

func parseBehavior(s string) (splitBehavior, error) {
	switch s {
	case "Removed":
		return removed, nil
	case "Isolated":
		return isolated, nil
	case "MergedWithPrevious":
		return mergedWithPrevious, nil
	case "MergedWithNext":
		return mergedWithNext, nil
	case "Contiguous":
		return contiguous, nil
	}
	return 0, fmt.Errorf("unknown split behavior %q", s)
}

// splitPreTokenizer splits on a pattern (Hugging Face's Split, and the
// pre-tokenizers defined through it).
type splitPreTokenizer struct {
	m        matcher
	behavior splitBehavior
	invert   bool
}

type piece struct {
	start, end int
	match      bool
}

func (p splitPreTokenizer) preTokenize(s string, emit func(string)) {
	if p.behavior == isolated {
		last := 0
		p.m.forEach(s, func(start, end int) {
			if last < start {
				emit(s[last:start])
			}
			if start < end {
				emit(s[start:end])
			}
			last = end
		})
		if last < len(s) {
			emit(s[last:])
		}
		return
	}
	// Cover s with matches and the gaps between them, as Hugging Face's
	// Pattern::find_matches, then apply the behavior.
	var pieces []piece
	last := 0
	p.m.forEach(s, func(start, end int) {
		if last < start {
			pieces = append(pieces, piece{last, start, p.invert})
		}
		pieces = append(pieces, piece{start, end, !p.invert})
		last = end
	})
	if last < len(s) {
		pieces = append(pieces, piece{last, len(s), p.invert})
	}
	for _, pc := range applyBehavior(pieces, p.behavior) {
		if !pc.match && pc.start < pc.end {
			emit(s[pc.start:pc.end])
		}
	}
}

// applyBehavior returns the pieces to keep; match marks pieces to remove.
func applyBehavior(pieces []piece, b splitBehavior) []piece {
	out := make([]piece, 0, len(pieces))
	prevMatch := false
	switch b {
	case removed:
		return pieces
	case contiguous:
		for i, pc := range pieces {
			if i > 0 && pc.match == prevMatch {
				out[len(out)-1].end = pc.end
			} else {
				out = append(out, piece{pc.start, pc.end, false})
			}
			prevMatch = pc.match
		}
	case mergedWithPrevious:
		for _, pc := range pieces {
			if pc.match && !prevMatch && len(out) > 0 {
				out[len(out)-1].end = pc.end
			} else {
				out = append(out, piece{pc.start, pc.end, false})
			}
			prevMatch = pc.match
		}
	case mergedWithNext:
		for i := len(pieces) - 1; i >= 0; i-- {
			pc := pieces[i]
			if pc.match && !prevMatch && len(out) > 0 {
				out[len(out)-1].start = pc.start
			} else {
				out = append(out, piece{pc.start, pc.end, false})
			}
			prevMatch = pc.match
		}
		for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
			out[i], out[j] = out[j], out[i]
		}
	default: // isolated
		for _, pc := range pieces {
			out = append(out, piece{pc.start, pc.end, false})
		}
	}
	return out
}

// runeMatcher matches every single character satisfying a predicate, each
// as its own match (Hugging Face's Pattern for Fn(char) -> bool).
type runeMatcher func(rune) bool

func (m runeMatcher) forEach(s string, fn func(start, end int)) {
	for i := 0; i < len(s); {
		r, n := runeAt(s, i)
		if m(r) {
			fn(i, i+n)
		}
		i += n
	}
}

// whitespaceWordMatcher matches `\w+|[^\w\s]+` (the Whitespace pre-tokenizer).
type whitespaceWordMatcher struct{}

func (whitespaceWordMatcher) forEach(s string, fn func(start, end int)) {
	cls := func(r rune) int {
		switch {
		case isWordRune(r):
			return 1
		case unicode.IsSpace(r):
			return 0
		}
		return 2
	}
	for i := 0; i < len(s); {
		r, n := runeAt(s, i)
		c := cls(r)
		if c == 0 {
			i += n
			continue
		}
		j := i + n
		for j < len(s) {
			r2, n2 := runeAt(s, j)
			if cls(r2) != c {
				break
			}
			j += n2
		}
		fn(i, j)
		i = j
	}
}

// isWordRune is \w of Rust's regex crate: alphabetic, marks, decimal digits,
// connector punctuation and the joiners.
func isWordRune(r rune) bool {
	return unicode.IsLetter(r) || unicode.Is(unicode.M, r) || unicode.Is(unicode.Nd, r) ||
		unicode.Is(unicode.Nl, r) || unicode.Is(unicode.Pc, r) || r == 0x200C || r == 0x200D
}

// byteLevelPreTokenizer is GPT-2's ByteLevel pre-tokenizer: optionally
// prefix a space, optionally split with gpt2Pattern, then map every byte to
// its alphabet character. With rawBytes the mapping is left to the BPE
// model, which reads the bytes directly (same ids, no string building).
type byteLevelPreTokenizer struct {
	addPrefixSpace bool
	useRegex       bool
	rawBytes       bool
	alpha          *byteLevelAlphabet
}

func (p *byteLevelPreTokenizer) preTokenize(s string, emit func(string)) {
	if p.addPrefixSpace && !strings.HasPrefix(s, " ") {
		s = " " + s
	}
	out := emit
	if !p.rawBytes {
		out = func(w string) { emit(p.alpha.encode(w)) }
	}
	if !p.useRegex {
		out(s)
		return
	}
	for i := 0; i < len(s); {
		e := gpt2MatchAt(s, i)
		out(s[i:e])
		i = e
	}
}

// bertPreTokenizer splits on whitespace (dropped) and isolates every
// punctuation character (BERT's BasicTokenizer).
type bertPreTokenizer struct{}

func (bertPreTokenizer) preTokenize(s string, emit func(string)) {
	start := -1
	for i := 0; i < len(s); {
		r, n := runeAt(s, i)
		switch {
		case unicode.IsSpace(r):
			if start >= 0 {
				emit(s[start:i])
				start = -1
			}
		case isBertPunct(r):
			if start >= 0 {
				emit(s[start:i])
				start = -1
			}
			emit(s[i : i+n])
		default:
			if start < 0 {
				start = i
			}
		}
		i += n
	}
	if start >= 0 {
		emit(s[start:])
	}
}

// isBertPunct is ASCII punctuation (all of !"#$%&'()*+,-./:;<=>?@[\]^_`{|}~)
// or a Unicode punctuation character (categories Pc Pd Ps Pe Pi Pf Po).
func isBertPunct(r rune) bool {
	if r < 0x80 {
		return (r >= 33 && r <= 47) || (r >= 58 && r <= 64) || (r >= 91 && r <= 96) || (r >= 123 && r <= 126)
	}
	return unicode.IsPunct(r)
}

// finalByteLevel returns the ByteLevel pre-tokenizer when it runs last (the
// words it produces go straight to the model), else nil.
func finalByteLevel(p preTokenizer) *byteLevelPreTokenizer {
	switch p := p.(type) {
	case *byteLevelPreTokenizer:
		return p
	case sequencePreTokenizer:
		if len(p) > 0 {
			return finalByteLevel(p[len(p)-1])
		}
	}
	return nil
}
