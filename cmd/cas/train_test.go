package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/cas-engine/cas/internal/sharedtest"
	"github.com/cas-engine/cas/qa"
	"github.com/cas-engine/cas/train"
	"github.com/cas-engine/cas/train/traintest"
)

// TestTrainCmdEndToEnd drives the trainer through the CLI on the golden tiny
// Qwen2 model with BM25 over the fixture passages: train two steps, resume
// to a third, generate from the checkpoint, plot, export prompts, bootstrap
// ACI and warm-start.
func TestTrainCmdEndToEnd(t *testing.T) {
	dir := t.TempDir()
	fx, err := traintest.Write(filepath.Join(dir, "fixture"), 384)
	if err != nil {
		t.Fatal(err)
	}
	model := filepath.Dir(sharedtest.Path(t, "golden", "qwen2-tiny", "config.json"))
	cfgPath := filepath.Join(dir, "run.yaml")
	cfg := fmt.Sprintf(`name: tiny
seed: 1
steps: 2
model: {path: %q, tokenizer: %q}
data: {train: [%q]}
retriever: {index: %q}
aps: {qhat_file: %q, candidates: 3}
rollout: {group_size: 2, max_turns: 2, max_turn_tokens: 10, max_obs_tokens: 20, max_response_tokens: 48}
grpo: {prompts_per_step: 2, mini_batch_prompts: 2, micro_batch: 4}
aci: {window: 30, calib_prompts: 3}
optim: {lr: 1.0e-3, warmup_ratio: 0}
checkpoint: {every: 1, keep: 2}
`, model, fx.Tokenizer, fx.Questions, fx.Index, fx.QHat)
	if err := os.WriteFile(cfgPath, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	run := filepath.Join(dir, "run")
	stdout, stderr, err := runCas(t, "train", "--config", cfgPath, "--out", run, "--no-progress")
	if err != nil || !strings.Contains(stdout, "trained 2 of 2 steps") {
		t.Fatalf("train: %v\n%s\n%s", err, stdout, stderr)
	}
	stdout, stderr, err = runCas(t, "train", "--resume", run, "--set", "steps=3", "--no-progress")
	if err != nil || !strings.Contains(stdout, "trained 3 of 3 steps") {
		t.Fatalf("resume: %v\n%s\n%s", err, stdout, stderr)
	}
	ms, err := train.ReadMetrics(filepath.Join(run, train.MetricsFile))
	if err != nil || len(ms) != 3 || ms[2].Step != 3 || ms[0].Run != "tiny" {
		t.Fatalf("metrics: %d lines (%v)", len(ms), err)
	}
	ck := filepath.Join(run, train.CheckpointsDir, train.CheckpointName(3))
	if _, stderr, err := runCas(t, "generate", "--model", ck, "--prompt", "what is", "--max-new-tokens", "4"); err != nil {
		t.Fatalf("generate from %s: %v\n%s", ck, err, stderr)
	}
	if _, err := os.Stat(filepath.Join(run, train.CheckpointsDir, train.CheckpointName(1))); !os.IsNotExist(err) {
		t.Errorf("checkpoint 1 not pruned (keep 2): %v", err)
	}

	stdout, stderr, err = runCas(t, "plot", run, "--smooth", "2")
	if err != nil || !strings.Contains(stdout, train.Figure2PNG) || !strings.Contains(stdout, train.RewardPNG) {
		t.Fatalf("plot: %v\n%s\n%s", err, stdout, stderr)
	}
	if _, err := os.Stat(filepath.Join(run, "plots", train.Figure2PNG)); err != nil {
		t.Error(err)
	}

	exported := filepath.Join(dir, "prompts.jsonl")
	if stdout, _, err := runCas(t, "train", "export-prompts", "--in", fx.Questions, "--out", exported, "--limit", "3"); err != nil || !strings.Contains(stdout, "3 prompts") {
		t.Fatalf("export-prompts: %v %s", err, stdout)
	}
	if ps, err := qa.Load(exported); err != nil || len(ps) != 3 || ps[0].Answers[0] != "Paris" {
		t.Fatalf("exported prompts: %v", err)
	}

	// --out under a file fails before the policy is loaded, naming the flag.
	blocked := filepath.Join(exported, "scores.jsonl")
	if _, stderr, err := runCas(t, "train", "bootstrap-aci", "--config", cfgPath, "--out", blocked); err == nil || !strings.Contains(err.Error(), "--out "+blocked) {
		t.Fatalf("bootstrap-aci --out under a file: err %v\n%s", err, stderr)
	}
	scores := filepath.Join(dir, "aci", "scores.jsonl") // aci/ does not exist yet
	if _, stderr, err := runCas(t, "train", "bootstrap-aci", "--config", cfgPath, "--out", scores); err != nil {
		t.Fatalf("bootstrap-aci: %v\n%s", err, stderr)
	}
	if s, err := train.ReadScores(scores); err != nil || len(s) != 3 {
		t.Fatalf("bootstrap scores %v (%v)", s, err)
	}

	data := filepath.Join(dir, "sft.jsonl")
	sft := `{"question": "what is the capital of France?", "response": "<think> I should search.</think><search> capital of France</search><information>Doc 1 (Title: Paris) Paris is the capital of France.</information><think> I should search.</think><answer> Paris</answer>"}` + "\n" +
		`{"question": "what is the capital of Italy?", "response": "<think> I should search.</think><answer> Rome</answer>"}` + "\n"
	if err := os.WriteFile(data, []byte(sft), 0o644); err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(dir, "warm")
	stdout, stderr, err = runCas(t, "train", "warm-start", "--model", model, "--tokenizer", fx.Tokenizer, "--data", data,
		"--out", ws, "--steps", "4", "--batch", "2", "--lr", "1e-2")
	if err != nil || !strings.Contains(stdout, "cross-entropy") {
		t.Fatalf("warm-start: %v\n%s\n%s", err, stdout, stderr)
	}
	if _, stderr, err := runCas(t, "generate", "--model", ws, "--prompt", "what is", "--max-new-tokens", "3"); err != nil {
		t.Fatalf("generate from the warm-started model: %v\n%s", err, stderr)
	}
}

func TestTrainCmdErrors(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"train"}, "either --config"},
		{[]string{"train", "--config", "x.yaml", "--resume", dir}, "either --config"},
		{[]string{"train", "--config", "x.yaml"}, "--out"},
		{[]string{"train", "--config", filepath.Join(dir, "missing.yaml"), "--out", dir}, "missing.yaml"},
		{[]string{"train", "--resume", dir}, "config.yaml"},
		{[]string{"plot", dir}, "metrics.jsonl"},
	}
	for _, c := range cases {
		_, _, err := runCas(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("cas %s: err = %v, want %q", strings.Join(c.args, " "), err, c.want)
		}
	}
}
