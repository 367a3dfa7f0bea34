package train

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"

	"github.com/gomlx/gomlx/backends"

	"github.com/cas-engine/cas/agent"
	"github.com/cas-engine/cas/conformal"
	"github.com/cas-engine/cas/model/qwen"
	"github.com/cas-engine/cas/qa"
	"github.com/cas-engine/cas/search"
)

// BenchInput is what BenchStep needs besides the config: models already
// built (a benchmark uses random weights of a named shape instead of a
// model folder), the tokenizer, the retriever, the prompts and the ACI
// window's bootstrap scores.
type BenchInput struct {
	Policy, Reference *qwen.Model // Reference may be nil when grpo.kl_coef is 0
	Tokenizer         agent.Tokenizer
	Retriever         search.Retriever
	Prompts           []qa.Record
	// Bootstrap preloads the ACI window (aci.enabled); it must hold at
	// least one score.
	Bootstrap []float64
}

// BenchStep runs one training step of cfg exactly as Trainer.Run does
// (trainStep: grpo.prompts_per_step prompts → rollouts with retrieval and
// rewards → scoring of the old and reference log-probs → GRPO+ACI loss,
// backward and AdamW), without a run folder, metrics file or checkpoint,
// and returns the step's metrics with the time of each phase
// (rollout_time_s, score_time_s, update_time_s, step_time_s).
func BenchStep(ctx context.Context, cfg *Config, in BenchInput) (StepMetrics, error) {
	if in.Policy == nil || in.Tokenizer == nil || in.Retriever == nil {
		return StepMetrics{}, errors.New("bench step: policy, tokenizer and retriever are required")
	}
	if len(in.Prompts) < cfg.GRPO.PromptsPerStep {
		return StepMetrics{}, fmt.Errorf("bench step: %d prompts, fewer than grpo.prompts_per_step %d", len(in.Prompts), cfg.GRPO.PromptsPerStep)
	}
	t := &Trainer{cfg: cfg, opts: RunOptions{Retriever: in.Retriever}, tok: in.Tokenizer,
		policy: in.Policy, ref: in.Reference, loader: NewLoader(in.Prompts, cfg.Seed, false), total: 1,
		rng: rand.NewPCG(cfg.Seed, 0xa54ff53a5f1d36f1)}
	if cfg.GRPO.KLCoef != 0 && in.Reference == nil {
		return StepMetrics{}, errors.New("bench step: grpo.kl_coef needs a reference model")
	}
	if cfg.ACI.Enabled {
		var err error
		if t.aci, err = conformal.NewACI(cfg.ACI.ACIConfig, in.Bootstrap); err != nil {
			return StepMetrics{}, fmt.Errorf("bench step: ACI bootstrap: %w", err)
		}
	}
	if err := t.finish(); err != nil {
		return StepMetrics{}, err
	}
	m, err := t.trainStep(ctx)
	if err != nil {
		return StepMetrics{}, err
	}
	m.Run = cfg.Name
	return m, nil
}

// BenchModels returns a random policy of cfg (seeded) loaded as a run of
// precision p loads its policy, and the frozen reference with the same
// weights loaded as the run loads its reference.
func BenchModels(cfg *qwen.Config, b backends.Backend, p qwen.Precision, seed uint64) (policy, ref *qwen.Model, err error) {
	if policy, err = qwen.NewRandomWith(cfg, b, seed, policyLoadOptions(p, nil)); err != nil {
		return nil, nil, err
	}
	if ref, err = qwen.NewRandomWith(cfg, b, seed, referenceLoadOptions(p, nil)); err != nil {
		return nil, nil, err
	}
	ref.SetTrainable(false)
	return policy, ref, nil
}
