package gocpu

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"

	"github.com/cas-engine/cas/model/vjp"
)

// TestFusedRMSNorm: Σ x² and Σ g⊙y run as row dot products and the input
// gradient as one RMSNormGrad step, equal to simplego's evaluation of
// GoMLX's own RMSNorm and VJP to float32 rounding, over one element per
// row (not fused: a last axis of 1), T = 1 and long rows. (GoMLX's
// ReduceMean divides by zero building a graph with zero rows; the kernels'
// own tests cover them.)
func TestFusedRMSNorm(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 10))
	const eps = 1e-6
	for _, dims := range [][]int{{2, 3, 1}, {1, 1, 8}, {2, 3, 64}, {3, 5000}} {
		t.Run(fmt.Sprint(dims), func(t *testing.T) {
			x, w := randTensor(r, dtypes.Float32, dims...), randTensor(r, dtypes.Float32, dims...)
			build := func(custom bool) func(in []*graph.Node) []*graph.Node {
				return func(in []*graph.Node) []*graph.Node {
					var y *graph.Node
					if custom {
						y = vjp.RMSNormalize(in[0], eps)
					} else {
						ms := graph.ReduceAndKeep(graph.Square(in[0]), graph.ReduceMean, -1)
						y = graph.Div(in[0], graph.Sqrt(graph.AddScalar(ms, eps)))
					}
					if in[0].Shape().Size() == 0 {
						return []*graph.Node{y}
					}
					loss := graph.ReduceAllSum(graph.Mul(graph.Mul(y, in[1]), graph.Cos(y)))
					return []*graph.Node{y, graph.Gradient(loss, in[0])[0]}
				}
			}
			rec := &planRecorder{Backend: fastOnce().(*Backend)}
			got, want, _, _ := runFastPlain(t, rec, build(true), build(false), x, w)
			// One element per row: y = ±1 nearly, and the gradient
			// g − y·mean(g⊙y) cancels to about ε/x² of g.
			tol := 2e-6
			if dims[len(dims)-1] == 1 {
				tol = 1e-4
			}
			for o, name := range []string{"normalised", "gradient"}[:len(want)] {
				assertRelNear(t, name, got[o], want[o], tol)
			}
			if len(want) == 1 || dims[len(dims)-1] == 1 {
				return
			}
			steps := rec.stepCounts()
			if steps["RowDots"] != 2 || steps["RMSNormGrad"] != 1 || steps["Sub"] != 0 {
				t.Errorf("not fused: steps %v", steps)
			}
		})
	}
}
