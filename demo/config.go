package demo

import (
	"errors"
	"fmt"
	"math"

	"github.com/cas-engine/cas/world"
)

// Config is one demo run: the world, the policy's size and every stage's
// budget. QuickConfig and DefaultConfig are the two presets of `cas demo`.
type Config struct {
	// Preset names the preset the config came from ("quick", "default").
	Preset string `json:"preset"`
	// Seed drives everything: the world, the policy's initialisation, the
	// example order, rollout sampling and the calibration draws.
	Seed  uint64       `json:"seed"`
	World world.Config `json:"world"`
	Model ModelConfig  `json:"model"`

	APS  APSSettings  `json:"aps"`
	Warm WarmSettings `json:"warm_start"`
	GRPO GRPOSettings `json:"grpo"`
	Eval EvalSettings `json:"eval"`

	// Variants are the GRPO runs, all started from the same warm start
	// (the first is the full method, CAS).
	Variants []Variant `json:"variants"`
}

// APSSettings configure the calibration of APS on the world's retrieval.
type APSSettings struct {
	// Alpha is the miscoverage level (paper: 0.2).
	Alpha float64 `json:"alpha"`
	// Temperature is T of softmax(s/T) over the BM25 scores. The paper's
	// T = 0.01 suits inner products of unit vectors (gaps of ~0.01); BM25
	// scores differ by whole units, so T is on that scale here.
	Temperature float64 `json:"temperature"`
	// CalibCandidates are the passages retrieved per calibration query;
	// Candidates those retrieved per search at training and evaluation
	// time, of which APS keeps k ∈ [MinDocs, MaxDocs]. Equal by default, so
	// calibration and use scores are exchangeable; the official code
	// calibrates on 20 and keeps from 5 (measured on NQ: mean kept 3.51 →
	// 3.06, gold kept 0.854 → 0.835).
	CalibCandidates int `json:"calib_candidates"`
	Candidates      int `json:"candidates"`
	MinDocs         int `json:"min_docs"`
	MaxDocs         int `json:"max_docs"`
	// TopK is the fixed number of passages of the −APS ablation (3).
	TopK int `json:"topk"`
}

// WarmSettings configure the supervised warm start on scripted
// trajectories.
type WarmSettings struct {
	Steps  int     `json:"steps"`
	Batch  int     `json:"batch"`
	LR     float64 `json:"lr"`
	Warmup int     `json:"warmup_steps"`
	// Chunks is the number of saves of the policy during the warm start
	// (also made when interrupted): a resumed warm start continues from the
	// last one, with fresh AdamW moments.
	Chunks int `json:"chunks"`
	// AnnealFrom is the fraction of the steps after which the learning
	// rate drops to AnnealFactor of its peak (1: never).
	AnnealFrom   float64 `json:"anneal_from"`
	AnnealFactor float64 `json:"anneal_factor"`
	// EnvWeight λ weighs the next-token loss on the tokens the policy
	// does not write — the question and the retrieved passages — against 1
	// for its own tokens (0: the plain warm-start objective). The tiny
	// policy starts from random weights, where a real Qwen has been
	// pretrained on text like the passages; λ > 0 is that pretraining
	// folded into the warm start, and it makes the copying of names the
	// agent needs appear sooner (held-out cross-entropy of the policy
	// tokens after 900 steps: 0.77 with λ = 0.25 against 1.09 without,
	// measured on the demo world with an earlier model and learning rate).
	EnvWeight float64 `json:"env_weight"`
	// DirectPerAgent is the number of direct-answer examples (the
	// no-retrieval baseline's prompt) per scripted agent example.
	DirectPerAgent float64 `json:"direct_per_agent"`
	// NoSearch is the share of the agent demonstrations that answer
	// without searching, from "memory" (world.ScriptSearches with 0
	// searches: for a training question the memorised fact, for an unseen
	// test entity a guess), as an instruct model often does; OneSearch the
	// share of the other two-hop demonstrations that answer after the first
	// search, without chaining the second through the bridge entity. Both
	// leave GRPO a behavioural gap that every question shares — to search,
	// and to search again — which it can close from reward alone
	// (Search-R1's story). 0 and 0: every demonstration searches every hop.
	NoSearch  float64 `json:"no_search,omitempty"`
	OneSearch float64 `json:"one_search,omitempty"`
}

// GRPOSettings configure each variant's GRPO run (paper Algorithm 1).
type GRPOSettings struct {
	Steps          int     `json:"steps"`
	PromptsPerStep int     `json:"prompts_per_step"`
	Group          int     `json:"group"`
	MicroBatch     int     `json:"micro_batch"`
	LR             float64 `json:"lr"`
	KLCoef         float64 `json:"kl_coef"`
	Temperature    float64 `json:"temperature"`
	// ACI: target rate ρ, step γ, weight η (paper §3.3).
	Rho   float64 `json:"rho"`
	Gamma float64 `json:"gamma"`
	Eta   float64 `json:"eta"`
	// CheckpointEvery bounds the work an interruption loses.
	CheckpointEvery int `json:"checkpoint_every"`
}

// EvalSettings configure the evaluations on the test split.
type EvalSettings struct {
	// Questions is the number of test questions evaluated (0: all), the
	// same ones for every variant.
	Questions int `json:"questions"`
	// Batch is the number of questions rolled out together.
	Batch int `json:"batch"`
}

// Rollout limits shared by the warm start, GRPO and evaluation: the tiny
// policy's turns are short, and a bounded response keeps a babbling policy
// cheap.
const (
	maxTurnTokens     = 96
	maxResponseTokens = 640
	maxTurns          = 4
)

// Variant is one GRPO run of the ablation: the paper's Table 3 rows.
type Variant struct {
	Name string `json:"name"`
	// APS keeps the APS prediction set of the candidates; false keeps a
	// fixed top-k (−APS).
	APS bool `json:"aps"`
	// ACI applies the confidence weights ω; false is −ACI (the controller
	// still runs and is logged).
	ACI bool `json:"aci"`
	// Rho overrides GRPOSettings.Rho; APSAlpha overrides APSSettings.Alpha
	// (0: the default).
	Rho      float64 `json:"rho,omitempty"`
	APSAlpha float64 `json:"aps_alpha,omitempty"`
	// Frozen samples the same prompts as the other runs without updating
	// the policy (train's grpo.frozen): the demo's reference curve, the
	// warm start's reward on the batches GRPO saw. It is not a row of the
	// configuration's Variants.
	Frozen bool `json:"frozen,omitempty"`
}

// VariantNoUpdate names the frozen reference run.
const VariantNoUpdate = "no-update"

// noUpdateVariant is the frozen reference run: the first variant's
// retrieval and ACI settings, without updates.
func (c Config) noUpdateVariant() Variant {
	v := c.Variants[0]
	v.Name, v.Frozen = VariantNoUpdate, true
	return v
}

// Variant names of the demo.
const (
	VariantCAS   = "cas"
	VariantNoACI = "no-aci"
	VariantNoAPS = "no-aps"
)

// DemoVariants are the GRPO runs of `cas demo --quick`: the full method
// and its two ablations (the default preset runs the first two).
func DemoVariants() []Variant {
	return []Variant{
		{Name: VariantCAS, APS: true, ACI: true},
		{Name: VariantNoACI, APS: true, ACI: false},
		{Name: VariantNoAPS, APS: false, ACI: true},
	}
}

// AblationVariants are the rows of `cas ablate` (paper Table 3): Default,
// −ACI, −APS, ρ ∈ {0.1, 0.4} and α_APS ∈ {0.05, 0.35}.
func AblationVariants() []Variant {
	return append(DemoVariants(),
		Variant{Name: "rho-0.1", APS: true, ACI: true, Rho: 0.1},
		Variant{Name: "rho-0.4", APS: true, ACI: true, Rho: 0.4},
		Variant{Name: "aps-alpha-0.05", APS: true, ACI: true, APSAlpha: 0.05},
		Variant{Name: "aps-alpha-0.35", APS: true, ACI: true, APSAlpha: 0.35},
	)
}

// tinyModel is the policy of both presets: the PyTorch prototype's shape
// (2 layers, 64 wide) as a Qwen3 with four 16-wide heads. Every query head
// has its own key/value head: measured on a copying task (repeat 10–19
// random tokens), the loss of this model falls below 0.2 nats after ≈ 500
// steps, against more than 800 with two key/value heads (grouped-query
// attention, as the real Qwen3s use), and copying names from the question
// and the passages is most of what the agent must learn. Two layers learn
// it sooner than three or four.
func tinyModel() ModelConfig {
	return ModelConfig{Hidden: 64, Layers: 2, Heads: 4, KVHeads: 4, HeadDim: 16, Intermediate: 192, MaxPositions: 1024}
}

func defaultAPS() APSSettings {
	return APSSettings{Alpha: 0.2, Temperature: 1, CalibCandidates: 5, Candidates: 5, MinDocs: 1, MaxDocs: 5, TopK: 3}
}

// demoWorld is the default preset's world: the default encyclopedia
// scaled up 2.5× (about 7,000 passages and 12,000 training questions) with
// a 2,000-token vocabulary, and the given evaluation splits. A tiny policy
// trained for thousands of steps memorises the facts of a small world's
// training entities; with enough distinct names it has to learn to copy
// them from the question and the passages, which is what transfers to
// unseen entities. Measured (seed 1): the default preset's 2,400-step warm
// start on the quick preset's world (2.5× smaller) ends at test EM 0.19,
// against 0.655 on this one; the quick preset's 900 steps stop before the
// smaller world is memorised.
func demoWorld(seed uint64, apsCalib, aciCalib, test int) world.Config {
	w := world.DefaultConfig(seed)
	w.Countries, w.Cities, w.People, w.Films, w.Companies, w.Bands, w.Books = 40, 400, 2250, 750, 500, 300, 550
	w.VocabSize = 2000
	w.Train = 12000
	w.APSCalib, w.ACICalib, w.Test = apsCalib, aciCalib, test
	return w
}

// QuickConfig is `cas demo --quick`: a world of the encyclopedia's
// default size (2.5× fewer entities than the default preset's, 5,000
// training questions), a 900-step warm start, two GRPO steps per variant
// and 110 test questions — under 3 minutes on two cores, and the
// end-to-end test. The smaller world is what makes the budget: its names
// are shorter in tokens and repeat more, and the policy learns to copy
// them from the passages in about half the steps (seed 1: test EM 0.245
// with search after 900 steps of 16; on the default preset's world, 1,600
// steps reached 0.218 and 800 steps 0.02).
func QuickConfig(seed uint64) Config {
	return Config{
		Preset: "quick", Seed: seed, World: quickWorld(seed), Model: tinyModel(), APS: defaultAPS(),
		Warm: WarmSettings{Steps: 900, Batch: 16, LR: 3e-3, Warmup: 20, Chunks: 3, AnnealFrom: 0.85, AnnealFactor: 0.3, EnvWeight: 0.25, DirectPerAgent: 0.25},
		GRPO: GRPOSettings{Steps: 2, PromptsPerStep: 4, Group: 5, MicroBatch: 20, LR: 1e-4, KLCoef: 0.001, Temperature: 1,
			Rho: 0.25, Gamma: 0.005, Eta: 0.5, CheckpointEvery: 1},
		Eval:     EvalSettings{Questions: 0, Batch: 64},
		Variants: DemoVariants(),
	}
}

// quickWorld is the quick preset's world: the encyclopedia's default
// entity counts with the demo's 2,000-token vocabulary and 5,000 training
// questions (its single-hop candidates run out near 5,500).
func quickWorld(seed uint64) world.Config {
	w := world.DefaultConfig(seed)
	w.VocabSize = 2000
	w.Train, w.APSCalib, w.ACICalib, w.Test = 5000, 100, 60, 110
	return w
}

// DefaultConfig is `make demo`: a warm start that leaves GRPO a
// behavioural gap to close, and GRPO for CAS and −ACI (−APS is a row of
// `cas ablate`). 35% of the warm start's demonstrations answer from memory
// (WarmSettings.NoSearch); the policy learns a probability below one half
// of searching at the decision token, the same for every question, so
// greedy decoding never searches. GRPO, from reward alone, raises it past
// one half on training prompts and on unseen entities alike, and the agent
// then searches, and chains the second search, on nearly every test
// question. Measured (`cas ablate --seeds 1,2,3`, 2026-12-02): the warm
// starts searched on none of the test questions (EM 0.002–0.006), CAS
// after 40 steps on 98.6–99.8% of them (EM 0.128, 0.136, 0.158).
// At 30% the seed-3 warm start of the first three-seed ablation
// already searched on 99.6% of the test questions (its decision had landed
// above one half), leaving GRPO nothing to learn there.
//
// GRPO samples at temperature 0.7, not the paper's 1: at 1 the tiny
// policy's sampled answers after a search were right on 12–26% of the
// searching rollouts by quarter of a 24-step run and the share of rollouts
// that search moved 0.40 → 0.58; at 0.7 they were right on 18–39% and the
// share moved 0.31 → 0.79 (seed 1, 2026-12-02, no_search 0.3, from the
// same warm start). GRPO's prompts are the warm start's training
// questions: on a GRPO split of unseen entities (world.Config.GRPO) the
// sampled answers after a search were right on none of ≈ 150 searching
// rollouts at temperatures 0.6, 0.8 and 1, which leaves GRPO no reward to
// learn from. docs/demo-history.md has these runs.
func DefaultConfig(seed uint64) Config {
	return Config{
		Preset: "default", Seed: seed, World: demoWorld(seed, 300, 150, 500), Model: tinyModel(), APS: defaultAPS(),
		Warm: WarmSettings{Steps: 2400, Batch: 16, LR: 3e-3, Warmup: 30, Chunks: 12, AnnealFrom: 0.85, AnnealFactor: 0.3, EnvWeight: 0.25, DirectPerAgent: 0.25,
			NoSearch: 0.35},
		GRPO: GRPOSettings{Steps: 40, PromptsPerStep: 8, Group: 5, MicroBatch: 20, LR: 5e-4, KLCoef: 0.001, Temperature: 0.7,
			Rho: 0.25, Gamma: 0.005, Eta: 0.5, CheckpointEvery: 4},
		Eval:     EvalSettings{Questions: 0, Batch: 64},
		Variants: DemoVariants()[:2],
	}
}

// TinyConfig is the tests' preset of the whole pipeline, seconds per
// run: the small world with 200 training and 12 test questions, a 20-step
// warm start and two GRPO steps of 2 prompts × 2 for CAS and −ACI. Its
// numbers mean nothing; it exercises every stage, the resume and the
// ablation's tables.
func TinyConfig(seed uint64) Config {
	w := world.SmallConfig(seed)
	w.Train, w.APSCalib, w.ACICalib, w.Test = 200, 40, 8, 12
	return Config{
		Preset: "tiny", Seed: seed, World: w, Model: tinyModel(), APS: defaultAPS(),
		Warm: WarmSettings{Steps: 20, Batch: 8, LR: 3e-3, Warmup: 5, Chunks: 1, AnnealFrom: 1, AnnealFactor: 1, EnvWeight: 0.25, DirectPerAgent: 0.25},
		GRPO: GRPOSettings{Steps: 2, PromptsPerStep: 2, Group: 2, MicroBatch: 4, LR: 1e-4, KLCoef: 0.001, Temperature: 1,
			Rho: 0.25, Gamma: 0.005, Eta: 0.5, CheckpointEvery: 2},
		Eval:     EvalSettings{Questions: 0, Batch: 24},
		Variants: []Variant{{Name: VariantCAS, APS: true, ACI: true}, {Name: VariantNoACI, APS: true, ACI: false}},
	}
}

// PresetConfig returns the named preset.
func PresetConfig(name string, seed uint64) (Config, error) {
	switch name {
	case "quick":
		return QuickConfig(seed), nil
	case "default", "":
		return DefaultConfig(seed), nil
	case "tiny":
		return TinyConfig(seed), nil
	}
	return Config{}, fmt.Errorf("unknown demo preset %q (want quick, default or tiny)", name)
}

// grpoQuestions is the number of GRPO's prompts and their split: the
// world's GRPO split (entities the warm start never saw) where it has
// questions, else the warm start's own training questions.
func (c Config) grpoQuestions() (int, world.Split) {
	if c.World.GRPO > 0 {
		return c.World.GRPO, world.GRPO
	}
	return c.World.Train, world.Train
}

// Validate reports every unusable setting at once.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if err := c.World.Validate(); err != nil {
		errs = append(errs, err)
	}
	if err := c.Model.Validate(); err != nil {
		errs = append(errs, err)
	}
	a := c.APS
	if !(a.Alpha > 0 && a.Alpha < 1) {
		bad("aps.alpha %g outside (0, 1)", a.Alpha)
	}
	if !(a.Temperature > 0) || math.IsInf(a.Temperature, 0) {
		bad("aps.temperature %g must be positive and finite", a.Temperature)
	}
	if a.Candidates < 1 || a.CalibCandidates < a.Candidates {
		bad("aps: candidates %d must be >= 1 and <= calib_candidates %d", a.Candidates, a.CalibCandidates)
	}
	if a.MinDocs < 1 || a.MaxDocs < a.MinDocs || a.MaxDocs > a.Candidates {
		bad("aps: want 1 <= min_docs (%d) <= max_docs (%d) <= candidates (%d)", a.MinDocs, a.MaxDocs, a.Candidates)
	}
	if a.TopK < 1 || a.TopK > a.Candidates {
		bad("aps.topk %d outside [1, candidates %d]", a.TopK, a.Candidates)
	}
	w := c.Warm
	if w.Steps < 1 || w.Batch < 1 || w.Chunks < 1 || w.Chunks > w.Steps {
		bad("warm start: want steps, batch >= 1 and 1 <= chunks <= steps (got %d, %d, %d)", w.Steps, w.Batch, w.Chunks)
	}
	if !(w.AnnealFrom > 0 && w.AnnealFrom <= 1) || !(w.AnnealFactor > 0 && w.AnnealFactor <= 1) {
		bad("warm start: anneal_from %g and anneal_factor %g must lie in (0, 1]", w.AnnealFrom, w.AnnealFactor)
	}
	if !(w.NoSearch >= 0 && w.NoSearch < 1) || !(w.OneSearch >= 0 && w.OneSearch <= 1) {
		bad("warm start: no_search %g must lie in [0, 1), one_search %g in [0, 1]", w.NoSearch, w.OneSearch)
	}
	if !(w.LR > 0) || w.Warmup < 0 || w.DirectPerAgent < 0 || !(w.EnvWeight >= 0 && w.EnvWeight <= 1) {
		bad("warm start: lr %g must be > 0, warmup %d and direct_per_agent %g >= 0, env_weight %g in [0, 1]", w.LR, w.Warmup, w.DirectPerAgent, w.EnvWeight)
	}
	g := c.GRPO
	if g.Steps < 0 || g.PromptsPerStep < 1 || g.Group < 2 || g.MicroBatch < 1 || g.CheckpointEvery < 1 {
		bad("grpo: want steps >= 0, prompts_per_step >= 1, group >= 2, micro_batch >= 1, checkpoint_every >= 1 (got %d, %d, %d, %d, %d)",
			g.Steps, g.PromptsPerStep, g.Group, g.MicroBatch, g.CheckpointEvery)
	}
	if !(g.LR > 0) || g.KLCoef < 0 || !(g.Temperature > 0) {
		bad("grpo: lr %g and temperature %g must be > 0, kl_coef %g >= 0", g.LR, g.Temperature, g.KLCoef)
	}
	if n, split := c.grpoQuestions(); n < g.PromptsPerStep {
		bad("grpo.prompts_per_step %d exceeds the %d questions of the %s split", g.PromptsPerStep, n, split)
	}
	if c.Eval.Questions < 0 || c.Eval.Batch < 1 {
		bad("eval: questions %d must be >= 0, batch %d >= 1", c.Eval.Questions, c.Eval.Batch)
	}
	if c.World.APSCalib < 1 || c.World.ACICalib < 1 || c.World.Test < 1 || c.World.Train < 1 {
		bad("world: every split needs questions")
	}
	if len(c.Variants) == 0 {
		bad("variants: want at least one (the no-update reference run takes the first's settings)")
	}
	seen := map[string]bool{}
	for _, v := range c.Variants {
		if v.Name == "" || seen[v.Name] {
			bad("variant name %q empty or repeated", v.Name)
		}
		if v.Name == VariantNoUpdate || v.Frozen {
			bad("variant %q: the name %q and frozen are the demo's own reference run", v.Name, VariantNoUpdate)
		}
		seen[v.Name] = true
		if v.Rho < 0 || v.Rho >= 1 || v.APSAlpha < 0 || v.APSAlpha >= 1 {
			bad("variant %s: rho %g and aps_alpha %g must lie in [0, 1)", v.Name, v.Rho, v.APSAlpha)
		}
	}
	return errors.Join(errs...)
}

// rho is the variant's ACI target rate.
func (c Config) rho(v Variant) float64 {
	if v.Rho > 0 {
		return v.Rho
	}
	return c.GRPO.Rho
}

// apsAlpha is the variant's APS miscoverage level.
func (c Config) apsAlpha(v Variant) float64 {
	if v.APSAlpha > 0 {
		return v.APSAlpha
	}
	return c.APS.Alpha
}
