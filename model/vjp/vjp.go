// Package vjp holds the model's graph functions whose gradients are
// written directly (custom VJPs) instead of being derived by GoMLX's
// autodiff: the last-axis softmax and log-sum-exp, the SwiGLU activation
// and RMSNorm's normalisation. Each forward value equals the plain formula's; each
// gradient is the closed form, carried to its input by a straight-through
// term x − StopGradient(x) (zero) whose identity holds the custom VJP.
// Any backend computes them; the gocpu backend recognises the forward
// chains and these gradients and runs each as one fused kernel of package
// tensor (backend/gocpu/fuse_*.go), and drops the zero terms.
//
// Attention (attention.go) is grouped-query attention with the
// FlashAttention-2 backward, whose forward and backward gocpu runs as
// blocked kernels that never write the score matrix.
//
// The inputs must be finite: elsewhere x − x is NaN on backends that
// compute it.
package vjp

import "github.com/gomlx/gomlx/pkg/core/graph"

// Softmax is graph.Softmax(x, -1) with its gradient written directly,
//
//	p = softmax(x),   ∂L/∂x = p ⊙ (g − Σ_last g⊙p)   for g = ∂L/∂p,
//
// where GoMLX's own VJP of graph.Softmax differentiates through its
// division and exponential (seven elementwise ops over the whole tensor).
// The gradient reaches x through a straight-through term: the value is
// p + (x − x), with the second x and p's input behind StopGradient, and
// the custom VJP of the identity around it returns the expression above.
// The gocpu backend runs the forward chain and the gradient each as one
// fused kernel (tensor.SoftmaxRows, SoftmaxGradRows; backend/gocpu/
// fuse_softmax.go) and drops the zero term; other backends compute it, so
// x must be finite (attention's masked scores are −1e30, not −Inf).
func Softmax(x *graph.Node) *graph.Node {
	p := graph.Softmax(graph.StopGradient(x), -1)
	zero := graph.Sub(x, graph.StopGradient(x))
	return graph.IdentityWithCustomGradient(graph.Add(p, zero), func(_, g *graph.Node) *graph.Node {
		return graph.Mul(p, graph.Sub(g, graph.ReduceAndKeep(graph.Mul(g, p), graph.ReduceSum, -1)))
	})
}

// SwiGLU is the MLP's activation silu(gate) ⊙ up with its gradients
// written directly, for v = ∂L/∂y:
//
//	∂L/∂up = v ⊙ silu(gate),   ∂L/∂gate = v ⊙ up ⊙ silu′(gate),
//	silu′(g) = σ + g·(σ − σ²),   σ = σ(g),
//
// where GoMLX's VJP differentiates through the products and σ (about a
// dozen elementwise ops). Each gradient reaches its input through its own
// straight-through term (x − x, the second x behind StopGradient) whose
// identity carries the custom VJP. The gocpu backend runs the forward and
// each gradient as one fused kernel (tensor.MulSilu, SiluGradMul;
// backend/gocpu/fuse_swiglu.go) and drops the zero terms.
func SwiGLU(gate, up *graph.Node) *graph.Node {
	g, u := graph.StopGradient(gate), graph.StopGradient(up)
	y := graph.Mul(u, Silu(g))
	toGate := graph.IdentityWithCustomGradient(graph.Sub(gate, g), func(_, v *graph.Node) *graph.Node {
		s := graph.Logistic(g)
		return graph.Mul(graph.Mul(v, u), graph.Add(s, graph.Mul(g, graph.Sub(s, graph.Mul(s, s)))))
	})
	toUp := graph.IdentityWithCustomGradient(graph.Sub(up, u), func(_, v *graph.Node) *graph.Node {
		return graph.Mul(v, Silu(g))
	})
	return graph.Add(graph.Add(y, toGate), toUp)
}

// RMSNormalize is RMSNorm's normalisation over the last axis with its
// gradient written directly, for g = ∂L/∂y:
//
//	y = x·r,   r = 1/√(mean(x²) + eps),   ∂L/∂x = r·(g − y·mean(g⊙y)),
//
// where GoMLX's VJP differentiates through the division, the square root
// and the square (about seven elementwise ops over the whole tensor). The
// gradient reaches x through a straight-through term as in Softmax. The
// gocpu backend computes Σ x² and Σ g⊙y as row dot products and the
// gradient in one pass (tensor.RowDots, RMSNormGradRows;
// backend/gocpu/fuse_rmsnorm.go).
func RMSNormalize(x *graph.Node, eps float64) *graph.Node {
	xs := graph.StopGradient(x)
	ms := graph.ReduceAndKeep(graph.Square(xs), graph.ReduceMean, -1)
	y := graph.Div(xs, graph.Sqrt(graph.AddScalar(ms, eps)))
	zero := graph.Sub(x, xs)
	return graph.IdentityWithCustomGradient(graph.Add(y, zero), func(_, g *graph.Node) *graph.Node {
		r := graph.Rsqrt(graph.AddScalar(ms, eps))
		c := graph.ReduceAndKeep(graph.Mul(g, y), graph.ReduceMean, -1)
		return graph.Mul(r, graph.Sub(g, graph.Mul(y, c)))
	})
}

// Silu is x·σ(x), the gate activation of the SwiGLU MLP (Shazeer 2020).
func Silu(x *graph.Node) *graph.Node { return graph.Mul(x, graph.Logistic(x)) }

// LogSumExp is log Σ_last e^x, computed as m + log Σ e^(x − m) with
// m = max x (the cross-entropy's normaliser over the vocabulary), with its
// gradient written directly, for g = ∂L/∂lse:
//
//	∂L/∂x = g ⊙ e^(x − lse)   (g ⊙ softmax(x)),
//
// where GoMLX's VJP keeps the exponentials of the forward pass. The result
// has one axis less than x, so the straight-through term is summed over
// that axis (Σ (x − x) = 0), and the custom VJP sits on the identity of the
// term before the sum, where the gradient arrives broadcast over the axis.
// The gocpu backend computes the sum of exponentials without writing them
// and the gradient in one pass (tensor.SumExpRows, ExpShiftScaleRows;
// backend/gocpu/fuse_softmax.go), and drops the zero term.
func LogSumExp(x *graph.Node) *graph.Node {
	xs := graph.StopGradient(x)
	mx := graph.ReduceAndKeep(xs, graph.ReduceMax, -1)
	sumExp := graph.ReduceSum(graph.Exp(graph.Sub(xs, mx)), -1)
	lse := graph.Add(graph.Log(sumExp), graph.Reshape(mx, sumExp.Shape().Dimensions...))
	zero := graph.IdentityWithCustomGradient(graph.Sub(x, xs), func(_, v *graph.Node) *graph.Node {
		return graph.Mul(v, graph.Exp(graph.Sub(xs, graph.ExpandAxes(lse, -1))))
	})
	return graph.Add(lse, graph.ReduceSum(zero, -1))
}
