package gocpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/cas-engine/cas/model/vjp"
)

// TestFusedAttention: vjp.Attention's forward and backward each run as
// one blocked kernel (the plan has one Attention and one AttentionGrad
// step, no softmax and no value as large as the [B, H, T, T] scores),
// with the output and the gradients with respect to q, k and v equal to
// simplego's evaluation of the same graph to float32 rounding: T = 1, odd
// T and head sizes, T past one key tile (256), GQA (KV heads < heads and
// one KV head), batch > 1 with left padding (padded rows see no key) under
// the causal mask, as model/qwen builds it.
func TestFusedAttention(t *testing.T) {
	cases := []struct{ b, heads, kv, t, h, pad int }{
		{1, 1, 1, 1, 4, 0},
		{2, 4, 2, 1, 8, 0},
		{3, 6, 2, 13, 5, 3},
		{2, 4, 1, 40, 16, 7},
		{2, 8, 2, 300, 64, 11},
	}
	r := rand.New(rand.NewPCG(5, 19))
	for _, c := range cases {
		t.Run(fmt.Sprintf("B%d_H%d_kv%d_T%d_h%d_pad%d", c.b, c.heads, c.kv, c.t, c.h, c.pad), func(t *testing.T) {
			bias := make([]float32, c.b*c.t*c.t)
			for b := range c.b {
				for i := range c.t {
					for s := range c.t {
						if s > i || s < b*c.pad {
							bias[(b*c.t+i)*c.t+s] = -1e30
						}
					}
				}
			}
			args := []*tensors.Tensor{
				randTensor(r, dtypes.Float32, c.b, c.t, c.heads, c.h), randTensor(r, dtypes.Float32, c.b, c.t, c.kv, c.h),
				randTensor(r, dtypes.Float32, c.b, c.t, c.kv, c.h), tensors.FromFlatDataAndDimensions(bias, c.b, c.t, c.t),
				randTensor(r, dtypes.Float32, c.b, c.t, c.heads, c.h), randTensor(r, dtypes.Float32, c.heads*c.h, 7),
			}
			fn := func(in []*graph.Node) []*graph.Node {
				o := vjp.Attention(in[0], in[1], in[2], in[3], 1/math.Sqrt(float64(c.h)))
				// A loss whose adjoint varies: Σ o ⊙ w ⊙ cos(o), or, as in
				// the model, through an output projection of o reshaped to
				// [B, T, H·h]: Σ cos(o·W) (dO then arrives as a Reshape of
				// a [B, T, H·h] gradient).
				loss := graph.ReduceAllSum(graph.Mul(graph.Mul(o, in[4]), graph.Cos(o)))
				if c.t%2 == 1 {
					proj := graph.Einsum("btd,de->bte", graph.Reshape(o, c.b, c.t, c.heads*c.h), in[5])
					loss = graph.ReduceAllSum(graph.Cos(proj))
				}
				return append([]*graph.Node{o}, graph.Gradient(loss, in[0], in[1], in[2])...)
			}
			rec := &planRecorder{Backend: fastOnce().(*Backend)}
			got, want, _, _ := runFastPlain(t, rec, fn, fn, args...)
			for o, name := range []string{"output", "dq", "dk", "dv"} {
				assertRelNear(t, name, got[o], want[o], 3e-5)
			}
			steps := rec.stepCounts()
			if steps["Attention"] != 1 || steps["AttentionGrad"] != 1 || steps["Softmax"] != 0 || steps["Exp"] != 0 {
				t.Errorf("not fused: steps %v", steps)
			}
			if scores := c.b * c.heads * c.t * c.t; c.t > 2*c.h && rec.last.largest >= scores {
				t.Errorf("the plan holds a value of %d elements, the scores have %d", rec.last.largest, scores)
			}
		})
	}
}
