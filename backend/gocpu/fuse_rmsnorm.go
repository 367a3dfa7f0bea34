package gocpu

import (
	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/shapes"

	"github.com/cas-engine/cas/tensor"
)

// RMSNorm's full-size passes, fused:
//
//   - ReduceSum(Mul(a, b), last axis) with a, b of one shape: row dot
//     products (tensor.RowDots) without the product (RMSNorm's Σ x² in
//     the forward pass, Σ g⊙y in its gradient);
//   - Mul(r, Sub(g, Mul(y, c))) with r, c of g's shape but a last axis of
//     1: the RMSNorm input gradient r ⊙ (g − y ⊙ c) as model/vjp's
//     RMSNormalize writes it (tensor.RMSNormGradRows), one pass instead
//     of three.

// rowDotsOp records Σ_last a⊙b for a, b of one float32 shape.
func (b *Builder) rowDotsOp(a, c *value) (backends.Op, error) {
	dims := a.shape.Dimensions
	n := dims[len(dims)-1]
	out := shapes.Make(a.shape.DType, dims[:len(dims)-1]...)
	return b.addLabeled("RowDots", []*value{a, c}, out, f32Exec(out, func(be *Backend, dst []float32, in [][]float32) {
		if n == 0 {
			clear(dst)
		} else {
			tensor.RowDots(dst, in[0], in[1], n, be.workers)
		}
	}))
}

// rmsNormGradInputs returns g, y, c when v = Sub(g, Mul(y, c)) (Mul in
// either order) with g, y of shape s and c of s's shape with a last axis
// of 1 (nil otherwise).
func rmsNormGradInputs(v *value, s shapes.Shape) (g, y, c *value) {
	n := v.node
	if n.opType != backends.OpTypeSub || len(n.inputs) != 2 || !v.shape.Equal(s) {
		return nil, nil, nil
	}
	g, m := n.inputs[0], n.inputs[1]
	if !g.shape.Equal(s) || m.node.opType != backends.OpTypeMul || len(m.node.inputs) != 2 {
		return nil, nil, nil
	}
	for i := range 2 {
		y, c := m.node.inputs[i], m.node.inputs[1-i]
		if y.shape.Equal(s) && keptShape(c.shape, s) {
			return g, y, c
		}
	}
	return nil, nil, nil
}

// fuseRMSNormGrad applies the gradient rewrite to Mul(lhs, rhs); ok
// reports whether it did.
func (b *Builder) fuseRMSNormGrad(lhs, rhs *value) (backends.Op, bool, error) {
	for i, v := range [2]*value{lhs, rhs} {
		r := [2]*value{rhs, lhs}[i]
		// A last axis of 1 would make every operand look like a per-row
		// factor (and RMSNorm over one element is degenerate).
		if v.shape.Rank() == 0 || v.shape.Dimensions[v.shape.Rank()-1] < 2 || !keptShape(r.shape, v.shape) {
			continue
		}
		g, y, c := rmsNormGradInputs(v, v.shape)
		if g == nil {
			continue
		}
		out := v.shape
		n := out.Dimensions[out.Rank()-1]
		op, err := b.addLabeled("RMSNormGrad", []*value{g, y, r, c}, out, f32Exec(out, func(be *Backend, dst []float32, in [][]float32) {
			tensor.RMSNormGradRows(dst, in[0], in[1], in[2], in[3], n, be.workers)
		}, 0, 1))
		return op, true, err
	}
	return nil, false, nil
}
