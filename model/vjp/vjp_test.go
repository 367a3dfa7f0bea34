package vjp

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/cas-engine/cas/backend"
)

// checkCustomVJP evaluates fused (a function with a custom VJP) and ref
// (the same function for GoMLX's own VJP) of the inputs, and the gradient
// of a loss whose adjoint varies, with respect to every input: fused on
// the pure-Go backend (which computes the straight-through zero terms)
// and on the project's backend (gocpu, which fuses the kernels) must equal
// ref on the pure-Go backend to float32 rounding (tol relative to each
// output's largest entry).
func checkCustomVJP(t *testing.T, fused, ref func(in []*graph.Node) *graph.Node, tol float64, in ...*tensors.Tensor) {
	t.Helper()
	plain, err := simplego.New("")
	if err != nil {
		t.Fatal(err)
	}
	be, err := backend.New() // gocpu, as the model runs
	if err != nil {
		t.Fatal(err)
	}
	eval := func(f func(in []*graph.Node) *graph.Node, gocpu bool) [][]float32 {
		fn := func(in []*graph.Node) []*graph.Node {
			y := f(in)
			w := graph.Cos(graph.IotaFull(y.Graph(), y.Shape()))
			loss := graph.ReduceAllSum(graph.Mul(graph.Mul(y, w), graph.Cos(y)))
			return append([]*graph.Node{y}, graph.Gradient(loss, in...)...)
		}
		exec := graph.MustNewExec(plain, fn)
		if gocpu {
			exec = graph.MustNewExec(be, fn)
		}
		args := make([]any, len(in))
		for i, x := range in {
			c, err := x.LocalClone() // a tensor binds to the first backend using it
			if err != nil {
				t.Fatal(err)
			}
			args[i] = c
		}
		outs := exec.MustExec(args...)
		res := make([][]float32, len(outs))
		for i, o := range outs {
			res[i] = tensors.MustCopyFlatData[float32](o)
		}
		return res
	}
	want := eval(ref, false)
	for _, gocpu := range []bool{false, true} {
		got := eval(fused, gocpu)
		for o := range want {
			scale := 0.0
			for _, v := range want[o] {
				scale = max(scale, math.Abs(float64(v)))
			}
			for i := range want[o] {
				// (At least tol·0.01: an output that is exactly zero, such as
				// attention's query gradient for T = 1, comes out as the
				// rounding noise of terms of order 1.)
				if d := math.Abs(float64(got[o][i] - want[o][i])); d > tol*max(scale, 0.01) || math.IsNaN(float64(got[o][i])) {
					t.Fatalf("gocpu=%v: output %d (0: value, then gradients) [%d] = %g, want %g", gocpu, o, i, got[o][i], want[o][i])
				}
			}
		}
	}
}

func randInput(r *rand.Rand, scale float64, dims ...int) *tensors.Tensor {
	n := 1
	for _, d := range dims {
		n *= d
	}
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(r.NormFloat64() * scale)
	}
	return tensors.FromFlatDataAndDimensions(x, dims...)
}

// TestSoftmaxGradient: Softmax equals graph.Softmax and GoMLX's gradient
// of it, with masked (−1e30) scores.
func TestSoftmaxGradient(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 3))
	x := randInput(r, 3, 2, 3, 37)
	x.MutableFlatData(func(flat any) {
		for i, f := 0, flat.([]float32); i < len(f); i += 7 {
			f[i] = -1e30 // masked, as attention masks scores
		}
	})
	checkCustomVJP(t,
		func(in []*graph.Node) *graph.Node { return Softmax(in[0]) },
		func(in []*graph.Node) *graph.Node { return graph.Softmax(in[0], -1) },
		1e-5, x)
}

// TestSwiGLUGradient: SwiGLU equals silu(gate) ⊙ up and GoMLX's gradients
// of it with respect to both inputs.
func TestSwiGLUGradient(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 4))
	checkCustomVJP(t,
		func(in []*graph.Node) *graph.Node { return SwiGLU(in[0], in[1]) },
		func(in []*graph.Node) *graph.Node { return graph.Mul(Silu(in[0]), in[1]) },
		2e-6, randInput(r, 3, 3, 5, 41), randInput(r, 1, 3, 5, 41))
}

// TestRMSNormalizeGradient: RMSNormalize equals x / √(mean(x²) + ε) and
// GoMLX's gradient of it.
func TestRMSNormalizeGradient(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 5))
	const eps = 1e-6
	checkCustomVJP(t,
		func(in []*graph.Node) *graph.Node { return RMSNormalize(in[0], eps) },
		func(in []*graph.Node) *graph.Node {
			ms := graph.ReduceAndKeep(graph.Square(in[0]), graph.ReduceMean, -1)
			return graph.Div(in[0], graph.Sqrt(graph.AddScalar(ms, eps)))
		},
		2e-6, randInput(r, 2, 4, 3, 64))
}

// TestLogSumExpGradient: LogSumExp equals m + log Σ e^(x − m) and GoMLX's
// gradient of it, with masked (−1e30) entries.
func TestLogSumExpGradient(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 6))
	x := randInput(r, 4, 3, 4, 300)
	x.MutableFlatData(func(flat any) {
		for i, f := 0, flat.([]float32); i < len(f); i += 11 {
			f[i] = -1e30
		}
	})
	checkCustomVJP(t,
		func(in []*graph.Node) *graph.Node { return LogSumExp(in[0]) },
		func(in []*graph.Node) *graph.Node {
			mx := graph.StopGradient(graph.ReduceAndKeep(in[0], graph.ReduceMax, -1))
			s := graph.ReduceSum(graph.Exp(graph.Sub(in[0], mx)), -1)
			return graph.Add(graph.Log(s), graph.Reshape(mx, s.Shape().Dimensions...))
		},
		2e-6, x)
}

// TestRopeGradient: Rope equals x ⊙ cos + rot(x) ⊙ sin with rot written
// as model/qwen wrote it (a 2×2 contraction over the halves) and GoMLX's
// gradient of it, with cos and sin broadcast over the heads.
func TestRopeGradient(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 7))
	const b, tt, heads, h = 2, 5, 3, 8
	angles := randInput(r, 3, b, tt, 1, h)
	ref := func(x, cos, sin *graph.Node) *graph.Node {
		halves := graph.Reshape(x, b, tt, heads, 2, h/2)
		rot := graph.Const(x.Graph(), [][]float32{{0, -1}, {1, 0}})
		rotated := graph.Reshape(graph.Einsum("btnjh,ij->btnih", halves, rot), b, tt, heads, h)
		return graph.Add(graph.Mul(x, cos), graph.Mul(rotated, sin))
	}
	for _, shape := range [][]int{{b, tt, heads, h}} {
		checkCustomVJP(t,
			func(in []*graph.Node) *graph.Node { return Rope(in[0], graph.Cos(in[1]), graph.Sin(in[1])) },
			func(in []*graph.Node) *graph.Node {
				return ref(in[0], graph.StopGradient(graph.Cos(in[1])), graph.StopGradient(graph.Sin(in[1])))
			},
			2e-6, randInput(r, 1, shape...), angles)
	}
}
