package bert

import (
	"math"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/ml/context"
)

// Einsum letters used below:
//
//	b batch   t,q query position   k key position
//	n head    d head dimension     h hidden size   o output features

// forward returns the last hidden state [b, t, h] for ids [b, t] (int32) and
// mask [b, t] (float32, 1 for real tokens, 0 for padding).
func (w *Weights) forward(cfg Config, ids, mask *graph.Node) *graph.Node {
	g := ids.Graph()
	val := func(v *context.Variable) *graph.Node { return v.ValueGraph(g) }
	B, T := ids.Shape().Dimensions[0], ids.Shape().Dimensions[1]
	H, nH, dH := cfg.HiddenSize, cfg.NumAttentionHeads, cfg.HeadDim()
	eps := cfg.LayerNormEps

	// Embeddings: word + absolute position + token type 0.
	word := graph.Gather(val(w.Embeddings.Word), graph.InsertAxes(ids, -1))             // [b, t, h]
	pos := graph.Slice(val(w.Embeddings.Position), graph.AxisRange(0, T))               // [t, h]
	typ := graph.Slice(val(w.Embeddings.Type), graph.AxisRange(0, 1))                   // [1, h]
	x := graph.Add(graph.Add(word, graph.InsertAxes(pos, 0)), graph.InsertAxes(typ, 0)) // [b, t, h]
	x = layerNorm(x, val(w.Embeddings.Norm.Gamma), val(w.Embeddings.Norm.Beta), eps)    // [b, t, h]

	// Additive attention bias: 0 for real keys, the lowest float32 for padding,
	// as Hugging Face's get_extended_attention_mask does.
	bias := graph.MulScalar(graph.OneMinus(mask), -math.MaxFloat32) // [b, k]
	bias = graph.Reshape(bias, B, 1, 1, T)                          // [b, 1, 1, k]
	scale := 1 / math.Sqrt(float64(dH))

	for i := range w.Layers {
		l := &w.Layers[i]
		// Self-attention.
		q := graph.Reshape(linear(x, val(l.Query.Weight), val(l.Query.Bias)), B, T, nH, dH) // [b, t, n, d]
		k := graph.Reshape(linear(x, val(l.Key.Weight), val(l.Key.Bias)), B, T, nH, dH)     // [b, k, n, d]
		v := graph.Reshape(linear(x, val(l.Value.Weight), val(l.Value.Bias)), B, T, nH, dH) // [b, k, n, d]
		scores := graph.MulScalar(graph.Einsum("bqnd,bknd->bnqk", q, k), scale)             // [b, n, q, k]
		probs := graph.Softmax(graph.Add(scores, bias), -1)                                 // [b, n, q, k]
		att := graph.Einsum("bnqk,bknd->bqnd", probs, v)                                    // [b, q, n, d]
		att = graph.Reshape(att, B, T, H)                                                   // [b, t, h]
		attn := linear(att, val(l.AttnOut.Weight), val(l.AttnOut.Bias))                     // [b, t, h]
		x = layerNorm(graph.Add(x, attn), val(l.AttnNorm.Gamma), val(l.AttnNorm.Beta), eps) // [b, t, h]

		// Feed-forward with exact GELU.
		u := gelu(linear(x, val(l.Up.Weight), val(l.Up.Bias)))                         // [b, t, i]
		y := linear(u, val(l.Down.Weight), val(l.Down.Bias))                           // [b, t, h]
		x = layerNorm(graph.Add(x, y), val(l.OutNorm.Gamma), val(l.OutNorm.Beta), eps) // [b, t, h]
	}
	return x
}

// linear computes x Wᵀ + b contracting x's last axis with W's last axis
// (W in [out, in] layout): [..., in] → [..., out].
func linear(x, w, b *graph.Node) *graph.Node {
	y := graph.DotGeneral(x, []int{x.Rank() - 1}, nil, w, []int{1}, nil) // [..., out]
	return graph.Add(y, leading(b, y.Rank()))                            // [..., out]
}

// leading prepends size-1 axes to x until it has the given rank, for
// broadcasting a [h] parameter against [..., h] activations.
func leading(x *graph.Node, rank int) *graph.Node {
	if x.Rank() >= rank {
		return x
	}
	axes := make([]int, rank-x.Rank())
	return graph.InsertAxes(x, axes...)
}

// layerNorm is γ ⊙ (x − μ) / √(σ² + ε) + β over the last axis, with the
// biased variance σ² = mean((x − μ)²) as torch.nn.LayerNorm computes it.
func layerNorm(x, gamma, beta *graph.Node, eps float64) *graph.Node {
	mu := graph.ReduceAndKeep(x, graph.ReduceMean, -1)
	xc := graph.Sub(x, mu)
	variance := graph.ReduceAndKeep(graph.Square(xc), graph.ReduceMean, -1)
	y := graph.Mul(xc, graph.Rsqrt(graph.AddScalar(variance, eps)))
	return graph.Add(graph.Mul(y, leading(gamma, x.Rank())), leading(beta, x.Rank()))
}

// gelu is the exact GELU, u·½(1 + erf(u/√2)), Hugging Face's "gelu".
func gelu(u *graph.Node) *graph.Node {
	return graph.Mul(u, graph.MulScalar(graph.AddScalar(graph.Erf(graph.MulScalar(u, 1/math.Sqrt2)), 1), 0.5))
}

// meanPoolNormalize returns E5's sentence embedding [b, h] from hidden
// [b, t, h] and mask [b, t]:
//
//	h̄ = Σₜ mₜ hₜ / max(Σₜ mₜ, 1e-9),   e = h̄ / max(‖h̄‖₂, 1e-12)
//
// (sentence-transformers' mean Pooling followed by Normalize).
func meanPoolNormalize(hidden, mask *graph.Node) *graph.Node {
	m := graph.InsertAxes(mask, -1)                                                  // [b, t, 1]
	sum := graph.ReduceSum(graph.Mul(hidden, m), 1)                                  // [b, h]
	count := graph.MaxScalar(graph.ReduceSum(mask, 1), 1e-9)                         // [b]
	mean := graph.Div(sum, graph.InsertAxes(count, -1))                              // [b, h]
	norm := graph.Sqrt(graph.ReduceAndKeep(graph.Square(mean), graph.ReduceSum, -1)) // [b, 1]
	return graph.Div(mean, graph.MaxScalar(norm, 1e-12))                             // [b, h]
}
