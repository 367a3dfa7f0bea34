package qwen

import (
	"math"
	"path/filepath"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/cas-engine/cas/backend/backendtest"
	"github.com/cas-engine/cas/internal/sharedtest"
)

func TestParsePrecision(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Precision
		err  bool
	}{
		{"", PrecisionF32, false}, {"f32", PrecisionF32, false}, {"Float32", PrecisionF32, false},
		{"bf16", PrecisionBF16, false}, {"BFloat16", PrecisionBF16, false}, {"fp16", "", true}, {"f64", "", true},
	} {
		got, err := ParsePrecision(tc.in)
		if (err != nil) != tc.err || got != tc.want {
			t.Errorf("ParsePrecision(%q) = %q, %v; want %q (error %v)", tc.in, got, err, tc.want, tc.err)
		}
	}
}

// maxRelDiff returns max |a−b| over the masked positions divided by
// max |b| there.
func maxRelDiff(a, b []float32, mask []int32, vocab int) float64 {
	d, _ := relDiffs(a, b, mask, vocab)
	return d
}

// relDiffs returns max |a−b| and mean |a−b| over the masked positions,
// both divided by max |b| there.
func relDiffs(a, b []float32, mask []int32, vocab int) (maxRel, meanRel float64) {
	maxErr, maxAbs, sum, n := 0.0, 0.0, 0.0, 0
	for i := range b {
		if mask[i/vocab] != 1 {
			continue
		}
		e := math.Abs(float64(a[i] - b[i]))
		maxAbs = math.Max(maxAbs, math.Abs(float64(b[i])))
		maxErr = math.Max(maxErr, e)
		sum += e
		n++
	}
	return maxErr / maxAbs, sum / float64(n) / maxAbs
}

// TestBF16Logits runs the golden models in bfloat16 two ways — weights
// stored in bf16, and f32 weights cast to bf16 inside the graph (mixed
// precision) — and checks: both give the same logits (qwen3-tiny's weights
// are bf16 in the checkpoint, so the casts are exact; qwen2-tiny's are
// rounded the same way), both are close to PyTorch's f32 logits (bf16
// keeps 8 significant bits, ≈ 0.4% per rounding, and the roundings of every
// layer add up: bf16MaxRel and bf16MeanRel), and the KV cache reproduces
// the greedy continuation's first token.
// Tolerances of bf16 logits against f32 ones, relative to max |logit|:
// the largest error (measured 0.064 on qwen2-tiny, 0.033 on qwen3-tiny)
// and the mean one.
const bf16MaxRel, bf16MeanRel = 0.1, 0.01

func TestBF16Logits(t *testing.T) {
	for _, name := range goldenModels {
		t.Run(name, func(t *testing.T) {
			g := loadGolden(t, name)
			dir := filepath.Dir(sharedtest.Path(t, "golden", name, "config.json"))
			stored, err := Load(dir, backendtest.Shared(t), LoadOptions{DType: PrecisionBF16})
			if err != nil {
				t.Fatal(err)
			}
			if stored.ComputeDType() != dtypes.BFloat16 {
				t.Fatalf("ComputeDType = %s, want BFloat16", stored.ComputeDType())
			}
			ctx := context.New()
			SetComputeDType(ctx, PrecisionBF16)
			mixed, err := Load(dir, backendtest.Shared(t), LoadOptions{Context: ctx})
			if err != nil {
				t.Fatal(err)
			}
			v := g.model.Config.VocabSize
			a, err := stored.Logits(g.ids, g.mask, g.batch, g.seqLen)
			if err != nil {
				t.Fatal(err)
			}
			b, err := mixed.Logits(g.ids, g.mask, g.batch, g.seqLen)
			if err != nil {
				t.Fatal(err)
			}
			if d := maxRelDiff(a, b, g.mask, v); d > 1e-6 {
				t.Errorf("bf16-stored vs f32 cast to bf16: rel diff %.3g, want equal", d)
			}
			d, mean := relDiffs(a, g.logits, g.mask, v)
			t.Logf("%s bf16 vs PyTorch f32: max |Δ| / max |logit| = %.3g, mean %.3g", name, d, mean)
			if d > bf16MaxRel || mean > bf16MeanRel || d < 1e-6 {
				t.Errorf("bf16 vs f32 reference: rel diff max %.3g (want in [1e-6, %g]), mean %.3g (want ≤ %g)",
					d, bf16MaxRel, mean, bf16MeanRel)
			}
			res, err := stored.Generate([][]int{g.row(0)}, GenerateOptions{MaxNewTokens: 1, EOS: []int{}}, 0)
			if err != nil {
				t.Fatal(err)
			}
			if res[0].IDs[0] != g.greedy[0] {
				t.Errorf("bf16 greedy first token %d, want %d", res[0].IDs[0], g.greedy[0])
			}
		})
	}
}
