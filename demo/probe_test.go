package demo

import (
	"context"
	"fmt"
	"github.com/cas-engine/cas/agent"
	"github.com/cas-engine/cas/world"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/cas-engine/cas/model/qwen"
	"github.com/cas-engine/cas/train"
)

func cpuTime() float64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

func TestProbe(t *testing.T) {
	if os.Getenv("CAS_PROBE") == "" {
		t.Skip()
	}
	cfg := QuickConfig(1)
	if v := os.Getenv("CAS_PROBE_VOCAB"); v != "" {
		fmt.Sscan(v, &cfg.World.VocabSize)
	}
	if v := os.Getenv("CAS_PROBE_T"); v != "" {
		fmt.Sscan(v, &cfg.APS.Temperature)
	}
	out := t.TempDir()
	r, err := newRunner(cfg, out, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	d, err := r.buildWorld(ctx)
	if err != nil {
		t.Fatal(err)
	}
	aps, err := r.calibrateAPS(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	var rep WarmReport
	ex, err := r.warmExamples(ctx, d, float64(aps[0.2].QHat), &rep)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("kept %.2f, gold %.3f, mean tokens %.0f, prompt %.0f, qhat %.4f", rep.APSMeanKept, rep.APSGoldCovered, rep.MeanTokens, rep.PromptTokens, aps[0.2].QHat)
	hist := map[int]int{}
	for _, e := range ex {
		hist[(len(e.Tokens)+63)/64*64]++
	}
	t.Logf("length hist %v", hist)
	var single, two []train.Trajectory
	for _, e := range ex[:rep.AgentExamples] {
		if len(e.Tokens) > 256 {
			two = append(two, e)
		} else {
			single = append(single, e)
		}
	}
	t.Logf("single %d two %d", len(single), len(two))
	qc, _ := cfg.Model.QwenConfig(d.tok.VocabSize(), d.eos)
	m, _ := qwen.NewRandom(qc, r.backend, 1)
	oc := train.OptimConfig{LR: 3e-3, Beta1: 0.9, Beta2: 0.98, Epsilon: 1e-8, MaxGradNorm: 1, SkipNonFinite: true}
	for _, c := range []struct {
		name string
		ex   []train.Trajectory
		mb   int
	}{{"mixed16", ex, 16}, {"single16", single, 16}, {"two16", two, 16}} {
		tok := 0
		for _, e := range c.ex {
			tok += len(e.Tokens)
		}
		avg := float64(tok) / float64(len(c.ex))
		// warm-up compile
		if _, err := train.WarmStart(m, c.ex, train.WarmStartConfig{Optim: oc, Steps: 1, BatchSize: 32, MicroBatch: c.mb, Seed: 1}); err != nil {
			t.Fatal(err)
		}
		c0, w0 := cpuTime(), time.Now()
		steps := 4
		if _, err := train.WarmStart(m, c.ex, train.WarmStartConfig{Optim: oc, Steps: steps, BatchSize: 32, MicroBatch: c.mb, Seed: 2}); err != nil {
			t.Fatal(err)
		}
		cpu, wall := cpuTime()-c0, time.Since(w0).Seconds()
		n := avg * float64(steps*32)
		t.Logf("%s: avg %.0f tokens: %.0f tok/CPU-s, %.0f tok/wall-s", c.name, avg, n/cpu, n/wall)
	}
}

func TestProbeWarm(t *testing.T) {
	if os.Getenv("CAS_PROBE_WARM") == "" {
		t.Skip()
	}
	cfg := QuickConfig(1)
	cfg.Variants = nil
	cfg.GRPO.Steps = 0
	cfg.World.VocabSize = 2000
	cfg.Warm.Steps = 240
	cfg.Warm.Chunks = 4
	cfg.Warm.LR = 5e-3
	cfg.Warm.Warmup = 10
	out := os.Getenv("CAS_PROBE_WARM")
	c0 := cpuTime()
	res, err := Run(context.Background(), cfg, out, Options{Log: os.Stderr})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("cpu %.0f s wall %.0f s", cpuTime()-c0, res.Wall)
	l := res.Warm.Losses
	for i := 0; i < len(l); i += 10 {
		t.Logf("step %d CE %.3f", i, l[i])
	}
}

func TestProbeCurve(t *testing.T) {
	if os.Getenv("CAS_PROBE_CURVE") == "" {
		t.Skip()
	}
	cfg := QuickConfig(1)
	if os.Getenv("CAS_PROBE_BIG") != "" {
		cfg.World = world.DefaultConfig(1)
		cfg.World.Test = 110
	}
	cfg.World.VocabSize = 2000
	if v := os.Getenv("CAS_PROBE_VOCAB"); v != "" {
		fmt.Sscan(v, &cfg.World.VocabSize)
	}
	var lr float64 = 8e-3
	fmt.Sscan(os.Getenv("CAS_PROBE_CURVE"), &lr)
	out := t.TempDir()
	r, err := newRunner(cfg, out, Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	d, err := r.buildWorld(ctx)
	if err != nil {
		t.Fatal(err)
	}
	aps, err := r.calibrateAPS(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	var rep WarmReport
	ex, err := r.warmExamples(ctx, d, float64(aps[0.2].QHat), &rep)
	if err != nil {
		t.Fatal(err)
	}
	sets := splitByLength(ex, shortLen)
	qc, _ := cfg.Model.QwenConfig(d.tok.VocabSize(), d.eos)
	m, _ := qwen.NewRandom(qc, r.backend, 1)
	c0 := cpuTime()
	for c := 0; c < 8; c++ {
		oc := train.OptimConfig{LR: lr, WarmupSteps: 5, TotalSteps: 60, WeightDecay: 0.01, Beta1: 0.9, Beta2: 0.98, Epsilon: 1e-8, MaxGradNorm: 1, SkipNonFinite: true}
		res, err := train.WarmStart(m, sets[0], train.WarmStartConfig{Optim: oc, Steps: 60, BatchSize: 16, MicroBatch: 16, Seed: uint64(c)})
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Join(out, fmt.Sprintf("m%d", c))
		if err := SaveModelFolder(dir, m, d.tokPath); err != nil {
			t.Fatal(err)
		}
		e, err := r.runEval(ctx, d, evalSpec{name: "x", model: dir, mode: agent.ModeAgent, aps: r.apsPath(0.2)})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("after %d steps (cpu %.0f s): CE %.3f, EM %.3f (1-hop %.3f, 2-hop %.3f), valid %.2f", (c+1)*60, cpuTime()-c0, res.Losses[59], e.EM, e.EMSingle, e.EMTwoHop, e.FormatValid)
	}
}

func TestProbeCopy(t *testing.T) {
	if os.Getenv("CAS_PROBE_COPY") == "" {
		t.Skip()
	}
	be, _ := NewBackend()
	qc, _ := tinyModel().QwenConfig(2000, 1999)
	m, _ := qwen.NewRandom(qc, be, 1)
	rng := rand.New(rand.NewPCG(1, 2))
	var ex []train.Trajectory
	for range 2000 {
		n := 10 + rng.IntN(10)
		seq := make([]int, n)
		for i := range seq {
			seq[i] = 10 + rng.IntN(1500)
		}
		tr := train.Trajectory{Tokens: append([]int{1}, seq...), PromptLen: n + 1}
		tr.Tokens = append(tr.Tokens, 2)
		tr.Tokens = append(tr.Tokens, seq...)
		for range n + 1 {
			tr.LossMask = append(tr.LossMask, true)
		}
		ex = append(ex, tr)
	}
	for c := 0; c < 6; c++ {
		oc := train.OptimConfig{LR: 3e-3, WarmupSteps: 5, TotalSteps: 50, WeightDecay: 0.01, Beta1: 0.9, Beta2: 0.98, Epsilon: 1e-8, MaxGradNorm: 1, SkipNonFinite: true}
		res, err := train.WarmStart(m, ex, train.WarmStartConfig{Optim: oc, Steps: 50, BatchSize: 16, MicroBatch: 16, Seed: uint64(c)})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("after %d steps: CE %.3f", (c+1)*50, res.Losses[49])
	}
}
