package gocpu

import (
	"slices"

	"github.com/gomlx/gomlx/backends"
)

// sliceMinCustom is the output size (elements) from which a Slice of a
// value computed by a delegated op also runs here: simplego's generic
// Slice moves one element at a time (about 15% of an attention layer's
// forward and backward on the fused kernels, which slice o out of the
// forward's [o | m | l] and dQ, dK, dV out of the backward's result).
const sliceMinCustom = 1 << 14

// Slice implements backends.Builder. With unit strides it copies runs of
// the innermost axis (any dtype) when the operand is a custom op's result
// or the output is large; otherwise, and on "nofast", simplego slices.
func (b *Builder) Slice(x backends.Op, starts, limits, strides []int) (backends.Op, error) {
	starts, limits, strides = slices.Clone(starts), slices.Clone(limits), slices.Clone(strides)
	one := func(sb backends.Builder, x backends.Op) (backends.Op, error) {
		return sb.Slice(x, slices.Clone(starts), slices.Clone(limits), slices.Clone(strides))
	}
	replay := oneResult(one)
	vs, so, existing, out, err := b.shadowUnary("Slice", x, one)
	if err != nil || existing != nil {
		return existing, err
	}
	unit := true
	for _, s := range strides {
		unit = unit && s == 1
	}
	if b.backend.plain || !unit || len(starts) != vs[0].shape.Rank() ||
		(vs[0].node.kind != kindCustom && out.Size() < sliceMinCustom) {
		return b.addShadowNode(&node{kind: kindDelegate, opType: backends.OpTypeSlice, inputs: vs, replay: replay}, so)
	}
	st := rowMajorStrides(vs[0].shape.Dimensions)
	off := 0
	for i, s := range starts {
		off += s * st[i]
	}
	exec := func(be *Backend, in []backends.Buffer, _ []bool) (backends.Buffer, int, error) {
		src, buf, flat, err := be.srcAndOut(in[0], out)
		if err != nil {
			return nil, -1, err
		}
		d, esz := rawBytes(flat)
		s, _ := rawBytes(src)
		if len(d) > 0 {
			gatherStrided(d, s[off*esz:], out.Dimensions, st, esz)
		}
		return buf, -1, nil
	}
	return b.addShadowNode(&node{kind: kindCustom, opType: backends.OpTypeSlice, inputs: vs, exec: exec}, so)
}
