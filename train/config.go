package train

import (
	"errors"
	"fmt"
	"strings"

	"github.com/cas-engine/cas/agent"
	"github.com/cas-engine/cas/conformal"
	"github.com/cas-engine/cas/model/qwen"
)

// Config is one training run, read from one YAML file (configs/*.yaml) with
// the paper's defaults for everything left out (DefaultConfig). Paths are
// relative to the YAML file's folder. `cas train --set key=value` overrides
// any field by its dotted YAML path; the resolved config is saved with the
// run as config.yaml.
type Config struct {
	// Name labels the run in metrics and plots (default: the run folder's name).
	Name string `yaml:"name"`
	// Seed drives data order, rollout sampling and ACI's calibration draw.
	Seed uint64 `yaml:"seed"`
	// Steps is the number of training steps; 0 means Epochs passes over the
	// training prompts (⌊N / prompts_per_step⌋ steps each, verl's
	// total_epochs with drop_last).
	Steps  int `yaml:"steps"`
	Epochs int `yaml:"epochs"`

	Model     ModelConfig     `yaml:"model"`
	Data      DataConfig      `yaml:"data"`
	Retriever RetrieverConfig `yaml:"retriever"`
	APS       APSConfig       `yaml:"aps"`
	// Rollout is the agent's rollout settings (their YAML keys are
	// agent.RolloutConfig's) and the run's group size and batching.
	Rollout RolloutSection `yaml:"rollout"`
	// GRPO is the loss (LossConfig's keys) and the update's batching.
	GRPO GRPOSection `yaml:"grpo"`
	// ACI is the controller (conformal.ACIConfig's keys), whether its
	// weights apply, and where its window's first scores come from.
	ACI ACISection `yaml:"aci"`
	// Optim is AdamW and its schedule; optim.warmup_steps counts training
	// steps here (learnerConfig turns it into optimiser steps) and
	// TotalSteps is set from the run's length.
	Optim      OptimConfig      `yaml:"optim"`
	Checkpoint CheckpointConfig `yaml:"checkpoint"`
}

// ModelConfig names the policy.
type ModelConfig struct {
	// Path is the Hugging Face folder of the initial policy (config.json,
	// model.safetensors or shards, tokenizer.json).
	Path string `yaml:"path"`
	// Tokenizer is the tokenizer.json (default: Path/tokenizer.json).
	Tokenizer string `yaml:"tokenizer"`
	// Reference is the frozen reference model of the KL (default: Path).
	Reference string `yaml:"reference"`
	// ChatFamily overrides the tokenizer's chat template family ("qwen2.5"
	// or "qwen3"); Qwen3 always renders with thinking disabled.
	// (the flag --chat-template); "chat_family" is its old, still
	// accepted key.
	ChatFamily       string `yaml:"chat_template"`
	LegacyChatFamily string `yaml:"chat_family,omitempty"`
	// Precision is "f32" (the default) or "bf16": mixed precision, bf16
	// weights and activations in the graphs with f32 master weights and
	// AdamW state (see train/precision.go; memory in configs/README.md).
	Precision string `yaml:"precision"`
}

// DataConfig names the training prompts.
type DataConfig struct {
	// Train lists FlashRAG/Search-R1 JSONL files ({"id", "question",
	// "golden_answers"}) and Search-R1 parquet files, concatenated.
	Train []string `yaml:"train"`
	// Shuffle draws a fresh permutation every epoch (seeded).
	Shuffle bool `yaml:"shuffle"`
	// Limit keeps only the first Limit prompts (0: all).
	Limit int `yaml:"limit"`
}

// RetrieverConfig says where passages come from: an index folder (`cas
// index build`) or a running Search-R1-compatible server — exactly one.
type RetrieverConfig struct {
	Index string `yaml:"index"`
	// Server is the URL of a Search-R1-compatible retrieval server (the
	// flag --retriever); "server:" is its old, still accepted key.
	Server       string `yaml:"url,omitempty"`
	LegacyServer string `yaml:"server,omitempty"`
	// Corpus overrides the corpus the index folder records (a moved
	// corpus; the flag --corpus of the commands that open a folder).
	Corpus string `yaml:"corpus,omitempty"`
}

// APSConfig sets the passage truncation of every search.
type APSConfig struct {
	// Enabled keeps APS's prediction set of the Candidates retrieved
	// passages; false keeps a fixed TopK (the paper's −APS ablation, k = 3).
	Enabled bool `yaml:"enabled"`
	// QHatFile is the calibration report of `cas calibrate aps` (its qhat,
	// temperature, min_docs and max_docs are used).
	QHatFile string `yaml:"qhat_file"`
	// Alpha is the miscoverage level the file must have been calibrated at
	// (checked when the report records one; 0: not checked). Paper: 0.2.
	Alpha float64 `yaml:"alpha"`
	// Candidates is the number of passages retrieved per search under APS
	// (code: 5).
	Candidates int `yaml:"candidates"`
	// TopK is the fixed number of passages when APS is off.
	TopK int `yaml:"topk"`
}

// RolloutSection is the "rollout:" section: the agent's settings plus how
// many trajectories a prompt gets and how many prompts roll out together.
// MaxTurns and TurnRule bound the generations: the paper's "a maximum of 4
// assistant turns" is read two ways (agent.TurnRule): "paper" counts
// assistant–search rounds (max_turns 4: 4 searches and a final answer
// generation, Search-R1's loop), "code" counts generations (4 generations,
// at most 3 searches; the official CAS code). answer_from is "policy" (the
// default: only the text the policy generated) or "text" (the last <answer>
// of the whole response, the official code's extract_solution).
type RolloutSection struct {
	// GroupSize is G, the trajectories per prompt (5).
	GroupSize int `yaml:"group_size"`
	// BatchPrompts is the number of prompts rolled out together (their G
	// trajectories share one batched KV-cache session); a step's prompts go
	// in consecutive chunks of this size. 0 means all at once. It bounds
	// the rollout's memory, not the math.
	BatchPrompts        int `yaml:"batch_prompts"`
	agent.RolloutConfig `yaml:",inline"`
}

// GRPOSection is the "grpo:" section: the loss constants and the batching
// of the policy update.
type GRPOSection struct {
	// PromptsPerStep is the number of prompts per training step (512).
	PromptsPerStep int `yaml:"prompts_per_step"`
	// MiniBatchPrompts is the number of prompts per optimiser step (256).
	MiniBatchPrompts int `yaml:"mini_batch_prompts"`
	// MicroBatch is the number of trajectories per forward/backward pass.
	MicroBatch int `yaml:"micro_batch"`
	// PPOEpochs is the number of passes over each step's batch (1).
	PPOEpochs  int `yaml:"ppo_epochs"`
	LossConfig `yaml:",inline"`
	// RecomputeOldLogProbs scores the trajectories with the policy before
	// the update (verl) instead of using the sampler's log-probs.
	RecomputeOldLogProbs bool `yaml:"recompute_old_logprobs"`
	// Frozen samples, rewards and logs the prompts of a GRPO run without
	// updating anything (no loss, no optimiser step, no ACI update): with
	// the same seed it sees the same batches as the run it accompanies, so
	// its reward is the curve the run's reward is read against. A step's
	// reward averages a few fresh questions, and consecutive batches differ
	// more than consecutive policies do.
	Frozen bool `yaml:"frozen,omitempty"`
}

// ACISection is the "aci:" section (paper §3.3).
type ACISection struct {
	// Enabled applies ω to the loss; false is the −ACI ablation (the
	// controller still runs, so α_t, q_t and the low-confidence ratio are
	// logged, but every ω is 1).
	Enabled bool `yaml:"enabled"`
	// ACIConfig is the controller: window_unit "iterations" (the paper)
	// or "scores" (the code's deque), rule "smoothed" (Eq. 7), "plain"
	// (Eq. 4) or "ema" (the code), quantile "conformal", "higher" or
	// "linear" (the code's); alpha1 0 means α₁ = ρ.
	conformal.ACIConfig `yaml:",inline"`
	// Bootstrap is a JSONL file of scores ({"scores": [...]} per line, as
	// `cas train bootstrap-aci` writes) preloading the window; empty means
	// computing them at the start of the run from CalibPrompts prompts.
	Bootstrap string `yaml:"bootstrap"`
	// CalibData lists the files the calibration prompts are drawn from
	// (default: data.train); CalibPrompts is how many (150).
	CalibData    []string `yaml:"calib_data"`
	CalibPrompts int      `yaml:"calib_prompts"`
}

// CheckpointConfig sets checkpointing.
type CheckpointConfig struct {
	// Every writes a checkpoint every Every steps (and after the last).
	Every int `yaml:"every"`
	// Keep is the number of checkpoints kept (oldest deleted first; 0: all).
	Keep int `yaml:"keep"`
	// DType of the policy weights: "f32" (exact resume) or "bf16" (half the
	// size; a resumed run then differs from an uninterrupted one).
	DType string `yaml:"dtype"`
}

// DefaultConfig is the paper's Qwen2.5-3B-Instruct recipe (METHOD.md and the
// official code's verl settings); model, data and retriever are left empty.
func DefaultConfig() Config {
	return Config{
		Seed: 0, Epochs: 1,
		Data:       DataConfig{Shuffle: true},
		APS:        APSConfig{Enabled: true, Alpha: 0.2, Candidates: 5, TopK: 3},
		Rollout:    rolloutDefaults(),
		GRPO:       grpoDefaults(),
		ACI:        aciDefaults(),
		Optim:      DefaultOptimConfig(),
		Checkpoint: CheckpointConfig{Every: 100, Keep: 2, DType: "f32"},
	}
}

// rolloutDefaults: the agent's defaults, G = 5, top-p 1 (no filtering).
func rolloutDefaults() RolloutSection {
	r := RolloutSection{GroupSize: 5, RolloutConfig: agent.DefaultRolloutConfig()}
	r.TopP = 1
	return r
}

func grpoDefaults() GRPOSection {
	return GRPOSection{PromptsPerStep: 512, MiniBatchPrompts: 256, MicroBatch: 8, PPOEpochs: 1,
		LossConfig: DefaultLossConfig(), RecomputeOldLogProbs: true}
}

func aciDefaults() ACISection {
	a := ACISection{Enabled: true, ACIConfig: conformal.DefaultACIConfig(), CalibPrompts: 150}
	a.Alpha1 = 0 // α₁ = ρ, whatever rho is set to
	return a
}

// Validate reports every unusable setting at once.
func (c *Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if c.Steps < 0 {
		bad("steps %d < 0", c.Steps)
	}
	if c.Steps == 0 && c.Epochs < 1 {
		bad("epochs %d < 1 (with steps 0)", c.Epochs)
	}
	if c.Model.Path == "" {
		bad("model.path is required")
	}
	if _, err := qwen.ParsePrecision(c.Model.Precision); err != nil {
		bad("model.precision: %v", err)
	}
	if len(c.Data.Train) == 0 {
		bad("data.train is required")
	}
	if c.Data.Limit < 0 {
		bad("data.limit %d < 0", c.Data.Limit)
	}
	if (c.Retriever.Index == "") == (c.Retriever.Server == "") {
		bad("give exactly one of retriever.index and retriever.url")
	}
	if c.APS.Enabled && c.APS.QHatFile == "" {
		bad("aps.enabled needs aps.qhat_file (cas calibrate aps --out FILE)")
	}
	if c.APS.Alpha < 0 || c.APS.Alpha >= 1 {
		bad("aps.alpha %g outside [0, 1)", c.APS.Alpha)
	}
	if c.Rollout.GroupSize < 1 {
		bad("rollout.group_size %d < 1", c.Rollout.GroupSize)
	}
	if c.Rollout.BatchPrompts < 0 {
		bad("rollout.batch_prompts %d < 0", c.Rollout.BatchPrompts)
	}
	g := c.GRPO
	if g.PromptsPerStep < 1 {
		bad("grpo.prompts_per_step %d < 1", g.PromptsPerStep)
	}
	if g.MiniBatchPrompts < 1 || g.MiniBatchPrompts > g.PromptsPerStep {
		bad("grpo.mini_batch_prompts %d outside [1, prompts_per_step %d]", g.MiniBatchPrompts, g.PromptsPerStep)
	}
	if g.MicroBatch < 1 {
		bad("grpo.micro_batch %d < 1", g.MicroBatch)
	}
	if c.ACI.CalibPrompts < 1 && c.ACI.Bootstrap == "" {
		bad("aci.calib_prompts %d < 1 without aci.bootstrap", c.ACI.CalibPrompts)
	}
	if c.Checkpoint.Every < 1 {
		bad("checkpoint.every %d < 1", c.Checkpoint.Every)
	}
	if c.Checkpoint.Keep < 0 {
		bad("checkpoint.keep %d < 0", c.Checkpoint.Keep)
	}
	if _, err := c.weightDType(); err != nil {
		bad("%v", err)
	}
	// The APS threshold comes from aps.qhat_file when the run starts.
	if err := c.RolloutConfig().ValidateForAPS(c.APS.Enabled); err != nil {
		bad("%v", err)
	}
	if err := c.ACI.Validate(); err != nil {
		bad("%v", err)
	}
	lc := c.learnerConfig(1)
	if err := lc.Validate(); err != nil {
		bad("%v", err)
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	return nil
}

// TotalSteps is the run's length for n training prompts.
func (c *Config) TotalSteps(n int) int {
	if c.Steps > 0 {
		return c.Steps
	}
	return c.Epochs * (n / c.GRPO.PromptsPerStep)
}

// weightDType maps checkpoint.dtype.
func (c *Config) weightDType() (string, error) {
	switch strings.ToLower(c.Checkpoint.DType) {
	case "f32", "float32", "":
		return "F32", nil
	case "bf16", "bfloat16":
		return "BF16", nil
	}
	return "", fmt.Errorf("checkpoint.dtype %q: want f32 or bf16", c.Checkpoint.DType)
}

// RolloutConfig is the agent's rollout settings: the rollout section with
// the chat family of model.chat_template and aps.candidates and aps.topk
// (APS itself is set by the caller once the calibration file is read).
func (c *Config) RolloutConfig() agent.RolloutConfig {
	r := c.Rollout.RolloutConfig
	r.ChatFamily = c.Model.ChatFamily
	r.Candidates, r.TopK = c.APS.Candidates, c.APS.TopK
	return r
}

// learnerConfig builds the update's settings for a run of totalSteps
// training steps (the warm-up ratio counts optimiser steps: training steps ×
// mini-batches per step).
func (c *Config) learnerConfig(totalSteps int) LearnerConfig {
	g := c.GRPO
	perStep := 1
	if g.MiniBatchPrompts > 0 {
		perStep = max(1, (g.PromptsPerStep+g.MiniBatchPrompts-1)/g.MiniBatchPrompts) * max(1, g.PPOEpochs)
	}
	o := c.Optim
	o.WarmupSteps *= perStep
	o.TotalSteps = max(1, totalSteps) * perStep
	o.SkipNonFinite = true
	return LearnerConfig{Loss: g.LossConfig, Optim: o,
		MiniBatchGroups: g.MiniBatchPrompts, MicroBatch: g.MicroBatch, Epochs: g.PPOEpochs,
		RecomputeOldLogProbs: g.RecomputeOldLogProbs, Temperature: c.Rollout.Temperature, ApplyACI: c.ACI.Enabled,
	}
}
