package vjp

import "github.com/gomlx/gomlx/pkg/core/graph"

// Rope is the rotary position embedding (Su et al. 2021) in Hugging Face's
// layout, for x [..., h] and cos, sin broadcastable to x (no gradient):
//
//	y = x ⊙ cos + rot(x) ⊙ sin,   rot(x) = [−x₂, x₁] for the halves x₁, x₂,
//
// with its gradient written directly (rot is orthogonal, rotᵀ = −rot), for
// g = ∂L/∂y:
//
//	∂L/∂x = g ⊙ cos − rot(g ⊙ sin),
//
// carried to x by a straight-through term as in Softmax. The forward value
// is behind a StopGradient, so that GoMLX does not differentiate through
// the halves' Slices (whose VJP is a Pad, which the pure-Go backend lacks).
// The gocpu backend runs the forward and the gradient each as one pass
// (tensor.RopeRows; backend/gocpu/fuse_rope.go).
func Rope(x, cos, sin *graph.Node) *graph.Node {
	xs := graph.StopGradient(x)
	cos, sin = graph.StopGradient(cos), graph.StopGradient(sin)
	y := graph.StopGradient(graph.Add(graph.Mul(xs, cos), graph.Mul(rotateHalf(xs), sin)))
	zero := graph.Sub(x, xs)
	return graph.IdentityWithCustomGradient(graph.Add(y, zero), func(_, g *graph.Node) *graph.Node {
		return graph.Sub(graph.Mul(g, cos), rotateHalf(graph.Mul(g, sin)))
	})
}

// rotateHalf is rot(x) = [−x₂, x₁] over the last axis.
func rotateHalf(x *graph.Node) *graph.Node {
	h := x.Shape().Dimensions[x.Rank()-1]
	x1 := graph.SliceAxis(x, -1, graph.AxisRange(0, h/2))
	x2 := graph.SliceAxis(x, -1, graph.AxisRange(h/2, h))
	return graph.Concatenate([]*graph.Node{graph.Neg(x2), x1}, -1)
}
