package train

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"

	"github.com/cas-engine/cas/internal/atomicfile"
	"github.com/cas-engine/cas/internal/guard"
	"github.com/cas-engine/cas/internal/relpath"

	"gopkg.in/yaml.v3"

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

	Model      ModelConfig      `yaml:"model"`
	Data       DataConfig       `yaml:"data"`
	Retriever  RetrieverConfig  `yaml:"retriever"`
	APS        APSConfig        `yaml:"aps"`
	Rollout    RolloutConfig    `yaml:"rollout"`
	GRPO       GRPOConfig       `yaml:"grpo"`
	ACI        ACIConfig        `yaml:"aci"`
	Optim      OptimSection     `yaml:"optim"`
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

// RolloutConfig sets how trajectories are sampled.
type RolloutConfig struct {
	// GroupSize is G, the trajectories per prompt (5).
	GroupSize int `yaml:"group_size"`
	// BatchPrompts is the number of prompts rolled out together (their G
	// trajectories share one batched KV-cache session); a step's prompts go
	// in consecutive chunks of this size. 0 means all at once. It bounds
	// the rollout's memory, not the math.
	BatchPrompts int     `yaml:"batch_prompts"`
	Temperature  float64 `yaml:"temperature"`
	TopP         float64 `yaml:"top_p"`
	TopK         int     `yaml:"top_k"`
	// MaxTurns and TurnRule bound the generations. The paper's "a maximum
	// of 4 assistant turns" is read two ways (agent.TurnRule): "paper"
	// counts assistant–search rounds, so max_turns 4 lets 4 searches and a
	// final answer generation happen (5 generations, Search-R1's loop);
	// "code" counts generations, so max_turns 4 allows 4 generations and
	// executes at most 3 searches (the official CAS code).
	MaxTurns int    `yaml:"max_turns"`
	TurnRule string `yaml:"turn_rule"`
	// Placement is "system-user" (the code's) or "user" (Search-R1's).
	Placement string `yaml:"placement"`
	// InfoFormat is "code" or "search-r1".
	InfoFormat string `yaml:"info_format"`
	// AnswerFrom is where the reward reads the answer (and whether there is
	// one): "policy" (default), only the text the policy generated, or
	// "text", the last <answer> of the whole response, retrieved passages
	// and the invalid-action message included (the official code's
	// extract_solution).
	AnswerFrom        string `yaml:"answer_from"`
	MaxObsTokens      int    `yaml:"max_obs_tokens"`
	MaxTurnTokens     int    `yaml:"max_turn_tokens"`
	MaxPromptTokens   int    `yaml:"max_prompt_tokens"`
	MaxResponseTokens int    `yaml:"max_response_tokens"`
	// RetrieveAttempts and RetrieveTimeout bound retrieval retries.
	RetrieveAttempts int           `yaml:"retrieve_attempts"`
	RetrieveTimeout  time.Duration `yaml:"retrieve_timeout"`
}

// GRPOConfig sets the policy update.
type GRPOConfig struct {
	// PromptsPerStep is the number of prompts per training step (512).
	PromptsPerStep int `yaml:"prompts_per_step"`
	// MiniBatchPrompts is the number of prompts per optimiser step (256).
	MiniBatchPrompts int `yaml:"mini_batch_prompts"`
	// MicroBatch is the number of trajectories per forward/backward pass.
	MicroBatch int `yaml:"micro_batch"`
	// PPOEpochs is the number of passes over each step's batch (1).
	PPOEpochs   int     `yaml:"ppo_epochs"`
	ClipLow     float64 `yaml:"clip_low"`
	ClipHigh    float64 `yaml:"clip_high"`
	DualClip    float64 `yaml:"dual_clip"`
	KLCoef      float64 `yaml:"kl_coef"`
	EntropyCoef float64 `yaml:"entropy_coef"`
	// RecomputeOldLogProbs scores the trajectories with the policy before
	// the update (verl) instead of using the sampler's log-probs.
	RecomputeOldLogProbs bool `yaml:"recompute_old_logprobs"`
}

// ACIConfig sets the confidence weights (paper §3.3).
type ACIConfig struct {
	// Enabled applies ω to the loss; false is the −ACI ablation (the
	// controller still runs, so α_t, q_t and the low-confidence ratio are
	// logged, but every ω is 1).
	Enabled bool    `yaml:"enabled"`
	Rho     float64 `yaml:"rho"`
	Gamma   float64 `yaml:"gamma"`
	Eta     float64 `yaml:"eta"`
	Window  int     `yaml:"window"`
	// WindowUnit is what Window counts: "iterations" (the paper: every
	// score of the last Window steps) or "scores" (the official code's
	// deque of the last Window scores).
	WindowUnit string `yaml:"window_unit"`
	// Rule is "smoothed" (paper Eq. 7), "plain" (Eq. 4) or "ema" (the code).
	Rule string `yaml:"rule"`
	// Quantile is "conformal", "higher" or "linear" (the code's).
	Quantile string  `yaml:"quantile"`
	Decay    float64 `yaml:"decay"`
	Alpha1   float64 `yaml:"alpha1"`
	AlphaMin float64 `yaml:"alpha_min"`
	AlphaMax float64 `yaml:"alpha_max"`
	// Bootstrap is a JSONL file of scores ({"scores": [...]} per line, as
	// `cas train bootstrap-aci` writes) preloading the window; empty means
	// computing them at the start of the run from CalibPrompts prompts.
	Bootstrap string `yaml:"bootstrap"`
	// CalibData lists the files the calibration prompts are drawn from
	// (default: data.train); CalibPrompts is how many (150).
	CalibData    []string `yaml:"calib_data"`
	CalibPrompts int      `yaml:"calib_prompts"`
}

// OptimSection sets AdamW and its schedule.
type OptimSection struct {
	LR          float64 `yaml:"lr"`
	WarmupRatio float64 `yaml:"warmup_ratio"`
	WarmupSteps int     `yaml:"warmup_steps"`
	WeightDecay float64 `yaml:"weight_decay"`
	Beta1       float64 `yaml:"beta1"`
	Beta2       float64 `yaml:"beta2"`
	Epsilon     float64 `yaml:"epsilon"`
	MaxGradNorm float64 `yaml:"max_grad_norm"`
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
		Optim:      optimDefaults(),
		Checkpoint: CheckpointConfig{Every: 100, Keep: 2, DType: "f32"},
	}
}

func rolloutDefaults() RolloutConfig {
	a := agent.DefaultRolloutConfig()
	return RolloutConfig{
		GroupSize: 5, Temperature: a.Temperature, TopP: 1, TopK: 0,
		MaxTurns: a.MaxTurns, TurnRule: a.TurnRule.String(), Placement: a.Placement.String(), InfoFormat: a.Info.String(),
		AnswerFrom:   "policy",
		MaxObsTokens: a.MaxObsTokens, MaxTurnTokens: a.MaxTurnTokens,
		MaxPromptTokens: a.MaxPromptTokens, MaxResponseTokens: a.MaxResponseTokens,
		RetrieveAttempts: a.RetrieveAttempts, RetrieveTimeout: a.RetrieveTimeout,
	}
}

func grpoDefaults() GRPOConfig {
	l := DefaultLossConfig()
	return GRPOConfig{PromptsPerStep: 512, MiniBatchPrompts: 256, MicroBatch: 8, PPOEpochs: 1,
		ClipLow: l.ClipLow, ClipHigh: l.ClipHigh, DualClip: l.DualClip, KLCoef: l.KLCoef, EntropyCoef: l.EntropyCoef,
		RecomputeOldLogProbs: true}
}

func aciDefaults() ACIConfig {
	c := conformal.DefaultACIConfig()
	return ACIConfig{Enabled: true, Rho: c.Rho, Gamma: c.Gamma, Eta: c.Eta, Window: c.Window, WindowUnit: c.WindowUnit.String(),
		Rule: c.Rule.String(), Quantile: c.Quantile.String(), Decay: c.Decay, Alpha1: 0, // α₁ = ρ
		AlphaMin: c.AlphaMin, AlphaMax: c.AlphaMax, CalibPrompts: 150}
}

func optimDefaults() OptimSection {
	o := DefaultOptimConfig()
	return OptimSection{LR: o.LR, WarmupRatio: o.WarmupRatio, WeightDecay: o.WeightDecay,
		Beta1: o.Beta1, Beta2: o.Beta2, Epsilon: o.Epsilon, MaxGradNorm: o.MaxGradNorm}
}

// LoadConfig reads a YAML run file over DefaultConfig, applies the
// key=value overrides (dotted YAML paths, values in YAML syntax, e.g.
// aci.rho=0.1 or data.train=[a.jsonl,b.parquet]), resolves relative paths
// against the file's folder, and validates the result. Unknown keys are
// errors. A top-level "base: other.yaml" (relative to the file) is read
// first and overlaid key by key, so an ablation states only what it
// changes.
func LoadConfig(path string, sets []string) (*Config, error) {
	origin := map[*yaml.Node]string{}
	root, err := loadConfigNode(path, 0, origin)
	if err != nil {
		return nil, err
	}
	if err := checkKeys(root, reflect.TypeOf(Config{}), "", origin); err != nil {
		return nil, err
	}
	cfg, err := decodeConfig(root, sets)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", path, err)
	}
	cfg.ResolvePaths(filepath.Dir(path))
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("load %s: %w", path, err)
	}
	return cfg, nil
}

// ParseConfig decodes YAML over DefaultConfig and applies overrides; it does
// not follow "base", resolve paths nor validate.
func ParseConfig(raw []byte, sets []string) (*Config, error) {
	root, err := parseConfigNode(raw)
	if err != nil {
		return nil, err
	}
	if err := checkKeys(root, reflect.TypeOf(Config{}), "", nil); err != nil {
		return nil, err
	}
	return decodeConfig(root, sets)
}

// parseConfigNode parses YAML into its top-level mapping node.
func parseConfigNode(raw []byte) (*yaml.Node, error) {
	var doc yaml.Node
	// yaml.v3 is third-party: a panic on hostile input becomes an error.
	if err := guard.Run("YAML", func() error { return yaml.Unmarshal(raw, &doc) }); err != nil {
		return nil, err
	}
	if doc.Kind == 0 { // empty file
		return &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}, nil
	}
	if len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, errors.New("config: the top level must be a mapping")
	}
	return doc.Content[0], nil
}

// loadConfigNode reads a config file's mapping with its base files merged
// under it.
func loadConfigNode(path string, depth int, origin map[*yaml.Node]string) (*yaml.Node, error) {
	if depth > 8 {
		return nil, fmt.Errorf("load %s: base files nested more than 8 deep (a cycle?)", path)
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", path, err)
	}
	node, err := parseConfigNode(raw)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", path, err)
	}
	markOrigin(node, path, origin)
	for i := 0; i+1 < len(node.Content); i += 2 {
		if node.Content[i].Value != "base" {
			continue
		}
		base := node.Content[i+1].Value
		node.Content = append(node.Content[:i:i], node.Content[i+2:]...)
		if !filepath.IsAbs(base) {
			base = filepath.Join(filepath.Dir(path), base)
		}
		parent, err := loadConfigNode(base, depth+1, origin)
		if err != nil {
			return nil, fmt.Errorf("load %s: base: %w", path, err)
		}
		mergeMapping(parent, node)
		return parent, nil
	}
	return node, nil
}

// mergeMapping overlays src's keys onto dst, recursing into mappings present
// in both; other values (scalars, lists) are replaced.
func mergeMapping(dst, src *yaml.Node) {
	for i := 0; i+1 < len(src.Content); i += 2 {
		key, val := src.Content[i], src.Content[i+1]
		found := false
		for j := 0; j+1 < len(dst.Content); j += 2 {
			if dst.Content[j].Value != key.Value {
				continue
			}
			found = true
			if dst.Content[j+1].Kind == yaml.MappingNode && val.Kind == yaml.MappingNode {
				mergeMapping(dst.Content[j+1], val)
			} else {
				dst.Content[j+1] = val
			}
			break
		}
		if !found {
			dst.Content = append(dst.Content, key, val)
		}
	}
}

// decodeConfig applies overrides to a mapping node and decodes it over
// DefaultConfig, rejecting unknown keys.
func decodeConfig(root *yaml.Node, sets []string) (*Config, error) {
	for _, s := range sets {
		if err := applySet(root, s); err != nil {
			return nil, err
		}
	}
	b, err := yaml.Marshal(root)
	if err != nil {
		return nil, err
	}
	cfg := DefaultConfig()
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil && err != io.EOF {
		return nil, fmt.Errorf("config: %w", err)
	}
	if cfg.Model.LegacyChatFamily != "" {
		if cfg.Model.ChatFamily == "" {
			cfg.Model.ChatFamily = cfg.Model.LegacyChatFamily
		}
		cfg.Model.LegacyChatFamily = ""
	}
	if cfg.Retriever.LegacyServer != "" {
		if cfg.Retriever.Server == "" {
			cfg.Retriever.Server = cfg.Retriever.LegacyServer
		}
		cfg.Retriever.LegacyServer = ""
	}
	return &cfg, nil
}

// markOrigin records the file every node of a parsed file came from, so
// that an unknown key is reported with its own file and line even after
// base files are merged.
func markOrigin(n *yaml.Node, path string, origin map[*yaml.Node]string) {
	if origin == nil {
		return
	}
	origin[n] = path
	for _, c := range n.Content {
		markOrigin(c, path, origin)
	}
}

// yamlFields maps the YAML keys of a struct type to their field types.
func yamlFields(t reflect.Type) map[string]reflect.Type {
	fs := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		fs[name] = f.Type
	}
	return fs
}

// keyError names an unknown config key, the keys known there, and where the
// key came from (the file and line, or the --set flag).
func keyError(key, where string, t reflect.Type) error {
	known := slices.Sorted(maps.Keys(yamlFields(t)))
	return fmt.Errorf("%s: unknown config key %s (known here: %s)", where, key, strings.Join(known, ", "))
}

// checkKeys reports the first key of a mapping node that the struct type t
// does not have, recursing into nested sections.
func checkKeys(n *yaml.Node, t reflect.Type, prefix string, origin map[*yaml.Node]string) error {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind != yaml.MappingNode || t.Kind() != reflect.Struct {
		return nil
	}
	fs := yamlFields(t)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k := n.Content[i]
		key := prefix + k.Value
		ft, ok := fs[k.Value]
		if !ok && !(prefix == "" && k.Value == "base") {
			where := fmt.Sprintf("line %d", k.Line)
			if f, ok := origin[k]; ok {
				where = fmt.Sprintf("%s:%d", f, k.Line)
			}
			return keyError(key, where, t)
		}
		if ok {
			if err := checkKeys(n.Content[i+1], ft, key+".", origin); err != nil {
				return err
			}
		}
	}
	return nil
}

// checkSetKey checks a --set key's dotted path against the Config type.
func checkSetKey(set string, parts []string) error {
	t := reflect.TypeOf(Config{})
	for i, p := range parts {
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct {
			return fmt.Errorf("--set %s: %s is not a section", set, strings.Join(parts[:i], "."))
		}
		ft, ok := yamlFields(t)[p]
		if !ok {
			return keyError(strings.Join(parts[:i+1], "."), "--set "+set, t)
		}
		t = ft
	}
	return nil
}

// applySet sets a dotted key of a YAML mapping to a YAML value, creating
// intermediate mappings.
func applySet(root *yaml.Node, set string) error {
	key, val, ok := strings.Cut(set, "=")
	key = strings.TrimSpace(key)
	if !ok || key == "" {
		return fmt.Errorf("--set %q: want key=value", set)
	}
	var value yaml.Node
	if err := yaml.Unmarshal([]byte(val), &value); err != nil {
		return fmt.Errorf("--set %s: value: %w", key, err)
	}
	v := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}
	if len(value.Content) == 1 {
		v = value.Content[0]
	}
	parts := strings.Split(key, ".")
	if err := checkSetKey(set, parts); err != nil {
		return err
	}
	node := root
	for i, p := range parts {
		if p == "" {
			return fmt.Errorf("--set %s: empty path element", key)
		}
		if node.Kind != yaml.MappingNode {
			return fmt.Errorf("--set %s: %s is not a mapping", key, strings.Join(parts[:i], "."))
		}
		var child *yaml.Node
		for j := 0; j+1 < len(node.Content); j += 2 {
			if node.Content[j].Value == p {
				child = node.Content[j+1]
				if i == len(parts)-1 {
					node.Content[j+1] = v
				}
				break
			}
		}
		if i == len(parts)-1 {
			if child == nil {
				node.Content = append(node.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: p}, v)
			}
			return nil
		}
		if child == nil {
			child = &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
			node.Content = append(node.Content, &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: p}, child)
		}
		node = child
	}
	return nil
}

// filePaths lists every field of the config that names a file or folder.
func (c *Config) filePaths() []*string {
	ps := []*string{&c.Model.Path, &c.Model.Tokenizer, &c.Model.Reference, &c.Retriever.Index, &c.Retriever.Corpus,
		&c.APS.QHatFile, &c.ACI.Bootstrap}
	for i := range c.Data.Train {
		ps = append(ps, &c.Data.Train[i])
	}
	for i := range c.ACI.CalibData {
		ps = append(ps, &c.ACI.CalibData[i])
	}
	return ps
}

// ResolvePaths makes every relative path absolute against dir (the folder
// of the file the config was read from; see internal/relpath).
func (c *Config) ResolvePaths(dir string) {
	for _, p := range c.filePaths() {
		*p = relpath.Resolve(dir, *p)
		if a, err := relpath.Abs(*p); err == nil {
			*p = a
		}
	}
}

// AbsPaths makes every relative path absolute against the working
// directory (a config built in code, e.g. by the demo).
func (c *Config) AbsPaths() error {
	for _, p := range c.filePaths() {
		a, err := relpath.Abs(*p)
		if err != nil {
			return err
		}
		*p = a
	}
	return nil
}

// storedPaths returns a copy of c whose paths are written the way the one
// path rule says (internal/relpath): relative to dir when under root (""
// means dir), else absolute.
func (c *Config) storedPaths(dir, root string) (*Config, error) {
	s := *c
	s.Data.Train = slices.Clone(c.Data.Train)
	s.ACI.CalibData = slices.Clone(c.ACI.CalibData)
	for _, p := range s.filePaths() {
		v, err := relpath.Store(dir, root, *p)
		if err != nil {
			return nil, err
		}
		*p = v
	}
	return &s, nil
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
	if _, err := c.rolloutConfig(); err != nil {
		bad("%v", err)
	}
	if _, err := c.aciConfig(); err != nil {
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

// Save writes the config as YAML (atomically), its paths relative to the
// file's folder when they lie under root ("" means that folder), else
// absolute, so that LoadConfig reads them back whatever the working
// directory and a moved or copied run folder keeps working.
func (c *Config) Save(path, root string) error {
	s, err := c.storedPaths(filepath.Dir(path), root)
	if err != nil {
		return err
	}
	b, err := yaml.Marshal(s)
	if err != nil {
		return err
	}
	return writeFileAtomic(path, b)
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

// rolloutConfig builds the agent's rollout settings (APS is set by the
// caller once the calibration file is read).
func (c *Config) rolloutConfig() (agent.RolloutConfig, error) {
	r := agent.DefaultRolloutConfig()
	var err error
	var errs []error
	if r.TurnRule, err = agent.ParseTurnRule(c.Rollout.TurnRule); err != nil {
		errs = append(errs, err)
	}
	if r.Placement, err = agent.ParsePlacement(c.Rollout.Placement); err != nil {
		errs = append(errs, err)
	}
	if r.Info, err = agent.ParseInfoFormat(c.Rollout.InfoFormat); err != nil {
		errs = append(errs, err)
	}
	switch c.Rollout.AnswerFrom {
	case "policy", "":
	case "text":
		r.Reward.WholeText = true
	default:
		errs = append(errs, fmt.Errorf("rollout.answer_from %q: want policy or text", c.Rollout.AnswerFrom))
	}
	ro := c.Rollout
	r.ChatFamily = c.Model.ChatFamily
	r.MaxTurns = ro.MaxTurns
	r.Candidates, r.TopK = c.APS.Candidates, c.APS.TopK
	r.MaxObsTokens, r.MaxTurnTokens = ro.MaxObsTokens, ro.MaxTurnTokens
	r.MaxPromptTokens, r.MaxResponseTokens = ro.MaxPromptTokens, ro.MaxResponseTokens
	r.Temperature, r.TopP, r.SampleTopK = ro.Temperature, ro.TopP, ro.TopK
	r.RetrieveAttempts, r.RetrieveTimeout = ro.RetrieveAttempts, ro.RetrieveTimeout
	if err := errors.Join(errs...); err != nil {
		return r, err
	}
	if c.APS.Enabled {
		// Validate with a placeholder threshold; the real one comes from
		// the calibration file.
		probe := r
		probe.SetAPS(conformal.PaperAPS(), math.Inf(1))
		return r, probe.Validate()
	}
	return r, r.Validate()
}

// aciConfig builds the controller's settings.
func (c *Config) aciConfig() (conformal.ACIConfig, error) {
	a := c.ACI
	rule, err := conformal.ParseACIRule(a.Rule)
	if err != nil {
		return conformal.ACIConfig{}, err
	}
	q, err := conformal.ParseQuantileRule(a.Quantile)
	if err != nil {
		return conformal.ACIConfig{}, err
	}
	unit, err := conformal.ParseACIWindow(a.WindowUnit)
	if err != nil {
		return conformal.ACIConfig{}, fmt.Errorf("aci.window_unit: %w", err)
	}
	out := conformal.ACIConfig{Rho: a.Rho, Gamma: a.Gamma, Eta: a.Eta, Window: a.Window, WindowUnit: unit, Rule: rule, Quantile: q,
		Decay: a.Decay, Alpha1: a.Alpha1, AlphaMin: a.AlphaMin, AlphaMax: a.AlphaMax}
	return out, out.Validate()
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
	return LearnerConfig{
		Loss: LossConfig{ClipLow: g.ClipLow, ClipHigh: g.ClipHigh, DualClip: g.DualClip, KLCoef: g.KLCoef, EntropyCoef: g.EntropyCoef},
		Optim: OptimConfig{LR: o.LR, WarmupRatio: o.WarmupRatio, WarmupSteps: o.WarmupSteps * perStep,
			TotalSteps: max(1, totalSteps) * perStep, WeightDecay: o.WeightDecay, Beta1: o.Beta1, Beta2: o.Beta2,
			Epsilon: o.Epsilon, MaxGradNorm: o.MaxGradNorm, SkipNonFinite: true},
		MiniBatchGroups: g.MiniBatchPrompts, MicroBatch: g.MicroBatch, Epochs: g.PPOEpochs,
		RecomputeOldLogProbs: g.RecomputeOldLogProbs, Temperature: c.Rollout.Temperature, ApplyACI: c.ACI.Enabled,
	}
}

// writeFileAtomic writes b to path atomically and syncs its directory so the
// rename is durable.
func writeFileAtomic(path string, b []byte) error {
	if err := atomicfile.WriteFile(path, b); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

// syncDir fsyncs a directory so that renames into it are durable.
func syncDir(dir string) error { return atomicfile.SyncDir(dir) }

// rolloutSettings and aciSettings: temporary names for the golden test.
func (c *Config) rolloutSettings() (agent.RolloutConfig, error) { return c.rolloutConfig() }
func (c *Config) aciSettings() (conformal.ACIConfig, error)     { return c.aciConfig() }
