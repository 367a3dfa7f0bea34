package tokenizer

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"
)

func splitTokenizerJSON(pattern string) []byte {
	p := strings.ReplaceAll(strings.ReplaceAll(pattern, `\`, `\\`), `"`, `\"`)
	return []byte(`{"pre_tokenizer":{"type":"Split","pattern":{"Regex":"` + p + `"},"behavior":"Isolated","invert":false},` +
		`"model":{"type":"BPE","vocab":{"a":0,"b":1,"c":2,"1":3},"merges":[]}}`)
}

// TestNestedQuantifierRejected: patterns whose backtracking is exponential
// by nesting are refused at load with the pattern named; Hugging Face's own
// pre-tokenizer patterns and harmless repetitions load.
func TestNestedQuantifierRejected(t *testing.T) {
	for _, tc := range []struct {
		pattern string
		bad     bool
	}{
		{`(\p{L}+)+\d`, true},
		{`(?:a*)*b`, false}, // regexp2 folds it into a*
		{`(?:a*b?)*c`, true},
		{`((ab)+c?)+`, true},
		{`(?:\s+x)*?y`, true},
		{`(a+){2,5}`, true},
		{`(a+)?b`, false},
		{`(?:x{1,3})+`, false},
		{`(?:ab)+|\s+(?!\S)`, false},
		{qwen2Pattern, false},
		{llama3Pattern, false},
		{gpt2Pattern, false},
		{`[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?`, false},
	} {
		_, err := Parse(splitTokenizerJSON(tc.pattern))
		switch {
		case tc.bad && (err == nil || !strings.Contains(err.Error(), fmt.Sprintf("%q", tc.pattern)) || !strings.Contains(err.Error(), "nested quantifier")):
			t.Errorf("%s: error %v, want a nested-quantifier error naming the pattern", tc.pattern, err)
		case !tc.bad && err != nil:
			t.Errorf("%s: %v", tc.pattern, err)
		}
	}
}

// TestRegexTimeout: an exponential pattern without nesting, (a|aa)*c on
// 64 a's (≈ 10^13 paths), is abandoned after the match timeout with an
// error naming the pattern, from TryEncode, and Err after Encode.
func TestRegexTimeout(t *testing.T) {
	const pattern = `(a|aa)*c`
	tok, err := Parse(splitTokenizerJSON(pattern))
	if err != nil {
		t.Fatal(err)
	}
	m := tok.preTok.(splitPreTokenizer).m.(*regexMatcher)
	if m.re.MatchTimeout != RegexTimeout {
		t.Fatalf("MatchTimeout %v, want %v", m.re.MatchTimeout, RegexTimeout)
	}
	m.re.MatchTimeout = 100 * time.Millisecond // keep the test short
	text := strings.Repeat("a", 64)
	start := time.Now()
	_, err = tok.TryEncode(text)
	var te *RegexTimeoutError
	if !errors.As(err, &te) || te.Pattern != pattern || !strings.Contains(err.Error(), pattern) {
		t.Fatalf("TryEncode error %v, want a timeout naming %q", err, pattern)
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Errorf("timeout took %v", el)
	}
	if tok.Err() != nil {
		t.Fatal("TryEncode set Err")
	}
	tok.Encode("b" + text)
	if !errors.As(tok.Err(), &te) {
		t.Fatalf("Err after a timed-out Encode: %v", tok.Err())
	}
	// Text the pattern handles quickly still encodes.
	if ids, err := tok.TryEncode("aac"); err != nil || len(ids) == 0 {
		t.Fatalf("aac: %v %v", ids, err)
	}
}
