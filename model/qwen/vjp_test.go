package qwen

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"
)

// TestSoftmaxGradient: softmax (the custom VJP p ⊙ (g − Σ g⊙p) behind a
// straight-through term) equals graph.Softmax and GoMLX's own gradient of
// it, on the pure-Go backend (which computes the zero term) and on this
// package's backend (gocpu, which fuses both), with masked −1e30 scores.
func TestSoftmaxGradient(t *testing.T) {
	plain, err := simplego.New("")
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(2, 3))
	const rows, n = 6, 37
	x, w := make([]float32, rows*n), make([]float32, rows*n)
	for i := range x {
		x[i], w[i] = float32(r.NormFloat64()*3), float32(r.NormFloat64())
		if i%7 == 2 {
			x[i] = maskedScore
		}
	}
	eval := func(fused, gocpu bool) [][]float32 {
		fn := func(x, w *graph.Node) []*graph.Node {
			var p *graph.Node
			if fused {
				p = softmax(x)
			} else {
				p = graph.Softmax(x, -1)
			}
			loss := graph.ReduceAllSum(graph.Mul(graph.Mul(p, w), graph.Cos(p)))
			return []*graph.Node{p, graph.Gradient(loss, x)[0]}
		}
		exec := graph.MustNewExec(plain, fn)
		if gocpu {
			exec = graph.MustNewExec(newBackend(t), fn)
		}
		outs := exec.MustExec(tensors.FromFlatDataAndDimensions(x, 2, 3, n), tensors.FromFlatDataAndDimensions(w, 2, 3, n))
		res := make([][]float32, len(outs))
		for i, o := range outs {
			res[i] = tensors.MustCopyFlatData[float32](o)
		}
		return res
	}
	want := eval(false, false)
	for _, c := range []struct {
		name  string
		gocpu bool
	}{{"simplego", false}, {"gocpu", true}} {
		got := eval(true, c.gocpu)
		for o, name := range []string{"softmax", "gradient"} {
			scale := 0.0
			for _, v := range want[o] {
				scale = max(scale, math.Abs(float64(v)))
			}
			for i := range want[o] {
				if d := math.Abs(float64(got[o][i] - want[o][i])); d > 1e-5*scale || math.IsNaN(float64(got[o][i])) {
					t.Fatalf("%s: %s[%d] = %g, want %g", c.name, name, i, got[o][i], want[o][i])
				}
			}
		}
	}
}

// TestSwiGLUGradient: swiglu (custom VJPs behind straight-through terms)
// equals silu(gate) ⊙ up and GoMLX's own gradients of it, on the pure-Go
// backend and on gocpu (which fuses the forward and both gradients).
func TestSwiGLUGradient(t *testing.T) {
	plain, err := simplego.New("")
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewPCG(2, 4))
	const n = 3 * 5 * 41
	gate, up, w := make([]float32, n), make([]float32, n), make([]float32, n)
	for i := range gate {
		gate[i], up[i], w[i] = float32(r.NormFloat64()*3), float32(r.NormFloat64()), float32(r.NormFloat64())
	}
	eval := func(fused, gocpu bool) [][]float32 {
		fn := func(gate, up, w *graph.Node) []*graph.Node {
			var y *graph.Node
			if fused {
				y = swiglu(gate, up)
			} else {
				y = graph.Mul(silu(gate), up)
			}
			loss := graph.ReduceAllSum(graph.Mul(graph.Mul(y, w), graph.Cos(y)))
			return append([]*graph.Node{y}, graph.Gradient(loss, gate, up)...)
		}
		exec := graph.MustNewExec(plain, fn)
		if gocpu {
			exec = graph.MustNewExec(newBackend(t), fn)
		}
		in := func(x []float32) *tensors.Tensor { return tensors.FromFlatDataAndDimensions(x, 3, 5, 41) }
		outs := exec.MustExec(in(gate), in(up), in(w))
		res := make([][]float32, len(outs))
		for i, o := range outs {
			res[i] = tensors.MustCopyFlatData[float32](o)
		}
		return res
	}
	want := eval(false, false)
	for _, gocpu := range []bool{false, true} {
		got := eval(true, gocpu)
		for o, name := range []string{"swiglu", "gate gradient", "up gradient"} {
			scale := 0.0
			for _, v := range want[o] {
				scale = max(scale, math.Abs(float64(v)))
			}
			for i := range want[o] {
				if d := math.Abs(float64(got[o][i] - want[o][i])); d > 2e-6*scale || math.IsNaN(float64(got[o][i])) {
					t.Fatalf("gocpu=%v: %s[%d] = %g, want %g", gocpu, name, i, got[o][i], want[o][i])
				}
			}
		}
	}
}
