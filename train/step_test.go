package train

import (
	"errors"
	"math"
	"math/rand/v2"
	"path/filepath"
	"testing"

	"github.com/cas-engine/cas/agent"
	"github.com/cas-engine/cas/backend/backendtest"
	"github.com/cas-engine/cas/conformal"
	"github.com/cas-engine/cas/internal/sharedtest"
	"github.com/cas-engine/cas/model/qwen"
)

// tinyModel loads a golden tiny Qwen model (qwen2-tiny or qwen3-tiny).
func tinyModel(t testing.TB, name string) *qwen.Model {
	t.Helper()
	dir := filepath.Dir(sharedtest.Path(t, "golden", name, "config.json"))
	m, err := qwen.Load(dir, backendtest.Shared(t), qwen.LoadOptions{})
	if err != nil {
		t.Fatalf("load %s: %v", name, err)
	}
	return m
}

// synthTrajectories builds groups×g trajectories with random tokens: a
// prompt, a generated turn, a retrieved block (out of the loss), a final
// generated turn whose last tokens are the answer span; rewards vary within
// each group.
func synthTrajectories(seed uint64, vocab, groups, g int) []*agent.Trajectory {
	rng := rand.New(rand.NewPCG(seed, 7))
	var out []*agent.Trajectory
	for grp := range groups {
		promptLen := 4 + rng.IntN(6)
		prompt := make([]int, promptLen)
		for i := range prompt {
			prompt[i] = rng.IntN(vocab)
		}
		for k := range g {
			gen1, info, gen2 := 3+rng.IntN(5), 2+rng.IntN(6), 3+rng.IntN(5)
			tr := &agent.Trajectory{Question: grp, PromptLen: promptLen, IDs: append([]int(nil), prompt...), Mask: make([]uint8, promptLen)}
			for range gen1 + info + gen2 {
				tr.IDs = append(tr.IDs, rng.IntN(vocab))
			}
			for j := range gen1 + info + gen2 {
				m := uint8(0) // the retrieved block is out of the loss
				if j < gen1 || j >= gen1+info {
					m = 1
				}
				tr.Mask = append(tr.Mask, m)
			}
			n := gen1 + info + gen2
			tr.AnswerSpan = [2]int{n - 2, n}
			tr.Outcome.Reward = []float64{0, 0.1, 0.2, 1}[(grp+k)%4]
			tr.EM = tr.Outcome.Reward == 1
			tr.Outcome.Valid = tr.Outcome.Reward >= 0.2
			tr.Searches = []agent.SearchCall{{Kept: make([]string, 1+k%3)}}
			out = append(out, tr)
		}
	}
	return out
}

// weightValues copies one policy tensor by its Hugging Face name.
func weightValues(t testing.TB, m *qwen.Model, name string) []float32 {
	t.Helper()
	var out []float32
	err := m.ForEachWeight(func(n string, _ []int, v []float32) error {
		if n == name {
			out = append([]float32(nil), v...)
		}
		return nil
	})
	if err != nil || out == nil {
		t.Fatalf("weight %s: %v", name, err)
	}
	return out
}

func maxDiff(a, b []float32) float64 {
	d := 0.0
	for i := range a {
		d = math.Max(d, math.Abs(float64(a[i]-b[i])))
	}
	return d
}

func testLearnerConfig() LearnerConfig {
	cfg := DefaultLearnerConfig()
	cfg.Optim.LR = 1e-3
	cfg.Optim.WarmupRatio = 0
	cfg.MiniBatchGroups = 2
	cfg.MicroBatch = 3
	cfg.Loss.KLCoef = 0.01
	return cfg
}

// TestLearnerTwoSteps runs two GRPO+ACI steps on both tiny models: losses
// and norms finite, weights move, the reference does not, the ACI
// controller advances and its weights reach the loss.
func TestLearnerTwoSteps(t *testing.T) {
	for _, name := range []string{"qwen2-tiny", "qwen3-tiny"} {
		t.Run(name, func(t *testing.T) {
			policy, ref := tinyModel(t, name), tinyModel(t, name)
			aciCfg := conformal.DefaultACIConfig()
			aciCfg.Window = 64
			boot := make([]float64, 40)
			for i := range boot {
				boot[i] = 5 + 2*float64(i)/40 // NLLs of a near-uniform 384-token model ≈ 6
			}
			aci, err := conformal.NewACI(aciCfg, boot)
			if err != nil {
				t.Fatal(err)
			}
			l, err := NewLearner(policy, ref, aci, testLearnerConfig())
			if err != nil {
				t.Fatal(err)
			}
			const w = "model.layers.0.mlp.up_proj.weight"
			before, refBefore := weightValues(t, policy, w), weightValues(t, ref, w)
			for step := range 2 {
				trajs := synthTrajectories(uint64(step), policy.Config.VocabSize, 4, 3)
				res, err := l.Step(trajs)
				if err != nil {
					t.Fatalf("step %d: %v", step, err)
				}
				for _, v := range []float64{res.Loss, res.PG, res.KL, res.GradNorm, res.ClipFrac, res.ApproxKL} {
					if !isFinite(v) {
						t.Fatalf("step %d: non-finite result %+v", step, res)
					}
				}
				if res.OptimizerSteps != 2 {
					t.Errorf("step %d: %d optimiser steps, want 2 (4 prompts, mini-batches of 2)", step, res.OptimizerSteps)
				}
				if res.GradNorm <= 0 || math.Abs(res.LR-1e-3) > 1e-9 {
					t.Errorf("step %d: grad norm %g, lr %g", step, res.GradNorm, res.LR)
				}
				if res.KL < 0 || (step > 0 && res.KL == 0) {
					t.Errorf("step %d: k3 KL %g (≥ 0, and > 0 once the policy moved)", step, res.KL)
				}
				if !res.HasACI || res.ACI.T != step+1 {
					t.Errorf("step %d: ACI step %+v", step, res.ACI)
				}
				lowConf := 0
				for i, om := range res.Omega {
					if om != 1 {
						lowConf++
						if om != aciCfg.Eta || res.Scores[i] <= res.ACI.QHat {
							t.Errorf("ω %g for score %g, q %g", om, res.Scores[i], res.ACI.QHat)
						}
					}
				}
				if got := float64(lowConf) / float64(len(res.Omega)); got != res.LowConfidence {
					t.Errorf("low-confidence ratio %g, want %g", res.LowConfidence, got)
				}
			}
			if aci.T() != 2 || len(aci.Window()) != 40+2*12 {
				t.Errorf("ACI after two steps: t=%d window=%d", aci.T(), len(aci.Window()))
			}
			if d := maxDiff(before, weightValues(t, policy, w)); d == 0 {
				t.Error("policy weights did not change")
			}
			if d := maxDiff(refBefore, weightValues(t, ref, w)); d != 0 {
				t.Errorf("reference weights changed by %g", d)
			}
		})
	}
}

// TestGradientAccumulationExact: micro-batches of 1 and of the whole batch
// give the same mini-batch loss and gradient norm (the micro-batch losses
// are divided by the mini-batch's token count, so they add up exactly).
func TestGradientAccumulationExact(t *testing.T) {
	trajs := synthTrajectories(9, 384, 2, 3)
	var res [2]*StepResult
	for k, micro := range []int{1, 6} {
		cfg := testLearnerConfig()
		cfg.MicroBatch, cfg.MiniBatchGroups = micro, 0
		l, err := NewLearner(tinyModel(t, "qwen3-tiny"), tinyModel(t, "qwen3-tiny"), nil, cfg)
		if err != nil {
			t.Fatal(err)
		}
		if res[k], err = l.Step(trajs); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		name string
		a, b float64
	}{{"loss", res[0].Loss, res[1].Loss}, {"pg", res[0].PG, res[1].PG}, {"grad norm", res[0].GradNorm, res[1].GradNorm}} {
		if math.Abs(c.a-c.b) > 1e-5*math.Max(1e-3, math.Abs(c.b)) {
			t.Errorf("%s: micro-batch 1 gives %.9g, micro-batch 6 gives %.9g", c.name, c.a, c.b)
		}
	}
	if res[0].GradNorm == 0 {
		t.Error("zero gradient: the test exercises nothing")
	}
}

func TestLearnerRejectsBadInput(t *testing.T) {
	m := tinyModel(t, "qwen2-tiny")
	if _, err := NewLearner(m, m, nil, testLearnerConfig()); err == nil {
		t.Error("the policy accepted as its own reference")
	}
	if _, err := NewLearner(m, nil, nil, testLearnerConfig()); err == nil {
		t.Error("a KL without a reference accepted")
	}
	cfg := testLearnerConfig()
	cfg.Loss.KLCoef = 0
	cfg.RecomputeOldLogProbs = false
	l, err := NewLearner(m, nil, nil, cfg)
	if err != nil {
		t.Fatal(err)
	}
	good := func() []*agent.Trajectory { return synthTrajectories(1, 384, 1, 2) }
	cases := map[string]func([]*agent.Trajectory){
		"mask length":  func(tr []*agent.Trajectory) { tr[0].Mask = tr[0].Mask[1:] },
		"old logprobs": func(tr []*agent.Trajectory) { tr[1].LogProbs = nil },
		"token id":     func(tr []*agent.Trajectory) { tr[0].IDs[0] = -1 },
		"reward":       func(tr []*agent.Trajectory) { tr[0].Outcome.Reward = math.Inf(1) },
		"short tokens": func(tr []*agent.Trajectory) { tr[0].IDs = tr[0].IDs[:tr[0].PromptLen-1] },
	}
	for name, mutate := range cases {
		tr := good()
		for i := range tr {
			tr[i].LogProbs = make([]float32, len(tr[i].IDs))
		}
		mutate(tr)
		if _, err := l.Step(tr); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	// A response cut to nothing (the prompt filled the context) is a valid
	// member of its group: no loss tokens, score EmptyNLL.
	empty := good()
	for i := range empty {
		empty[i].LogProbs = make([]float32, len(empty[i].IDs))
	}
	empty[0].IDs, empty[0].Mask, empty[0].LogProbs = empty[0].IDs[:empty[0].PromptLen], empty[0].Mask[:empty[0].PromptLen], empty[0].LogProbs[:empty[0].PromptLen]
	if res, err := l.Step(empty); err != nil {
		t.Errorf("empty response rejected: %v", err)
	} else if res.Scores[0] != conformal.EmptyNLL {
		t.Errorf("empty response scores %g, want %g", res.Scores[0], conformal.EmptyNLL)
	}
	// A NaN old log-prob inside the loss mask: ErrNonFinite, no update.
	const w = "model.layers.0.mlp.down_proj.weight"
	before := weightValues(t, m, w)
	tr := good()
	for i := range tr {
		tr[i].LogProbs = make([]float32, len(tr[i].IDs))
	}
	tr[1].LogProbs[tr[1].PromptLen] = float32(math.NaN())
	if _, err := l.Step(tr); !errors.Is(err, ErrNonFinite) {
		t.Fatalf("NaN step: err = %v, want ErrNonFinite", err)
	}
	if d := maxDiff(before, weightValues(t, m, w)); d != 0 {
		t.Errorf("the NaN step changed the weights by %g", d)
	}
}

// BenchmarkLearnerStep times one GRPO+ACI update (old and reference
// scoring, two mini-batches of micro-batches, two AdamW steps) of 12
// trajectories on the tiny Qwen3 model; graphs are compiled before the
// timer starts. It reports policy tokens per second.
func BenchmarkLearnerStep(b *testing.B) {
	cfg := testLearnerConfig()
	l, err := NewLearner(tinyModel(b, "qwen3-tiny"), tinyModel(b, "qwen3-tiny"), nil, cfg)
	if err != nil {
		b.Fatal(err)
	}
	trajs := synthTrajectories(1, 384, 4, 3)
	if _, err := l.Step(trajs); err != nil {
		b.Fatal(err)
	}
	tokens := 0
	for i := range trajs {
		tokens += trajs[i].PolicyTokens()
	}
	b.ResetTimer()
	for range b.N {
		if _, err := l.Step(trajs); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(tokens*b.N)/b.Elapsed().Seconds(), "tokens/s")
}

// sequenceLogProbs scores trajectories with the policy and returns, per
// trajectory, the sum of the log-probs of its loss-mask tokens.
func sequenceLogProbs(t testing.TB, m *qwen.Model, trajs []*agent.Trajectory) []float64 {
	t.Helper()
	idx := make([]int, len(trajs))
	for i := range idx {
		idx[i] = i
	}
	p := packRows(trajs, idx, len(trajs))
	lp, _, err := m.Score(p.ids, p.attn, p.respMaskI, p.rows, p.seqLen, qwen.ScoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	out := make([]float64, len(trajs))
	for i, tr := range trajs {
		for j, v := range p.responseOf(lp, i, tr) {
			if tr.ResponseMask()[j] == 1 {
				out[i] += float64(v)
			}
		}
	}
	return out
}

// TestLearnerStepFollowsAdvantage checks the direction of a GRPO update,
// which no other test pins: after one step on fixed trajectories the
// policy gives more log-probability to the trajectories with positive
// advantage and less to those with negative advantage (Σ_i A_i·Δlog π(τ_i)
// > 0, and the token-mean surrogate of A·r rises above its value at r = 1),
// and reversing the rewards reverses the changes. A sign error in the
// advantages, the surrogate or the optimiser's update fails it.
func TestLearnerStepFollowsAdvantage(t *testing.T) {
	var deltas [2][]float64
	for k, flip := range []bool{false, true} {
		policy := tinyModel(t, "qwen3-tiny")
		cfg := testLearnerConfig()
		cfg.Loss.KLCoef = 0
		cfg.Optim.LR = 1e-4
		cfg.MiniBatchGroups = 0
		l, err := NewLearner(policy, nil, nil, cfg)
		if err != nil {
			t.Fatal(err)
		}
		trajs := synthTrajectories(5, policy.Config.VocabSize, 4, 4)
		if flip {
			for _, tr := range trajs {
				tr.Outcome.Reward = 1 - tr.Outcome.Reward
			}
		}
		before := sequenceLogProbs(t, policy, trajs)
		res, err := l.Step(trajs)
		if err != nil {
			t.Fatal(err)
		}
		after := sequenceLogProbs(t, policy, trajs)
		var dot, norm float64
		deltas[k] = make([]float64, len(trajs))
		for i := range trajs {
			deltas[k][i] = after[i] - before[i]
			dot += res.Advantages[i] * deltas[k][i]
			norm += math.Abs(deltas[k][i])
		}
		t.Logf("flip %v: Σ A·Δlog π = %.4g, Σ|Δlog π| = %.4g", flip, dot, norm)
		if !(dot > 0.2*norm) {
			t.Errorf("flip %v: Σ A·Δlog π = %.4g against Σ|Δlog π| = %.4g: the update does not follow the advantages (A %v, Δ %v)",
				flip, dot, norm, res.Advantages, deltas[k])
		}
	}
	agree := 0
	for i := range deltas[0] {
		if (deltas[0][i] > 0) == (deltas[1][i] > 0) {
			agree++
		}
	}
	if agree > len(deltas[0])/4 {
		t.Errorf("reversed rewards moved %d of %d trajectories the same way", agree, len(deltas[0]))
	}
}

// TestMicroBatchesByLength: micro-batches hold trajectories of similar
// length, so one long response no longer pads a whole micro-batch of short
// ones to its bucket (the padded positions the scoring and update graphs
// process drop from 4 × 1024 to 1024 + 3 × 64 here).
func TestMicroBatchesByLength(t *testing.T) {
	l := &Learner{cfg: LearnerConfig{MicroBatch: 2}}
	var trajs []*agent.Trajectory
	for i := range 8 {
		n := 40
		if i%4 == 0 {
			n = 700 // a babbling response: bucket 1024
		}
		trajs = append(trajs, &agent.Trajectory{Question: i / 2, IDs: make([]int, n), Mask: make([]uint8, n)})
	}
	padded := 0
	seen := map[int]bool{}
	for _, idx := range l.microBatches(trajs) {
		padded += packRows(trajs, idx, 2).seqLen * 2
		for _, i := range idx {
			seen[i] = true
		}
	}
	if len(seen) != len(trajs) {
		t.Fatalf("micro-batches cover %d of %d trajectories", len(seen), len(trajs))
	}
	if want := 1024*2 + 3*64*2; padded != want {
		t.Errorf("micro-batches pad to %d positions, want %d", padded, want)
	}
}
