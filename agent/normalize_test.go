package agent

import (
	"fmt"
	"strings"
	"testing"
	"unicode/utf8"
)

// normalizeCases were produced by Python 3's SQuAD/Search-R1 normalize_answer
// (re, string.punctuation, str.lower, str.split) on the same inputs.
var normalizeCases = []struct{ in, want string }{
	{"The Beatles", "beatles"},
	{"  the  BEATLES!! ", "beatles"},
	{"U.S.A.", "usa"},
	{"an apple a day", "apple day"},
	{"A", ""},
	{"The", ""},
	{"Theodore Roosevelt", "theodore roosevelt"},
	{"the_the", "thethe"},
	{"a-a", "aa"},
	{"An-Najaf", "annajaf"},
	{"Théâtre the ", "théâtre"},
	{"ΟΔΟΣ", "οδος"},
	{"ΣΑΣ ΣΟΦΟΣ.", "σας σοφος"},
	{"Σ", "σ"},
	{"ΑΣ'", "ας"},
	{"İstanbul", "i\u0307stanbul"},
	{"İ", "i\u0307"},
	{"the\u00a0cat", "cat"},
	{"a\u2003b\u3000c", "b c"},
	{"x\u001cy\u001dz", "x y z"},
	{"tab\tsep\nline", "tab sep line"},
	{"über the naïve café", "über naïve café"},
	{"«the» answer", "« » answer"},
	{"the—dash", "—dash"},
	{"1,234.5", "12345"},
	{"$5 million", "5 million"},
	{"Paris, France", "paris france"},
	{"O'Neill", "oneill"},
	{"the 1990s", "1990s"},
	{"Mr. T", "mr t"},
	{"A Tale of Two Cities", "tale of two cities"},
	{"a.k.a.", "aka"},
	{"an", ""},
	{"theater", "theater"},
	{"ánthe the", "ánthe"},
	{"数学 the 物理", "数学 物理"},
	{"the\u0301 word", "\u0301 word"},
	{"ℌthe", "ℌthe"},
	{"the²", "the²"},
	{"x_the_y", "xthey"},
	{"  ", ""},
	{"", ""},
	{"the the the", ""},
	{"Ǆ", "ǆ"},
	{"ǅungla", "ǆungla"},
	{"Straße", "straße"},
	{"ΌΣΟΣ", "όσος"},
	{"aΣ", "aς"},
	{"Σa", "σa"},
	{"ΑΣ.Β", "ασβ"},
	{"a\u200bthe\u200bb", "\u200b \u200bb"},
}

func TestNormalizeAnswerMatchesPython(t *testing.T) {
	for _, c := range normalizeCases {
		if got := NormalizeAnswer(c.in); got != c.want {
			t.Errorf("NormalizeAnswer(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestExactMatch(t *testing.T) {
	cases := []struct {
		pred  string
		golds []string
		want  bool
	}{
		{"Ernest Hemingway", []string{"Ernest Hemingway"}, true},
		{" the Ernest  Hemingway. ", []string{"Ernest Hemingway"}, true},
		{"Hemingway", []string{"Ernest Hemingway"}, false},
		{"Brasilia", []string{"Brasília", "Brasilia"}, true},
		{"brasília", []string{"Brasilia"}, false}, // accents are kept
		{"USA", []string{"U.S.A.", "United States"}, true},
		{"", []string{""}, true},
		{"the", []string{"a"}, true}, // both normalise to ""
		{"Paris", nil, false},
		{"Paris", []string{}, false},
		{"1,000", []string{"1000"}, true},
	}
	for _, c := range cases {
		if got := ExactMatch(c.pred, c.golds); got != c.want {
			t.Errorf("ExactMatch(%q, %q) = %v, want %v", c.pred, c.golds, got, c.want)
		}
	}
}

// FuzzNormalizeAnswer checks the invariants of the normal form: idempotent,
// no ASCII punctuation, no standalone article, single spaces, no edge spaces.
func FuzzNormalizeAnswer(f *testing.F) {
	for _, c := range normalizeCases {
		f.Add(c.in)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n := NormalizeAnswer(s)
		if NormalizeAnswer(n) != n {
			t.Fatalf("not idempotent: %q → %q → %q", s, n, NormalizeAnswer(n))
		}
		if utf8.ValidString(s) && !utf8.ValidString(n) {
			t.Fatalf("invalid UTF-8 from valid input %q: %q", s, n)
		}
		if strings.ContainsFunc(n, asciiPunct) {
			t.Fatalf("punctuation left in %q", n)
		}
		if n != pyStrip(n) || strings.Contains(n, "  ") {
			t.Fatalf("whitespace not collapsed in %q", n)
		}
		for _, w := range strings.Fields(n) {
			if w == "a" || w == "an" || w == "the" {
				t.Fatalf("article %q left in %q", w, n)
			}
		}
	})
}

func BenchmarkNormalizeAnswer(b *testing.B) {
	s := "The Eiffel Tower, completed in 1889, is an iron lattice tower on the Champ de Mars in Paris."
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		NormalizeAnswer(s)
	}
}

func ExampleNormalizeAnswer() {
	fmt.Println(NormalizeAnswer("  The Beatles!! "))
	fmt.Println(NormalizeAnswer("U.S.A."))
	// Output:
	// beatles
	// usa
}
