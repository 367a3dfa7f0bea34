package vjp

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
)

// refAttention is the unfused attention model/qwen built before
// Attention: scores scaled after the product, graph.Softmax, GoMLX's
// own gradients.
func refAttention(q, k, v, bias *graph.Node, scale float64) *graph.Node {
	d := q.Shape().Dimensions
	b, t, heads, h := d[0], d[1], d[2], d[3]
	kv := k.Shape().Dimensions[2]
	q5 := graph.Reshape(q, b, t, kv, heads/kv, h)
	keys := graph.TransposeAllAxes(k, 0, 2, 1, 3)   // [B, kv, S, h]
	values := graph.TransposeAllAxes(v, 0, 2, 3, 1) // [B, kv, h, S]
	scores := graph.MulScalar(graph.Einsum("btkrh,bksh->bkrts", q5, keys), scale)
	scores = graph.Add(scores, graph.Reshape(bias, b, 1, 1, t, t))
	out := graph.Einsum("bkrts,bkhs->btkrh", graph.Softmax(scores, -1), values)
	return graph.Reshape(out, b, t, heads, h)
}

// TestAttentionGradient: Attention equals the unfused attention and
// GoMLX's gradients of it with respect to q, k and v, on the pure-Go
// backend and on gocpu (the blocked kernel): T = 1, odd T and head
// sizes, GQA (2 or 3 query heads per KV head), batch > 1 with left
// padding (whole rows masked, as padded positions are) under the causal
// mask, and a random finite bias.
func TestAttentionGradient(t *testing.T) {
	cases := []struct {
		b, heads, kv, t, h, pad int
		randomBias              bool
	}{
		{1, 1, 1, 1, 4, 0, false},
		{2, 4, 2, 1, 8, 0, false},
		{2, 4, 2, 7, 8, 2, false},
		{3, 6, 2, 13, 5, 4, false},
		{2, 2, 2, 20, 16, 0, true},
		{2, 8, 2, 67, 64, 5, false},
	}
	r := rand.New(rand.NewPCG(19, 7))
	for _, c := range cases {
		t.Run(fmt.Sprintf("B%d_H%d_kv%d_T%d_h%d_pad%d_rand%v", c.b, c.heads, c.kv, c.t, c.h, c.pad, c.randomBias), func(t *testing.T) {
			bias := make([]float32, c.b*c.t*c.t)
			for b := range c.b {
				for i := range c.t {
					for s := range c.t {
						if c.randomBias {
							bias[(b*c.t+i)*c.t+s] = float32(r.NormFloat64())
						}
						if s > i || s < b*c.pad {
							bias[(b*c.t+i)*c.t+s] = -1e30
						}
					}
				}
			}
			scale := 1 / math.Sqrt(float64(c.h))
			biasNode := func(g *graph.Graph) *graph.Node {
				return graph.Reshape(graph.Const(g, bias), c.b, c.t, c.t)
			}
			checkCustomVJP(t,
				func(in []*graph.Node) *graph.Node {
					return Attention(in[0], in[1], in[2], biasNode(in[0].Graph()), scale)
				},
				func(in []*graph.Node) *graph.Node {
					return refAttention(in[0], in[1], in[2], biasNode(in[0].Graph()), scale)
				},
				3e-5,
				randInput(r, 1, c.b, c.t, c.heads, c.h), randInput(r, 1, c.b, c.t, c.kv, c.h), randInput(r, 1, c.b, c.t, c.kv, c.h))
		})
	}
}
