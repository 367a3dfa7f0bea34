package gocpu

import (
	"slices"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"

	"github.com/cas-engine/cas/tensor"
)

// The fused rotary embedding (tensor.RopeRows), routed from the chains
// model/vjp's Rope writes, for x [..., n, h] and cos, sin [..., 1, h] (one
// row per position, broadcast over the n heads; or of x's shape, n = 1),
// with rot(x) = Concatenate(Neg(Slice(x, h/2:)), Slice(x, :h/2); last):
//
//   - forward, Add(Mul(x, cos), Mul(rot(x), sin)): x ⊙ cos + rot(x) ⊙ sin;
//   - gradient, Sub(Mul(g, cos), rot(Mul(g, sin))): g ⊙ cos − rot(g ⊙ sin).
//
// Each is recognised at its last op; the ops before it, left without
// readers, are dropped at Compile.

// rotateHalfOf returns x when v = rot(x) (nil otherwise).
func rotateHalfOf(v *value) *value {
	n := v.node
	r := v.shape.Rank()
	if n.opType != backends.OpTypeConcatenate || len(n.inputs) != 2 || r == 0 {
		return nil
	}
	h := v.shape.Dimensions[r-1]
	neg, x1 := n.inputs[0], n.inputs[1]
	if h%2 != 0 || neg.node.opType != backends.OpTypeNeg || len(neg.node.inputs) != 1 {
		return nil
	}
	x2 := neg.node.inputs[0]
	for _, s := range []*value{x1, x2} {
		if s.node.opType != backends.OpTypeSlice || len(s.node.inputs) != 1 {
			return nil
		}
	}
	x := x1.node.inputs[0]
	if x2.node.inputs[0] != x || !x.shape.Equal(v.shape) {
		return nil
	}
	// The halves: x1 = x[..., :h/2], x2 = x[..., h/2:].
	half := slices.Clone(x.shape.Dimensions)
	half[r-1] = h / 2
	zero := make([]int, r)
	second := make([]int, r)
	second[r-1] = h / 2
	if !slices.Equal(x1.shape.Dimensions, half) || !slices.Equal(x2.shape.Dimensions, half) ||
		!slices.Equal(x1.node.sliceStarts, zero) || !slices.Equal(x2.node.sliceStarts, second) {
		return nil
	}
	return x
}

// mulOther returns the operand other than c of m = Mul(a, b) when c is one
// of them (nil otherwise).
func mulOther(m *value, c *value) *value {
	n := m.node
	if n.opType != backends.OpTypeMul || len(n.inputs) != 2 {
		return nil
	}
	switch c {
	case n.inputs[1]:
		return n.inputs[0]
	case n.inputs[0]:
		return n.inputs[1]
	}
	return nil
}

// ropeTable reports whether c (cos or sin) has one row of h values per
// position of x [..., n, h]: x's shape with axis −2 of size 1, or x's
// shape.
func ropeTable(c, x *value) bool {
	r := x.shape.Rank()
	if r < 2 || c.shape.Rank() != r || c.shape.DType != dtypes.Float32 {
		return false
	}
	d, xd := c.shape.Dimensions, x.shape.Dimensions
	return slices.Equal(d[:r-2], xd[:r-2]) && d[r-1] == xd[r-1] && (d[r-2] == 1 || d[r-2] == xd[r-2])
}

// fuseRope applies the forward rewrite to Add(lhs, rhs) (either order);
// ok reports whether it did.
func (b *Builder) fuseRope(lhs, rhs *value) (backends.Op, bool, error) {
	for _, p := range [2][2]*value{{lhs, rhs}, {rhs, lhs}} {
		xc, rs := p[0].node, p[1].node
		if xc.opType != backends.OpTypeMul || rs.opType != backends.OpTypeMul || len(xc.inputs) != 2 || len(rs.inputs) != 2 {
			continue
		}
		for i := range 2 {
			x, cos := xc.inputs[i], xc.inputs[1-i] // p[0] = Mul(x, cos)
			if !x.shape.Equal(p[0].shape) || !ropeTable(cos, x) {
				continue
			}
			for j := range 2 { // p[1] = Mul(rot(x), sin)
				if sin := rs.inputs[1-j]; rotateHalfOf(rs.inputs[j]) == x && ropeTable(sin, x) {
					op, err := b.ropeOp(x, cos, sin, false)
					return op, true, err
				}
			}
		}
	}
	return nil, false, nil
}

// fuseRopeGrad applies the gradient rewrite to Sub(lhs, rhs); ok reports
// whether it did.
func (b *Builder) fuseRopeGrad(lhs, rhs *value) (backends.Op, bool, error) {
	gs := rotateHalfOf(rhs)
	if gs == nil || lhs.node.opType != backends.OpTypeMul || len(lhs.node.inputs) != 2 {
		return nil, false, nil
	}
	for i := range 2 {
		g, cos := lhs.node.inputs[i], lhs.node.inputs[1-i]
		if !ropeTable(cos, g) || !g.shape.Equal(lhs.shape) {
			continue
		}
		sin := mulOther(gs, g)
		if sin == nil || !ropeTable(sin, g) {
			continue
		}
		op, err := b.ropeOp(g, cos, sin, true)
		return op, true, err
	}
	return nil, false, nil
}

// ropeOp records tensor.RopeRows over x with the tables cos and sin.
func (b *Builder) ropeOp(x, cos, sin *value, grad bool) (backends.Op, error) {
	out := x.shape
	r := out.Rank()
	h, heads := out.Dimensions[r-1], out.Dimensions[r-2]
	if cos.shape.Dimensions[r-2] != 1 {
		heads = 1
	}
	label := "Rope"
	if grad {
		label = "RopeGrad"
	}
	return b.addLabeled(label, []*value{x, cos, sin}, out, f32Exec(out, func(be *Backend, dst []float32, in [][]float32) {
		tensor.RopeRows(dst, in[0], in[1], in[2], heads, h, grad, be.workers)
	}))
}
