package train

import (
	"bytes"
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/cas-engine/cas/agent"
	"github.com/cas-engine/cas/backend/backendtest"
	"github.com/cas-engine/cas/internal/sharedtest"
	"github.com/cas-engine/cas/internal/testfile"
	"github.com/cas-engine/cas/model/qwen"
	"github.com/cas-engine/cas/model/tokenizer"
	"github.com/cas-engine/cas/search"
	"github.com/cas-engine/cas/train/traintest"
)

// runFixture is a tiny but complete run: the golden qwen2-tiny policy, the
// fixture tokenizer, BM25 over six passages, APS, ACI with a computed
// bootstrap.
type runFixture struct {
	fx        traintest.Fixture
	retriever search.ClosableRetriever
}

func newRunFixture(t *testing.T) *runFixture {
	t.Helper()
	fx, err := traintest.Write(t.TempDir(), 384)
	if err != nil {
		t.Fatal(err)
	}
	r, _, err := search.OpenRetriever(fx.Index, search.OpenOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return &runFixture{fx: fx, retriever: r}
}

func (f *runFixture) config(t *testing.T) *Config {
	t.Helper()
	cfg := DefaultConfig()
	cfg.Seed = 3
	cfg.Steps = 3
	cfg.Model.Path = filepath.Dir(sharedtest.Path(t, "golden", "qwen2-tiny", "config.json"))
	cfg.Model.Tokenizer = f.fx.Tokenizer
	cfg.Data.Train = []string{f.fx.Questions}
	cfg.Retriever.Index = f.fx.Index
	cfg.APS.QHatFile = f.fx.QHat
	cfg.APS.Candidates = 3
	cfg.Rollout.GroupSize = 3
	cfg.Rollout.MaxTurns = 2
	cfg.Rollout.MaxTurnTokens = 12
	cfg.Rollout.MaxObsTokens = 24
	cfg.Rollout.MaxResponseTokens = 64
	cfg.GRPO.PromptsPerStep = 2
	cfg.Rollout.BatchPrompts = 1
	cfg.GRPO.MiniBatchPrompts = 1
	cfg.GRPO.MicroBatch = 3
	cfg.GRPO.KLCoef = 0.01
	cfg.ACI.Window = 40
	cfg.ACI.CalibPrompts = 4
	cfg.Optim.LR = 1e-3
	cfg.Optim.WarmupRatio = 0.5
	cfg.Checkpoint.Every = 1
	cfg.Checkpoint.Keep = 0
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	return &cfg
}

func (f *runFixture) options(t testing.TB) RunOptions {
	return RunOptions{Backend: backendtest.Shared(t), Retriever: f.retriever}
}

// TestRunResumeMatchesUninterrupted is the trainer's end-to-end test: three
// GRPO+ACI steps with real rollouts (BM25 + APS) on the tiny Qwen2 model.
// Losses are finite, the weights move, the ACI state advances, every
// checkpoint is a Hugging Face folder that qwen.Load (the loader of `cas
// generate`) reads back to the same weights and generates from, and a run
// stopped after step 2 and resumed from its checkpoint ends bit-identical
// to the uninterrupted run: same metrics (timing aside), weights, optimiser
// and ACI state.
func TestRunResumeMatchesUninterrupted(t *testing.T) {
	f := newRunFixture(t)
	cfg := f.config(t)
	root := t.TempDir()
	const w = "model.layers.1.self_attn.q_proj.weight"

	dirA := filepath.Join(root, "a")
	a, err := NewTrainer(cfg, dirA, f.options(t))
	if err != nil {
		t.Fatal(err)
	}
	initial := weightValues(t, a.Policy(), w)
	if err := a.Run(context.Background()); err != nil {
		t.Fatal(err)
	}

	dirB := filepath.Join(root, "b")
	optsB := f.options(t)
	optsB.StopAfter = 2
	b, err := NewTrainer(cfg, dirB, optsB)
	if err != nil {
		t.Fatal(err)
	}
	if err := b.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if b.Step() != 2 {
		t.Fatalf("stopped run at step %d, want 2", b.Step())
	}
	if _, err := NewTrainer(cfg, dirB, f.options(t)); err == nil {
		t.Fatal("a second fresh run in the same folder was accepted")
	}
	b2, err := ResumeTrainer(dirB, nil, f.options(t))
	if err != nil {
		t.Fatal(err)
	}
	if b2.Step() != 2 {
		t.Fatalf("resumed at step %d, want 2", b2.Step())
	}
	if err := b2.Run(context.Background()); err != nil {
		t.Fatal(err)
	}

	ma, err := ReadMetrics(filepath.Join(dirA, MetricsFile))
	if err != nil {
		t.Fatal(err)
	}
	mb, err := ReadMetrics(filepath.Join(dirB, MetricsFile))
	if err != nil {
		t.Fatal(err)
	}
	if len(ma) != 3 || len(mb) != 3 {
		t.Fatalf("metrics lines: %d and %d, want 3", len(ma), len(mb))
	}
	for i := range ma {
		m := ma[i]
		t.Logf("step %d: reward %.3f em %.2f valid %.2f searches %.2f docs %.2f α %.4f q %.3f low %.2f loss %.4g kl %.3g clip %.3f |g| %.3f lr %.2g",
			m.Step, m.Reward, m.EM, m.FormatValid, m.SearchCalls, m.DocsPerSearch, m.Alpha, float64(m.QHat), m.LowConfidence, m.Loss, m.KL, m.ClipFrac, m.GradNorm, m.LR)
		if m.Step != i+1 || m.Trajectories != 6 {
			t.Errorf("line %d: step %d, %d trajectories", i, m.Step, m.Trajectories)
		}
		for _, v := range []float64{m.Loss, m.PGLoss, m.KL, m.GradNorm, m.Alpha, m.ScoreMean} {
			if !isFinite(v) {
				t.Errorf("step %d: non-finite metric in %+v", m.Step, m)
			}
		}
		if m.GradNorm <= 0 || m.ResponseLen <= 0 || m.PolicyTokens <= 0 || m.StepTime <= 0 {
			t.Errorf("step %d: implausible metrics %+v", m.Step, m)
		}
		mb[i].Run = m.Run
		if !reflect.DeepEqual(ma[i].WithoutTiming(), mb[i].WithoutTiming()) {
			t.Errorf("step %d differs after resume:\n uninterrupted %+v\n resumed       %+v", i+1, ma[i].WithoutTiming(), mb[i].WithoutTiming())
		}
	}
	// Warm-up: lr(s) = LR·s/W over W = int(0.5·6) = 3 optimiser steps, two
	// per training step; the metric is the step's last.
	if ma[0].LR != float64(float32(1e-3/3)) || ma[2].LR != float64(float32(1e-3)) {
		t.Errorf("learning rates %g, %g, %g", ma[0].LR, ma[1].LR, ma[2].LR)
	}
	ckA, err := LatestCheckpoint(dirA)
	if err != nil {
		t.Fatal(err)
	}
	aci, err := ReadACIState(ckA)
	if err != nil || aci == nil {
		t.Fatalf("ACI state: %v", err)
	}
	if aci.T() != 3 || len(aci.Window()) != min(40, 4+3*6) {
		t.Errorf("ACI after 3 steps: t=%d, window %d", aci.T(), len(aci.Window()))
	}
	ckB, err := LatestCheckpoint(dirB)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"model.safetensors", OptimizerFile, ACIStateFile} {
		if !bytes.Equal(testfile.Read(t, filepath.Join(ckA, name)), testfile.Read(t, filepath.Join(ckB, name))) {
			t.Errorf("%s differs between the uninterrupted and the resumed run", name)
		}
	}
	for _, name := range []string{"config.json", "tokenizer.json"} {
		if _, err := os.Stat(filepath.Join(ckA, name)); err != nil {
			t.Errorf("checkpoint lacks %s", name)
		}
	}
	loaded, err := qwen.Load(ckA, backendtest.Shared(t), qwen.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	final := weightValues(t, a.Policy(), w)
	if d := maxDiff(final, weightValues(t, loaded, w)); d != 0 {
		t.Errorf("reloaded checkpoint differs from the policy by %g", d)
	}
	if d := maxDiff(initial, final); d == 0 {
		t.Error("three steps did not change the policy")
	}
	tok, err := tokenizer.Load(filepath.Join(ckA, "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := loaded.Generate([][]int{tok.Encode("<|im_start|>user\nwhat is the capital of France?")}, qwen.GenerateOptions{MaxNewTokens: 5}, 0)
	if err != nil || len(res[0].IDs) == 0 {
		t.Fatalf("generate from the checkpoint: %v", err)
	}
	steps, err := listCheckpoints(filepath.Join(dirA, CheckpointsDir))
	if err != nil || len(steps) != 3 {
		t.Errorf("checkpoints %v (%v), want steps 1–3", steps, err)
	}
}

// TestRunStopsOnNaN: a NaN in step 2's loss stops the run with an error
// naming the step and the last good checkpoint, which stays the latest and
// resumable; the offending update is not applied.
func TestRunStopsOnNaN(t *testing.T) {
	f := newRunFixture(t)
	cfg := f.config(t)
	cfg.GRPO.RecomputeOldLogProbs = false
	dir := filepath.Join(t.TempDir(), "run")
	tr, err := NewTrainer(cfg, dir, f.options(t))
	if err != nil {
		t.Fatal(err)
	}
	tr.beforeUpdate = func(step int, trajs []*agent.Trajectory) {
		if step != 2 {
			return
		}
		for j, m := range trajs[0].Mask {
			if m == 1 {
				trajs[0].LogProbs[j] = float32(math.NaN())
				return
			}
		}
	}
	err = tr.Run(context.Background())
	if !errors.Is(err, ErrNonFinite) || !strings.Contains(err.Error(), "step 2") || !strings.Contains(err.Error(), CheckpointName(1)) {
		t.Fatalf("err = %v, want a non-finite step-2 loss naming %s", err, CheckpointName(1))
	}
	t.Log(err)
	ck, err := LatestCheckpoint(dir)
	if err != nil || filepath.Base(ck) != CheckpointName(1) {
		t.Fatalf("latest checkpoint %s (%v), want step 1", ck, err)
	}
	saved, err := qwen.Load(ck, backendtest.Shared(t), qwen.LoadOptions{})
	if err != nil {
		t.Fatal(err)
	}
	const w = "model.embed_tokens.weight"
	if d := maxDiff(weightValues(t, saved, w), weightValues(t, tr.Policy(), w)); d != 0 {
		t.Errorf("the failed step changed the policy by %g", d)
	}
	ms, err := ReadMetrics(filepath.Join(dir, MetricsFile))
	if err != nil || len(ms) != 1 {
		t.Fatalf("metrics after the failure: %d lines (%v), want 1", len(ms), err)
	}
	if _, err := ResumeTrainer(dir, nil, f.options(t)); err != nil {
		t.Fatalf("resume after the failure: %v", err)
	}
}

// TestResumeWithoutCheckpointStartsOver: a run stopped before its first
// checkpoint resumes by starting over from its saved config and bootstrap.
func TestResumeWithoutCheckpointStartsOver(t *testing.T) {
	f := newRunFixture(t)
	cfg := f.config(t)
	cfg.Steps = 1
	dir := filepath.Join(t.TempDir(), "run")
	if _, err := NewTrainer(cfg, dir, f.options(t)); err != nil {
		t.Fatal(err)
	}
	tr, err := ResumeTrainer(dir, nil, f.options(t))
	if err != nil {
		t.Fatal(err)
	}
	if tr.Step() != 0 || tr.Config().ACI.Bootstrap != filepath.Join(dir, ACIBootstrapFile) {
		t.Fatalf("restarted at step %d with bootstrap %q", tr.Step(), tr.Config().ACI.Bootstrap)
	}
	if err := tr.Run(context.Background()); err != nil {
		t.Fatal(err)
	}
	if ms, err := ReadMetrics(filepath.Join(dir, MetricsFile)); err != nil || len(ms) != 1 {
		t.Fatalf("metrics: %d lines (%v)", len(ms), err)
	}
}

// TestRunFrozen: a frozen run samples the same first batch as the GRPO run
// it accompanies (same seed, same prompts, same rollouts), logs its
// rollouts, and leaves the weights as they were, where the GRPO run moves
// them.
func TestRunFrozen(t *testing.T) {
	f := newRunFixture(t)
	const w = "model.layers.1.self_attn.q_proj.weight"
	run := func(frozen bool) (before, after []float32, ms []StepMetrics) {
		cfg := f.config(t)
		cfg.Steps = 2
		cfg.GRPO.Frozen = frozen
		dir := filepath.Join(t.TempDir(), "run")
		tr, err := NewTrainer(cfg, dir, f.options(t))
		if err != nil {
			t.Fatal(err)
		}
		before = weightValues(t, tr.Policy(), w)
		if err := tr.Run(context.Background()); err != nil {
			t.Fatal(err)
		}
		ms, err = ReadMetrics(filepath.Join(dir, MetricsFile))
		if err != nil {
			t.Fatal(err)
		}
		return before, weightValues(t, tr.Policy(), w), ms
	}
	b0, b1, frozen := run(true)
	if !slices.Equal(b0, b1) {
		t.Error("a frozen run changed the policy's weights")
	}
	g0, g1, trained := run(false)
	if slices.Equal(g0, g1) {
		t.Error("the GRPO run left the weights as they were")
	}
	if len(frozen) != 2 || len(trained) != 2 {
		t.Fatalf("%d and %d metric lines, want 2 each", len(frozen), len(trained))
	}
	f1, t1 := frozen[0].WithoutTiming(), trained[0].WithoutTiming()
	if f1.Trajectories != 6 || f1.Reward != t1.Reward || f1.EM != t1.EM || f1.ResponseLen != t1.ResponseLen || f1.PolicyTokens != t1.PolicyTokens {
		t.Errorf("step 1 rollouts differ: frozen %+v, trained %+v", f1, t1)
	}
	if f1.Loss != 0 || f1.GradNorm != 0 || f1.Scores != nil || f1.ACIWeighted {
		t.Errorf("a frozen step reports an update: loss %g, grad norm %g, %d scores, ACI weighted %v", f1.Loss, f1.GradNorm, len(f1.Scores), f1.ACIWeighted)
	}
}
