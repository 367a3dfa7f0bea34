package train

import (
	"bytes"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/cas-engine/cas/agent"
	"github.com/cas-engine/cas/model/tokenizer"
	"github.com/cas-engine/cas/train/traintest"
)

// TestTrainerDropsLongPrompts: prompts longer than rollout.max_prompt_tokens
// are filtered out before training (the paper's data filter) and counted in
// the run's log, instead of failing the rollout that draws them.
func TestTrainerDropsLongPrompts(t *testing.T) {
	f := newRunFixture(t)
	cfg := f.config(t)
	tok, err := tokenizer.Load(f.fx.Tokenizer)
	if err != nil {
		t.Fatal(err)
	}
	rc := cfg.RolloutConfig()
	lens := make([]int, len(traintest.Questions))
	for i, q := range traintest.Questions {
		ids, err := agent.PromptTokens(tok, rc.ChatFamily, rc.Placement, q.Question)
		if err != nil {
			t.Fatal(err)
		}
		lens[i] = len(ids)
	}
	sorted := slices.Sorted(slices.Values(lens))
	limit := sorted[len(sorted)-2] // the longest prompt is over
	wantDropped := 0
	for _, l := range lens {
		if l > limit {
			wantDropped++
		}
	}
	cfg.Rollout.MaxPromptTokens = limit
	var log bytes.Buffer
	opts := f.options(t)
	opts.Log = &log
	tr, err := NewTrainer(cfg, filepath.Join(t.TempDir(), "run"), opts)
	if err != nil {
		t.Fatal(err)
	}
	if tr.DroppedPrompts() != wantDropped || wantDropped < 1 || tr.loader.Len() != len(lens)-wantDropped {
		t.Fatalf("dropped %d (want %d of %d, limit %d), loader holds %d", tr.DroppedPrompts(), wantDropped, len(lens), limit, tr.loader.Len())
	}
	if want := "dropped: over rollout.max_prompt_tokens"; !strings.Contains(log.String(), want) {
		t.Errorf("log does not report the dropped prompts: %q", log.String())
	}
}
