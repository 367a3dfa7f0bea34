package traintest

import (
	"testing"

	"github.com/cas-engine/cas/agent"
	"github.com/cas-engine/cas/model/tokenizer"
	"github.com/cas-engine/cas/search"
)

// TestFixture: the tokenizer loads in the project's tokenizer, encodes a
// rendered agent prompt in few tokens below the vocabulary, round-trips
// text, and the BM25 index retrieves the gold passage.
func TestFixture(t *testing.T) {
	const vocab = 384
	fx, err := Write(t.TempDir(), vocab)
	if err != nil {
		t.Fatal(err)
	}
	tok, err := tokenizer.Load(fx.Tokenizer)
	if err != nil {
		t.Fatal(err)
	}
	if tok.Family() != tokenizer.FamilyQwen3 {
		t.Errorf("family %q", tok.Family())
	}
	msgs, err := agent.PromptMessages(Questions[0].Question, agent.PlacementSystemUser)
	if err != nil {
		t.Fatal(err)
	}
	no := false
	text, err := tok.RenderChat(msgs, tokenizer.ChatOptions{AddGenerationPrompt: true, EnableThinking: &no})
	if err != nil {
		t.Fatal(err)
	}
	ids := tok.Encode(text)
	if len(ids) > 60 {
		t.Errorf("prompt is %d tokens, want a few dozen", len(ids))
	}
	for _, id := range ids {
		if id < 0 || id >= vocab {
			t.Fatalf("id %d outside [0, %d)", id, vocab)
		}
	}
	if got := tok.Decode(ids, false); got != text {
		t.Errorf("round trip:\n%q\n%q", got, text)
	}
	if eos := tok.Encode(EOS); len(eos) != 1 || eos[0] != vocab-1 {
		t.Errorf("EOS encodes to %v", eos)
	}
	r, _, err := search.OpenRetriever(fx.Index, search.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	hits, err := r.Retrieve(t.Context(), []string{"capital of Germany"}, 2)
	if err != nil {
		t.Fatal(err)
	}
	if len(hits[0]) == 0 || hits[0][0].Doc.ID != "2" {
		t.Errorf("BM25 top hit %+v, want passage 2", hits[0])
	}
	if _, err := TokenizerJSON(100); err == nil {
		t.Error("tiny vocabulary accepted")
	}
}
