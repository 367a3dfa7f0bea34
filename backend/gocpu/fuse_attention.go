package gocpu

import (
	"slices"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/shapes"

	"github.com/cas-engine/cas/tensor"
)

// The fused attention (tensor.Attention, a blocked flash-style kernel that
// never writes the [B, H, T, S] scores), routed from the two graphs
// model/vjp's Attention builds, each recognised at its last op, a
// Concatenate (for qs [B, T, H, h] = q·scale, k, v [B, S, kv, h], bias
// [B, T, S], r = H/kv):
//
//   - forward, [B, kv, T, r, h+2] = Concatenate(o, m, l; last axis) with
//     s = Add(DotGeneral(Reshape(qs) [B,T,kv,r,h], k; contract h, batch
//     B, kv), bias broadcast over kv and r) [B, kv, T, r, S],
//     o = DotGeneral(Softmax(s), v; contract S, batch B, kv) (the softmax
//     fused by fuse_softmax.go), m = Reshape(ReduceMax(s, last)) and
//     l = Reshape(SumExp(s));
//   - backward, [B, kv, T, r+2, h] = Concatenate(dQ, Reshape(dK),
//     Reshape(dV); axis 3) with dQ = DotGeneral(dS, k), dK =
//     DotGeneral(dS, Reshape(qs)), dV = DotGeneral(P, dO5), dS = Mul(P,
//     Sub(DotGeneral(dO5, v), Reshape(RowDots(dO5, o5)))), where dO5 is
//     Transpose(Reshape(dO), 0, 2, 1, 3, 4), o5 a Slice of a fused forward
//     whose qs, k and v these products read.
//
// The kernel reads qs, k, v, bias and dO in place; the ops of the unfused
// chains, left without readers, are dropped at Compile.

// attentionDims are the sizes of one fused attention.
type attentionDims struct{ b, heads, kv, t, s, h int }

// kernel returns the kernel of d on workers goroutines, with buffers kept
// from call to call in bufs (one per fused op: its calls reuse them).
func (d attentionDims) kernel(workers int, bufs *tensor.AttentionBuffers) *tensor.Attention {
	return &tensor.Attention{Batch: d.b, Heads: d.heads, KVHeads: d.kv, T: d.t, S: d.s, HeadDim: d.h, Workers: workers, Buffers: bufs}
}

// dotOf returns the operands of v when v is a custom DotGeneral with the
// given axes (nil otherwise).
func dotOf(v *value, lc, lb, rc, rb []int) (lhs, rhs *value) {
	n := v.node
	if n.kind != kindCustom || n.opType != backends.OpTypeDotGeneral || len(n.inputs) != 2 ||
		!slices.Equal(n.dotAxes[0], lc) || !slices.Equal(n.dotAxes[1], lb) ||
		!slices.Equal(n.dotAxes[2], rc) || !slices.Equal(n.dotAxes[3], rb) {
		return nil, nil
	}
	return n.inputs[0], n.inputs[1]
}

// reshapeSource returns the operand of v when v is a Reshape (v itself
// otherwise): the same elements in the same order.
func reshapeSource(v *value) *value {
	for v.node.opType == backends.OpTypeReshape && len(v.node.inputs) == 1 {
		v = v.node.inputs[0]
	}
	return v
}

// isF32 reports whether v is float32 of dimensions dims.
func isF32(v *value, dims ...int) bool {
	return v.shape.DType == dtypes.Float32 && slices.Equal(v.shape.Dimensions, dims)
}

// biasSource returns the [B, T, S] bias added to the scores s [B, kv, T,
// r, S]: the other operand of the Add, through the broadcast over the
// heads and Reshapes (nil if it is not one).
func biasSource(other *value, d attentionDims) *value {
	v := other
	if n := v.node; n.bcastFrom != nil && n.opType == backends.OpTypeBroadcastInDim {
		v = n.bcastFrom
	}
	v = reshapeSource(v)
	if v.shape.Size() != d.b*d.t*d.s || v.shape.DType != dtypes.Float32 {
		return nil
	}
	// The values must not vary over kv and r: the operand before the
	// Reshapes is [B, 1, T, 1, S] (or [B, T, S] itself).
	for w := other; ; {
		if n := w.node; n.bcastFrom != nil && n.opType == backends.OpTypeBroadcastInDim {
			w = n.bcastFrom
			continue
		}
		if isF32(w, d.b, 1, d.t, 1, d.s) || isF32(w, d.b, d.t, d.s) {
			return v
		}
		if w.node.opType != backends.OpTypeReshape || len(w.node.inputs) != 1 {
			return nil
		}
		w = w.node.inputs[0]
	}
}

// attentionScores returns qs, k and bias when s = qs·kᵀ + bias as
// vjp.Attention writes it (nil otherwise), with the problem's sizes.
func attentionScores(s *value) (qs, k, bias *value, d attentionDims, ok bool) {
	n := s.node
	if n.opType != backends.OpTypeAdd || len(n.inputs) != 2 || s.shape.Rank() != 5 || s.shape.DType != dtypes.Float32 {
		return nil, nil, nil, d, false
	}
	for i := range 2 {
		q5, kk := dotOf(n.inputs[i], []int{4}, []int{0, 2}, []int{3}, []int{0, 2})
		if q5 == nil || q5.shape.Rank() != 5 || kk.shape.Rank() != 4 {
			continue
		}
		qd, kd := q5.shape.Dimensions, kk.shape.Dimensions
		d = attentionDims{b: qd[0], t: qd[1], kv: qd[2], heads: qd[2] * qd[3], h: qd[4], s: kd[1]}
		if !isF32(kk, d.b, d.s, d.kv, d.h) || !isF32(s, d.b, d.kv, d.t, d.heads/d.kv, d.s) {
			continue
		}
		if bias = biasSource(n.inputs[1-i], d); bias == nil {
			continue
		}
		return reshapeSource(q5), kk, bias, d, true
	}
	return nil, nil, nil, d, false
}

// fuseAttention records the fused forward or backward when Concatenate(axis,
// vs) is one (see the comment at the top); ok reports whether it did.
func (b *Builder) fuseAttention(axis int, vs []*value) (backends.Op, bool, error) {
	switch {
	case len(vs) == 3 && axis == 4:
		return b.fuseAttentionForward(vs)
	case len(vs) == 3 && axis == 3:
		return b.fuseAttentionBackward(vs)
	}
	return nil, false, nil
}

func (b *Builder) fuseAttentionForward(vs []*value) (backends.Op, bool, error) {
	o, m, l := vs[0], vs[1], vs[2]
	p, v := dotOf(o, []int{4}, []int{0, 1}, []int{1}, []int{0, 2})
	if p == nil || p.node.label != "Softmax" || len(p.node.inputs) != 1 {
		return nil, false, nil
	}
	s := p.node.inputs[0]
	qs, k, bias, d, ok := attentionScores(s)
	if !ok || !isF32(v, d.b, d.s, d.kv, d.h) || lastAxisReduction(m, backends.OpTypeReduceMax) != s || sumExpOf(l) != s ||
		!keptShape(m.shape, s.shape) || !keptShape(l.shape, s.shape) {
		return nil, false, nil
	}
	out := shapes.Make(dtypes.Float32, d.b, d.kv, d.t, d.heads/d.kv, d.h+2)
	bufs := new(tensor.AttentionBuffers)
	op, err := b.addLabeled("Attention", []*value{qs, k, v, bias}, out, f32Exec(out, func(be *Backend, dst []float32, in [][]float32) {
		d.kernel(be.workers, bufs).Forward(dst, in[0], in[1], in[2], in[3])
	}))
	return op, true, err
}

func (b *Builder) fuseAttentionBackward(vs []*value) (backends.Op, bool, error) {
	dQ, dKr, dVr := vs[0], reshapeSource(vs[1]), reshapeSource(vs[2])
	dS, k := dotOf(dQ, []int{4}, []int{0, 1}, []int{1}, []int{0, 2})
	if dS == nil {
		return nil, false, nil
	}
	dS2, q5 := dotOf(dKr, []int{2, 3}, []int{0, 1}, []int{1, 3}, []int{0, 2})
	p, dO5 := dotOf(dVr, []int{2, 3}, []int{0, 1}, []int{2, 3}, []int{0, 1})
	if dS2 != dS || p == nil {
		return nil, false, nil
	}
	// dS = Mul(P, Sub(dP, D)), dP = DotGeneral(dO5, v), D = Σ_h dO5 ⊙ o5.
	n := dS.node
	if n.opType != backends.OpTypeMul || len(n.inputs) != 2 || n.inputs[0] != p {
		return nil, false, nil
	}
	sub := n.inputs[1].node
	if sub.opType != backends.OpTypeSub || len(sub.inputs) != 2 {
		return nil, false, nil
	}
	dO5b, v := dotOf(sub.inputs[0], []int{4}, []int{0, 1}, []int{3}, []int{0, 2})
	a, c := rowDotOperands(sub.inputs[1])
	if dO5b != dO5 || a != dO5 || c == nil || c.node.opType != backends.OpTypeSlice || len(c.node.inputs) != 1 {
		return nil, false, nil
	}
	fwd := c.node.inputs[0]
	if fwd.node.label != "Attention" || len(fwd.node.inputs) != 4 {
		return nil, false, nil
	}
	qs, fk, fv, bias := fwd.node.inputs[0], fwd.node.inputs[1], fwd.node.inputs[2], fwd.node.inputs[3]
	if fk != k || fv != v || reshapeSource(q5) != qs {
		return nil, false, nil
	}
	// P = Div(Exp(Sub(s, m)), l): its exponential.
	if pn := p.node; pn.opType != backends.OpTypeDiv || len(pn.inputs) != 2 || pn.inputs[0].node.opType != backends.OpTypeExp {
		return nil, false, nil
	}
	// dO5 = Transpose(Reshape(dO [B, T, H, h]), 0, 2, 1, 3, 4).
	tn := dO5.node
	if tn.opType != backends.OpTypeTranspose || len(tn.inputs) != 1 || !slices.Equal(tn.perm, []int{0, 2, 1, 3, 4}) {
		return nil, false, nil
	}
	dO := reshapeSource(tn.inputs[0])
	fd := fwd.shape.Dimensions // [B, kv, T, r, h+2]
	d := attentionDims{b: fd[0], kv: fd[1], t: fd[2], heads: fd[1] * fd[3], h: fd[4] - 2, s: fk.shape.Dimensions[1]}
	// dO's elements are in [B, T, H, h] order whatever Reshapes it went
	// through (in the model it is the gradient of o reshaped to [B, T, H·h]).
	if d.s != d.t || dO.shape.DType != dtypes.Float32 || dO.shape.Size() != d.b*d.t*d.heads*d.h {
		return nil, false, nil
	}
	out := shapes.Make(dtypes.Float32, d.b, d.kv, d.t, d.heads/d.kv+2, d.h)
	bufs := new(tensor.AttentionBuffers)
	op, err := b.addLabeled("AttentionGrad", []*value{qs, k, v, bias, fwd, dO}, out, f32Exec(out, func(be *Backend, dst []float32, in [][]float32) {
		d.kernel(be.workers, bufs).Backward(dst, in[0], in[1], in[2], in[3], in[4], in[5])
	}))
	return op, true, err
}
