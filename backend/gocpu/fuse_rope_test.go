package gocpu

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"

	"github.com/cas-engine/cas/model/vjp"
)

// TestFusedRope: vjp.Rope's forward and gradient run as one pass each
// (the plan has one Rope and one RopeGrad step and no Concatenate), equal
// to simplego's evaluation of the same graph to float32 rounding, with
// the tables broadcast over the heads or of x's full shape, one head and
// one position.
func TestFusedRope(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 17))
	for _, c := range []struct{ x, table []int }{
		{[]int{2, 5, 3, 8}, []int{2, 5, 1, 8}},
		{[]int{1, 1, 1, 2}, []int{1, 1, 1, 2}},
		{[]int{3, 7, 1, 64}, []int{3, 7, 1, 64}},
		{[]int{2, 4, 3, 6}, []int{2, 4, 3, 6}},
		{[]int{2, 33, 4, 64}, []int{2, 33, 1, 64}},
	} {
		t.Run(fmt.Sprintf("%v/%v", c.x, c.table), func(t *testing.T) {
			x, angles, w := randTensor(r, dtypes.Float32, c.x...), randTensor(r, dtypes.Float32, c.table...), randTensor(r, dtypes.Float32, c.x...)
			fn := func(in []*graph.Node) []*graph.Node {
				y := vjp.Rope(in[0], graph.Cos(in[1]), graph.Sin(in[1]))
				loss := graph.ReduceAllSum(graph.Mul(graph.Mul(y, in[2]), graph.Cos(y)))
				return []*graph.Node{y, graph.Gradient(loss, in[0])[0]}
			}
			rec := &planRecorder{Backend: fastOnce().(*Backend)}
			got, want, _, _ := runFastPlain(t, rec, fn, fn, x, angles, w)
			assertRelNear(t, "rope", got[0], want[0], 2e-6)
			assertRelNear(t, "gradient", got[1], want[1], 2e-6)
			steps := rec.stepCounts()
			if steps["Rope"] != 1 || steps["RopeGrad"] != 1 || steps["Concatenate"] != 0 {
				t.Errorf("not fused: steps %v", steps)
			}
		})
	}
}
