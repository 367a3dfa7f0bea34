package demo

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/cas-engine/cas/train"
	"github.com/cas-engine/cas/world"
)

// aciBootstrapPath holds the ACI window's bootstrap scores.
func (r *runner) aciBootstrapPath() string { return filepath.Join(r.out, "aci_bootstrap.jsonl") }

// variantDir is a variant's trainer run folder.
func (r *runner) variantDir(v Variant) string { return filepath.Join(r.out, "grpo", v.Name) }

// trainConfig is the trainer's configuration of variant v: GRPO from the
// warm start on the GRPO split (the training split where the world has
// none), with APS at the variant's level (or
// fixed top-k) and ACI weights (or not), the window preloaded with the
// shared bootstrap.
func (r *runner) trainConfig(d *worldData, v Variant) *train.Config {
	c := train.DefaultConfig()
	g := r.cfg.GRPO
	c.Name = v.Name
	c.Seed = r.cfg.Seed
	c.Steps = max(1, g.Steps)
	c.Model = train.ModelConfig{Path: r.warmDir()}
	_, split := r.cfg.grpoQuestions()
	c.Data = train.DataConfig{Train: []string{d.splitPath(split)}, Shuffle: true}
	c.Retriever = train.RetrieverConfig{Index: d.indexDir}
	c.APS = train.APSConfig{Enabled: v.APS, QHatFile: r.apsPath(r.cfg.apsAlpha(v)), Alpha: r.cfg.apsAlpha(v),
		Candidates: r.cfg.APS.Candidates, TopK: r.cfg.APS.TopK}
	c.Rollout.GroupSize = g.Group
	c.Rollout.Temperature = g.Temperature
	c.Rollout.MaxTurns = maxTurns
	c.Rollout.MaxTurnTokens = maxTurnTokens
	c.Rollout.MaxResponseTokens = maxResponseTokens
	c.GRPO.PromptsPerStep = g.PromptsPerStep
	c.GRPO.MiniBatchPrompts = g.PromptsPerStep
	c.GRPO.MicroBatch = g.MicroBatch
	c.GRPO.KLCoef = g.KLCoef
	c.ACI.Enabled = v.ACI
	c.ACI.Rho = r.cfg.rho(v)
	c.ACI.Alpha1 = 0 // α₁ = ρ
	c.ACI.Gamma = g.Gamma
	c.ACI.Eta = g.Eta
	c.ACI.Bootstrap = r.aciBootstrapPath()
	c.ACI.CalibData = []string{d.splitPath(world.ACICalib)}
	c.ACI.CalibPrompts = len(d.w.Splits[world.ACICalib])
	c.GRPO.Frozen = v.Frozen
	c.Optim.LR = g.LR
	c.Optim.WarmupRatio = 0
	c.Optim.WarmupSteps = 0
	c.Checkpoint = train.CheckpointConfig{Every: g.CheckpointEvery, Keep: 1, DType: "f32"}
	return &c
}

// bootstrapACI is stage 4a: the ACI window's initial scores, the
// answer-span NLLs of the warm-started policy's greedy answers (without
// tools) to the aci_calib questions (paper Algorithm 1, line 2), shared by
// every variant.
func (r *runner) bootstrapACI(ctx context.Context, d *worldData) ([]float64, error) {
	err := r.stage(ctx, "aci-bootstrap", func() error {
		policy, err := LoadModelFolder(r.warmDir(), r.backend)
		if err != nil {
			return err
		}
		c := r.trainConfig(d, r.cfg.Variants[0])
		c.ACI.Bootstrap = ""
		r.logf("stage 4: ACI bootstrap on %d aci_calib questions", c.ACI.CalibPrompts)
		scores, err := train.ComputeBootstrap(c, policy, d.tok, r.opts.Progress)
		if err != nil {
			return err
		}
		return train.WriteScores(r.aciBootstrapPath(), scores)
	})
	if err != nil {
		return nil, err
	}
	return train.ReadScores(r.aciBootstrapPath())
}

// runVariant is stage 4b for one variant: its GRPO run, resumed from the
// latest checkpoint when an earlier invocation was interrupted.
func (r *runner) runVariant(ctx context.Context, d *worldData, v Variant) error {
	if r.cfg.GRPO.Steps == 0 {
		return nil
	}
	return r.stage(ctx, "grpo-"+v.Name, func() error {
		dir := r.variantDir(v)
		// The run goes in segments of CheckpointEvery steps, each a fresh
		// trainer resumed from the last checkpoint, so that the generation
		// graphs compiled per (batch, tokens, cache) shape by a policy
		// sampling many steps of compacting rollouts are released between
		// segments instead of accumulating.
		opts := train.RunOptions{Backend: r.backend, Retriever: d.retriever, Tokenizer: d.tok, Progress: r.opts.Progress,
			Log: r.opts.Log, StopAfter: r.cfg.GRPO.CheckpointEvery, PathRoot: r.out}
		for {
			var t *train.Trainer
			var err error
			if _, statErr := os.Stat(filepath.Join(dir, train.RunConfigFile)); statErr == nil {
				if _, ckErr := train.LatestCheckpoint(dir); ckErr == nil {
					t, err = train.ResumeTrainer(dir, nil, opts)
				} else if err = os.RemoveAll(dir); err == nil { // stopped before its first checkpoint
					t, err = train.NewTrainer(r.trainConfig(d, v), dir, opts)
				}
			} else {
				if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
					return err
				}
				t, err = train.NewTrainer(r.trainConfig(d, v), dir, opts)
			}
			if err != nil {
				return fmt.Errorf("variant %s: %w", v.Name, err)
			}
			if t.Step() >= t.Total() {
				return nil
			}
			aps := fmt.Sprintf("APS α=%g", r.cfg.apsAlpha(v))
			if !v.APS {
				aps = fmt.Sprintf("fixed top-%d", r.cfg.APS.TopK)
			}
			what := "GRPO " + v.Name
			if v.Frozen {
				what = "reference run " + v.Name + " (the warm start's rollouts on the same prompts, no update)"
			}
			r.logf("stage 4: %s (%s, ACI weights %v, ρ=%g): steps %d..%d of %d, %d prompts × %d", what, aps, v.ACI,
				r.cfg.rho(v), t.Step()+1, min(t.Total(), t.Step()+r.cfg.GRPO.CheckpointEvery), t.Total(), r.cfg.GRPO.PromptsPerStep, r.cfg.GRPO.Group)
			before := t.Step()
			if err := t.Run(ctx); err != nil {
				return err
			}
			if t.Step() >= t.Total() {
				return nil
			}
			if t.Step() == before {
				return errors.New("the trainer made no progress")
			}
		}
	})
}

// variantModel is the folder of the policy a variant ends with.
func (r *runner) variantModel(v Variant) (string, error) {
	if r.cfg.GRPO.Steps == 0 {
		return r.warmDir(), nil
	}
	return train.LatestCheckpoint(r.variantDir(v))
}

// variantMetrics reads a variant's per-step training metrics.
func (r *runner) variantMetrics(v Variant) ([]train.StepMetrics, error) {
	if r.cfg.GRPO.Steps == 0 {
		return nil, nil
	}
	return train.ReadMetrics(filepath.Join(r.variantDir(v), train.MetricsFile))
}
