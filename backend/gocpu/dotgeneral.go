package gocpu

import (
	"fmt"
	"slices"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/shapes"

	"github.com/cas-engine/cas/tensor"
)

// DotGeneral implements backends.Builder. For float32 and BF16 operands it
// is
//
//	out[b…, i…, j…] = Σ_{c…} lhs[b…, i…, c…] · rhs[b…, j…, c…]
//
// over the batch axes b (paired in order), the contracting axes c (paired in
// order) and the remaining "cross" axes i of lhs and j of rhs (in axis
// order), computed by tensor.Gemm with float32 accumulation. Each of the
// three axis groups of an operand is read in place when it flattens to one
// stride (the usual case: x·Wᵀ over [..., in]·[out, in], q·kᵀ, p·v and their
// gradients); otherwise the operand is first copied into [batch, cross,
// contracting] order. Other dtypes run on simplego.
func (b *Builder) DotGeneral(lhsOp backends.Op, lhsContractingAxes, lhsBatchAxes []int, rhsOp backends.Op, rhsContractingAxes, rhsBatchAxes []int) (backends.Op, error) {
	lc, lb := slices.Clone(lhsContractingAxes), slices.Clone(lhsBatchAxes)
	rc, rb := slices.Clone(rhsContractingAxes), slices.Clone(rhsBatchAxes)
	vs, err := b.checkOps("DotGeneral", []backends.Op{lhsOp, rhsOp})
	if err != nil {
		return nil, err
	}
	lhs, rhs := vs[0], vs[1]
	if !b.backend.plain && lhs.shape.DType == dtypes.Float32 && rhs.shape.DType == dtypes.Float32 {
		// Read bfloat16 weights cast to float32 in place (see bf16Source).
		if src, ok := bf16Source(lhs); ok {
			vs[0] = src
		}
		if src, ok := bf16Source(rhs); ok {
			vs[1] = src
		}
		if vs[0] != lhs || vs[1] != rhs {
			p, err := newDotPlan(vs[0].shape, lc, lb, vs[1].shape, rc, rb, b.backend.workers)
			if err != nil {
				return nil, fmt.Errorf("DotGeneral(lhs=%s, contracting=%v, batch=%v; rhs=%s, contracting=%v, batch=%v): %w",
					lhs.shape, lhsContractingAxes, lhsBatchAxes, rhs.shape, rhsContractingAxes, rhsBatchAxes, err)
			}
			// The product of the casts is float32 even when both operands
			// are read as bfloat16 (accumulated in float32, never rounded).
			p.dtype, p.out = dtypes.Float32, shapes.Make(dtypes.Float32, p.out.Dimensions...)
			return b.addCustom(backends.OpTypeDotGeneral, vs, p.out, p.exec)
		}
	}
	if b.backend.plain || !fastDType(lhs.shape.DType) || lhs.shape.DType != rhs.shape.DType {
		return b.record1(backends.OpTypeDotGeneral, []backends.Op{lhsOp, rhsOp}, func(sb backends.Builder, in []backends.Op) (backends.Op, error) {
			return sb.DotGeneral(in[0], slices.Clone(lc), slices.Clone(lb), in[1], slices.Clone(rc), slices.Clone(rb))
		})
	}
	p, err := newDotPlan(lhs.shape, lc, lb, rhs.shape, rc, rb, b.backend.workers)
	if err != nil {
		return nil, fmt.Errorf("DotGeneral(lhs=%s, contracting=%v, batch=%v; rhs=%s, contracting=%v, batch=%v): %w",
			lhs.shape, lhsContractingAxes, lhsBatchAxes, rhs.shape, rhsContractingAxes, rhsBatchAxes, err)
	}
	op, err := b.addCustom(backends.OpTypeDotGeneral, vs, p.out, p.exec)
	if err == nil {
		op.(*value).node.dotAxes = [4][]int{lc, lb, rc, rb}
	}
	return op, err
}

// Dot implements backends.Builder with simplego's semantics: vector·vector,
// matrix·vector and matrix·matrix, contracting the last axis of lhs with the
// first of rhs.
func (b *Builder) Dot(lhsOp, rhsOp backends.Op) (backends.Op, error) {
	vs, err := b.checkOps("Dot", []backends.Op{lhsOp, rhsOp})
	if err != nil {
		return nil, err
	}
	lr, rr := vs[0].shape.Rank(), vs[1].shape.Rank()
	switch {
	case lr == 1 && rr == 1:
		return b.DotGeneral(lhsOp, []int{0}, nil, rhsOp, []int{0}, nil)
	case lr == 2 && (rr == 1 || rr == 2):
		return b.DotGeneral(lhsOp, []int{1}, nil, rhsOp, []int{0}, nil)
	}
	return nil, fmt.Errorf("Dot operands have invalid ranks: lhs=%s, rhs=%s", vs[0].shape, vs[1].shape)
}

// dotPlan is a DotGeneral resolved at build time.
type dotPlan struct {
	dtype          dtypes.DType
	batch, m, n, k int
	lhs, rhs       operandPlan
	out            shapes.Shape
	workers        int
	// tiny, when set, computes the product without the GEMM (see
	// tinyPlan).
	tiny *tinyPlan
}

// operandPlan says how to read one operand as the A ([batch, M, K]) or B
// ([batch, K, N]) operand of a tensor.Gemm.
type operandPlan struct {
	// direct: element (b, r, c) at b·batch + r·row + c·col of the operand.
	direct          bool
	batch, row, col int
	// Otherwise the operand is copied in the axis order perm (batch,
	// cross, contracting axes), a contiguous [batch, cross, contracting]
	// array.
	dims, perm []int
	size       int
}

func newDotPlan(ls shapes.Shape, lc, lb []int, rs shapes.Shape, rc, rb []int, workers int) (*dotPlan, error) {
	// Operands of one dtype give that dtype; float32 with bfloat16 (a
	// bfloat16 weight read in place, see bf16Source) gives float32.
	outDType := ls.DType
	if ls.DType != rs.DType {
		if !fastDType(ls.DType) || !fastDType(rs.DType) {
			return nil, fmt.Errorf("operand dtypes %s and %s differ", ls.DType, rs.DType)
		}
		outDType = dtypes.Float32
	}
	if len(lc) != len(rc) {
		return nil, fmt.Errorf("%d contracting axes for lhs but %d for rhs", len(lc), len(rc))
	}
	if len(lb) != len(rb) {
		return nil, fmt.Errorf("%d batch axes for lhs but %d for rhs", len(lb), len(rb))
	}
	var err error
	if lc, err = normAxes(ls.Rank(), lc); err != nil {
		return nil, fmt.Errorf("lhs contracting axes: %w", err)
	}
	if lb, err = normAxes(ls.Rank(), lb); err != nil {
		return nil, fmt.Errorf("lhs batch axes: %w", err)
	}
	if rc, err = normAxes(rs.Rank(), rc); err != nil {
		return nil, fmt.Errorf("rhs contracting axes: %w", err)
	}
	if rb, err = normAxes(rs.Rank(), rb); err != nil {
		return nil, fmt.Errorf("rhs batch axes: %w", err)
	}
	lx, err := crossAxes(ls.Rank(), lc, lb)
	if err != nil {
		return nil, fmt.Errorf("lhs: %w", err)
	}
	rx, err := crossAxes(rs.Rank(), rc, rb)
	if err != nil {
		return nil, fmt.Errorf("rhs: %w", err)
	}
	ld, rd := ls.Dimensions, rs.Dimensions
	for i := range lc {
		if ld[lc[i]] != rd[rc[i]] {
			return nil, fmt.Errorf("contracting dimensions differ: lhs axis %d has %d, rhs axis %d has %d", lc[i], ld[lc[i]], rc[i], rd[rc[i]])
		}
	}
	var outDims []int
	for i := range lb {
		if ld[lb[i]] != rd[rb[i]] {
			return nil, fmt.Errorf("batch dimensions differ: lhs axis %d has %d, rhs axis %d has %d", lb[i], ld[lb[i]], rb[i], rd[rb[i]])
		}
		outDims = append(outDims, ld[lb[i]])
	}
	for _, a := range lx {
		outDims = append(outDims, ld[a])
	}
	for _, a := range rx {
		outDims = append(outDims, rd[a])
	}
	p := &dotPlan{
		dtype:   outDType,
		batch:   prod(ld, lb),
		m:       prod(ld, lx),
		n:       prod(rd, rx),
		k:       prod(ld, lc),
		out:     shapes.Make(outDType, outDims...),
		workers: workers,
	}
	p.lhs = planOperand(ld, lb, lx, lc, false)
	p.rhs = planOperand(rd, rb, rx, rc, true)
	p.tiny = newTinyPlan(ls, lc, lb, rs, rc, rb, rx)
	return p, nil
}

// planOperand reads the operand of dimensions dims as [batch, cross,
// contracting] (A) or, with asB, as [batch, contracting, cross] (B).
func planOperand(dims, batch, cross, contract []int, asB bool) operandPlan {
	strides := rowMajorStrides(dims)
	bs, bok := flatStride(dims, strides, batch)
	xs, xok := flatStride(dims, strides, cross)
	cs, cok := flatStride(dims, strides, contract)
	if bok && xok && cok {
		if asB {
			return operandPlan{direct: true, batch: bs, row: cs, col: xs}
		}
		return operandPlan{direct: true, batch: bs, row: xs, col: cs}
	}
	nx, nc := prod(dims, cross), prod(dims, contract)
	perm := append(append(append([]int(nil), batch...), cross...), contract...)
	p := operandPlan{dims: slices.Clone(dims), perm: perm, size: prod(dims, perm), batch: nx * nc}
	if asB { // [batch, cross, contracting] read as B(p, j) = x[j·nc + p]
		p.row, p.col = 1, nc
	} else {
		p.row, p.col = nc, 1
	}
	return p
}

// flatStride returns the stride of the axes group (in the given order)
// flattened to one index, if the group's memory layout allows it: each axis'
// stride equals the next one's stride times its dimension (axes of
// dimension 1 are ignored; an empty group has stride 0).
func flatStride(dims, strides, axes []int) (int, bool) {
	last := -1
	for _, a := range axes {
		if dims[a] == 1 {
			continue
		}
		if last >= 0 && strides[last] != strides[a]*dims[a] {
			return 0, false
		}
		last = a
	}
	if last < 0 {
		return 0, true
	}
	return strides[last], true
}

func rowMajorStrides(dims []int) []int {
	s := make([]int, len(dims))
	st := 1
	for i := len(dims) - 1; i >= 0; i-- {
		s[i] = st
		st *= dims[i]
	}
	return s
}

func prod(dims, axes []int) int {
	p := 1
	for _, a := range axes {
		p *= dims[a]
	}
	return p
}

func normAxes(rank int, axes []int) ([]int, error) {
	out := make([]int, len(axes))
	for i, a := range axes {
		if a < 0 {
			a += rank
		}
		if a < 0 || a >= rank {
			return nil, fmt.Errorf("axis %d out of range for rank %d", axes[i], rank)
		}
		out[i] = a
	}
	return out, nil
}

// crossAxes returns the axes that are neither contracting nor batch, in
// order, and checks that no axis is used twice.
func crossAxes(rank int, contract, batch []int) ([]int, error) {
	used := make([]bool, rank)
	for _, a := range append(slices.Clone(contract), batch...) {
		if used[a] {
			return nil, fmt.Errorf("axis %d used more than once", a)
		}
		used[a] = true
	}
	var x []int
	for a := range rank {
		if !used[a] {
			x = append(x, a)
		}
	}
	return x, nil
}

// exec runs the product on the tensor kernels.
func (p *dotPlan) exec(be *Backend, in []backends.Buffer, _ []bool) (backends.Buffer, int, error) {
	out, flat, err := be.NewSharedBuffer(0, p.out)
	if err != nil {
		return nil, -1, err
	}
	if p.out.Size() == 0 {
		return out, -1, nil
	}
	lf, err := be.BufferData(in[0])
	if err != nil {
		return nil, -1, err
	}
	rf, err := be.BufferData(in[1])
	if err != nil {
		return nil, -1, err
	}
	if p.tiny != nil {
		if lv, ok := lf.([]float32); ok {
			if rv, ok := rf.([]float32); ok {
				if dst, ok := flat.([]float32); ok {
					p.tiny.run(be, dst, lv, rv)
					return out, -1, nil
				}
			}
		}
	}
	var scratch []*[]float32
	defer func() {
		for _, s := range scratch {
			putScratch(s)
		}
	}()
	g := tensor.Gemm{Batch: p.batch, M: p.m, N: p.n, K: p.k, Workers: p.workers}
	g.A = p.lhs.operand(lf, &scratch)
	g.B = p.rhs.operand(rf, &scratch)
	switch dst := flat.(type) {
	case []float32:
		if !gemv(&g, dst) {
			err = g.Run(dst)
		}
	default: // BFloat16: accumulate in float32, round once.
		s := getScratch(p.out.Size())
		scratch = append(scratch, s)
		if err = g.Run(*s); err == nil {
			tensor.EncodeBF16(bf16Bits(flat), *s)
		}
	}
	if err != nil {
		be.BufferFinalize(out)
		return nil, -1, fmt.Errorf("DotGeneral %s: %w", p.out, err)
	}
	return out, -1, nil
}

// gemv computes g into out with tensor's streaming matrix-vector kernels
// when g is one activation row against a weight matrix whose rows are
// contiguous (a batch-1 decoding step's linear layers and output layer,
// float32 or bfloat16 weights read in place), and reports whether it did.
// The result is bit-identical to g.Run's (tensor.GemvT's doc), without
// the GEMM's task set-up or, for bfloat16 weights, its conversion of each
// weight block into a float32 scratch. Only M = 1 on a CPU with the
// GEMV kernels is taken, so every product keeps the values it had before
// (the GEMM's order of sums where the GEMV's would differ).
func gemv(g *tensor.Gemm, out []float32) bool {
	x, w := g.A, g.B // x(p) = A(0, p), W(j, p) = B(p, j)
	if tensor.GemvKernelName() == "go" || g.Batch != 1 || g.M != 1 || g.K < 16 || g.Accumulate || x.F32 == nil || x.ColStride != 1 || w.RowStride != 1 || w.ColStride < g.K {
		return false
	}
	xs := x.F32[x.Offset : x.Offset+g.K]
	if w.F32 != nil {
		tensor.GemvT(out, xs, w.F32[w.Offset:], g.N, g.K, w.ColStride, false, g.Workers)
	} else {
		tensor.GemvTBF16(out, xs, w.BF16[w.Offset:], g.N, g.K, w.ColStride, false, g.Workers)
	}
	return true
}

// operand returns the tensor.Operand of flat (float32 or BF16), copying it
// into scratch first when the plan is not direct.
func (o *operandPlan) operand(flat any, scratch *[]*[]float32) tensor.Operand {
	if o.direct {
		op := tensor.Operand{BatchStride: o.batch, RowStride: o.row, ColStride: o.col}
		if f, ok := flat.([]float32); ok {
			op.F32 = f
		} else {
			op.BF16 = bf16Bits(flat)
		}
		return op
	}
	s := getScratch(o.size)
	*scratch = append(*scratch, s)
	if f, ok := flat.([]float32); ok {
		permute(*s, f, o.dims, o.perm)
	} else {
		h := bf16Bits(flat)
		t := make([]uint16, len(h))
		permute(t, h, o.dims, o.perm)
		tensor.DecodeBF16(*s, t)
	}
	return tensor.Operand{F32: *s, BatchStride: o.batch, RowStride: o.row, ColStride: o.col}
}

// permute writes dst = src transposed: dst is the contiguous array of axes
// perm of src (dimensions dims, row-major).
func permute[T any](dst, src []T, dims, perm []int) {
	permuteStrided(dst, src, dims, rowMajorStrides(dims), perm)
}

// nextIndex advances the odometer idx (the last axis fastest) over the
// dimensions dims[:len(idx)], moving the offset off by strides; it reports
// false once idx has passed its last value.
func nextIndex(idx, dims, strides []int, off int) (int, bool) {
	for a := len(idx) - 1; a >= 0; a-- {
		idx[a]++
		off += strides[a]
		if idx[a] < dims[a] {
			return off, true
		}
		off -= strides[a] * dims[a]
		idx[a] = 0
	}
	return off, false
}

// permuteStrided is permute with the source's strides given (st[a] for
// source axis a), so a slab of a larger array can be transposed.
func permuteStrided[T any](dst, src []T, dims, st, perm []int) {
	n := len(perm)
	if n == 0 {
		if len(dst) > 0 {
			dst[0] = src[0]
		}
		return
	}
	pd := make([]int, n) // dst dimensions
	ps := make([]int, n) // src stride of each dst axis
	for i, a := range perm {
		pd[i], ps[i] = dims[a], st[a]
	}
	for _, d := range pd {
		if d == 0 {
			return
		}
	}
	idx := make([]int, n-1)
	inner, istride := pd[n-1], ps[n-1]
	off, o := 0, 0
	for {
		if istride == 1 {
			copy(dst[o:o+inner], src[off:off+inner])
		} else {
			s := off
			for j := range dst[o : o+inner] {
				dst[o+j] = src[s]
				s += istride
			}
		}
		o += inner
		var more bool
		if off, more = nextIndex(idx, pd, ps, off); !more {
			return
		}
	}
}
