package qwen

// Einsum letters used in this file:
//
//	b batch row          t query position (the tokens of this call)
//	s key slot (the sequence, or the slots of a KV cache)
//	d hidden_size        o output features of a projection
//	k key/value head     r query head within its KV group (num_attention_heads / num_key_value_heads)
//	h head_dim           v vocabulary
//
// The forward pass, per decoder block (nanoGPT's two lines, RMS-normalised):
//
//	x = x + o_proj(attention(rope(q(n₁(x))), rope(k(n₁(x))), v(n₁(x))))
//	x = x + down(silu(gate(n₂(x))) ⊙ up(n₂(x)))
//
// then logits = lm_head(norm(x)).

import (
	"math"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/ml/context"

	"github.com/cas-engine/cas/model/vjp"
)

// maskedScore is the score given to disallowed (future or padded) keys. It
// is finite so that a query with no allowed key (a padded position) gets a
// uniform, NaN-free distribution, as with PyTorch's masked_fill(finfo.min).
const maskedScore = -1e30

// linear computes x·wᵀ + b with w in Hugging Face's [out, in] layout,
// contracting the last axis of both: x [..., in] → [..., out]. b may be nil.
func linear(x, w, b *graph.Node) *graph.Node {
	y := graph.DotGeneral(x, []int{x.Rank() - 1}, nil, w, []int{1}, nil)
	if b != nil {
		y = graph.Add(y, graph.ExpandLeftToRank(b, y.Rank()))
	}
	return y
}

// rmsNorm computes x / sqrt(mean(x², last axis) + eps) ⊙ w (Zhang &
// Sennrich 2019; Hugging Face's Qwen2RMSNorm): the normalisation in float32,
// its result cast back to x's dtype before the product with w, as Hugging
// Face does for bfloat16 models. x [..., n], w [n].
func rmsNorm(x, w *graph.Node, eps float64) *graph.Node {
	dt := x.DType()
	y := graph.ConvertDType(vjp.RMSNormalize(graph.ConvertDType(x, dtypes.Float32), eps), dt)
	return graph.Mul(y, graph.ExpandLeftToRank(graph.ConvertDType(w, dt), y.Rank()))
}

// ropeTables returns cos and sin [B, T, 1, h] of the rotary embedding (Su et
// al. 2021) at positions pos [B, T]: angle(p, i) = p · θ^(−2i/h) for
// i < h/2, repeated for both halves of the head (Hugging Face's layout).
func ropeTables(pos *graph.Node, headDim int, theta float64) (cos, sin *graph.Node) {
	g := pos.Graph()
	half := headDim / 2
	inv := make([]float32, half)
	for i := range inv {
		inv[i] = float32(1 / math.Pow(theta, float64(2*i)/float64(headDim)))
	}
	invFreq := graph.Const(g, [][][]float32{{inv}})                                  // [1, 1, h/2]
	p := graph.ExpandAxes(graph.ConvertDType(pos, dtypes.Float32), -1)               // [B, T, 1]
	angles := graph.Mul(p, invFreq)                                                  // [B, T, h/2]
	emb := graph.ExpandAxes(graph.Concatenate([]*graph.Node{angles, angles}, -1), 2) // [B, T, 1, h]
	return graph.Cos(emb), graph.Sin(emb)
}

// applyRope rotates x [B, T, n, h] by the tables of ropeTables:
// x·cos + rotate_half(x)·sin, with rotate_half(x) = [−x₂, x₁] for the halves
// x₁, x₂ of the head, as vjp.Rope (its gradient written directly; gocpu
// runs each as one pass).
func applyRope(x, cos, sin *graph.Node) *graph.Node {
	return vjp.Rope(x, graph.ConvertDType(cos, x.DType()), graph.ConvertDType(sin, x.DType()))
}

// attend is grouped-query attention (Ainslie et al. 2023) over keys
// [B, k, S, h] and values [B, k, h, S] for queries q [B, T, H, h], where
// bias [B, T, S] (maskBias) is 0 where a query may see a slot and
// maskedScore where it may not:
//
//	softmax_s(q·kᵀ/√h + bias) · v   → [B, T, H·h]
//
// The bias is added with size-1 broadcasting over the heads, so neither
// the mask nor its gradient is materialised per head (a Where would be,
// forward and backward).
func attend(c *Config, q, keys, values, bias *graph.Node) *graph.Node {
	dims := q.Shape().Dimensions
	b, t := dims[0], dims[1]
	kv, r, h := c.NumKeyValueHeads, c.KVGroups(), c.HeadDim
	s := keys.Shape().Dimensions[2]
	q5 := graph.Reshape(q, b, t, kv, r, h)                // [B, T, k, r, h]
	scores := graph.Einsum("btkrh,bksh->bkrts", q5, keys) // [B, k, r, T, S]
	scores = graph.MulScalar(scores, 1/math.Sqrt(float64(h)))
	scores = graph.Add(scores, graph.Reshape(bias, b, 1, 1, t, s))
	// The softmax runs in float32 whatever the activations' dtype (Hugging
	// Face's eager attention: softmax(…, dtype=float32).to(q.dtype)).
	probs := graph.ConvertDType(vjp.Softmax(graph.ConvertDType(scores, dtypes.Float32)), q.DType()) // [B, k, r, T, S]
	out := graph.Einsum("bkrts,bkhs->btkrh", probs, values)                                         // [B, T, k, r, h]
	return graph.Reshape(out, b, t, kv*r*h)                                                         // [B, T, H·h]
}

// attentionFn computes the attention output [B, T, H·h] of layer l from
// the rotated queries q [B, T, H, h] and the new keys/values [B, T, k, h].
type attentionFn func(l int, q, k, v *graph.Node) *graph.Node

// decoder runs the embedding and every decoder block over ids [B, T] at
// positions pos [B, T] and returns the final-normed hidden states [B, T, D].
func decoder(c *Config, w *weights, ids, pos *graph.Node, attention attentionFn) *graph.Node {
	dims := ids.Shape().Dimensions
	b, t := dims[0], dims[1]
	x := graph.Gather(w.Embed, graph.ExpandAxes(ids, -1)) // [B, T, D]
	cos, sin := ropeTables(pos, c.HeadDim, c.RopeTheta)   // [B, T, 1, h]
	eps := c.RMSNormEps
	for l := range w.Layers {
		lw := &w.Layers[l]
		n1 := rmsNorm(x, lw.InputNorm, eps)
		q := graph.Reshape(linear(n1, lw.Q, lw.QBias), b, t, c.NumAttentionHeads, c.HeadDim) // [B, T, H, h]
		k := graph.Reshape(linear(n1, lw.K, lw.KBias), b, t, c.NumKeyValueHeads, c.HeadDim)  // [B, T, k, h]
		v := graph.Reshape(linear(n1, lw.V, lw.VBias), b, t, c.NumKeyValueHeads, c.HeadDim)  // [B, T, k, h]
		if lw.QNorm != nil {
			q = rmsNorm(q, lw.QNorm, eps)
			k = rmsNorm(k, lw.KNorm, eps)
		}
		q, k = applyRope(q, cos, sin), applyRope(k, cos, sin)
		x = graph.Add(x, linear(attention(l, q, k, v), lw.O, lw.OBias))
		n2 := rmsNorm(x, lw.PostNorm, eps)
		x = graph.Add(x, linear(vjp.SwiGLU(linear(n2, lw.Gate, nil), linear(n2, lw.Up, nil)), lw.Down, nil))
	}
	return rmsNorm(x, w.Norm, eps)
}

// positionsFromMask returns position ids cumsum(mask) − 1, clamped at 0
// [B, T] int32: real tokens count 0, 1, 2, … whatever the padding before
// them (Hugging Face generate's convention for left-padded batches).
//
// The prefix sum is Hillis and Steele's: ⌈log₂ T⌉ rounds of m += m shifted
// right by 1, 2, 4, … (exact in int32). GoMLX's CumSum is a sum-pool with
// a T-wide window, O(T²) per row on the pure-Go backends: about 5% of
// the CPU time of the demo policy's warm start.
func positionsFromMask(mask *graph.Node) *graph.Node {
	m := graph.ConvertDType(mask, dtypes.Int32)
	dims := m.Shape().Dimensions
	b, t := dims[0], dims[1]
	for k := 1; k < t; k *= 2 {
		shifted := graph.Concatenate([]*graph.Node{
			graph.Zeros(m.Graph(), shapes.Make(dtypes.Int32, b, k)),
			graph.SliceAxis(m, 1, graph.AxisRange(0, t-k)),
		}, 1)
		m = graph.Add(m, shifted)
	}
	return graph.MaxScalar(graph.SubScalar(m, 1), 0)
}

// causalAllowed returns allowed [B, T, T]: key s is visible to query t when
// s ≤ t and mask[b, s] is set.
func causalAllowed(mask *graph.Node) *graph.Node {
	g := mask.Graph()
	dims := mask.Shape().Dimensions
	b, t := dims[0], dims[1]
	qi := graph.Iota(g, shapes.Make(dtypes.Int32, t, t), 0)
	ki := graph.Iota(g, shapes.Make(dtypes.Int32, t, t), 1)
	causal := graph.BroadcastToDims(graph.ExpandAxes(graph.LessOrEqual(ki, qi), 0), b, t, t)
	valid := graph.BroadcastToDims(graph.ExpandAxes(graph.ConvertDType(mask, dtypes.Bool), 1), b, t, t)
	return graph.LogicalAnd(causal, valid)
}

// maskBias turns allowed [B, T, S] into the additive attention bias of
// attend in dtype dt (the activations', which are the embedding's): 0 where
// allowed, maskedScore elsewhere.
func maskBias(allowed *graph.Node, dt dtypes.DType) *graph.Node {
	g := allowed.Graph()
	return graph.Where(allowed, graph.Zeros(g, shapes.Make(dt)), graph.Scalar(g, dt, maskedScore))
}

// HiddenStates builds the final-normed hidden states [B, T, D] of the model
// whose variables live under ctx's scope, for ids [B, T] and attention mask
// [B, T] (1 for real tokens; left or right padding). It is differentiable
// with respect to the model variables.
func HiddenStates(ctx *context.Context, c *Config, ids, mask *graph.Node) *graph.Node {
	w := bindWeights(ctx, ids.Graph(), c)
	return hiddenStates(c, w, ids, mask)
}

// hiddenStates runs the model over a whole sequence (no KV cache). In
// float32 its attention is vjp.Attention, whose forward and closed-form
// backward the gocpu backend runs as blocked kernels that never write the
// [B, H, T, T] scores (backend/gocpu/fuse_attention.go); in other compute
// dtypes, and in the KV-cache step graph (decoding), it is attend.
func hiddenStates(c *Config, w *weights, ids, mask *graph.Node) *graph.Node {
	bias := maskBias(causalAllowed(mask), w.Embed.DType())
	return decoder(c, w, graph.ConvertDType(ids, dtypes.Int32), positionsFromMask(mask), func(_ int, q, k, v *graph.Node) *graph.Node {
		if q.DType() == dtypes.Float32 {
			dims := q.Shape().Dimensions
			o := vjp.Attention(q, k, v, bias, 1/math.Sqrt(float64(c.HeadDim))) // [B, T, H, h]
			return graph.Reshape(o, dims[0], dims[1], dims[2]*dims[3])
		}
		keys := graph.TransposeAllAxes(k, 0, 2, 1, 3)   // [B, k, S, h]
		values := graph.TransposeAllAxes(v, 0, 2, 3, 1) // [B, k, h, S]
		return attend(c, q, keys, values, bias)
	})
}

// Logits builds the next-token logits [B, T, V] (float32, whatever the
// compute dtype) for ids [B, T] under the attention mask [B, T]. Logits at
// padded positions are not meaningful.
func Logits(ctx *context.Context, c *Config, ids, mask *graph.Node) *graph.Node {
	w := bindWeights(ctx, ids.Graph(), c)
	return graph.ConvertDType(linear(hiddenStates(c, w, ids, mask), w.lmHead(), nil), dtypes.Float32)
}
