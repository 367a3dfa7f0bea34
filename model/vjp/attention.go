package vjp

import (
	"fmt"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

// Attention is grouped-query attention (Ainslie et al. 2023) over
// queries q [B, T, H, h] (heads in KV-group order: head j·r + i uses KV
// head j, r = H/kv), keys and values k, v [B, T, kv, h] and an additive
// bias [B, T, T] broadcast over heads (0 where query t may see key s,
// −1e30 where it may not; it gets no gradient):
//
//	s = (q·scale)·kᵀ + bias,   o = softmax_s(s)·v   → [B, T, H, h],
//
// with the gradients written in closed form (FlashAttention-2's backward,
// Dao 2023), for dO = ∂L/∂o, the row maximum m of s and the sum
// l = Σ_s e^(s − m) saved by the forward pass, P = e^(s − m)/l and
// D = Σ_h dO ⊙ o per row:
//
//	dV = Pᵀ·dO,   dS = P ⊙ (dO·vᵀ − D),   dQ = dS·k·scale,   dK = dSᵀ·q·scale,
//
// where GoMLX's VJP would differentiate through the softmax and the two
// products. (FlashAttention-2 saves lse = m + log l instead; for a row
// with no unmasked key, a padded position, −1e30 + log l rounds to −1e30
// in float32 and e^(s − lse) would be 1 where the softmax is 1/T.) The
// forward pass is one node, o, m and l side by side ([B, kv, T, r, h+2],
// attentionForward), and so is the backward (dQ, dK
// and dV side by side, [B, kv, T, r+2, h], attentionBackward), so that the
// gocpu backend recognises each and runs it as one blocked kernel that
// never writes the [B, H, T, T] scores (tensor.Attention;
// backend/gocpu/fuse_attention.go); other backends compute these graphs
// as written. Each gradient reaches its input through a straight-through
// term x − StopGradient(x) added to the output (k's and v's placed at
// query head 0 of their group, zero elsewhere), whose identity's custom
// VJP returns that input's part of the packed gradient. The inputs must be
// finite.
func Attention(q, k, v, bias *graph.Node, scale float64) *graph.Node {
	dims := q.Shape().Dimensions
	if q.Rank() != 4 || k.Rank() != 4 || !k.Shape().Equal(v.Shape()) || bias.Rank() != 3 {
		panic(fmt.Errorf("vjp.Attention: want q [B,T,H,h], k and v [B,T,kv,h], bias [B,T,T]; got %s, %s, %s, %s",
			q.Shape(), k.Shape(), v.Shape(), bias.Shape()))
	}
	b, t, heads, h := dims[0], dims[1], dims[2], dims[3]
	kv := k.Shape().Dimensions[2]
	if kv == 0 || heads%kv != 0 || k.Shape().Dimensions[0] != b || k.Shape().Dimensions[1] != t || k.Shape().Dimensions[3] != h {
		panic(fmt.Errorf("vjp.Attention: keys %s do not match queries %s", k.Shape(), q.Shape()))
	}
	r := heads / kv
	qs := graph.MulScalar(graph.StopGradient(q), scale)
	ks, vs := graph.StopGradient(k), graph.StopGradient(v)
	bias = graph.StopGradient(bias)
	fwd := attentionForward(qs, ks, vs, bias, kv) // [B, kv, T, r, h+2]
	all := graph.AxisRange()
	o5 := graph.Slice(fwd, all, all, all, all, graph.AxisRange(0, h)) // [B, kv, T, r, h]
	m := graph.Slice(fwd, all, all, all, all, graph.AxisRange(h, h+1))
	l := graph.Slice(fwd, all, all, all, all, graph.AxisRange(h+1, h+2))
	// Behind a StopGradient, so that GoMLX does not differentiate through
	// the Slice (whose VJP is a Pad, which the pure-Go backend lacks).
	o := graph.StopGradient(graph.Reshape(graph.TransposeAllAxes(o5, 0, 2, 1, 3, 4), b, t, heads, h))

	// The three custom VJPs share one backward node (built by the first
	// of them to run, for the gradient dO they all receive).
	var grads, seen *graph.Node
	part := func(dO *graph.Node, from, to int) *graph.Node { // [B, T, kv, to−from, h]
		if grads == nil || seen != dO {
			grads, seen = attentionBackward(qs, ks, vs, bias, o5, m, l, dO, kv), dO
		}
		g := graph.Slice(grads, all, all, all, graph.AxisRange(from, to))
		return graph.TransposeAllAxes(g, 0, 2, 1, 3, 4)
	}
	// kvGrad spreads dK or dV [B, T, kv, 1, h] to o's shape, zero at query
	// heads i > 0 of each group, so that the sum over the group (the VJP
	// of spread) is exactly it.
	kvGrad := func(g *graph.Node) *graph.Node {
		if r > 1 {
			g = graph.Concatenate([]*graph.Node{g, graph.Zeros(g.Graph(), shapes.Make(g.DType(), b, t, kv, r-1, h))}, 3)
		}
		return graph.Reshape(g, b, t, heads, h)
	}
	spread := func(z *graph.Node) *graph.Node { // [B, T, kv, h] → [B, T, H, h]
		z = graph.Reshape(z, b, t, kv, 1, h)
		if r > 1 {
			z = graph.BroadcastToDims(z, b, t, kv, r, h)
		}
		return graph.Reshape(z, b, t, heads, h)
	}
	outQ := graph.IdentityWithCustomGradient(graph.Add(o, graph.Sub(q, graph.StopGradient(q))), func(_, dO *graph.Node) *graph.Node {
		return graph.MulScalar(graph.Reshape(part(dO, 0, r), b, t, heads, h), scale)
	})
	outK := graph.IdentityWithCustomGradient(spread(graph.Sub(k, graph.StopGradient(k))), func(_, dO *graph.Node) *graph.Node {
		return kvGrad(part(dO, r, r+1))
	})
	outV := graph.IdentityWithCustomGradient(spread(graph.Sub(v, graph.StopGradient(v))), func(_, dO *graph.Node) *graph.Node {
		return kvGrad(part(dO, r+1, r+2))
	})
	return graph.Add(graph.Add(outQ, outK), outV)
}

// attentionScores is s = qs·kᵀ + bias [B, kv, T, r, S] for qs [B, T, H, h],
// k [B, S, kv, h] and bias [B, T, S].
func attentionScores(qs, k, bias *graph.Node, kv int) *graph.Node {
	d := qs.Shape().Dimensions
	b, t, heads, h := d[0], d[1], d[2], d[3]
	s := k.Shape().Dimensions[1]
	q5 := graph.Reshape(qs, b, t, kv, heads/kv, h)
	scores := graph.DotGeneral(q5, []int{4}, []int{0, 2}, k, []int{3}, []int{0, 2}) // [B, kv, T, r, S]
	return graph.Add(scores, graph.Reshape(bias, b, 1, t, 1, s))
}

// attentionForward is the forward pass of Attention for the scaled
// queries qs: o = softmax(s)·v [B, kv, T, r, h], m = max_s s and
// l = Σ_s e^(s − m) [B, kv, T, r, 1], concatenated on the last axis.
func attentionForward(qs, k, v, bias *graph.Node, kv int) *graph.Node {
	s := attentionScores(qs, k, bias, kv)
	m := graph.ReduceAndKeep(s, graph.ReduceMax, -1)
	e := graph.Exp(graph.Sub(s, m))
	l := graph.ReduceAndKeep(e, graph.ReduceSum, -1)
	o := graph.DotGeneral(graph.Div(e, l), []int{4}, []int{0, 1}, v, []int{1}, []int{0, 2}) // [B, kv, T, r, h]
	return graph.Concatenate([]*graph.Node{o, m, l}, 4)
}

// attentionBackward is the backward pass of Attention: dQs (with respect
// to the scaled queries), dK and dV, concatenated as [B, kv, T, r+2, h]
// (dK and dV at key s = t), from the forward's o5 [B, kv, T, r, h], m and
// l [B, kv, T, r, 1] and the output gradient dO [B, T, H, h].
func attentionBackward(qs, k, v, bias, o5, m, l, dO *graph.Node, kv int) *graph.Node {
	d := qs.Shape().Dimensions
	b, t, heads, h := d[0], d[1], d[2], d[3]
	r := heads / kv
	dO5 := graph.TransposeAllAxes(graph.Reshape(dO, b, t, kv, r, h), 0, 2, 1, 3, 4) // [B, kv, T, r, h]
	p := graph.Div(graph.Exp(graph.Sub(attentionScores(qs, k, bias, kv), m)), l)    // [B, kv, T, r, S]
	rowD := graph.ReduceAndKeep(graph.Mul(dO5, o5), graph.ReduceSum, -1)            // [B, kv, T, r, 1]
	dP := graph.DotGeneral(dO5, []int{4}, []int{0, 1}, v, []int{3}, []int{0, 2})    // [B, kv, T, r, S]
	dS := graph.Mul(p, graph.Sub(dP, rowD))
	q5 := graph.Reshape(qs, b, t, kv, r, h)
	dQ := graph.DotGeneral(dS, []int{4}, []int{0, 1}, k, []int{1}, []int{0, 2})        // [B, kv, T, r, h]
	dK := graph.DotGeneral(dS, []int{2, 3}, []int{0, 1}, q5, []int{1, 3}, []int{0, 2}) // [B, kv, S, h]
	dV := graph.DotGeneral(p, []int{2, 3}, []int{0, 1}, dO5, []int{2, 3}, []int{0, 1}) // [B, kv, S, h]
	return graph.Concatenate([]*graph.Node{dQ, graph.Reshape(dK, b, kv, t, 1, h), graph.Reshape(dV, b, kv, t, 1, h)}, 3)
}
