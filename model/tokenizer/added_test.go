package tokenizer

import (
	"encoding/json"
	"slices"
	"testing"
)

type splitPiece struct {
	text string
	tok  bool
}

func splitAll(m *addedMatcher, s string) []splitPiece {
	var out []splitPiece
	m.split(s, func(p string, tok *AddedToken) { out = append(out, splitPiece{p, tok != nil}) })
	return out
}

// TestAddedMatcherRules ports Hugging Face's added_vocabulary tests for
// single_word, lstrip and rstrip.
func TestAddedMatcherRules(t *testing.T) {
	for _, tc := range []struct {
		name string
		tok  AddedToken
		in   string
		want []splitPiece
	}{
		{"single word", AddedToken{Content: "<mask>", SingleWord: true},
			"<mask> my name <mask> a<mask> <mask>ony <mask>",
			[]splitPiece{{"<mask>", true}, {" my name ", false}, {"<mask>", true}, {" a<mask> <mask>ony ", false}, {"<mask>", true}}},
		{"single word unicode", AddedToken{Content: "<mask>", SingleWord: true},
			"<mask>, <mask>- ◌̰<mask>",
			[]splitPiece{{"<mask>", true}, {", ", false}, {"<mask>", true}, {"- ◌̰<mask>", false}}},
		{"lstrip rstrip", AddedToken{Content: "<mask>", SingleWord: true, LStrip: true, RStrip: true},
			"hi <mask> there\t<mask>\t<mask>\u2000",
			[]splitPiece{{"hi", false}, {" <mask> ", true}, {"there", false}, {"\t<mask>\t", true}, {"<mask>\u2000", true}}},
		{"plain", AddedToken{Content: "ab"}, "xabab", []splitPiece{{"x", false}, {"ab", true}, {"ab", true}}},
	} {
		tok := tc.tok
		m := newAddedMatcher([]*AddedToken{&tok}, []string{tok.Content})
		if got := splitAll(m, tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("%s: got %+v, want %+v", tc.name, got, tc.want)
		}
	}
}

func TestAddedMatcherLeftmostLongest(t *testing.T) {
	a, b, c := &AddedToken{Content: "<a>"}, &AddedToken{Content: "<a><b>"}, &AddedToken{Content: "b>"}
	m := newAddedMatcher([]*AddedToken{a, b, c}, []string{a.Content, b.Content, c.Content})
	want := []splitPiece{{"x", false}, {"<a><b>", true}, {"<a>", true}, {"b>", true}}
	if got := splitAll(m, "x<a><b><a>b>"); !slices.Equal(got, want) {
		t.Errorf("got %+v, want %+v", got, want)
	}
}

func TestAddedTokenDefaults(t *testing.T) {
	var toks []AddedToken
	if err := json.Unmarshal([]byte(`[{"id":1,"content":"a"},{"id":2,"content":"b","special":true},{"id":3,"content":"c","normalized":false}]`), &toks); err != nil {
		t.Fatal(err)
	}
	for i, want := range []bool{true, false, false} {
		if toks[i].Normalized != want {
			t.Errorf("token %q: Normalized = %v, want %v", toks[i].Content, toks[i].Normalized, want)
		}
	}
}
