package qwen

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/cas-engine/cas/backend/backendtest"
	"github.com/cas-engine/cas/internal/sharedtest"
	"github.com/cas-engine/cas/model/hfbind"
)

// TestScoreGradient differentiates Σ logp over the response tokens with
// respect to every weight on the pure-Go backend (no Pad needed): all
// gradients are finite, every weight gets some signal, and two entries match
// central finite differences.
func TestScoreGradient(t *testing.T) {
	for _, name := range goldenModels {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Dir(sharedtest.Path(t, "golden", name, "config.json"))
			m, err := Load(dir, backendtest.Shared(t), LoadOptions{})
			if err != nil {
				t.Fatal(err)
			}
			g := loadGolden(t, name)
			resp := make([]int32, len(g.mask))
			for i := range resp {
				if i%g.seqLen >= g.seqLen/2 {
					resp[i] = g.mask[i]
				}
			}
			c := m.Config
			exec, err := context.NewExec(m.backend, m.ctx, func(ctx *context.Context, ids, mask, rm *graph.Node) []*graph.Node {
				lp, ent := TokenLogProbs(ctx, c, ids, mask, rm, ScoreOptions{Entropy: true})
				loss := graph.Add(graph.ReduceAllSum(lp), graph.MulScalar(graph.ReduceAllSum(ent), 0.01))
				return append([]*graph.Node{loss}, ctx.BuildTrainableVariablesGradientsGraph(loss)...)
			})
			if err != nil {
				t.Fatal(err)
			}
			args := []any{
				tensors.FromFlatDataAndDimensions(g.ids, g.batch, g.seqLen),
				tensors.FromFlatDataAndDimensions(g.mask, g.batch, g.seqLen),
				tensors.FromFlatDataAndDimensions(resp, g.batch, g.seqLen),
			}
			out, err := exec.Exec(args...)
			if err != nil {
				t.Fatal(err)
			}
			var vars []*context.Variable
			for v := range m.ctx.IterVariables() {
				if v.Trainable {
					vars = append(vars, v)
				}
			}
			if len(out)-1 != len(vars) {
				t.Fatalf("%d gradients for %d variables", len(out)-1, len(vars))
			}
			grads := map[string][]float32{}
			for i, v := range vars {
				grad := tensors.MustCopyFlatData[float32](out[1+i])
				norm := 0.0
				for _, x := range grad {
					if math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
						t.Fatalf("%s: non-finite gradient", v.ScopeAndName())
					}
					norm += float64(x) * float64(x)
				}
				if norm == 0 {
					t.Errorf("%s: zero gradient", v.ScopeAndName())
				}
				hf, _ := HFName(m.ctx.Scope(), v)
				grads[hf] = grad
			}
			loss := func() float64 {
				o, err := exec.Exec(args...)
				if err != nil {
					t.Fatal(err)
				}
				return float64(tensors.ToScalar[float32](o[0]))
			}
			for _, probe := range []struct {
				name  string
				index int
			}{
				{"model.layers.0.self_attn.q_proj.weight", 5},
				{"model.layers.1.mlp.down_proj.weight", 17},
			} {
				scope, vname := hfbind.VariableScope(m.ctx.Scope(), probe.name)
				v := m.ctx.GetVariableByScopeAndName(scope, vname)
				orig := tensors.MustCopyFlatData[float32](v.MustValue())
				const eps = 1e-2
				at := func(delta float32) float64 {
					p := append([]float32(nil), orig...)
					p[probe.index] += delta
					v.MustSetValue(tensors.FromFlatDataAndDimensions(p, v.Shape().Dimensions...))
					return loss()
				}
				fd := (at(eps) - at(-eps)) / (2 * eps)
				v.MustSetValue(tensors.FromFlatDataAndDimensions(orig, v.Shape().Dimensions...))
				an := float64(grads[probe.name][probe.index])
				// The loss is a float32 sum: each evaluation carries rounding
				// of a few ulps of its magnitude, which the difference
				// quotient divides by 2·eps.
				l0 := loss()
				noise := 8 * float64(math.Nextafter32(float32(math.Abs(l0)), float32(math.Inf(1)))-float32(math.Abs(l0))) / (2 * eps)
				t.Logf("%s[%d]: analytic %.5g, finite difference %.5g (loss %.5g, rounding noise ±%.2g)", probe.name, probe.index, an, fd, l0, noise)
				if math.Abs(fd-an) > 0.02*math.Max(math.Abs(fd), 1e-2)+noise {
					t.Errorf("%s[%d]: analytic gradient %g, finite difference %g", probe.name, probe.index, an, fd)
				}
			}
		})
	}
}

// TestTwoModelsOneContext loads a policy and a frozen reference copy into
// scopes of one context, as the GRPO trainer does: gradients exist only for
// the trainable copy, and both score identically.
func TestTwoModelsOneContext(t *testing.T) {
	dir := filepath.Dir(sharedtest.Path(t, "golden", "qwen2-tiny", "config.json"))
	ctx := context.New()
	policy, err := Load(dir, backendtest.Shared(t), LoadOptions{Context: ctx.In("policy")})
	if err != nil {
		t.Fatal(err)
	}
	ref, err := Load(dir, backendtest.Shared(t), LoadOptions{Context: ctx.In("ref")})
	if err != nil {
		t.Fatal(err)
	}
	ref.SetTrainable(false)
	if _, err := Load(dir, backendtest.Shared(t), LoadOptions{Context: ctx.In("ref")}); err == nil {
		t.Error("loading twice into one scope succeeded")
	}
	g := loadGolden(t, "qwen2-tiny")
	c := policy.Config
	exec, err := context.NewExec(policy.Backend(), ctx, func(ctx *context.Context, ids, mask *graph.Node) []*graph.Node {
		lp, _ := TokenLogProbs(ctx.In("policy"), c, ids, mask, nil, ScoreOptions{})
		lr, _ := TokenLogProbs(ctx.In("ref"), c, ids, mask, nil, ScoreOptions{})
		loss := graph.ReduceAllSum(graph.Sub(lp, lr))
		return append([]*graph.Node{loss}, ctx.BuildTrainableVariablesGradientsGraph(loss)...)
	})
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Exec(tensors.FromFlatDataAndDimensions(g.ids, g.batch, g.seqLen), tensors.FromFlatDataAndDimensions(g.mask, g.batch, g.seqLen))
	if err != nil {
		t.Fatal(err)
	}
	if loss := tensors.ToScalar[float32](out[0]); loss != 0 {
		t.Errorf("policy and reference differ: Σ(lp − lr) = %g", loss)
	}
	if want := len(weightSpecsNeeded(c)); len(out)-1 != want {
		t.Errorf("%d gradients, want %d (policy only)", len(out)-1, want)
	}
}

// TestScoreMatchesReferenceLogits checks Score (which runs the decoder on
// ids[:, :T−1] only) against the log-softmax and entropy of the
// independent reference's logits over the full batch, and on prefixes of
// 2 and 1 tokens: logp[b, t] = log softmax(z[b, t−1])[ids[b, t]] where
// positions t−1 and t are real tokens, and 0 at t = 0 (a single token
// predicts nothing).
func TestScoreMatchesReferenceLogits(t *testing.T) {
	for _, name := range goldenModels {
		g := loadGolden(t, name)
		v := g.model.Config.VocabSize
		for _, tc := range []struct {
			name string
			t    int
		}{{"full", g.seqLen}, {"two tokens", 2}, {"one token", 1}} {
			t.Run(name+"/"+tc.name, func(t *testing.T) {
				ids, mask := make([]int32, g.batch*tc.t), make([]int32, g.batch*tc.t)
				for b := range g.batch {
					copy(ids[b*tc.t:(b+1)*tc.t], g.ids[b*g.seqLen:])
					copy(mask[b*tc.t:(b+1)*tc.t], g.mask[b*g.seqLen:])
				}
				logp, ent, err := g.model.Score(ids, mask, nil, g.batch, tc.t, ScoreOptions{Entropy: true})
				if err != nil {
					t.Fatal(err)
				}
				checked := 0
				for b := range g.batch {
					if logp[b*tc.t] != 0 || ent[b*tc.t] != 0 {
						t.Errorf("row %d: logp, entropy at t = 0 are %g, %g, want 0", b, logp[b*tc.t], ent[b*tc.t])
					}
					for s := 1; s < tc.t; s++ {
						if mask[b*tc.t+s-1] == 0 || mask[b*tc.t+s] == 0 {
							continue
						}
						z := g.logits[(b*g.seqLen+s-1)*v : (b*g.seqLen+s)*v]
						mx := math.Inf(-1)
						for _, x := range z {
							mx = math.Max(mx, float64(x))
						}
						sum, dot := 0.0, 0.0
						for _, x := range z {
							e := math.Exp(float64(x) - mx)
							sum += e
							dot += e * float64(x)
						}
						lse := mx + math.Log(sum)
						wantLogp := float64(z[ids[b*tc.t+s]]) - lse
						wantEnt := lse - dot/sum
						if d := math.Abs(float64(logp[b*tc.t+s]) - wantLogp); d > 2e-4*math.Max(1, math.Abs(wantLogp)) {
							t.Errorf("row %d position %d: logp %g, reference %g", b, s, logp[b*tc.t+s], wantLogp)
						}
						if d := math.Abs(float64(ent[b*tc.t+s]) - wantEnt); d > 2e-4*math.Max(1, wantEnt) {
							t.Errorf("row %d position %d: entropy %g, reference %g", b, s, ent[b*tc.t+s], wantEnt)
						}
						checked++
					}
				}
				if want := tc.t > 1; (checked > 0) != want {
					t.Fatalf("%d positions checked", checked)
				}
			})
		}
	}
}
