package agent

import (
	"strings"
	"testing"

	"github.com/cas-engine/cas/model/tokenizer/tokentest"
)

// TestAnswerTokenSpanQwen3 checks the ACI span (paper Eq. 6: the tokens
// strictly inside <answer>…</answer>) with the real Qwen3 tokenizer: no tag
// fragment and no wrapping whitespace-only token is scored, and an answer
// with no token inside falls back (empty span).
func TestAnswerTokenSpanQwen3(t *testing.T) {
	tok := tokentest.Qwen3(t)
	for _, tc := range []struct {
		name, text string
		want       []string // the span's tokens, decoded one by one; nil: empty span
	}{
		{"spaced", "<think>x</think>\n<answer> Paris </answer>", []string{" Paris"}},
		{"newline-wrapped", "<think>x</think>\n<answer>\nParis\n</answer>", []string{"Paris"}},
		{"tight", "<answer>Paris</answer>", []string{"Paris"}},
		{"multi-token", "<answer> Jean-Paul Sartre </answer>", []string{" Jean", "-P", "aul", " S", "art", "re"}},
		{"newline multi-token", "<answer>\nJean-Paul Sartre\n\n</answer>", []string{"Jean", "-P", "aul", " S", "art", "re"}},
		{"tag merged with the first byte", "<answer>São Paulo</answer>", []string{"ão", " Paulo"}},
		{"empty", "<answer></answer>", nil},
		{"whitespace only", "<answer> \n </answer>", nil},
		{"no answer", "<think>x</think>", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ids := tok.Encode(tc.text)
			lo, hi := AnswerTokens(tok, ids, tc.text)
			var got []string
			for i := lo; i < hi; i++ {
				got = append(got, tok.Decode(ids[i:i+1], true))
			}
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				all := make([]string, len(ids))
				for i := range ids {
					all[i] = tok.Decode(ids[i:i+1], true)
				}
				t.Errorf("span %q, want %q (tokens %q)", got, tc.want, all)
			}
			// Every scored token lies inside the answer's content.
			if hi > lo {
				start, end, _ := AnswerSpan(tc.text)
				if inner := tok.Decode(ids[lo:hi], true); !strings.Contains(tc.text[start:end], inner) || strings.ContainsAny(inner, "<>") {
					t.Errorf("span decodes to %q, outside %q", inner, tc.text[start:end])
				}
			}
		})
	}
}
