package train

import (
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/cas-engine/cas/agent"
	"github.com/cas-engine/cas/backend/backendtest"
	"github.com/cas-engine/cas/internal/sharedtest"
	"github.com/cas-engine/cas/model/qwen"
)

// Tolerances of mixed precision (bf16 compute, f32 master weights) against
// f32 training on the tiny golden models: the loss within 2% and the
// gradient within 15% in relative L2 norm with cosine ≥ 0.99. Measured:
// qwen2-tiny (logits up to 18) loss 1.0%, gradient 10.7%, cosine 0.9947;
// qwen3-tiny loss 0.23%, gradient 6.3%, cosine 0.9984. bf16 keeps 8
// significant bits (≈ 0.4% per rounding), and a gradient passes through
// every layer's roundings twice.
const (
	mixedLossRel = 0.02
	mixedGradRel = 0.15
	mixedGradCos = 0.99
)

// loadPolicy loads a golden tiny model the way the trainer loads its policy.
func loadPolicy(t testing.TB, name string, p qwen.Precision) *qwen.Model {
	t.Helper()
	dir := filepath.Dir(sharedtest.Path(t, "golden", name, "config.json"))
	m, err := qwen.Load(dir, backendtest.Shared(t), policyLoadOptions(p, nil))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// lossAndGrads returns the mean teacher-forced NLL of trajs' response
// tokens and its gradient with respect to every weight, flattened in
// context order, with the gradients' dtypes.
func lossAndGrads(t *testing.T, m *qwen.Model, trajs []*agent.Trajectory) (float64, []float64, []dtypes.DType) {
	t.Helper()
	b, seqLen := len(trajs), 0
	for _, tr := range trajs {
		seqLen = max(seqLen, len(tr.IDs))
	}
	ids, attn, resp := make([]int32, b*seqLen), make([]int32, b*seqLen), make([]float32, b*seqLen)
	for i, tr := range trajs {
		for j, id := range tr.IDs {
			ids[i*seqLen+j], attn[i*seqLen+j] = int32(id), 1
			if tr.Mask[j] == 1 {
				resp[i*seqLen+j] = 1
			}
		}
	}
	exec, err := context.NewExec(m.Backend(), m.Context(), func(ctx *context.Context, ids, attn, resp *graph.Node) []*graph.Node {
		logp, _ := qwen.TokenLogProbs(ctx, m.Config, ids, attn, resp, qwen.ScoreOptions{})
		loss := graph.Div(graph.Neg(graph.ReduceAllSum(logp)), graph.ReduceAllSum(resp))
		return append([]*graph.Node{loss}, ctx.BuildTrainableVariablesGradientsGraph(loss)...)
	})
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Exec(tensors.FromFlatDataAndDimensions(ids, b, seqLen),
		tensors.FromFlatDataAndDimensions(attn, b, seqLen), tensors.FromFlatDataAndDimensions(resp, b, seqLen))
	if err != nil {
		t.Fatal(err)
	}
	loss := float64(tensors.ToScalar[float32](out[0]))
	var grads []float64
	var dts []dtypes.DType
	for _, g := range out[1:] {
		dts = append(dts, g.DType())
		if g.DType() != dtypes.Float32 {
			continue
		}
		for _, v := range tensors.MustCopyFlatData[float32](g) {
			grads = append(grads, float64(v))
		}
	}
	return loss, grads, dts
}

// TestMixedPrecisionGradient: bf16 compute with f32 master weights gives
// the f32 loss and gradient within the stated tolerances, and the
// gradients reach the weights as float32.
func TestMixedPrecisionGradient(t *testing.T) {
	for _, name := range []string{"qwen2-tiny", "qwen3-tiny"} {
		t.Run(name, func(t *testing.T) {
			f32, mixed := loadPolicy(t, name, qwen.PrecisionF32), loadPolicy(t, name, qwen.PrecisionBF16)
			if mixed.ComputeDType() != dtypes.BFloat16 || f32.ComputeDType() != dtypes.Float32 {
				t.Fatalf("compute dtypes %s and %s", f32.ComputeDType(), mixed.ComputeDType())
			}
			trajs := synthTrajectories(3, f32.Config.VocabSize, 2, 3)
			lossA, gA, _ := lossAndGrads(t, f32, trajs)
			lossB, gB, dts := lossAndGrads(t, mixed, trajs)
			for i, dt := range dts {
				if dt != dtypes.Float32 {
					t.Fatalf("gradient %d is %s, want float32 (master weights)", i, dt)
				}
			}
			if len(gA) != len(gB) || len(gA) == 0 {
				t.Fatalf("%d and %d gradient values", len(gA), len(gB))
			}
			var dot, na, nb, nd float64
			for i := range gA {
				dot += gA[i] * gB[i]
				na += gA[i] * gA[i]
				nb += gB[i] * gB[i]
				nd += (gA[i] - gB[i]) * (gA[i] - gB[i])
			}
			lossRel := math.Abs(lossB-lossA) / math.Abs(lossA)
			gradRel, cos := math.Sqrt(nd/na), dot/math.Sqrt(na*nb)
			t.Logf("%s: loss f32 %.6g mixed %.6g (rel %.3g); gradient rel L2 %.3g, cosine %.5f", name, lossA, lossB, lossRel, gradRel, cos)
			if lossRel > mixedLossRel || gradRel > mixedGradRel || cos < mixedGradCos {
				t.Errorf("mixed vs f32: loss rel %.3g (≤ %g), gradient rel %.3g (≤ %g), cosine %.4f (≥ %g)",
					lossRel, mixedLossRel, gradRel, mixedGradRel, cos, mixedGradCos)
			}
			if lossRel == 0 || gradRel == 0 {
				t.Error("mixed precision gave bit-identical results: bf16 did not run")
			}
		})
	}
}

// TestMixedPrecisionLearner runs one GRPO+ACI step under mixed precision
// next to the same step in f32: loss and gradient norm agree within the
// tolerances, the reference is stored in bf16, and every variable of the
// policy's context — weights, gradient accumulators, AdamW's moments —
// stays float32.
func TestMixedPrecisionLearner(t *testing.T) {
	const name = "qwen3-tiny"
	dir := filepath.Dir(sharedtest.Path(t, "golden", name, "config.json"))
	var res [2]*StepResult
	for k, p := range []qwen.Precision{qwen.PrecisionF32, qwen.PrecisionBF16} {
		policy := loadPolicy(t, name, p)
		ref, err := qwen.Load(dir, backendtest.Shared(t), referenceLoadOptions(p, nil))
		if err != nil {
			t.Fatal(err)
		}
		if ref.ComputeDType() != p.DType() {
			t.Errorf("%s: reference computes in %s", p, ref.ComputeDType())
		}
		l, err := NewLearner(policy, ref, nil, testLearnerConfig())
		if err != nil {
			t.Fatal(err)
		}
		if res[k], err = l.Step(synthTrajectories(5, policy.Config.VocabSize, 2, 3)); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		moments := 0
		for v := range policy.Context().IterVariables() {
			if v.DType() != dtypes.Float32 && v.DType() != dtypes.Int64 && v.DType() != dtypes.Int32 {
				t.Errorf("%s: variable %s is %s, want float32", p, v.ScopeAndName(), v.DType())
			}
			if v.Shape().Rank() > 0 && !v.Trainable {
				moments++
			}
		}
		if moments < 3*len(weightNames(policy)) {
			t.Errorf("%s: %d non-trainable tensors, want accumulators and two AdamW moments per weight (%d weights)", p, moments, len(weightNames(policy)))
		}
	}
	t.Logf("loss f32 %.6g mixed %.6g; grad norm f32 %.6g mixed %.6g", res[0].Loss, res[1].Loss, res[0].GradNorm, res[1].GradNorm)
	for _, c := range []struct {
		what string
		a, b float64
	}{{"loss", res[0].Loss, res[1].Loss}, {"grad norm", res[0].GradNorm, res[1].GradNorm}} {
		if d := math.Abs(c.a-c.b) / math.Max(math.Abs(c.a), 1e-3); d > mixedGradRel {
			t.Errorf("%s: f32 %.6g, mixed %.6g (rel %.3g > %g)", c.what, c.a, c.b, d, mixedGradRel)
		}
	}
}

func weightNames(m *qwen.Model) []string {
	var names []string
	_ = m.ForEachWeight(func(n string, _ []int, _ []float32) error {
		names = append(names, n)
		return nil
	})
	return names
}

func TestConfigPrecision(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want qwen.Precision
		ok   bool
	}{{"", qwen.PrecisionF32, true}, {"bf16", qwen.PrecisionBF16, true}, {"f16", "", false}} {
		c := Config{Model: ModelConfig{Precision: tc.in}}
		err := c.Validate()
		hasErr := err != nil && strings.Contains(err.Error(), "model.precision")
		if hasErr == tc.ok {
			t.Errorf("precision %q: validate error %v", tc.in, err)
		}
		if tc.ok && c.precision() != tc.want {
			t.Errorf("precision %q parsed as %q", tc.in, c.precision())
		}
	}
}
