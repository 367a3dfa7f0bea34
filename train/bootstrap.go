package train

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/schollz/progressbar/v3"

	"github.com/cas-engine/cas/agent"
	"github.com/cas-engine/cas/conformal"
	"github.com/cas-engine/cas/internal/loadfile"
	"github.com/cas-engine/cas/model/qwen"
	"github.com/cas-engine/cas/qa"
)

// BootstrapConfig configures the ACI window's bootstrap.
type BootstrapConfig struct {
	// Placement and ChatFamily render the prompt as the rollouts do.
	Placement  agent.Placement
	ChatFamily string
	// MaxNewTokens bounds each greedy response (default 500).
	MaxNewTokens int
	// Batch is the number of prompts generated together (default 16).
	Batch int
	// Progress, when set, shows a progress bar.
	Progress io.Writer
}

// BootstrapScores computes the scores that preload ACI's window (paper
// Algorithm 1, line 2; the official code's bootstrap): for every
// calibration prompt, the untrained policy answers greedily without tools
// (the agent's prompt, generation until </answer> or EOS, no search
// executed), and the score is the mean NLL of the answer-span tokens under
// that policy (Eq. 6; the mean over all generated tokens without an answer,
// conformal.EmptyNLL for an empty generation).
func BootstrapScores(m *qwen.Model, tok agent.Tokenizer, prompts []qa.Record, cfg BootstrapConfig) ([]float64, error) {
	if len(prompts) == 0 {
		return nil, errors.New("aci bootstrap: no prompts")
	}
	if cfg.MaxNewTokens <= 0 {
		cfg.MaxNewTokens = 500
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 16
	}
	var bar *progressbar.ProgressBar
	if cfg.Progress != nil {
		bar = progressbar.NewOptions(len(prompts), progressbar.OptionSetWriter(cfg.Progress),
			progressbar.OptionSetDescription("ACI bootstrap"), progressbar.OptionShowCount(),
			progressbar.OptionSetPredictTime(true), progressbar.OptionClearOnFinish())
	}
	opts := qwen.GenerateOptions{
		MaxNewTokens: cfg.MaxNewTokens, Stop: []string{agent.AnswerClose},
		Decode: func(ids []int) string { return tok.Decode(ids, false) },
	}
	scores := make([]float64, 0, len(prompts))
	for off := 0; off < len(prompts); off += cfg.Batch {
		batch := prompts[off:min(off+cfg.Batch, len(prompts))]
		ids := make([][]int, len(batch))
		for i, p := range batch {
			var err error
			if ids[i], err = agent.PromptTokens(tok, cfg.ChatFamily, cfg.Placement, p.Question); err != nil {
				return nil, fmt.Errorf("aci bootstrap: prompt %q: %w", p.ID, err)
			}
			if len(ids[i]) == 0 {
				return nil, fmt.Errorf("aci bootstrap: prompt %q encodes to no tokens", p.ID)
			}
			for _, id := range ids[i] {
				if id < 0 || id >= m.Config.VocabSize {
					return nil, fmt.Errorf("aci bootstrap: prompt %q: token id %d outside the model's vocabulary [0, %d) (tokenizer and model do not match)",
						p.ID, id, m.Config.VocabSize)
				}
			}
		}
		res, err := m.Generate(ids, opts, 0)
		if err != nil {
			return nil, fmt.Errorf("aci bootstrap: %w", err)
		}
		for _, r := range res {
			lo, hi := agent.AnswerTokens(tok, r.IDs, tok.Decode(r.IDs, true))
			scores = append(scores, agent.ConfidenceScore(r.LogProbs, nil, [2]int{lo, hi}))
		}
		if bar != nil {
			_ = bar.Add(len(batch))
		}
	}
	return scores, nil
}

// WriteScores writes scores as one JSONL line {"scores": [...]} (the format
// conformal.ReadScoreLines and `cas conformal aci --bootstrap` read).
func WriteScores(path string, scores []float64) error {
	b, err := json.Marshal(struct {
		Scores []float64 `json:"scores"`
	}{scores})
	if err != nil {
		return err
	}
	return writeFileAtomic(path, append(b, '\n'))
}

// ReadScores reads a JSONL score file and concatenates its lines.
func ReadScores(path string) ([]float64, error) {
	lines, err := loadfile.Parse(path, func(b []byte) ([][]float64, error) {
		return conformal.ReadScoreLines(bytes.NewReader(b))
	})
	if err != nil {
		return nil, err
	}
	var out []float64
	for _, l := range lines {
		out = append(out, l...)
	}
	return out, nil
}
