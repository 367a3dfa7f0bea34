package agent

import (
	"context"
	"slices"
	"testing"

	"github.com/cas-engine/cas/internal/scriptpolicy"
	"github.com/cas-engine/cas/model/qwen"
	"github.com/cas-engine/cas/qa"
)

// TestPromptTokensMatchRollout: PromptTokens gives the ids a rollout of
// the same mode starts from.
func TestPromptTokensMatchRollout(t *testing.T) {
	tok := newPieceTok(384, "qwen3")
	for _, mode := range []Mode{ModeAgent, ModeDirect} {
		cfg := DefaultRolloutConfig()
		cfg.Mode = mode
		p := &scriptPolicy{scriptpolicy.Policy{Tok: tok, EOS: tok.EOS(), Vocab: 384, MaxCtx: 4096,
			Next: func(string, int) (string, qwen.FinishReason) { return "<answer> x</answer>", qwen.FinishEOS }}}
		ret := retrieverFunc(nil)
		run, err := NewRunner(p, tok, ret, cfg)
		if err != nil {
			t.Fatal(err)
		}
		qs := []qa.Record{{ID: "a", Question: "who founded the school?", Answers: []string{"x"}}, {ID: "b", Question: "where is California?", Answers: []string{"y"}}}
		ts, err := run.Run(context.Background(), qs, 1, 0)
		if err != nil {
			t.Fatal(err)
		}
		for i, q := range qs {
			got, err := RolloutPromptTokens(tok, cfg, q.Question)
			if err != nil {
				t.Fatal(err)
			}
			if want := ts[i].IDs[:ts[i].PromptLen]; !slices.Equal(got, want) {
				t.Errorf("mode %v, question %d: PromptTokens %v, rollout prompt %v", mode, i, got, want)
			}
		}
	}
	cfg := DefaultRolloutConfig()
	cfg.Mode = ModeRAG
	if _, err := RolloutPromptTokens(tok, cfg, "q?"); err == nil {
		t.Error("RAG prompt tokens without a retrieval accepted")
	}
}
