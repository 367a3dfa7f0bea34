package gocpu

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"

	"github.com/cas-engine/cas/model/vjp"
)

// TestFusedSwiGLU: the SwiGLU forward and both gradients run as fused
// kernels (MulSilu twice, SiluGradMul once, no Logistic), equal to
// simplego's evaluation of the same graph to float32 rounding, over odd
// shapes (one element, T = 1, zero rows, long rows); GoMLX's own VJP of
// silu(g) ⊙ u also gives the same gradients.
func TestFusedSwiGLU(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 9))
	for _, dims := range [][]int{{1, 1, 1}, {2, 1, 7}, {2, 3, 300}, {0, 5}, {3, 4099}} {
		t.Run(fmt.Sprint(dims), func(t *testing.T) {
			gate, up, w := randTensor(r, dtypes.Float32, dims...), randTensor(r, dtypes.Float32, dims...), randTensor(r, dtypes.Float32, dims...)
			build := func(custom bool) func(in []*graph.Node) []*graph.Node {
				return func(in []*graph.Node) []*graph.Node {
					var y *graph.Node
					if custom {
						y = vjp.SwiGLU(in[0], in[1])
					} else {
						y = graph.Mul(graph.Mul(in[0], graph.Logistic(in[0])), in[1])
					}
					if in[0].Shape().Size() == 0 {
						return []*graph.Node{y}
					}
					loss := graph.ReduceAllSum(graph.Mul(graph.Mul(y, in[2]), graph.Cos(y)))
					return append([]*graph.Node{y}, graph.Gradient(loss, in[0], in[1])...)
				}
			}
			rec := &planRecorder{Backend: fastOnce().(*Backend)}
			got, want, _, _ := runFastPlain(t, rec, build(true), build(false), gate, up, w)
			for o, name := range []string{"swiglu", "gate gradient", "up gradient"}[:len(want)] {
				assertRelNear(t, name, got[o], want[o], 2e-6)
			}
			if len(want) == 1 {
				return
			}
			steps := rec.stepCounts()
			if steps["MulSilu"] != 2 || steps["SiluGradMul"] != 1 || steps["Logistic"] != 0 {
				t.Errorf("not fused: steps %v", steps)
			}
		})
	}
}
