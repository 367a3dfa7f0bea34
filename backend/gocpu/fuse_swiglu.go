package gocpu

import (
	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/shapes"

	"github.com/cas-engine/cas/tensor"
)

// The fused SwiGLU (tensor.MulSilu and SiluGradMul), routed from:
//
//   - a · silu(g), Mul(a, Mul(g, Logistic(g))) in either order: the MLP's
//     forward silu(gate) ⊙ up, and its gradient with respect to up as
//     model/vjp's SwiGLU writes it (v ⊙ silu(gate));
//   - the gradient with respect to the gate as vjp.SwiGLU writes it,
//     Mul(Mul(v, u), Add(s, Mul(g, Sub(s, Mul(s, s))))) with s = Logistic(g),
//     that is v ⊙ u ⊙ silu′(g).
//
// The straight-through zero terms that carry these gradients are dropped as
// for the softmax (fuse_softmax.go).

// siluOf returns g when v = Mul(g, Logistic(g)) (either order; nil
// otherwise).
func siluOf(v *value) *value {
	n := v.node
	if n.opType != backends.OpTypeMul || len(n.inputs) != 2 {
		return nil
	}
	for i := range 2 {
		g, s := n.inputs[i], n.inputs[1-i]
		if logisticOf(s) == g && g.shape.Equal(v.shape) {
			return g
		}
	}
	return nil
}

// logisticOf returns x when v = Logistic(x) (nil otherwise).
func logisticOf(v *value) *value {
	if n := v.node; n.opType == backends.OpTypeLogistic && len(n.inputs) == 1 {
		return n.inputs[0]
	}
	return nil
}

// siluGradOf returns g when v = Add(s, Mul(g, Sub(s, Mul(s, s)))) with
// s = Logistic(g), silu′(g) (nil otherwise).
func siluGradOf(v *value) *value {
	n := v.node
	if n.opType != backends.OpTypeAdd || len(n.inputs) != 2 {
		return nil
	}
	s, m := n.inputs[0], n.inputs[1]
	g := logisticOf(s)
	if g == nil || !g.shape.Equal(v.shape) || m.node.opType != backends.OpTypeMul || len(m.node.inputs) != 2 || m.node.inputs[0] != g {
		return nil
	}
	d := m.node.inputs[1].node
	if d.opType != backends.OpTypeSub || len(d.inputs) != 2 || d.inputs[0] != s {
		return nil
	}
	sq := d.inputs[1].node
	if sq.opType != backends.OpTypeMul || len(sq.inputs) != 2 || sq.inputs[0] != s || sq.inputs[1] != s {
		return nil
	}
	return g
}

// fuseSwiGLU applies the SwiGLU rewrites to Mul(lhs, rhs) of equal float32
// shapes; ok reports whether it did.
func (b *Builder) fuseSwiGLU(lhs, rhs *value) (backends.Op, bool, error) {
	if !lhs.shape.Equal(rhs.shape) {
		return nil, false, nil
	}
	for i, v := range [2]*value{lhs, rhs} {
		other := [2]*value{rhs, lhs}[i]
		if g := siluOf(v); g != nil {
			op, err := b.elementwiseFused("MulSilu", []*value{other, g}, func(be *Backend, dst []float32, in [][]float32) {
				tensor.MulSilu(dst, in[0], in[1], be.workers)
			})
			return op, true, err
		}
		if g := siluGradOf(v); g != nil {
			if pn := other.node; pn.opType == backends.OpTypeMul && len(pn.inputs) == 2 && pn.inputs[0].shape.Equal(v.shape) && pn.inputs[1].shape.Equal(v.shape) {
				op, err := b.elementwiseFused("SiluGradMul", []*value{pn.inputs[0], pn.inputs[1], g}, func(be *Backend, dst []float32, in [][]float32) {
					tensor.SiluGradMul(dst, in[0], in[1], in[2], be.workers)
				})
				return op, true, err
			}
		}
	}
	return nil, false, nil
}

// elementwiseFused records a fused float32 op over operands of one shape
// (the output's), writing into an operand that is not used afterwards when
// there is one.
func (b *Builder) elementwiseFused(label string, vs []*value, kernel func(be *Backend, dst []float32, in [][]float32)) (backends.Op, error) {
	out := vs[0].shape
	cand := make([]int, len(vs))
	for i := range cand {
		cand[i] = i
	}
	return b.addLabeled(label, vs, out, f32Exec(out, kernel, cand...))
}

// f32Exec returns the step of a fused float32 op: it reads every input as
// float32, takes the output (an owned input of shape out among candidates
// when there is one, else a new buffer) and runs kernel on it unless the
// output is empty.
func f32Exec(out shapes.Shape, kernel func(be *Backend, dst []float32, in [][]float32), candidates ...int) customFn {
	return func(be *Backend, in []backends.Buffer, owned []bool) (backends.Buffer, int, error) {
		xs := make([][]float32, len(in))
		for i := range in {
			x, err := f32Data(be, in[i])
			if err != nil {
				return nil, -1, err
			}
			xs[i] = x
		}
		buf, dst, consumed, err := outputFor(be, in, owned, out, candidates...)
		if err != nil {
			return nil, -1, err
		}
		if len(dst) > 0 {
			kernel(be, dst, xs)
		}
		return buf, consumed, nil
	}
}
