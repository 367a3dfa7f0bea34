package train

import (
	"math"
	"testing"
)

// TestSFTMatchesWarmStart: SFT's step computes the same
// masked cross-entropy as WarmStart on the same batch, and lowers it.
func TestSFTMatchesWarmStart(t *testing.T) {
	ex := synthTrajectories(3, 299, 3, 2)
	oc := OptimConfig{LR: 1e-2, Beta1: 0.9, Beta2: 0.98, Epsilon: 1e-8, MaxGradNorm: 1, SkipNonFinite: true}
	m1 := tinyModel(t, "qwen3-tiny")
	ws, err := WarmStart(m1, ex, WarmStartConfig{Optim: oc, Steps: 1, BatchSize: len(ex), Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	m2 := tinyModel(t, "qwen3-tiny")
	s, err := NewSFT(m2, oc, len(ex), 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	var first, last float64
	want := 0
	for _, e := range ex {
		want += e.PolicyTokens()
	}
	for i := range 30 {
		loss, _, policy, err := s.Step(ex, oc.LR)
		if err != nil {
			t.Fatal(err)
		}
		if policy != want {
			t.Fatalf("step %d: %d loss tokens, want %d", i, policy, want)
		}
		if i == 0 {
			first = loss
		}
		last = loss
	}
	if math.Abs(first-ws.Losses[0]) > 1e-4*math.Abs(first) {
		t.Errorf("cross-entropy %.6f, WarmStart %.6f", first, ws.Losses[0])
	}
	if !(last < first-1) {
		t.Errorf("cross-entropy %.3f → %.3f after 30 steps on one batch", first, last)
	}
	if err := s.Clear(); err != nil {
		t.Fatal(err)
	}
	if _, ok := LastGradNorm(m2.Context()); ok {
		t.Error("optimiser state survived clear")
	}

	// With the passages in the loss (λ > 0) the reported cross-entropy is
	// still the policy tokens' (equal before the first update), and the
	// update differs: the second step's cross-entropy changes.
	second := map[float64]float64{}
	for _, lambda := range []float64{0, 0.5} {
		m := tinyModel(t, "qwen3-tiny")
		s, err := NewSFT(m, oc, len(ex), 1, lambda)
		if err != nil {
			t.Fatal(err)
		}
		l0, _, _, err := s.Step(ex, oc.LR)
		if err != nil {
			t.Fatal(err)
		}
		if math.Abs(l0-ws.Losses[0]) > 1e-4*math.Abs(l0) {
			t.Errorf("λ=%g: cross-entropy %.6f, WarmStart %.6f", lambda, l0, ws.Losses[0])
		}
		if second[lambda], _, _, err = s.Step(ex, oc.LR); err != nil {
			t.Fatal(err)
		}
	}
	if math.Abs(second[0]-second[0.5]) < 1e-4 {
		t.Errorf("the passages' loss did not change the update: second-step cross-entropy %.6f with λ=0 and %.6f with λ=0.5", second[0], second[0.5])
	}
}

// TestAssembleWeights checks the warm start's batches: every policy token
// is in the loss once at weight 1 with pm = 1; with λ > 0 every other token
// is too, at weight λ; every entry predicts the token after its position.
func TestAssembleWeights(t *testing.T) {
	ex := synthTrajectories(9, 50, 5, 1)
	rows := []int{0, 1, 2, 3, 4}
	policy, env := 0, 0
	for _, e := range ex {
		policy += e.PolicyTokens()
		env += len(e.IDs) - 1 - e.PolicyTokens()
	}
	for _, lambda := range []float64{0, 0.25} {
		bs := assembleSFT(ex, rows, lambda)
		wantEnv := env
		if lambda == 0 {
			wantEnv = 0
		}
		if bs.policy != policy || bs.env != wantEnv {
			t.Fatalf("λ=%g: %d policy and %d environment tokens, want %d and %d", lambda, bs.policy, bs.env, policy, wantEnv)
		}
		var sumW, sumPM float64
		entries := 0
		seen := map[int32]bool{}
		for i := range bs.n {
			sumW += float64(bs.w[i])
			sumPM += float64(bs.pm[i])
			if bs.w[i] == 0 {
				continue
			}
			entries++
			p := bs.pos[i]
			r, at := int(p)/bs.t, int(p)%bs.t+1
			if seen[p] || bs.tgt[i] != int32(ex[r].IDs[at]) {
				t.Fatalf("λ=%g: entry %d (row %d, target position %d) repeated or with the wrong target", lambda, i, r, at)
			}
			seen[p] = true
			isPolicy := at >= ex[r].PromptLen && ex[r].Mask[at] == 1
			want := float32(lambda)
			if isPolicy {
				want = 1
			}
			if isPolicy != (bs.pm[i] == 1) || bs.w[i] != want {
				t.Fatalf("λ=%g: entry %d: w %g, pm %g for a policy token %v", lambda, i, bs.w[i], bs.pm[i], isPolicy)
			}
		}
		if entries != policy+wantEnv || math.Abs(sumW-(float64(policy)+lambda*float64(env))) > 1e-3 || sumPM != float64(policy) {
			t.Fatalf("λ=%g: %d entries, Σw %g, Σpm %g; want %d, %g and %d", lambda, entries, sumW, sumPM, policy+wantEnv, float64(policy)+lambda*float64(env), policy)
		}
	}
}
