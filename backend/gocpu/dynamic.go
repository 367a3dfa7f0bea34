package gocpu

import (
	"fmt"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

// DynamicSlice implements backends.Builder (XLA semantics): the block of
// sizes sliceDims of operand starting at the runtime scalar indices
// startIndices (one per axis), each start clamped to [0, dim − size] so the
// block lies inside the operand.
func (b *Builder) DynamicSlice(operandOp backends.Op, startIndices []backends.Op, sliceDims []int) (backends.Op, error) {
	vs, err := b.checkOps("DynamicSlice", append([]backends.Op{operandOp}, startIndices...))
	if err != nil {
		return nil, err
	}
	op := vs[0].shape
	if err := checkStartIndices("DynamicSlice", op, vs[1:]); err != nil {
		return nil, err
	}
	if len(sliceDims) != op.Rank() {
		return nil, fmt.Errorf("DynamicSlice: %d slice dimensions for operand %s", len(sliceDims), op)
	}
	for a, d := range sliceDims {
		if d < 0 || d > op.Dimensions[a] {
			return nil, fmt.Errorf("DynamicSlice: slice dimension %d of axis %d outside [0, %d] (operand %s)", d, a, op.Dimensions[a], op)
		}
	}
	outShape := shapes.Make(op.DType, sliceDims...)
	opDims := append([]int(nil), op.Dimensions...)
	size := append([]int(nil), sliceDims...)
	return b.addCustom(backends.OpTypeDynamicSlice, vs, outShape, func(be *Backend, in []backends.Buffer, _ []bool) (backends.Buffer, int, error) {
		start, err := clampedStarts(be, in[1:], opDims, size)
		if err != nil {
			return nil, -1, fmt.Errorf("DynamicSlice: %w", err)
		}
		src, out, flat, err := be.srcAndOut(in[0], outShape)
		if err != nil {
			return nil, -1, err
		}
		s, esz := rawBytes(src)
		d, _ := rawBytes(flat)
		copyBlock(d, size, make([]int, len(size)), s, opDims, start, size, esz)
		return out, -1, nil
	})
}

// DynamicUpdateSlice implements backends.Builder (XLA semantics): operand
// with the block update written at the runtime start indices, each clamped
// to [0, dim − update dim]. When the operand is not used afterwards its
// buffer is updated in place (a KV cache write costs the size of the
// update, not of the cache).
func (b *Builder) DynamicUpdateSlice(operandOp, updateOp backends.Op, startIndices []backends.Op) (backends.Op, error) {
	vs, err := b.checkOps("DynamicUpdateSlice", append([]backends.Op{operandOp, updateOp}, startIndices...))
	if err != nil {
		return nil, err
	}
	op, up := vs[0].shape, vs[1].shape
	if err := checkStartIndices("DynamicUpdateSlice", op, vs[2:]); err != nil {
		return nil, err
	}
	if up.DType != op.DType || up.Rank() != op.Rank() {
		return nil, fmt.Errorf("DynamicUpdateSlice: update %s does not match operand %s", up, op)
	}
	for a, d := range up.Dimensions {
		if d > op.Dimensions[a] {
			return nil, fmt.Errorf("DynamicUpdateSlice: update %s larger than operand %s on axis %d", up, op, a)
		}
	}
	opDims := append([]int(nil), op.Dimensions...)
	upDims := append([]int(nil), up.Dimensions...)
	outShape := op.Clone()
	return b.addCustom(backends.OpTypeDynamicUpdateSlice, vs, outShape, func(be *Backend, in []backends.Buffer, owned []bool) (backends.Buffer, int, error) {
		start, err := clampedStarts(be, in[2:], opDims, upDims)
		if err != nil {
			return nil, -1, fmt.Errorf("DynamicUpdateSlice: %w", err)
		}
		src, err := be.BufferData(in[0])
		if err != nil {
			return nil, -1, err
		}
		out, consumed := in[0], 0
		dst := src
		if !owned[0] {
			var flat any
			if out, flat, err = be.NewSharedBuffer(0, outShape); err != nil {
				return nil, -1, err
			}
			consumed, dst = -1, flat
			d, _ := rawBytes(flat)
			s, _ := rawBytes(src)
			copy(d, s)
		}
		upd, err := be.BufferData(in[1])
		if err != nil {
			return nil, -1, err
		}
		d, esz := rawBytes(dst)
		u, _ := rawBytes(upd)
		copyBlock(d, opDims, start, u, upDims, make([]int, len(upDims)), upDims, esz)
		return out, consumed, nil
	})
}

func checkStartIndices(what string, op shapes.Shape, idx []*value) error {
	if len(idx) != op.Rank() {
		return fmt.Errorf("%s: %d start indices for operand %s of rank %d", what, len(idx), op, op.Rank())
	}
	for i, v := range idx {
		if v.shape.Rank() != 0 || !v.shape.DType.IsInt() {
			return fmt.Errorf("%s: start index #%d is %s, want an integer scalar", what, i, v.shape)
		}
	}
	return nil
}

// clampedStarts reads the start indices and clamps each to [0, dim − size].
func clampedStarts(be *Backend, idx []backends.Buffer, dims, size []int) ([]int, error) {
	start := make([]int, len(idx))
	for a, buf := range idx {
		flat, err := be.BufferData(buf)
		if err != nil {
			return nil, err
		}
		s, err := scalarIndex(flat)
		if err != nil {
			return nil, fmt.Errorf("axis %d: %w", a, err)
		}
		start[a] = max(0, min(s, dims[a]-size[a]))
	}
	return start, nil
}

// Pad implements backends.Builder (XLA semantics): along each axis, Start
// elements of fillValue before, End after and Interior between consecutive
// elements; negative Start/End crop. Missing axes are not padded. The output
// dimension is Start + End + d + max(d−1, 0)·Interior.
func (b *Builder) Pad(x, fillValue backends.Op, axesConfig ...backends.PadAxis) (backends.Op, error) {
	vs, err := b.checkOps("Pad", []backends.Op{x, fillValue})
	if err != nil {
		return nil, err
	}
	xs, fs := vs[0].shape, vs[1].shape
	if fs.Rank() != 0 || fs.DType != xs.DType {
		return nil, fmt.Errorf("Pad: fill value %s must be a scalar of the operand's dtype %s", fs, xs.DType)
	}
	if len(axesConfig) > xs.Rank() {
		return nil, fmt.Errorf("Pad: %d axes configured for operand %s", len(axesConfig), xs)
	}
	cfg := make([]backends.PadAxis, xs.Rank())
	copy(cfg, axesConfig)
	outDims := make([]int, xs.Rank())
	for a, c := range cfg {
		d := xs.Dimensions[a]
		if c.Interior < 0 {
			return nil, fmt.Errorf("Pad: negative interior padding %d on axis %d", c.Interior, a)
		}
		outDims[a] = c.Start + c.End + d + max(d-1, 0)*c.Interior
		if outDims[a] < 0 {
			return nil, fmt.Errorf("Pad: axis %d of %s padded with %+v has negative size %d", a, xs, c, outDims[a])
		}
	}
	outShape := shapes.Make(xs.DType, outDims...)
	inDims := append([]int(nil), xs.Dimensions...)
	return b.addCustom(backends.OpTypePad, vs, outShape, func(be *Backend, in []backends.Buffer, _ []bool) (backends.Buffer, int, error) {
		src, out, flat, err := be.srcAndOut(in[0], outShape)
		if err != nil {
			return nil, -1, err
		}
		fill, err := be.BufferData(in[1])
		if err != nil {
			return nil, -1, err
		}
		d, esz := rawBytes(flat)
		s, _ := rawBytes(src)
		f, _ := rawBytes(fill)
		padBytes(d, outDims, s, inDims, f, cfg, esz)
		return out, -1, nil
	})
}

// padBytes fills dst (dimensions outDims) with the element fill, then copies
// every element i of src (dimensions inDims) to out index Start + i·(1 +
// Interior) on each axis when that lies inside dst.
func padBytes(dst []byte, outDims []int, src []byte, inDims []int, fill []byte, cfg []backends.PadAxis, esz int) {
	if len(dst) == 0 {
		return
	}
	// Fill by doubling copies of the fill element.
	copy(dst, fill[:esz])
	for n := esz; n < len(dst); n *= 2 {
		copy(dst[n:], dst[:n])
	}
	if len(src) == 0 {
		return
	}
	rank := len(inDims)
	if rank == 0 {
		copy(dst[:esz], src[:esz])
		return
	}
	os, is := rowMajorStrides(outDims), rowMajorStrides(inDims)
	last := rank - 1
	step := cfg[last].Interior + 1
	idx := make([]int, rank-1)
	for {
		// Output offset of the current row of src, if inside dst.
		inside := true
		ooff, ioff := 0, 0
		for a := range rank - 1 {
			o := cfg[a].Start + idx[a]*(cfg[a].Interior+1)
			if o < 0 || o >= outDims[a] {
				inside = false
				break
			}
			ooff += o * os[a]
			ioff += idx[a] * is[a]
		}
		if inside {
			// Along the last axis: in element i goes to Start + i·step.
			lo := 0
			if st := cfg[last].Start; st < 0 {
				lo = (-st + step - 1) / step
			}
			for i := lo; i < inDims[last]; i++ {
				o := cfg[last].Start + i*step
				if o >= outDims[last] {
					break
				}
				if step == 1 {
					// Contiguous run up to the end of the row or of dst.
					n := min(inDims[last]-i, outDims[last]-o)
					copy(dst[(ooff+o)*esz:(ooff+o+n)*esz], src[(ioff+i)*esz:(ioff+i+n)*esz])
					break
				}
				copy(dst[(ooff+o)*esz:(ooff+o+1)*esz], src[(ioff+i)*esz:(ioff+i+1)*esz])
			}
		}
		a := rank - 2
		for ; a >= 0; a-- {
			idx[a]++
			if idx[a] < inDims[a] {
				break
			}
			idx[a] = 0
		}
		if a < 0 {
			return
		}
	}
}

// srcAndOut returns the data of the input x and a new output buffer of
// shape with its flat data: the start of every custom op that copies or
// rearranges one input.
func (be *Backend) srcAndOut(x backends.Buffer, shape shapes.Shape) (src any, out backends.Buffer, flat any, err error) {
	if src, err = be.BufferData(x); err != nil {
		return nil, nil, nil, err
	}
	if out, flat, err = be.NewSharedBuffer(0, shape); err != nil {
		return nil, nil, nil, err
	}
	return src, out, flat, nil
}
