package gocpu

import (
	"slices"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
)

// ReduceSum implements backends.Builder. A sum over a broadcasting product,
//
//	ReduceSum(Mul(a, b), axes)   with a, b of equal rank, each axis of
//	                             size d in both or d in one and 1 in the other,
//
// is a DotGeneral: reduced axes where both operands have size d are
// contracted, kept axes of size d in both are batch axes, and kept axes of
// size d in only one operand are that operand's cross axes. GoMLX v0.26
// writes the gradient of DotGeneral exactly this way (graph.dotGeneralVJP),
// materializing a [batch, cross, cross, contracting] product first — for
// the input gradient of a [8·256, 4096]×[4096, 256] projection, 8.5 GB.
// The rewrite computes the same sums with the GEMM kernels and never builds
// the product (the Mul, left unused, is dropped at Compile). It is the
// project's only fix of that gradient: training and cas bench cpu both
// create this backend through package backend, and nothing replaces
// GoMLX's VJP (docs/upstream/gomlx-dotgeneral-grad.md).
func (b *Builder) ReduceSum(x backends.Op, axes ...int) (backends.Op, error) {
	axes = slices.Clone(axes)
	if op, ok, err := b.foldZeroPad(x, axes); ok || err != nil {
		return op, err
	}
	if op, ok, err := b.fuseReduceSumMul(x, axes); ok || err != nil {
		return op, err
	}
	if op, ok, err := b.fuseSumExp(x, axes); ok || err != nil {
		return op, err
	}
	return b.reduce(backends.OpTypeReduceSum, x, axes, func(sb backends.Builder, x backends.Op) (backends.Op, error) {
		return sb.ReduceSum(x, slices.Clone(axes)...)
	})
}

// fuseReduceSumMul applies the rewrite of ReduceSum when x is such a
// product and it pays, or computes a sum over the last axis of a product of
// two operands of one shape as row dot products (rowDotsOp, fuse_rmsnorm.go) (the product is at least 4 times larger than either
// operand, or the right operand is tiny); ok reports whether it did.
func (b *Builder) fuseReduceSumMul(x backends.Op, axes []int) (backends.Op, bool, error) {
	v, isValue := x.(*value)
	if b.backend.plain || !isValue || v.b != b || len(axes) == 0 {
		return nil, false, nil
	}
	n := v.node
	if n.kind == kindParam || n.opType != backends.OpTypeMul || len(n.inputs) != 2 || len(n.outs) != 1 {
		return nil, false, nil
	}
	lhs, rhs := n.inputs[0], n.inputs[1]
	out := v.shape
	rank := out.Rank()
	if !fastDType(out.DType) || lhs.shape.DType != out.DType || rhs.shape.DType != out.DType ||
		lhs.shape.Rank() != rank || rhs.shape.Rank() != rank {
		return nil, false, nil
	}
	if out.DType == dtypes.Float32 && lhs.shape.Equal(out) && rhs.shape.Equal(out) && len(axes) == 1 && (axes[0] == rank-1 || axes[0] == -1) {
		op, err := b.rowDotsOp(lhs, rhs)
		return op, true, err
	}
	// A tiny right operand (RoPE's 2×2 rotation in the gradient of
	// rotate_half) may make a tinyPlan product, which pays at any size
	// (checked below, once the axes are known).
	tinyRHS := rhs.shape.Size() <= tinyMaxRHS && out.DType == dtypes.Float32
	pays := out.Size() >= 4096 && out.Size() >= 4*max(lhs.shape.Size(), rhs.shape.Size())
	if !tinyRHS && !pays {
		return nil, false, nil
	}
	reduced := make([]bool, rank)
	for _, a := range axes {
		if a < 0 {
			a += rank
		}
		if a < 0 || a >= rank || reduced[a] {
			return nil, false, nil // let simplego report it
		}
		reduced[a] = true
	}
	var contract, batch, lhsCross, rhsCross []int
	for a := range rank {
		dl, dr := lhs.shape.Dimensions[a], rhs.shape.Dimensions[a]
		switch {
		case reduced[a] && dl == dr:
			contract = append(contract, a)
		case reduced[a]:
			return nil, false, nil // a sum over one operand only
		case dl == dr:
			batch = append(batch, a)
		case dl == 1:
			rhsCross = append(rhsCross, a)
		case dr == 1:
			lhsCross = append(lhsCross, a)
		default:
			return nil, false, nil
		}
	}
	if !pays && (len(batch) != 0 || len(contract) != 1) {
		return nil, false, nil // not a tinyPlan product
	}
	// DotGeneral's output is [batch, lhs cross, rhs cross], where each
	// cross axis appears twice: at full size from one operand and as a
	// size-1 placeholder from the other.
	dot, err := b.dotThroughReshapes(lhs, rhs, contract, batch)
	if err != nil {
		return nil, true, err
	}
	var dims, order []int // dims without placeholders; original axis of each
	for _, a := range batch {
		dims, order = append(dims, out.Dimensions[a]), append(order, a)
	}
	for _, a := range lhsCross {
		dims, order = append(dims, out.Dimensions[a]), append(order, a)
	}
	for _, a := range rhsCross {
		dims, order = append(dims, out.Dimensions[a]), append(order, a)
	}
	res, err := b.Reshape(dot, dims...)
	if err != nil {
		return nil, true, err
	}
	// Transpose to the kept axes' original order.
	kept := slices.Clone(order)
	slices.Sort(kept)
	perm := make([]int, len(kept))
	identity := true
	for i, a := range kept {
		perm[i] = slices.Index(order, a)
		identity = identity && perm[i] == i
	}
	if !identity {
		if res, err = b.Transpose(res, perm...); err != nil {
			return nil, true, err
		}
	}
	return res, true, nil
}

// dotThroughReshapes is DotGeneral(lhs, contract, batch, rhs, contract,
// batch) for operands of equal rank, reading an operand that is a Reshape
// adding or removing size-1 axes (GoMLX's DotGeneral gradient reshapes
// the output gradient [B, T, V] to [B, T, V, 1]) from that Reshape's
// input: the Reshape, left unused, is not run, where it would copy its
// operand. The result has the same elements in the same order, with
// size-1 axes in other places (callers reshape it).
func (b *Builder) dotThroughReshapes(lhs, rhs *value, contract, batch []int) (backends.Op, error) {
	lsrc, lmap := squeezeSource(lhs)
	rsrc, rmap := squeezeSource(rhs)
	if lsrc == nil && rsrc == nil {
		return b.DotGeneral(lhs, contract, batch, rhs, contract, batch)
	}
	keep := func(axes []int) []int { // drop axes of size 1 (in both operands)
		var k []int
		for _, a := range axes {
			if lhs.shape.Dimensions[a] != 1 {
				k = append(k, a)
			}
		}
		return k
	}
	c, bt := keep(contract), keep(batch)
	if len(c) == 0 {
		return b.DotGeneral(lhs, contract, batch, rhs, contract, batch)
	}
	remap := func(src *value, m []int, v *value, axes []int) (*value, []int) {
		if src == nil {
			return v, axes
		}
		out := make([]int, len(axes))
		for i, a := range axes {
			out[i] = m[a]
		}
		return src, out
	}
	lv, lc := remap(lsrc, lmap, lhs, c)
	_, lb := remap(lsrc, lmap, lhs, bt)
	rv, rc := remap(rsrc, rmap, rhs, c)
	_, rb := remap(rsrc, rmap, rhs, bt)
	return b.DotGeneral(lv, lc, lb, rv, rc, rb)
}

// squeezeSource returns the input of v when v is a Reshape that only adds
// or removes size-1 axes (the same dimensions other than 1, in the same
// order), with the input's axis of each axis of v of size other than 1
// (−1 for size-1 axes); nil when v is not such a Reshape.
func squeezeSource(v *value) (*value, []int) {
	n := v.node
	if n.opType != backends.OpTypeReshape || len(n.inputs) != 1 {
		return nil, nil
	}
	src := n.inputs[0]
	sd := src.shape.Dimensions
	m := make([]int, v.shape.Rank())
	j := 0
	for a, d := range v.shape.Dimensions {
		m[a] = -1
		if d == 1 {
			continue
		}
		for j < len(sd) && sd[j] == 1 {
			j++
		}
		if j == len(sd) || sd[j] != d {
			return nil, nil
		}
		m[a] = j
		j++
	}
	for ; j < len(sd); j++ {
		if sd[j] != 1 {
			return nil, nil
		}
	}
	return src, m
}

// foldZeroPad sums only the non-zero operand of a zero-padded Concatenate:
// ReduceSum(x, axes) where x is, through Reshapes that end at its own
// dimensions, Concatenate(operands; axis) with axis among axes and every
// operand but one, p, a broadcast zero Constant, is ReduceSum(p, axes),
// a Reshape when p has size 1 on every summed axis. The zeros add nothing
// (the same float32s, except that a −0 sum stays −0). model/vjp's
// Attention makes this sum for each of dK and dV: its custom gradient
// places them at query head 0 of their group, zero elsewhere, and the
// sum over the group's heads (the VJP of the broadcast that spreads k and
// v to the query heads) takes them back; without the fold the backward
// writes the 4× larger padded tensor, its zeros and the sum (about 0.5%
// of the 25M model's training step).
func (b *Builder) foldZeroPad(x backends.Op, axes []int) (backends.Op, bool, error) {
	v, isValue := x.(*value)
	if b.backend.plain || !isValue || v.b != b || len(axes) == 0 {
		return nil, false, nil
	}
	c := reshapeSource(v)
	n := c.node
	if n.opType != backends.OpTypeConcatenate || !slices.Equal(c.shape.Dimensions, v.shape.Dimensions) ||
		!slices.Contains(axes, n.concatAxis) {
		return nil, false, nil
	}
	var keep *value
	for _, in := range n.inputs {
		if isZeroConstant(in) {
			continue
		}
		if keep != nil {
			return nil, false, nil
		}
		keep = in
	}
	if keep == nil || keep.shape.DType != v.shape.DType {
		return nil, false, nil
	}
	var outDims []int
	ones := true
	for a, d := range keep.shape.Dimensions {
		if slices.Contains(axes, a) {
			ones = ones && d == 1
		} else {
			outDims = append(outDims, d)
		}
	}
	if !ones {
		op, err := b.ReduceSum(keep, axes...)
		return op, true, err
	}
	op, err := b.Reshape(keep, outDims...)
	return op, true, err
}

// isZeroConstant reports whether v is a Constant of zeros, or a Reshape or
// BroadcastInDim of one.
func isZeroConstant(v *value) bool {
	for {
		n := v.node
		switch {
		case n.opType == backends.OpTypeConstant:
			return n.zero
		case n.opType == backends.OpTypeBroadcastInDim && n.bcastFrom != nil:
			v = n.bcastFrom
		case (n.opType == backends.OpTypeReshape || n.opType == backends.OpTypeBroadcastInDim) && len(n.inputs) == 1:
			v = n.inputs[0]
		default:
			return false
		}
	}
}
