package world

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/cas-engine/cas/agent"
	"github.com/cas-engine/cas/model/tokenizer"
)

// TestTokenizerLoadsInProjectTokenizer loads the written tokenizer.json with
// the project's Hugging Face loader and checks, over the world's whole
// training text (passages, prompts, scripted trajectories), that it encodes
// id for id like the trainer's own encoder and decodes back to the text.
func TestTokenizerLoadsInProjectTokenizer(t *testing.T) {
	dir, w, own := writeWorld(t, SmallConfig(11))
	tok, err := tokenizer.Load(filepath.Join(dir, TokenizerFile))
	if err != nil {
		t.Fatal(err)
	}
	if got := tok.VocabSize(); got != w.Config.VocabSize {
		t.Errorf("loaded vocab size %d, want %d", got, w.Config.VocabSize)
	}
	// The added tokens make the loader pick Qwen3's chat template, and the
	// prompt the tokenizer was trained on is exactly what it renders.
	if f := tok.Family(); f != tokenizer.FamilyQwen3 {
		t.Errorf("family %q, want %q", f, tokenizer.FamilyQwen3)
	}
	off := false
	q := w.Splits[Test][0].Question
	chat, err := tok.RenderChat([]tokenizer.Message{{Role: "system", Content: agent.QwenSystemPrompt}, {Role: "user", Content: agent.Instruction + "\nQuestion: " + q}},
		tokenizer.ChatOptions{AddGenerationPrompt: true, EnableThinking: &off})
	if err != nil {
		t.Fatal(err)
	}
	trained, err := promptText(q)
	if err != nil || chat != trained {
		t.Errorf("RenderChat gives\n%q\nthe tokenizer was trained on\n%q (%v)", chat, trained, err)
	}
	for _, a := range AddedTokens() {
		id, ok := tok.TokenID(a.Content)
		want, _ := own.TokenID(a.Content)
		if !ok || id != want {
			t.Errorf("added token %q: id %d (%v), want %d", a.Content, id, ok, want)
		}
	}
	texts, mismatches := 0, 0
	err = w.TrainingText(func(text string, _ int) {
		texts++
		ids := tok.Encode(text)
		if !slices.Equal(ids, own.Encode(text)) {
			if mismatches++; mismatches <= 3 {
				t.Errorf("ids differ for %.80q", text)
			}
		}
		if got := tok.Decode(ids, false); got != text {
			if mismatches++; mismatches <= 3 {
				t.Errorf("decode round trip: %.80q → %.80q", text, got)
			}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if mismatches > 0 {
		t.Fatalf("%d of %d texts mismatch", mismatches, texts)
	}
	st, err := w.ComputeStats(tok, tok.VocabSize(), 3)
	if err != nil {
		t.Fatal(err)
	}
	// The tiny model's context: passages must stay short under the small
	// vocabulary.
	if st.TokensPassage > 70 || st.TokensPassage < 10 {
		t.Errorf("mean %.1f tokens per passage, want 10–70", st.TokensPassage)
	}
	if st.TokensSingle >= st.TokensTwoHop {
		t.Errorf("single-hop responses (%.1f tokens) not shorter than two-hop (%.1f)", st.TokensSingle, st.TokensTwoHop)
	}
	t.Logf("%d texts round-trip through model/tokenizer; vocab %d; %.1f tokens/passage (%.2f bytes/token); prompt %.1f; scripted response (3 docs/search) %.1f single-hop, %.1f two-hop",
		texts, tok.VocabSize(), st.TokensPassage, st.BytesPerToken, st.TokensPrompt, st.TokensSingle, st.TokensTwoHop)
}
