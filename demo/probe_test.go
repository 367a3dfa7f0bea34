package demo

import (
	"context"
	"os"
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
	}{{"mixed16", ex, 16}, {"mixed8", ex, 8}, {"single16", single, 16}, {"two16", two, 16}, {"single32", single, 32}} {
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
	cfg.Warm.Steps = 150
	cfg.Warm.Chunks = 3
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
