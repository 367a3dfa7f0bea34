package gocpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/cas-engine/cas/internal/cputime"
	"github.com/cas-engine/cas/model/vjp"
)

// BenchmarkFused times, on this backend, the forward value and gradient of
// each fused pattern (model/vjp's functions) against the same function
// written plainly (GoMLX's own VJP, run op by op), on one layer's tensors
// of the 25M benchmark model (8×256 tokens): the attention softmax over
// [8, 2, 4, 256, 256] scores, SwiGLU over [8, 256, 1408] and RMSNorm over
// [8, 256, 512]. It reports CPU seconds per execution (steadier than wall
// time on a shared machine):
//
//	go test -run '^$' -bench Fused -benchtime 5x ./backend/gocpu/
func BenchmarkFused(b *testing.B) {
	silu := func(x *graph.Node) *graph.Node { return graph.Mul(x, graph.Logistic(x)) }
	rms := func(in []*graph.Node) *graph.Node {
		ms := graph.ReduceAndKeep(graph.Square(in[0]), graph.ReduceMean, -1)
		return graph.Div(in[0], graph.Sqrt(graph.AddScalar(ms, 1e-6)))
	}
	cases := []struct {
		name         string
		dims         []int
		inputs       int
		fused, plain func(in []*graph.Node) *graph.Node
	}{
		{"softmax", []int{8, 2, 4, 256, 256}, 1,
			func(in []*graph.Node) *graph.Node { return vjp.Softmax(in[0]) },
			func(in []*graph.Node) *graph.Node { return graph.Softmax(in[0], -1) }},
		{"swiglu", []int{8, 256, 1408}, 2,
			func(in []*graph.Node) *graph.Node { return vjp.SwiGLU(in[0], in[1]) },
			func(in []*graph.Node) *graph.Node { return graph.Mul(silu(in[0]), in[1]) }},
		{"rmsnorm", []int{8, 256, 512}, 1,
			func(in []*graph.Node) *graph.Node { return vjp.RMSNormalize(in[0], 1e-6) },
			rms},
	}
	r := rand.New(rand.NewPCG(1, 1))
	for _, c := range cases {
		x, y, w := randTensor(r, dtypes.Float32, c.dims...), randTensor(r, dtypes.Float32, c.dims...), randTensor(r, dtypes.Float32, c.dims...)
		for _, variant := range []string{"fused", "plain"} {
			f := c.fused
			if variant == "plain" {
				f = c.plain
			}
			b.Run(c.name+"/"+variant, func(b *testing.B) {
				exec := graph.MustNewExec(fastOnce(), func(in []*graph.Node) []*graph.Node {
					out := f(in)
					// The adjoint w: a loss linear in the output.
					return append([]*graph.Node{out}, graph.Gradient(graph.ReduceAllSum(graph.Mul(out, in[len(in)-1])), in[:c.inputs]...)...)
				})
				args := []any{x, w}
				if c.inputs == 2 {
					args = []any{x, y, w}
				}
				benchCPU(b, exec, args...)
			})
		}
	}
}

// BenchmarkFusedAttention times, on this backend, the forward value and
// the gradients with respect to q, k and v of one 25M layer's causal
// attention (8 rows × 256 tokens, 8 query heads in 2 KV groups of head
// size 64): "fused" is vjp.Attention (the blocked kernel, forward and
// backward), "plain" the attention model/qwen built before it (scores
// [8, 2, 4, 256, 256] written out, vjp.Softmax fused, the products and
// their gradients as GEMMs). CPU seconds per execution:
//
//	go test -run '^$' -bench FusedAttention -benchtime 5x ./backend/gocpu/
func BenchmarkFusedAttention(b *testing.B) {
	const batch, t, heads, kv, h = 8, 256, 8, 2, 64
	r := rand.New(rand.NewPCG(1, 2))
	q, k, v := randTensor(r, dtypes.Float32, batch, t, heads, h), randTensor(r, dtypes.Float32, batch, t, kv, h), randTensor(r, dtypes.Float32, batch, t, kv, h)
	w := randTensor(r, dtypes.Float32, batch, t, heads, h)
	bias := make([]float32, batch*t*t)
	for i := range bias {
		if i%t > i/t%t {
			bias[i] = -1e30
		}
	}
	biasT := tensors.FromFlatDataAndDimensions(bias, batch, t, t)
	scale := 1 / math.Sqrt(h)
	plain := func(q, k, v, bias *graph.Node) *graph.Node {
		q5 := graph.Reshape(q, batch, t, kv, heads/kv, h)
		keys := graph.TransposeAllAxes(k, 0, 2, 1, 3)
		values := graph.TransposeAllAxes(v, 0, 2, 3, 1)
		scores := graph.MulScalar(graph.Einsum("btkrh,bksh->bkrts", q5, keys), scale)
		scores = graph.Add(scores, graph.Reshape(bias, batch, 1, 1, t, t))
		out := graph.Einsum("bkrts,bkhs->btkrh", vjp.Softmax(scores), values)
		return graph.Reshape(out, batch, t, heads, h)
	}
	fused := func(q, k, v, bias *graph.Node) *graph.Node { return vjp.Attention(q, k, v, bias, scale) }
	for _, c := range []struct {
		name string
		f    func(q, k, v, bias *graph.Node) *graph.Node
	}{{"fused", fused}, {"plain", plain}} {
		b.Run(c.name, func(b *testing.B) {
			exec := graph.MustNewExec(fastOnce(), func(in []*graph.Node) []*graph.Node {
				out := c.f(in[0], in[1], in[2], in[3])
				return append([]*graph.Node{out}, graph.Gradient(graph.ReduceAllSum(graph.Mul(out, in[4])), in[:3]...)...)
			})
			benchCPU(b, exec, q, k, v, biasT, w)
		})
	}
}

// BenchmarkFusedRope times, on this backend, the rotary embedding of one
// 25M layer's queries (8 × 256 positions, 8 heads of 64; tables
// broadcast over the heads) and its gradient: "fused" is vjp.Rope,
// "plain" the form model/qwen built before it (rotate_half as a 2×2
// contraction over the halves, GoMLX's gradient). CPU ms per execution:
//
//	go test -run '^$' -bench FusedRope -benchtime 20x ./backend/gocpu/
func BenchmarkFusedRope(b *testing.B) {
	const batch, t, heads, h = 8, 256, 8, 64
	r := rand.New(rand.NewPCG(1, 3))
	x, angles, w := randTensor(r, dtypes.Float32, batch, t, heads, h), randTensor(r, dtypes.Float32, batch, t, 1, h), randTensor(r, dtypes.Float32, batch, t, heads, h)
	plain := func(x, cos, sin *graph.Node) *graph.Node {
		halves := graph.Reshape(x, batch, t, heads, 2, h/2)
		rot := graph.Const(x.Graph(), [][]float32{{0, -1}, {1, 0}})
		rotated := graph.Reshape(graph.Einsum("btnjh,ij->btnih", halves, rot), batch, t, heads, h)
		return graph.Add(graph.Mul(x, cos), graph.Mul(rotated, sin))
	}
	for _, c := range []struct {
		name string
		f    func(x, cos, sin *graph.Node) *graph.Node
	}{{"fused", vjp.Rope}, {"plain", plain}} {
		b.Run(c.name, func(b *testing.B) {
			exec := graph.MustNewExec(fastOnce(), func(in []*graph.Node) []*graph.Node {
				cos, sin := graph.StopGradient(graph.Cos(in[1])), graph.StopGradient(graph.Sin(in[1]))
				out := c.f(in[0], cos, sin)
				return []*graph.Node{out, graph.Gradient(graph.ReduceAllSum(graph.Mul(out, in[2])), in[0])[0]}
			})
			benchCPU(b, exec, x, angles, w)
		})
	}
}

// benchCPU runs exec on args once (compiling it), then b.N times, and
// reports the process CPU milliseconds per execution.
func benchCPU(b *testing.B, exec *graph.Exec, args ...any) {
	run := func() {
		for _, o := range exec.MustExec(args...) {
			o.FinalizeAll()
		}
	}
	run()
	t0 := cputime.Process()
	for b.Loop() {
		run()
	}
	b.ReportMetric((cputime.Process()-t0).Seconds()/float64(b.N)*1e3, "cpu-ms/op")
}

// BenchmarkFusedBroadcast times, with and without loop fusion
// ("nofuse"), a normalisation as model/qwen writes it, on one 25M layer's
// [8, 256, 512] activations: x / √(mean x² + ε) (a [8, 256, 1] value per
// row) times the weight (a [512] vector broadcast over the rows), whose
// Div and Mul fuse into one pass. CPU ms per execution:
//
//	go test -run '^$' -bench FusedBroadcast -benchtime 50x ./backend/gocpu/
func BenchmarkFusedBroadcast(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 4))
	x, w := randTensor(r, dtypes.Float32, 8, 256, 512), randTensor(r, dtypes.Float32, 512)
	for _, c := range []struct {
		name string
		be   func() backends.Backend
	}{{"fused", fastOnce}, {"nofuse", noFuseOnce}} {
		b.Run(c.name, func(b *testing.B) {
			exec := graph.MustNewExec(c.be(), func(x, w *graph.Node) *graph.Node {
				return graph.Mul(vjp.RMSNormalize(x, 1e-6), graph.Reshape(w, 1, 1, 512))
			})
			xc, err := x.LocalClone() // a tensor binds to the first backend using it
			if err != nil {
				b.Fatal(err)
			}
			wc, err := w.LocalClone()
			if err != nil {
				b.Fatal(err)
			}
			benchCPU(b, exec, xc, wc)
		})
	}
}
