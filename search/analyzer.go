package search

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/kljensen/snowball/english"
	"github.com/rivo/uniseg"
)

// Stop-word list and stemmer names accepted by AnalyzerSettings.
const (
	StopWordsLuceneEnglish = "lucene-english" // Lucene's EnglishAnalyzer.ENGLISH_STOP_WORDS_SET (33 words)
	StopWordsNone          = "none"
	StemmerSnowballEnglish = "snowball-english" // Porter2 (Snowball English), github.com/kljensen/snowball
	StemmerNone            = "none"
)

// luceneEnglishStopWords is Lucene's EnglishAnalyzer.ENGLISH_STOP_WORDS_SET,
// the stop set pyserini's DefaultEnglishAnalyzer uses.
var luceneEnglishStopWords = [...]string{
	"a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in",
	"into", "is", "it", "no", "not", "of", "on", "or", "such", "that", "the",
	"their", "then", "there", "these", "they", "this", "to", "was", "will",
	"with",
}

// AnalyzerSettings describe the text analysis chain. They are saved in an
// index folder's settings so that queries are analysed exactly as the corpus
// was.
type AnalyzerSettings struct {
	// Lowercase folds every token with unicode.ToLower (Lucene's LowerCaseFilter).
	Lowercase bool `json:"lowercase"`
	// Possessive strips a trailing 's, ’s or ＇s (Lucene's EnglishPossessiveFilter).
	Possessive bool `json:"possessive"`
	// StopWords names the stop list: "lucene-english" or "none".
	StopWords string `json:"stopwords"`
	// Stemmer names the stemmer: "snowball-english" or "none".
	Stemmer string `json:"stemmer"`
	// MaxTokenLength splits longer tokens into pieces of this many runes
	// (Lucene's StandardTokenizer default: 255).
	MaxTokenLength int `json:"max_token_length"`
}

// DefaultAnalyzerSettings returns the English analyzer pyserini uses for
// BM25 (Lucene's StandardTokenizer → EnglishPossessiveFilter → LowerCase →
// English stop words → stemming). The one deliberate difference: the stemmer
// is Snowball's English (Porter2) instead of Lucene's original Porter
// stemmer, so a few rare suffixes stem differently.
func DefaultAnalyzerSettings() AnalyzerSettings {
	return AnalyzerSettings{
		Lowercase:      true,
		Possessive:     true,
		StopWords:      StopWordsLuceneEnglish,
		Stemmer:        StemmerSnowballEnglish,
		MaxTokenLength: 255,
	}
}

// Analyzer turns text into index terms. It is safe for concurrent use.
type Analyzer struct {
	settings AnalyzerSettings
	stop     map[string]struct{}
	stem     bool
}

// NewAnalyzer validates the settings and builds the analyzer.
func NewAnalyzer(s AnalyzerSettings) (*Analyzer, error) {
	a := &Analyzer{settings: s}
	switch s.StopWords {
	case StopWordsLuceneEnglish:
		a.stop = make(map[string]struct{}, len(luceneEnglishStopWords))
		for _, w := range luceneEnglishStopWords {
			a.stop[w] = struct{}{}
		}
	case StopWordsNone, "":
	default:
		return nil, fmt.Errorf("analyzer: unknown stop-word list %q (want %q or %q)", s.StopWords, StopWordsLuceneEnglish, StopWordsNone)
	}
	switch s.Stemmer {
	case StemmerSnowballEnglish:
		a.stem = true
	case StemmerNone, "":
	default:
		return nil, fmt.Errorf("analyzer: unknown stemmer %q (want %q or %q)", s.Stemmer, StemmerSnowballEnglish, StemmerNone)
	}
	if s.MaxTokenLength < 0 {
		return nil, fmt.Errorf("analyzer: max_token_length %d < 0", s.MaxTokenLength)
	}
	return a, nil
}

// Settings returns the analyzer's settings.
func (a *Analyzer) Settings() AnalyzerSettings { return a.settings }

// Analyze returns the terms of text in order (repeats kept).
func (a *Analyzer) Analyze(text string) []string {
	return a.appendTerms(nil, text, nil)
}

// stemCache memoises stems; one per goroutine (not shared).
type stemCache map[string]string

// appendTerms appends the terms of text to dst. cache, when non-nil,
// memoises the stemmer (stemming dominates analysis time).
//
// Tokenisation follows Unicode's word-boundary rules (UAX #29, as Lucene's
// StandardTokenizer does): a segment is a token when it holds a letter or a
// digit, so punctuation and spaces are dropped while "U.S.", "don't" and
// "3.5" stay whole.
func (a *Analyzer) appendTerms(dst []string, text string, cache stemCache) []string {
	eachWord(text, func(word string) {
		if a.settings.MaxTokenLength > 0 && len(word) > a.settings.MaxTokenLength && utf8.RuneCountInString(word) > a.settings.MaxTokenLength {
			for _, piece := range splitTokenRunes(word, a.settings.MaxTokenLength) {
				dst = a.appendToken(dst, piece, cache)
			}
			return
		}
		dst = a.appendToken(dst, word, cache)
	})
	return dst
}

// eachWord calls fn with every UAX #29 word segment of text that holds a
// letter or a digit. Word boundaries always fall around ASCII white space,
// so text is cut into white-space-separated fields and each field is
// segmented alone: pure-ASCII fields by asciiWords (the same rules, 5–10×
// faster), the others by uniseg.
func eachWord(text string, fn func(string)) {
	for len(text) > 0 {
		i := 0
		for i < len(text) && isASCIISpace(text[i]) {
			i++
		}
		text = text[i:]
		j, ascii := 0, true
		for j < len(text) && !isASCIISpace(text[j]) {
			if text[j] >= utf8.RuneSelf {
				ascii = false
			}
			j++
		}
		field := text[:j]
		text = text[j:]
		if ascii {
			asciiWords(field, fn)
		} else {
			uaxWords(field, fn)
		}
	}
}

func isASCIISpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

// uaxWords segments text with uniseg (UAX #29) and keeps word tokens.
func uaxWords(text string, fn func(string)) {
	state := -1
	var word string
	for len(text) > 0 {
		word, text, state = uniseg.FirstWordInString(text, state)
		if isWordToken(word) {
			fn(word)
		}
	}
}

// asciiWords applies UAX #29's word rules to ASCII text without white
// space: letters, digits and underscores join (WB5, WB8–WB10, WB13a/b); a
// colon, period or apostrophe joins two letters (WB6/WB7); a comma,
// semicolon, period or apostrophe joins two digits (WB11/WB12); anything
// else separates.
func asciiWords(f string, fn func(string)) {
	for i := 0; i < len(f); {
		if !isASCIIWordChar(f[i]) {
			i++
			continue
		}
		start := i
		hasAlnum := false
		for i < len(f) {
			c := f[i]
			if isASCIIWordChar(c) {
				hasAlnum = hasAlnum || c != '_'
				i++
				continue
			}
			if i+1 < len(f) && i > start {
				prev, next := f[i-1], f[i+1]
				if isASCIILetter(prev) && isASCIILetter(next) && (c == ':' || c == '.' || c == '\'') {
					i += 2
					continue
				}
				if isASCIIDigit(prev) && isASCIIDigit(next) && (c == ',' || c == ';' || c == '.' || c == '\'') {
					i += 2
					continue
				}
			}
			break
		}
		if hasAlnum {
			fn(f[start:i])
		}
	}
}

func isASCIILetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isASCIIDigit(c byte) bool  { return c >= '0' && c <= '9' }
func isASCIIWordChar(c byte) bool {
	return isASCIILetter(c) || isASCIIDigit(c) || c == '_'
}

// appendToken runs one token through the filter chain.
func (a *Analyzer) appendToken(dst []string, tok string, cache stemCache) []string {
	if a.settings.Possessive {
		tok = stripPossessive(tok)
	}
	if a.settings.Lowercase {
		tok = lowerToken(tok)
	}
	if tok == "" {
		return dst
	}
	if _, ok := a.stop[tok]; ok {
		return dst
	}
	if a.stem {
		if cache != nil {
			if s, ok := cache[tok]; ok {
				return append(dst, s)
			}
			s := english.Stem(tok, true)
			cache[tok] = s
			return append(dst, s)
		}
		tok = english.Stem(tok, true)
	}
	return append(dst, tok)
}

// isWordToken reports whether a UAX #29 segment holds a letter or a digit.
func isWordToken(w string) bool {
	for i := 0; i < len(w); i++ {
		c := w[i]
		if c < utf8.RuneSelf {
			if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' {
				return true
			}
			continue
		}
		r, _ := utf8.DecodeRuneInString(w[i:])
		if unicode.IsLetter(r) || unicode.IsNumber(r) {
			return true
		}
	}
	return false
}

// stripPossessive removes a trailing 's in any of the three apostrophes
// Lucene's EnglishPossessiveFilter knows (', U+2019, U+FF07), either case.
func stripPossessive(tok string) string {
	if len(tok) < 2 {
		return tok
	}
	last := tok[len(tok)-1]
	if last != 's' && last != 'S' {
		return tok
	}
	head := tok[:len(tok)-1]
	for _, apo := range [...]string{"'", "\u2019", "\uFF07"} {
		if strings.HasSuffix(head, apo) {
			return head[:len(head)-len(apo)]
		}
	}
	return tok
}

// lowerToken folds case, avoiding an allocation for already-lowercase ASCII.
func lowerToken(s string) string {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= utf8.RuneSelf || c >= 'A' && c <= 'Z' {
			return strings.ToLower(s)
		}
	}
	return s
}

// splitTokenRunes cuts s into pieces of at most n runes.
func splitTokenRunes(s string, n int) []string {
	var out []string
	for len(s) > 0 {
		i, count := 0, 0
		for i < len(s) && count < n {
			_, size := utf8.DecodeRuneInString(s[i:])
			i += size
			count++
		}
		out = append(out, s[:i])
		s = s[i:]
	}
	return out
}
