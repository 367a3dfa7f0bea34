package tokenizer

import (
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/cas-engine/cas/internal/guard"
	"github.com/dlclark/regexp2"
	"github.com/dlclark/regexp2/syntax"
)

// Pre-tokenizer regular expressions that have a hand-written scanner.
// Each scanner reproduces the backtracking (leftmost, first-alternative)
// semantics of Oniguruma, the engine Hugging Face's tokenizers uses, and is
// checked against regexp2 running the very same pattern (pattern_test.go).
const (
	// qwen2Pattern is the Split regex of Qwen2, Qwen2.5 and Qwen3.
	qwen2Pattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// llama3Pattern is Qwen's with runs of up to three digits (cl100k/Llama 3).
	llama3Pattern = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	// gpt2Pattern is the regex of the ByteLevel pre-tokenizer (use_regex).
	gpt2Pattern = `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+`
)

// matcher finds the non-overlapping matches of a pattern, left to right,
// and reports their byte spans.
type matcher interface {
	forEach(s string, fn func(start, end int))
}

// compilePattern returns the matcher of a Split pattern: a literal string,
// or a regex run by a scanner when it is one of the known pre-tokenizer
// regexes and by regexp2 (a backtracking engine with look-around, like
// Oniguruma) otherwise.
// componentPattern compiles the pattern a component requires; errors name
// the component: "decoder Replace: missing pattern".
func componentPattern(what string, p *patternJSON) (matcher, error) {
	if p == nil {
		return nil, fmt.Errorf("%s: missing pattern", what)
	}
	m, err := compilePattern(*p)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return m, nil
}

func compilePattern(p patternJSON) (matcher, error) {
	switch {
	case p.String != nil:
		return literalMatcher(*p.String), nil
	case p.Regex != nil:
		switch *p.Regex {
		case qwen2Pattern:
			return qwenMatcher{maxDigits: 1}, nil
		case llama3Pattern:
			return qwenMatcher{maxDigits: 3}, nil
		case gpt2Pattern:
			return gpt2Matcher{}, nil
		}
		return newRegexMatcher(*p.Regex)
	}
	return nil, fmt.Errorf("pattern has neither String nor Regex")
}

// literalMatcher matches a fixed string; the empty string matches nothing.
type literalMatcher string

func (m literalMatcher) forEach(s string, fn func(start, end int)) {
	if m == "" {
		return
	}
	for i := 0; i <= len(s); {
		j := strings.Index(s[i:], string(m))
		if j < 0 {
			return
		}
		fn(i+j, i+j+len(m))
		i += j + len(m)
	}
}

// RegexTimeout bounds one regexp2 match of a tokenizer.json pattern that
// has no hand-written scanner. regexp2 backtracks like Oniguruma, so an
// ambiguous pattern such as (a|aa)*b can take time exponential in the input;
// past this bound the match is abandoned and the encode fails with a
// *RegexTimeoutError naming the pattern.
const RegexTimeout = 2 * time.Second

// RegexTimeoutError reports a tokenizer pattern that ran past RegexTimeout.
type RegexTimeoutError struct {
	Pattern string
	Timeout time.Duration
	Bytes   int // length of the text being matched
}

func (e *RegexTimeoutError) Error() string {
	return fmt.Sprintf("tokenizer regex %q timed out after %v on %d bytes of text (backtracking blow-up)", e.Pattern, e.Timeout, e.Bytes)
}

// regexMatcher runs an arbitrary pattern through regexp2.
type regexMatcher struct {
	re      *regexp2.Regexp
	pattern string
}

func newRegexMatcher(pattern string) (*regexMatcher, error) {
	re, err := guard.Value(fmt.Sprintf("regex %q", pattern), func() (*regexp2.Regexp, error) {
		if err := checkNestedQuantifiers(pattern); err != nil {
			return nil, err
		}
		return regexp2.Compile(pattern, regexp2.None)
	})
	if err != nil {
		return nil, fmt.Errorf("compile regex %q: %w", pattern, err)
	}
	re.MatchTimeout = RegexTimeout
	return &regexMatcher{re: re, pattern: pattern}, nil
}

// checkNestedQuantifiers rejects a pattern in which a repeated group
// contains an unbounded repetition, e.g. (\p{L}+)+\d: a backtracking
// engine tries every way to split a run between the two loops, 2^n ways for
// n letters (0.5 s at 20 letters, 79 s at 28). No Hugging Face pre-tokenizer
// pattern has that shape. regexp2 has already folded (?:x{1,3})+ into one
// loop, so only genuine nesting is refused.
func checkNestedQuantifiers(pattern string) error {
	tree, err := syntax.Parse(pattern, syntax.RegexOptions(regexp2.None))
	if err != nil {
		return err
	}
	// The dump lists one node per line, indented one space per depth level,
	// loops as "Loop(Min = m, Max = n)", "Setloop(...)(Min = m, Max = inf)" …
	var outer []int // depths of enclosing repeated groups
	for _, line := range strings.Split(tree.Dump(), "\n") {
		node := strings.TrimLeft(line, " ")
		depth := len(line) - len(node)
		for len(outer) > 0 && depth <= outer[len(outer)-1] {
			outer = outer[:len(outer)-1]
		}
		isLoop := strings.Contains(node, "oop(") || strings.Contains(node, "lazy(")
		unbounded := isLoop && strings.Contains(node, "Max = inf")
		repeated := isLoop && !strings.Contains(node, "Max = 1)") && !strings.Contains(node, "Max = 0)")
		if unbounded && len(outer) > 0 {
			return fmt.Errorf("nested quantifier: an unbounded repetition inside a repeated group takes exponential time to backtrack")
		}
		if repeated && (strings.HasPrefix(node, "Loop(") || strings.HasPrefix(node, "Lazyloop(")) {
			outer = append(outer, depth)
		}
	}
	return nil
}

func (m *regexMatcher) forEach(s string, fn func(start, end int)) {
	if s == "" {
		return
	}
	runes := []rune(s)
	// offs[k] is the byte offset of rune k; regexp2 reports rune indices.
	offs := make([]int, 0, len(runes)+1)
	for i := range s {
		offs = append(offs, i)
	}
	offs = append(offs, len(s))
	match, err := m.re.FindRunesMatch(runes)
	for match != nil && err == nil {
		fn(offs[match.Index], offs[match.Index+match.Length])
		match, err = m.re.FindNextMatch(match)
	}
	if err != nil {
		// Unwound by the Tokenizer's encode methods (see encodeGuarded).
		panic(&RegexTimeoutError{Pattern: m.pattern, Timeout: m.re.MatchTimeout, Bytes: len(s)})
	}
}

// Character classes of the pre-tokenizer regexes: \p{L}, \p{N}, \s and the
// rest ([^\s\p{L}\p{N}]).
const (
	clsOther uint8 = iota
	clsLetter
	clsNumber
	clsSpace
)

var asciiClass = func() (t [utf8.RuneSelf]uint8) {
	for c := 0; c < utf8.RuneSelf; c++ {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
			t[c] = clsLetter
		case c >= '0' && c <= '9':
			t[c] = clsNumber
		case c == ' ', c >= '\t' && c <= '\r':
			t[c] = clsSpace
		}
	}
	return t
}()

func classOf(r rune) uint8 {
	if r < utf8.RuneSelf {
		return asciiClass[r]
	}
	switch {
	case unicode.IsLetter(r):
		return clsLetter
	case unicode.IsNumber(r):
		return clsNumber
	case unicode.IsSpace(r):
		return clsSpace
	}
	return clsOther
}

// runeAt decodes the rune starting at byte i of s.
func runeAt(s string, i int) (rune, int) {
	if c := s[i]; c < utf8.RuneSelf {
		return rune(c), 1
	}
	return utf8.DecodeRuneInString(s[i:])
}

// classAt returns the class of the rune at byte i and its size; at the end
// of s it returns (clsSpace, 0) with ok false.
func classAt(s string, i int) (cls uint8, r rune, size int, ok bool) {
	if i >= len(s) {
		return clsSpace, 0, 0, false
	}
	r, size = runeAt(s, i)
	return classOf(r), r, size, true
}

// scanClass advances i over runes of class cls, at most max runes when
// max ≥ 0.
func scanClass(s string, i int, cls uint8, max int) int {
	for max != 0 && i < len(s) {
		r, n := runeAt(s, i)
		if classOf(r) != cls {
			break
		}
		i += n
		max--
	}
	return i
}

// contraction matches s|t|re|ve|m|ll|d at byte j (after an apostrophe) and
// returns the end, or -1. With fold, matching is case-insensitive under
// Unicode simple case folding, as Oniguruma's (?i) (so 'ſ' matches 's').
func contraction(s string, j int, fold bool) int {
	at := func(k int) (rune, int) {
		if k >= len(s) {
			return 0, 0
		}
		r, n := runeAt(s, k)
		if fold {
			switch {
			case r >= 'A' && r <= 'Z':
				r += 'a' - 'A'
			case r == 'ſ':
				r = 's'
			}
		}
		return r, n
	}
	r, n := at(j)
	switch r {
	case 's', 't', 'm', 'd':
		return j + n
	case 'r', 'v':
		if r2, n2 := at(j + n); r2 == 'e' {
			return j + n + n2
		}
	case 'l':
		if r2, n2 := at(j + n); r2 == 'l' {
			return j + n + n2
		}
	}
	return -1
}

// trailingSpaces handles the whitespace alternatives shared by both regexes
// at a whitespace rune at byte i: with newlines, `\s*[\r\n]+` (up to the last
// newline of the run, when newlines is set); else `\s+(?!\S)` (the run, less
// its last rune when a non-space follows and the run has two or more runes);
// else `\s+`.
func trailingSpaces(s string, i int, newlines bool) int {
	k, lastNL, lastSize := i, -1, 0
	for k < len(s) {
		r, n := runeAt(s, k)
		if classOf(r) != clsSpace {
			break
		}
		if r == '\r' || r == '\n' {
			lastNL = k
		}
		lastSize = n
		k += n
	}
	switch {
	case newlines && lastNL >= 0:
		return lastNL + 1
	case k == len(s):
		return k
	case k-i > lastSize:
		return k - lastSize
	}
	return k
}

// qwenMatcher scans qwen2Pattern (maxDigits 1) or llama3Pattern (3):
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d) | [^\r\n\p{L}\p{N}]?\p{L}+ | \p{N}{1,maxDigits}
//	| ␣?[^\s\p{L}\p{N}]+[\r\n]* | \s*[\r\n]+ | \s+(?!\S) | \s+
//
// Every position starts a match, so the matches tile the input.
type qwenMatcher struct {
	maxDigits int
}

func (m qwenMatcher) forEach(s string, fn func(start, end int)) {
	for i := 0; i < len(s); {
		e := m.matchAt(s, i)
		fn(i, e)
		i = e
	}
}

func (m qwenMatcher) matchAt(s string, i int) int {
	r, n := runeAt(s, i)
	if r == '\'' {
		if e := contraction(s, i+n, true); e > 0 {
			return e
		}
	}
	c := classOf(r)
	if c == clsLetter {
		return scanClass(s, i+n, clsLetter, -1)
	}
	c2, _, n2, ok := classAt(s, i+n)
	if c != clsNumber && r != '\r' && r != '\n' && ok && c2 == clsLetter {
		return scanClass(s, i+n+n2, clsLetter, -1)
	}
	if c == clsNumber {
		return scanClass(s, i+n, clsNumber, m.maxDigits-1)
	}
	j := -1
	switch {
	case c == clsOther:
		j = i + n
	case r == ' ' && ok && c2 == clsOther:
		j = i + n + n2
	}
	if j >= 0 {
		j = scanClass(s, j, clsOther, -1)
		for j < len(s) && (s[j] == '\r' || s[j] == '\n') {
			j++
		}
		return j
	}
	return trailingSpaces(s, i, true)
}

// gpt2Matcher scans gpt2Pattern:
//
//	's|'t|'re|'ve|'m|'ll|'d | ␣?\p{L}+ | ␣?\p{N}+ | ␣?[^\s\p{L}\p{N}]+ | \s+(?!\S) | \s+
type gpt2Matcher struct{}

func (gpt2Matcher) forEach(s string, fn func(start, end int)) {
	for i := 0; i < len(s); {
		e := gpt2MatchAt(s, i)
		fn(i, e)
		i = e
	}
}

func gpt2MatchAt(s string, i int) int {
	r, n := runeAt(s, i)
	if r == '\'' {
		if e := contraction(s, i+n, false); e > 0 {
			return e
		}
	}
	c, j := classOf(r), i
	if r == ' ' {
		if c2, _, n2, ok := classAt(s, i+n); ok && c2 != clsSpace {
			c, j, n = c2, i+n, n2
		}
	}
	if c != clsSpace {
		return scanClass(s, j+n, c, -1)
	}
	return trailingSpaces(s, i, false)
}
