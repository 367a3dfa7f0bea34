package gocpu

import (
	"fmt"
	"slices"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/viterin/vek/vek32"
)

// Row gathers and their gradients.
//
// An embedding lookup, graph.Gather(table, ExpandAxes(ids, -1)), is a
// Gather of whole rows of table [V, …] by the integer ids [N…, 1], and its
// gradient is a ScatterSum of the rows of the adjoint [N…, …] into zeros
// of table's shape. simplego runs both through per-element iterators (a
// training step of the 25M model gathers and scatters 2 × 2048 rows of
// 512: ~2% of its time). Here they run by rows:
//
//   - Gather: out row i = table row clamp(ids[i], 0, V−1) (XLA's
//     clamping, as simplego does), any dtype, copied as bytes;
//   - ScatterSum (float32): out = operand (in place when the operand's
//     buffer is not used afterwards, else a copy), then for i in order,
//     out row ids[i] += updates row i, skipping ids outside [0, V) (XLA
//     drops out-of-bounds updates). The columns are split over the
//     workers, so each element still receives its updates in index order:
//     the same float32 additions, in the same order, as simplego's loop
//     (bit-identical).

// rowGather describes a Gather or ScatterSum of whole rows: the operand is
// [V, rest…] with row elements of rest, the indices [batch…, 1] (or
// [batch…] with the index vector axis at their rank).
type rowGather struct {
	rows, row int // V and the elements of one row
	n         int // number of indices
}

// rowIndexShape checks the indices' shape: integer, one index per position
// (index vector axis last, of size 1, or implicit); returns the batch
// dimensions.
func rowIndexShape(idx shapes.Shape, indexVectorAxis int) ([]int, bool) {
	if !idx.DType.IsInt() {
		return nil, false
	}
	r := idx.Rank()
	switch {
	case indexVectorAxis == r:
		return idx.Dimensions, true
	case r > 0 && indexVectorAxis == r-1 && idx.Dimensions[r-1] == 1:
		return idx.Dimensions[:r-1], true
	}
	return nil, false
}

// trailingAxes reports whether axes are exactly first, first+1, …, rank−1.
func trailingAxes(axes []int, first, rank int) bool {
	if len(axes) != rank-first {
		return false
	}
	for i, a := range axes {
		if a != first+i {
			return false
		}
	}
	return true
}

// newRowGather matches a Gather of whole rows of operand along axis 0.
func newRowGather(operand, idx shapes.Shape, indexVectorAxis int, offsetOutputAxes, collapsedSliceAxes, startIndexMap, sliceSizes []int) (*rowGather, bool) {
	r := operand.Rank()
	batch, ok := rowIndexShape(idx, indexVectorAxis)
	if !ok || r < 1 || !slices.Equal(startIndexMap, []int{0}) || !slices.Equal(collapsedSliceAxes, []int{0}) ||
		len(sliceSizes) != r || sliceSizes[0] != 1 || !slices.Equal(sliceSizes[1:], operand.Dimensions[1:]) ||
		!trailingAxes(offsetOutputAxes, len(batch), len(batch)+r-1) || operand.Dimensions[0] < 1 {
		return nil, false
	}
	return &rowGather{rows: operand.Dimensions[0], row: operand.Size() / operand.Dimensions[0], n: shapes.Make(idx.DType, batch...).Size()}, true
}

// newRowScatter matches a ScatterSum of whole rows of updates into operand
// along axis 0 (GoMLX's gradient of a row Gather).
func newRowScatter(operand, idx, updates shapes.Shape, indexVectorAxis int, updateWindowAxes, insertedWindowAxes, scatterAxesToOperandAxes []int) (*rowGather, bool) {
	r := operand.Rank()
	batch, ok := rowIndexShape(idx, indexVectorAxis)
	if !ok || r < 1 || operand.DType != dtypes.Float32 || updates.DType != dtypes.Float32 ||
		!slices.Equal(insertedWindowAxes, []int{0}) || !slices.Equal(scatterAxesToOperandAxes, []int{0}) ||
		!slices.Equal(updates.Dimensions, append(slices.Clone(batch), operand.Dimensions[1:]...)) ||
		!trailingAxes(updateWindowAxes, len(batch), updates.Rank()) || operand.Dimensions[0] < 1 {
		return nil, false
	}
	return &rowGather{rows: operand.Dimensions[0], row: operand.Size() / operand.Dimensions[0], n: shapes.Make(idx.DType, batch...).Size()}, true
}

// indexInts returns the n integer indices of flat as ints (int64 and
// uint64 values beyond ±2⁶² clamped, as out of range anyway).
func indexInts(flat any, n int) ([]int, error) {
	out := make([]int, n)
	switch x := flat.(type) {
	case []int32:
		widen(out, x[:n])
	case []int16:
		widen(out, x[:n])
	case []int8:
		widen(out, x[:n])
	case []uint8:
		widen(out, x[:n])
	case []uint16:
		widen(out, x[:n])
	case []uint32:
		widen(out, x[:n])
	case []int64:
		for i, v := range x[:n] {
			out[i] = clampInt64(v)
		}
	case []uint64:
		for i, v := range x[:n] {
			out[i] = int(min(v, 1<<62))
		}
	default:
		return nil, fmt.Errorf("indices of type %T are not integers", flat)
	}
	return out, nil
}

// widen sets out[i] = int(x[i]) for integer types narrower than int.
func widen[T int8 | int16 | int32 | uint8 | uint16 | uint32](out []int, x []T) {
	for i, v := range x {
		out[i] = int(v)
	}
}

// gatherRows copies row clamp(ids[i], 0, rows−1) of src to row i of dst
// (rows of rowBytes bytes), split over the workers.
func (be *Backend) gatherRows(dst, src []byte, ids []int, rows, rowBytes int) {
	be.forRange(len(ids), max(rowBytes/4, 1), func(lo, hi int) {
		for i := lo; i < hi; i++ {
			r := max(0, min(rows-1, ids[i]))
			copy(dst[i*rowBytes:(i+1)*rowBytes], src[r*rowBytes:(r+1)*rowBytes])
		}
	})
}

// scatterAddRows adds row i of upd into row ids[i] of dst (rows of row
// float32), for i in order, skipping ids outside [0, rows); the columns
// are split over the workers, so every element takes its additions in
// index order.
func (be *Backend) scatterAddRows(dst, upd []float32, ids []int, rows, row int) {
	if row == 0 {
		return
	}
	w := be.Workers()
	cw := row
	if w > 1 && len(ids)*row >= parallelMin && row >= 64 {
		cw = min(row, (row/w+15)&^15)
	}
	nc := (row + cw - 1) / cw
	be.forRange(nc, len(ids)*cw, func(lo, hi int) {
		for c := lo; c < hi; c++ {
			c0, c1 := c*cw, min(row, (c+1)*cw)
			for i, r := range ids {
				if r < 0 || r >= rows {
					continue
				}
				vek32.Add_Inplace(dst[r*row+c0:r*row+c1], upd[i*row+c0:i*row+c1])
			}
		}
	})
}

// customGather records a row Gather (see newRowGather) as a custom op.
func (b *Builder) customGather(vs []*value, so backends.Op, g *rowGather) (backends.Op, error) {
	out, err := b.shadow.OpShape(so)
	if err != nil {
		return nil, err
	}
	exec := func(be *Backend, in []backends.Buffer, _ []bool) (backends.Buffer, int, error) {
		src, err := be.BufferData(in[0])
		if err != nil {
			return nil, -1, err
		}
		iflat, err := be.BufferData(in[1])
		if err != nil {
			return nil, -1, err
		}
		ids, err := indexInts(iflat, g.n)
		if err != nil {
			return nil, -1, err
		}
		buf, flat, err := be.NewSharedBuffer(0, out)
		if err != nil {
			return nil, -1, err
		}
		d, esz := rawBytes(flat)
		s, _ := rawBytes(src)
		if len(d) > 0 {
			be.gatherRows(d, s, ids, g.rows, g.row*esz)
		}
		return buf, -1, nil
	}
	return b.addShadowNode(&node{kind: kindCustom, opType: backends.OpTypeGather, inputs: vs, exec: exec}, so)
}

// ScatterSum implements backends.Builder: a float32 scatter of whole rows
// (the gradient of an embedding lookup) runs here by rows, bit-identical
// to simplego; any other on simplego.
func (b *Builder) ScatterSum(operand backends.Op, scatterIndices backends.Op, updates backends.Op, indexVectorAxis int, updateWindowAxes []int, insertedWindowAxes []int, scatterAxesToOperandAxes []int, indicesAreSorted bool, uniqueIndices bool) (backends.Op, error) {
	updateWindowAxes = slices.Clone(updateWindowAxes)
	insertedWindowAxes = slices.Clone(insertedWindowAxes)
	scatterAxesToOperandAxes = slices.Clone(scatterAxesToOperandAxes)
	ins := []backends.Op{operand, scatterIndices, updates}
	replay := func(sb backends.Builder, in []backends.Op) ([]backends.Op, error) {
		o, err := sb.ScatterSum(in[0], in[1], in[2], indexVectorAxis, slices.Clone(updateWindowAxes), slices.Clone(insertedWindowAxes),
			slices.Clone(scatterAxesToOperandAxes), indicesAreSorted, uniqueIndices)
		return []backends.Op{o}, err
	}
	vs, err := b.checkOps("ScatterSum", ins)
	if err != nil {
		return nil, err
	}
	g, ok := newRowScatter(vs[0].shape, vs[1].shape, vs[2].shape, indexVectorAxis, updateWindowAxes, insertedWindowAxes, scatterAxesToOperandAxes)
	if b.backend.plain || !ok {
		res, err := b.recordN(backends.OpTypeScatterSum, ins, 1, replay)
		if err != nil {
			return nil, err
		}
		return res[0], nil
	}
	sos, err := replay(b.shadow, shadowOps(vs))
	if err != nil {
		return nil, err
	}
	so := sos[0]
	if v, ok := b.byShadow[so]; ok {
		return v, nil
	}
	out := vs[0].shape
	exec := func(be *Backend, in []backends.Buffer, owned []bool) (backends.Buffer, int, error) {
		iflat, err := be.BufferData(in[1])
		if err != nil {
			return nil, -1, err
		}
		ids, err := indexInts(iflat, g.n)
		if err != nil {
			return nil, -1, err
		}
		upd, err := f32Data(be, in[2])
		if err != nil {
			return nil, -1, err
		}
		buf, dst, consumed, err := outputFor(be, in, owned, out, 0)
		if err != nil {
			return nil, -1, err
		}
		if consumed < 0 {
			src, err := f32Data(be, in[0])
			if err != nil {
				return nil, -1, err
			}
			be.forRange(g.rows, g.row, func(lo, hi int) { copy(dst[lo*g.row:hi*g.row], src[lo*g.row:hi*g.row]) })
		}
		be.scatterAddRows(dst, upd, ids, g.rows, g.row)
		return buf, consumed, nil
	}
	return b.addShadowNode(&node{kind: kindCustom, opType: backends.OpTypeScatterSum, inputs: vs, exec: exec}, so)
}
