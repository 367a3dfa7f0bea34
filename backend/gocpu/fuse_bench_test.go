package gocpu

import (
	"math/rand/v2"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"

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
				run := func() {
					for _, o := range exec.MustExec(args...) {
						o.FinalizeAll()
					}
				}
				run() // compile
				t0 := cputime.Process()
				for b.Loop() {
					run()
				}
				b.ReportMetric((cputime.Process()-t0).Seconds()/float64(b.N)*1e3, "cpu-ms/op")
			})
		}
	}
}
