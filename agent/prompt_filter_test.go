package agent

import (
	"slices"
	"strings"
	"testing"

	"github.com/cas-engine/cas/model/tokenizer"
	"github.com/cas-engine/cas/model/tokenizer/tokentest"
)

// TestFilterLongPrompts drops the questions whose rendered agent prompt
// (Qwen3 chat template) is longer than MaxPromptTokens, and counts them.
func TestFilterLongPrompts(t *testing.T) {
	tok := tokentest.Qwen3(t)
	qs := []string{"Who wrote Hamlet?", strings.Repeat("very ", 300) + "long question?", "What is the capital of France?", strings.Repeat("word ", 50) + "?"}
	cfg := DefaultRolloutConfig()
	lens := make([]int, len(qs))
	for i, q := range qs {
		ids, err := PromptTokens(tok, cfg.ChatFamily, cfg.Placement, q)
		if err != nil {
			t.Fatal(err)
		}
		lens[i] = len(ids)
	}
	if !(lens[0] < lens[2] && lens[2] < lens[3] && lens[3] < lens[1]) {
		t.Fatalf("prompt lengths %v", lens)
	}
	for _, tc := range []struct {
		name    string
		limit   int
		kept    []int
		dropped int
	}{
		{"all fit", lens[1], []int{0, 1, 2, 3}, 0},
		{"the longest one over", lens[1] - 1, []int{0, 2, 3}, 1},
		{"at the limit exactly", lens[3], []int{0, 2, 3}, 1},
		{"two over", lens[3] - 1, []int{0, 2}, 2},
		{"none fit", lens[0] - 1, nil, 4},
	} {
		cfg.MaxPromptTokens = tc.limit
		kept, dropped, err := FilterLongPrompts(tok, cfg, qs)
		if err != nil || !slices.Equal(kept, tc.kept) || dropped != tc.dropped {
			t.Errorf("%s (limit %d): kept %v dropped %d (%v), want %v %d", tc.name, tc.limit, kept, dropped, err, tc.kept, tc.dropped)
		}
	}
	// The rollout encodes the same prompt.
	cfg = DefaultRolloutConfig()
	ids, _ := PromptTokens(tok, cfg.ChatFamily, cfg.Placement, qs[0])
	msgs, _ := PromptMessages(qs[0], cfg.Placement)
	no := false
	text, _ := tok.RenderChat(msgs, tokenizer.ChatOptions{Family: tokenizer.FamilyQwen3, AddGenerationPrompt: true, EnableThinking: &no})
	if !slices.Equal(ids, tok.Encode(text)) {
		t.Error("PromptTokens differs from the rendered chat template")
	}
}
