package train

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/cas-engine/cas/agent"
	"github.com/cas-engine/cas/conformal"
	"github.com/cas-engine/cas/internal/wanterr"
)

func TestParseConfigDefaultsAndOverrides(t *testing.T) {
	yaml := `
name: demo
model:
  path: models/qwen
data:
  train: [data/train.parquet]
retriever:
  server: http://127.0.0.1:8000
aps:
  qhat_file: qhat.json
aci:
  rho: 0.4
rollout:
  retrieve_timeout: 30s
`
	cfg, err := ParseConfig([]byte(yaml), []string{
		"aci.rho=0.1", "grpo.kl_coef=0", "optim.lr=2e-6", "data.train=[a.jsonl, b.parquet]",
		"aps.enabled=false", "checkpoint.every=7", "new.section.key=1",
	})
	if err == nil || !strings.Contains(err.Error(), "new") {
		t.Fatalf("unknown key accepted: %v", err)
	}
	cfg, err = ParseConfig([]byte(yaml), []string{
		"aci.rho=0.1", "grpo.kl_coef=0", "optim.lr=2e-6", "data.train=[a.jsonl, b.parquet]",
		"aps.enabled=false", "checkpoint.every=7",
	})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name      string
		got, want any
	}{
		{"name", cfg.Name, "demo"},
		{"rho override", cfg.ACI.Rho, 0.1},
		{"kl override", cfg.GRPO.KLCoef, 0.0},
		{"lr override", cfg.Optim.LR, 2e-6},
		{"train list", strings.Join(cfg.Data.Train, ","), "a.jsonl,b.parquet"},
		{"aps off", cfg.APS.Enabled, false},
		{"every", cfg.Checkpoint.Every, 7},
		{"default eta", cfg.ACI.Eta, 0.5},
		{"default gamma", cfg.ACI.Gamma, 0.005},
		{"default window", cfg.ACI.Window, 2000},
		{"default rule", cfg.ACI.Rule, conformal.RuleSmoothed},
		{"default group", cfg.Rollout.GroupSize, 5},
		{"default prompts", cfg.GRPO.PromptsPerStep, 512},
		{"default mini-batch", cfg.GRPO.MiniBatchPrompts, 256},
		{"default clip", cfg.GRPO.ClipLow, 0.2},
		{"default dual clip", cfg.GRPO.DualClip, 3.0},
		{"default warmup", cfg.Optim.WarmupRatio, 0.285},
		{"default topk", cfg.APS.TopK, 3},
		{"default candidates", cfg.APS.Candidates, 5},
		{"duration", cfg.Rollout.RetrieveTimeout, 30 * time.Second},
		{"default max response", cfg.Rollout.MaxResponseTokens, 3000},
	}
	for _, c := range cases {
		if c.got != c.want {
			t.Errorf("%s: got %v, want %v", c.name, c.got, c.want)
		}
	}
	cfg.ResolvePaths("/runs/x")
	if cfg.Model.Path != "/runs/x/models/qwen" || cfg.Data.Train[0] != "/runs/x/a.jsonl" || cfg.Retriever.Server != "http://127.0.0.1:8000" {
		t.Errorf("resolved paths: %q %q %q", cfg.Model.Path, cfg.Data.Train[0], cfg.Retriever.Server)
	}
	if err := cfg.Validate(); err != nil {
		t.Errorf("valid config rejected: %v", err)
	}
	// The schedule counts optimiser steps (2 per step): int(0.285·200) = 56.
	lc := cfg.learnerConfig(100)
	if lc.Optim.TotalSteps != 200 || lc.Optim.NumWarmupSteps() != 56 || !lc.Optim.SkipNonFinite || lc.ApplyACI != true {
		t.Errorf("learner config %+v", lc.Optim)
	}
}

func TestConfigValidateReportsEverything(t *testing.T) {
	cfg := DefaultConfig()
	cfg.GRPO.MiniBatchPrompts = 1000
	cfg.ACI.Rule = conformal.ACIRule(7)
	cfg.Rollout.MaxTurns = 0
	cfg.Checkpoint.DType = "int8"
	wanterr.CheckAll(t, "Validate", cfg.Validate(), []string{"model.path", "data.train", "retriever", "qhat_file", "mini_batch_prompts", "invalid rule", "max turns", "int8"})
}

// TestConfigBadNames: a misspelt setting name (an enum decoded by its
// UnmarshalText) is reported with its key and its file and line, or its
// --set flag.
func TestConfigBadNames(t *testing.T) {
	cases := []struct {
		yaml string
		sets []string
		want []string
	}{
		{"aci:\n  rho: 0.2\n  rule: bogus\n", nil, []string{"line 3", "aci.rule", "bogus"}},
		{"rollout:\n  turn_rule: sometimes\n", nil, []string{"line 2", "rollout.turn_rule", "sometimes"}},
		{"rollout:\n  answer_from: policyy\n", nil, []string{"rollout.answer_from", "policyy"}},
		{"", []string{"rollout.placement=assistant"}, []string{"--set rollout.placement=assistant", "assistant"}},
		{"", []string{"aci.quantile=median"}, []string{"--set aci.quantile=median", "median"}},
		{"", []string{"rollout.info_format=xml"}, []string{"--set rollout.info_format=xml", "xml"}},
		{"", []string{"aci.window_unit=days"}, []string{"--set aci.window_unit=days", "days"}},
	}
	for _, c := range cases {
		_, err := ParseConfig([]byte(c.yaml), c.sets)
		wanterr.CheckAll(t, fmt.Sprintf("%q %v", c.yaml, c.sets), err, c.want)
	}
	cfg, err := ParseConfig([]byte("rollout:\n  turn_rule: Code\n  answer_from: text\n"), []string{"aci.rule=EMA"})
	if err != nil || cfg.Rollout.TurnRule != agent.TurnsCode || cfg.Rollout.Reward.AnswerFrom != agent.AnswerFromText || cfg.ACI.Rule != conformal.RuleEMA {
		t.Errorf("names: %v %+v", err, cfg)
	}
}

func TestSetSyntaxErrors(t *testing.T) {
	for _, s := range []string{"noequals", "=1", "a..b=1", "aci.rho.x=1"} {
		if _, err := ParseConfig([]byte("aci: {rho: 0.2}\n"), []string{s}); err == nil {
			t.Errorf("--set %q accepted", s)
		}
	}
	if _, err := ParseConfig([]byte("- a\n- b\n"), nil); err == nil {
		t.Error("a YAML list accepted as a config")
	}
	if cfg, err := ParseConfig(nil, nil); err != nil || cfg.GRPO.PromptsPerStep != 512 {
		t.Errorf("empty file: %v", err)
	}
}

// TestShippedConfigs: every configs/*.yaml parses, validates and encodes
// its recipe (the paper's defaults, the model and the ablation it names).
func TestShippedConfigs(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("..", "configs", "*.yaml"))
	if err != nil || len(files) < 10 {
		t.Fatalf("configs: %v (%d files)", err, len(files))
	}
	seen := map[string]*Config{}
	for _, f := range files {
		cfg, err := LoadConfig(f, nil)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		seen[strings.TrimSuffix(filepath.Base(f), ".yaml")] = cfg
	}
	check := func(name string, ok func(c *Config) bool) {
		c := seen[name]
		if c == nil {
			t.Errorf("configs/%s.yaml missing", name)
			return
		}
		if !ok(c) {
			t.Errorf("configs/%s.yaml does not encode its recipe: %+v", name, *c)
		}
	}
	paper := func(c *Config) bool {
		return c.GRPO.PromptsPerStep == 512 && c.GRPO.MiniBatchPrompts == 256 && c.Rollout.GroupSize == 5 &&
			c.Optim.LR == 1e-6 && c.GRPO.KLCoef == 0.001 && c.ACI.Eta == 0.5 && c.ACI.Gamma == 0.005
	}
	check("qwen2.5-3b-instruct", func(c *Config) bool {
		return paper(c) && strings.Contains(c.Model.Path, "Qwen2.5-3B-Instruct") && c.APS.Enabled && c.ACI.Enabled && c.ACI.Rho == 0.25 && c.APS.Alpha == 0.2
	})
	check("qwen3-8b", func(c *Config) bool { return paper(c) && strings.Contains(c.Model.Path, "Qwen3-8B") })
	check("ablation-no-aps", func(c *Config) bool { return paper(c) && !c.APS.Enabled && c.APS.TopK == 3 && c.ACI.Enabled })
	check("ablation-no-aci", func(c *Config) bool { return paper(c) && c.APS.Enabled && !c.ACI.Enabled })
	for _, rho := range []string{"0.1", "0.25", "0.4"} {
		check("ablation-rho-"+rho, func(c *Config) bool { return paper(c) && fmtFloat(c.ACI.Rho) == rho })
	}
	for _, a := range []string{"0.05", "0.2", "0.35"} {
		check("ablation-aps-alpha-"+a, func(c *Config) bool {
			return paper(c) && fmtFloat(c.APS.Alpha) == a && strings.Contains(c.APS.QHatFile, a)
		})
	}
}

func fmtFloat(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }

func TestConfigSaveRoundTrip(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Model.Path, cfg.Data.Train, cfg.Retriever.Index, cfg.APS.QHatFile = "/m", []string{"/d.jsonl"}, "/ix", "/q.json"
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := cfg.Save(path, ""); err != nil {
		t.Fatal(err)
	}
	back, err := LoadConfig(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	b1, _ := os.ReadFile(path)
	if err := back.Save(path, ""); err != nil {
		t.Fatal(err)
	}
	b2, _ := os.ReadFile(path)
	if string(b1) != string(b2) {
		t.Errorf("config does not round-trip:\n%s\n---\n%s", b1, b2)
	}
}

// FuzzParseConfig: any YAML and --set string either parses into a config
// that validates without panicking, or is an error.
func FuzzParseConfig(f *testing.F) {
	f.Add("aci: {rho: 0.1}\n", "grpo.kl_coef=0")
	f.Add("model:\n  path: m\n", "data.train=[a, b]")
	f.Add("- 1\n", "x=1")
	f.Add("steps: -3\nrollout: {retrieve_timeout: 5s}\n", "aps=1")
	f.Add("base: x.yaml\n", "a.b.c=[")
	f.Fuzz(func(t *testing.T, yaml, set string) {
		cfg, err := ParseConfig([]byte(yaml), []string{set})
		if err != nil {
			return
		}
		_ = cfg.Validate()
		cfg.ResolvePaths("/r")
	})
}

// TestConfigKeyErrors: an unknown key names itself, its file and line (the
// file's own line, also under a base file), or the --set flag, and lists
// the keys known there.
func TestConfigKeyErrors(t *testing.T) {
	dir := t.TempDir()
	base := filepath.Join(dir, "base.yaml")
	child := filepath.Join(dir, "child.yaml")
	if err := os.WriteFile(base, []byte("name: b\nseed: 1\nsteps: 2\nretriever: {index: ix}\nmodel: {path: m}\ndata: {train: [a.jsonl]}\naps: {enabled: false}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(child, []byte("base: base.yaml\naci:\n  rho: 0.1\n  rhoo: 0.2\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path string
		sets []string
		want []string
	}{
		{child, nil, []string{child + ":4", "aci.rhoo", "rho,"}},
		{base, []string{"aci.rhoo=0.1"}, []string{"--set aci.rhoo=0.1", "unknown config key aci.rhoo", "gamma"}},
		{base, []string{"grpo.kl_coef.x=1"}, []string{"--set grpo.kl_coef.x=1", "grpo.kl_coef is not a section"}},
		{base, []string{"retriever.server=http://h:1"}, nil},
		{base, []string{"retriever.url=http://h:1", "retriever.index="}, nil},
	}
	for _, tc := range tests {
		_, err := LoadConfig(tc.path, tc.sets)
		if !wanterr.CheckAll(t, fmt.Sprintf("%s %v", tc.path, tc.sets), err, tc.want) && err != nil && strings.Contains(err.Error(), "unknown") {
			t.Errorf("%v: %v", tc.sets, err)
		}
	}
	cfg, err := LoadConfig(base, []string{"retriever.server=http://h:1", "retriever.index="})
	if err != nil || cfg.Retriever.Server != "http://h:1" {
		t.Errorf("old key retriever.server: %+v %v", cfg, err)
	}
}
