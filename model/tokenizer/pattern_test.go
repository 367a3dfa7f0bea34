package tokenizer

import (
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func spans(m matcher, s string) [][2]int {
	var out [][2]int
	m.forEach(s, func(a, b int) { out = append(out, [2]int{a, b}) })
	return out
}

// scannerCases pairs each hand-written scanner with regexp2 running the
// pattern it implements.
func scannerCases(t testing.TB) []struct {
	name string
	fast matcher
	re   matcher
} {
	t.Helper()
	var out []struct {
		name string
		fast matcher
		re   matcher
	}
	for _, c := range []struct {
		name    string
		fast    matcher
		pattern string
	}{
		{"qwen2", qwenMatcher{maxDigits: 1}, qwen2Pattern},
		{"llama3", qwenMatcher{maxDigits: 3}, llama3Pattern},
		{"gpt2", gpt2Matcher{}, gpt2Pattern},
	} {
		re, err := newRegexMatcher(c.pattern)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, struct {
			name string
			fast matcher
			re   matcher
		}{c.name, c.fast, re})
	}
	return out
}

// interesting runes for the regexes: letters (with case), digits of several
// kinds (Nd, Nl, No), whitespace of several kinds, apostrophes and
// contraction letters, punctuation, marks, CJK, emoji.
var patternAlphabet = []rune("aZsStTrReEvVmMlLdD'' \t\n\r\v\f\u00a0\u2003\u3000\u0085" +
	"09٣Ⅻ½.,!?-_<>|/\\\"é\u0301中文😀\u200b")

func randomText(r *rand.Rand, n int) string {
	var sb strings.Builder
	for i := 0; i < n; i++ {
		sb.WriteRune(patternAlphabet[r.IntN(len(patternAlphabet))])
	}
	return sb.String()
}

// TestScannersMatchRegexp2 checks the hand-written scanners against regexp2
// on the golden texts and on random strings.
func TestScannersMatchRegexp2(t *testing.T) {
	texts := []string{"", "a", "  ", " \n ", "I'm", "I'M", "'s'S", "x   \n\n  y", "a  ", "1234567", " !!\r\n"}
	for _, c := range readGolden(t, "golden", "tokenizer", "qwen3.jsonl") {
		texts = append(texts, c.Text)
	}
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 2000; i++ {
		texts = append(texts, randomText(r, 1+r.IntN(24)))
	}
	for _, c := range scannerCases(t) {
		bad := 0
		for _, s := range texts {
			if got, want := spans(c.fast, s), spans(c.re, s); !slices.Equal(got, want) {
				bad++
				if bad <= 5 {
					t.Errorf("%s on %q:\n scanner %v\n regexp2 %v", c.name, s, got, want)
				}
			}
		}
	}
}

// TestContractionFolding: Oniguruma's (?i) uses Unicode case folding, under
// which ſ (U+017F) folds to s (CaseFolding.txt "017F; C; 0073"); regexp2's
// lowercasing does not, so the scanner is checked on its own here.
func TestContractionFolding(t *testing.T) {
	for _, tc := range []struct {
		s    string
		want [][2]int
	}{
		{"'ſx", [][2]int{{0, 3}, {3, 4}}},
		{"'S", [][2]int{{0, 2}}},
		{"'LL", [][2]int{{0, 3}}},
		{"'x", [][2]int{{0, 2}}},
	} {
		if got := spans(qwenMatcher{maxDigits: 1}, tc.s); !slices.Equal(got, tc.want) {
			t.Errorf("qwen scanner on %q = %v, want %v", tc.s, got, tc.want)
		}
	}
	if got := spans(gpt2Matcher{}, "'S"); !slices.Equal(got, [][2]int{{0, 1}, {1, 2}}) {
		t.Errorf("gpt2 scanner is case-sensitive: got %v", got)
	}
}

func TestSplitBehaviors(t *testing.T) {
	// Hugging Face's documented example: splitting "the-final--countdown" on '-'.
	for _, tc := range []struct {
		b    splitBehavior
		want []string
	}{
		{removed, []string{"the", "final", "countdown"}},
		{isolated, []string{"the", "-", "final", "-", "-", "countdown"}},
		{mergedWithPrevious, []string{"the-", "final-", "-", "countdown"}},
		{mergedWithNext, []string{"the", "-final", "-", "-countdown"}},
		{contiguous, []string{"the", "-", "final", "--", "countdown"}},
	} {
		var got []string
		splitPreTokenizer{m: literalMatcher("-"), behavior: tc.b}.preTokenize("the-final--countdown", func(w string) {
			got = append(got, w)
		})
		if !slices.Equal(got, tc.want) {
			t.Errorf("behavior %d: got %q, want %q", tc.b, got, tc.want)
		}
	}
}

func BenchmarkScanQwen(b *testing.B) {
	text := goldenCorpus(b, "qwen3.jsonl")
	for _, c := range scannerCases(b)[:1] {
		for _, m := range []struct {
			name string
			m    matcher
		}{{"scanner", c.fast}, {"regexp2", c.re}} {
			b.Run(m.name, func(b *testing.B) {
				b.SetBytes(int64(len(text)))
				for b.Loop() {
					m.m.forEach(text, func(int, int) {})
				}
			})
		}
	}
}

// FuzzScanners compares the scanners with regexp2 on arbitrary text.
func FuzzScanners(f *testing.F) {
	for _, s := range []string{"Hello, world!", "I'm  here\n\n ok", "x1234 ", "\u00a0a", "'ll'VE"} {
		f.Add(s)
	}
	cases := scannerCases(f)
	f.Fuzz(func(t *testing.T, s string) {
		s = lossyUTF8(s)
		if strings.ContainsRune(s, 'ſ') {
			return // see TestContractionFolding
		}
		for _, c := range cases {
			if got, want := spans(c.fast, s), spans(c.re, s); !slices.Equal(got, want) {
				t.Fatalf("%s on %q:\n scanner %v\n regexp2 %v", c.name, s, got, want)
			}
		}
	})
}
