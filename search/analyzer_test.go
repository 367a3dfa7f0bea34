package search

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/cas-engine/cas/internal/sharedtest"
)

func TestAnalyzerDefault(t *testing.T) {
	a, err := NewAnalyzer(DefaultAnalyzerSettings())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		in   string
		want []string
	}{
		{"The quick brown fox's jumps", []string{"quick", "brown", "fox", "jump"}},
		{"U.S. presidents don't run", []string{"u.", "presid", "don't", "run"}},
		{"Café MÜNCHEN 3.5 1,000 km", []string{"café", "münchen", "3.5", "1,000", "km"}},
		{"hello_world foo-bar e-mail", []string{"hello_world", "foo", "bar", "e", "mail"}},
		{"北京大学 東京", []string{"北", "京", "大", "学", "東", "京"}},
		{"running runs ran easily", []string{"run", "run", "ran", "easili"}},
		{"Jesus’s O'Neil's", []string{"jesus", "o'neil"}},
		{"It is the", nil},
		{"!!! ... --- \n\t", nil},
		{"", nil},
		{"\"Evan Morris\"\nEvan Morris", []string{"evan", "morri", "evan", "morri"}},
	}
	for _, tc := range tests {
		got := a.Analyze(tc.in)
		if !slices.Equal(got, tc.want) {
			t.Errorf("Analyze(%q) = %q, want %q", tc.in, got, tc.want)
		}
		// The memoised path used for indexing must agree.
		if got2 := a.appendTerms(nil, tc.in, stemCache{}); !slices.Equal(got2, tc.want) {
			t.Errorf("appendTerms(%q, cache) = %q, want %q", tc.in, got2, tc.want)
		}
	}
}

func TestAnalyzerSettings(t *testing.T) {
	plain, err := NewAnalyzer(AnalyzerSettings{Lowercase: false, StopWords: StopWordsNone, Stemmer: StemmerNone})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := plain.Analyze("The Running dog's"), []string{"The", "Running", "dog's"}; !slices.Equal(got, want) {
		t.Errorf("plain analyzer: got %q, want %q", got, want)
	}
	short, err := NewAnalyzer(AnalyzerSettings{Lowercase: true, MaxTokenLength: 3})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := short.Analyze("abcdefg ÄÖÜäö"), []string{"abc", "def", "g", "äöü", "äö"}; !slices.Equal(got, want) {
		t.Errorf("max token length 3: got %q, want %q", got, want)
	}
	for _, bad := range []AnalyzerSettings{{StopWords: "french"}, {Stemmer: "lancaster"}, {MaxTokenLength: -1}} {
		if _, err := NewAnalyzer(bad); err == nil {
			t.Errorf("NewAnalyzer(%+v): want an error", bad)
		}
	}
}

func FuzzAnalyzer(f *testing.F) {
	for _, s := range []string{"The quick brown fox's", "U.S.A. 3.5", "\xff\xfe", "北京", strings.Repeat("a", 300), "'s ’s ＇S"} {
		f.Add(s)
	}
	a, err := NewAnalyzer(DefaultAnalyzerSettings())
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, tok := range a.Analyze(s) {
			if tok == "" {
				t.Fatalf("empty term from %q", s)
			}
		}
	})
}

func BenchmarkAnalyze(b *testing.B) {
	text := "Mason Alan Dinehart (born October 13, 1936) is an American actor, best known for playing Bat Masterson in the western series The Life and Legend of Wyatt Earp. He also played the part of the young Bat Masterson in the movie Tombstone."
	a, err := NewAnalyzer(DefaultAnalyzerSettings())
	if err != nil {
		b.Fatal(err)
	}
	cache := stemCache{}
	b.SetBytes(int64(len(text)))
	var dst []string
	for b.Loop() {
		dst = a.appendTerms(dst[:0], text, cache)
	}
}

// TestASCIIWordsMatchUniseg: the ASCII fast path segments exactly as uniseg
// does, on every passage of the 10k corpus (fields split at white space) and
// on tricky strings.
func TestASCIIWordsMatchUniseg(t *testing.T) {
	check := func(s string) {
		t.Helper()
		var fast, ref []string
		eachWord(s, func(w string) { fast = append(fast, w) })
		uaxWords(s, func(w string) { ref = append(ref, w) })
		if !slices.Equal(fast, ref) {
			t.Fatalf("segmentation of %q:\n fast %q\n  ref %q", s, fast, ref)
		}
	}
	for _, s := range []string{
		"U.S.A. a.b.c 3.5.7 1,000,000 1;2 a:b a::b 'quoted' don't o'clock a1.5 1.a a.1 _x x_ ___ __a__",
		"end. (paren) [x] {y} a--b a-b 4-5 $3.50 50% #tag @user a/b http://x.y/z?q=1&r=2 e.g. i.e., ...",
		"tab\tnew\nline\r\ncr\vvt\fff", "a'b'c 1'2'3 a.'b", "x:1 1:x 12:30", "", "   ",
		"Café MÜNCHEN – “quoted” 3.5 km²", "naïve co\u0301operate",
	} {
		check(s)
	}
	corpus := sharedtest.Path(t, "data", "corpus", "wiki18_harvested_10k.jsonl")
	raw, err := os.ReadFile(corpus)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if d, err := ParseDocLine([]byte(line)); err == nil {
			check(d.Contents)
		}
	}
}

func FuzzASCIIWords(f *testing.F) {
	for _, s := range []string{"U.S.A. 3.5", "a:b 1,2", "x_y_", "a'.b", "1.'2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var fast, ref []string
		eachWord(s, func(w string) { fast = append(fast, w) })
		uaxWords(s, func(w string) { ref = append(ref, w) })
		if !slices.Equal(fast, ref) {
			t.Fatalf("segmentation of %q: fast %q, uniseg %q", s, fast, ref)
		}
	})
}
