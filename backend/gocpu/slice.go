package gocpu

import (
	"slices"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

// sliceMinCustom is the output size (elements) from which a Slice or a
// Concatenate of values computed by delegated ops also runs here:
// simplego's generic Slice moves one element at a time (about 15% of an
// attention layer's forward and backward on the fused kernels, which slice
// o out of the forward's [o | m | l] and dQ, dK, dV out of the backward's
// result, and concatenate dK and dV with zeros; fuse_attention.go).
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
		return b.addShadowNode(&node{kind: kindDelegate, opType: backends.OpTypeSlice, inputs: vs, replay: replay, sliceStarts: starts}, so)
	}
	st := rowMajorStrides(vs[0].shape.Dimensions)
	exec := gatherExec(out, sliceOffset(starts, st), st)
	return b.addShadowNode(&node{kind: kindCustom, opType: backends.OpTypeSlice, inputs: vs, exec: exec, sliceStarts: starts}, so)
}

// sliceOffset is the element offset of starts in an array of strides st.
func sliceOffset(starts, st []int) int {
	off := 0
	for i, s := range starts {
		off += s * st[i]
	}
	return off
}

// gatherExec returns the custom op that fills out (row-major) from its one
// operand's element off + Σ idx[a]·strides[a] (in elements, any dtype).
func gatherExec(out shapes.Shape, off int, strides []int) customFn {
	return func(be *Backend, in []backends.Buffer, _ []bool) (backends.Buffer, int, error) {
		src, buf, flat, err := be.srcAndOut(in[0], out)
		if err != nil {
			return nil, -1, err
		}
		d, esz := rawBytes(flat)
		s, _ := rawBytes(src)
		if len(d) > 0 {
			be.gatherStridedPar(d, s[off*esz:], out.Dimensions, strides, esz)
		}
		return buf, -1, nil
	}
}

// Concatenate implements backends.Builder: the fused attention's forward
// and backward (fuse_attention.go); otherwise, when an operand is a custom
// op's result or the output is large, it copies each operand's rows (the
// axes from axis on, contiguous in both) here, any dtype; else, and on
// "nofast", simplego concatenates.
func (b *Builder) Concatenate(axis int, operands ...backends.Op) (backends.Op, error) {
	ins := slices.Clone(operands)
	vs, err := b.checkOps("Concatenate", ins)
	if err != nil {
		return nil, err
	}
	if !b.backend.plain {
		if op, ok, err := b.fuseAttention(axis, vs); ok || err != nil {
			return op, err
		}
	}
	replay := func(sb backends.Builder, in []backends.Op) ([]backends.Op, error) {
		o, err := sb.Concatenate(axis, in...)
		return []backends.Op{o}, err
	}
	sos, err := replay(b.shadow, shadowOps(vs))
	if err != nil {
		return nil, err
	}
	so := sos[0]
	if v, ok := b.byShadow[so]; ok {
		return v, nil
	}
	out, err := b.shadow.OpShape(so)
	if err != nil {
		return nil, err
	}
	custom := false
	for _, v := range vs {
		custom = custom || v.node.kind == kindCustom
	}
	if axis < 0 {
		axis += out.Rank() // replay then passes it normalised: the same op
	}
	if b.backend.plain || (!custom && out.Size() < sliceMinCustom) {
		return b.addShadowNode(&node{kind: kindDelegate, opType: backends.OpTypeConcatenate, inputs: vs, replay: replay, concatAxis: axis}, so)
	}
	outer := 1
	for _, d := range out.Dimensions[:axis] {
		outer *= d
	}
	row := out.Size() / max(outer, 1) // elements of one output row
	widths := make([]int, len(vs))    // elements of one row of each operand
	for i, v := range vs {
		widths[i] = v.shape.Size() / max(outer, 1)
	}
	exec := func(be *Backend, in []backends.Buffer, _ []bool) (backends.Buffer, int, error) {
		buf, flat, err := be.NewSharedBuffer(0, out)
		if err != nil {
			return nil, -1, err
		}
		d, esz := rawBytes(flat)
		srcs := make([][]byte, len(in))
		for i := range in {
			src, err := be.BufferData(in[i])
			if err != nil {
				return nil, -1, err
			}
			srcs[i], _ = rawBytes(src)
		}
		// Output rows split over the workers when large.
		be.forRange(outer, row, func(lo, hi int) {
			off := 0
			for i, s := range srcs {
				w := widths[i] * esz
				for o := lo; o < hi; o++ {
					copy(d[(o*row)*esz+off:(o*row)*esz+off+w], s[o*w:(o+1)*w])
				}
				off += w
			}
		})
		return buf, -1, nil
	}
	return b.addShadowNode(&node{kind: kindCustom, opType: backends.OpTypeConcatenate, inputs: vs, exec: exec, concatAxis: axis}, so)
}
