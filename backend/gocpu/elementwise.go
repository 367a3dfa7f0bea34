package gocpu

import (
	"maps"
	"math"
	"slices"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/viterin/vek/vek32"

	"github.com/cas-engine/cas/tensor"
)

// Float32 elementwise ops, reductions and data movement. simplego runs
// these through generic per-element iterators (its broadcasting iterator
// alone took a fifth of a Qwen training step); here each op is planned at
// build time into a few nested loops over contiguous runs, and large
// tensors are split over the cores. Every result equals simplego's to
// float32 rounding: the arithmetic is the same IEEE operation per element,
// sums are taken in a different order, and exp is a float64 polynomial
// rounded to float32 (simplego rounds math.Exp).

// parallelMin is the number of elements below which an op runs on one
// goroutine.
const parallelMin = 1 << 15

// forRange runs fn over [0, n) outer iterations, split over the backend's
// workers when the op touches enough elements (elems per iteration).
func (be *Backend) forRange(n, elemsPer int, fn func(lo, hi int)) {
	if n <= 1 || n*elemsPer < parallelMin {
		fn(0, n)
		return
	}
	tensor.ParallelFor(n, be.workers, 1, func(_, lo, hi int) { fn(lo, hi) })
}

// inPlace returns an input buffer that may hold the output: one that is
// owned (last use) and has the output's shape.
func inPlace(be *Backend, in []backends.Buffer, owned []bool, out shapes.Shape, candidates ...int) (backends.Buffer, int) {
	for _, i := range candidates {
		if !owned[i] {
			continue
		}
		if s, err := be.BufferShape(in[i]); err == nil && s.Equal(out) {
			return in[i], i
		}
	}
	return nil, -1
}

// outputFor returns the buffer for an output of shape out: an owned input
// of that shape when possible (consumed is its index), otherwise a new one.
func outputFor(be *Backend, in []backends.Buffer, owned []bool, out shapes.Shape, candidates ...int) (backends.Buffer, []float32, int, error) {
	if buf, i := inPlace(be, in, owned, out, candidates...); buf != nil {
		flat, err := be.BufferData(buf)
		if err != nil {
			return nil, nil, -1, err
		}
		return buf, flat.([]float32), i, nil
	}
	buf, flat, err := be.NewSharedBuffer(0, out)
	if err != nil {
		return nil, nil, -1, err
	}
	return buf, flat.([]float32), -1, nil
}

func f32Data(be *Backend, buf backends.Buffer) ([]float32, error) {
	flat, err := be.BufferData(buf)
	if err != nil {
		return nil, err
	}
	return flat.([]float32), nil
}

// ---------------------------------------------------------------- binary

// binaryKernel is one arithmetic op over runs: vv (both operands vary
// along the run), vs (rhs constant along it) and sv (lhs constant). dst
// may be exactly a or b. Add, Sub and Mul run vv and vs on vek's SIMD
// kernels, which reject overlapping slices: an aliased destination takes
// the in-place form.
type binaryKernel struct {
	vv func(dst, a, b []float32)
	vs func(dst, a []float32, s float32)
	sv func(dst []float32, s float32, b []float32)
}

// vekVV makes a vv kernel of vek's pair (into: dst = x ⊕ y, inplace:
// x = x ⊕ y). dst == a takes the in-place form; dst == b takes it too when
// ⊕ commutes, else a plain loop of op.
func vekVV(into func(dst, x, y []float32) []float32, inplace func(x, y []float32), op func(a, b float32) float32, commutes bool) func(d, a, b []float32) {
	return func(d, a, b []float32) {
		a, b = a[:len(d)], b[:len(d)]
		switch {
		case len(d) == 0:
		case &d[0] == &a[0]:
			inplace(d, b)
		case &d[0] == &b[0] && commutes:
			inplace(d, a)
		case &d[0] == &b[0]:
			for i := range d {
				d[i] = op(a[i], d[i])
			}
		default:
			into(d, a, b)
		}
	}
}

// vekVS makes a vs kernel of vek's pair; dst == a takes the in-place form.
func vekVS(into func(dst, x []float32, s float32) []float32, inplace func(x []float32, s float32)) func(d, a []float32, s float32) {
	return func(d, a []float32, s float32) {
		a = a[:len(d)]
		switch {
		case len(d) == 0:
		case &d[0] == &a[0]:
			inplace(d, s)
		default:
			into(d, a, s)
		}
	}
}

// commutedSV makes the sv kernel of a commutative ⊕ from its vs kernel:
// s ⊕ b[i] = b[i] ⊕ s bit for bit (IEEE addition and multiplication
// commute), so a scalar on the left (a rank-0 operand, or one broadcast
// along the last axis) runs vek's loop, not a scalar one (~10× faster per
// element in L1 here).
func commutedSV(vs func(d, a []float32, s float32)) func(d []float32, s float32, b []float32) {
	return func(d []float32, s float32, b []float32) { vs(d, b, s) }
}

// binaryKernels are the kernels of each binary op: arithAVX2's for Add,
// Sub and Mul where the CPU has AVX2, else vek's; Div's own (VDIVPS).
var binaryKernels = func() map[backends.OpType]binaryKernel {
	ks := vekKernels
	if arithAVX2 != nil {
		ks = maps.Clone(vekKernels)
		maps.Copy(ks, arithAVX2)
	}
	return ks
}()

// vekKernels are the binary ops' kernels without AVX2.
var vekKernels = map[backends.OpType]binaryKernel{
	backends.OpTypeAdd: {
		vv: vekVV(vek32.Add_Into, vek32.Add_Inplace, func(a, b float32) float32 { return a + b }, true),
		vs: vekVS(vek32.AddNumber_Into, vek32.AddNumber_Inplace),
		sv: commutedSV(vekVS(vek32.AddNumber_Into, vek32.AddNumber_Inplace)),
	},
	backends.OpTypeSub: {
		vv: vekVV(vek32.Sub_Into, vek32.Sub_Inplace, func(a, b float32) float32 { return a - b }, false),
		vs: vekVS(vek32.SubNumber_Into, vek32.SubNumber_Inplace),
		sv: func(d []float32, s float32, b []float32) {
			b = b[:len(d)]
			for i := range d {
				d[i] = s - b[i]
			}
		},
	},
	backends.OpTypeMul: {
		vv: vekVV(vek32.Mul_Into, vek32.Mul_Inplace, func(a, b float32) float32 { return a * b }, true),
		vs: vekVS(vek32.MulNumber_Into, vek32.MulNumber_Inplace),
		sv: commutedSV(vekVS(vek32.MulNumber_Into, vek32.MulNumber_Inplace)),
	},
	backends.OpTypeDiv: {
		vv: divVV, // VDIVPS (AVX-512 or AVX2): vek's kernels multiply by an approximate reciprocal
		vs: divVS,
		sv: divSV,
	},
}

// bcastPlan iterates a broadcasting binary op: after dropping size-1
// output axes and merging axes that are contiguous in both operands, the
// output is loops dims (row-major), operand strides sa and sb (0 along
// broadcast axes); the last loop is the run handed to a kernel.
type bcastPlan struct {
	dims, sa, sb []int
	size         int
}

// newBcastPlan plans lhs ⊕ rhs → out; nil when the shapes are not a
// broadcast of size-1 axes (scalars included) of equal ranks.
func newBcastPlan(ls, rs, out shapes.Shape) *bcastPlan {
	rank := out.Rank()
	lr, rr := ls.Rank(), rs.Rank()
	if (lr != rank && lr != 0) || (rr != rank && rr != 0) {
		return nil
	}
	dimOf := func(s shapes.Shape, a int) int {
		if s.Rank() == 0 {
			return 1
		}
		return s.Dimensions[a]
	}
	lst, rst := rowMajorStrides(padDims(ls, rank)), rowMajorStrides(padDims(rs, rank))
	p := &bcastPlan{size: out.Size()}
	for a := range rank {
		d := out.Dimensions[a]
		if d == 1 {
			continue
		}
		dl, dr := dimOf(ls, a), dimOf(rs, a)
		if (dl != d && dl != 1) || (dr != d && dr != 1) {
			return nil
		}
		sl, sr := lst[a], rst[a]
		if dl == 1 {
			sl = 0
		}
		if dr == 1 {
			sr = 0
		}
		if n := len(p.dims); n > 0 && p.sa[n-1] == sl*d && p.sb[n-1] == sr*d {
			p.dims[n-1] *= d // merge with the previous axis
			p.sa[n-1], p.sb[n-1] = sl, sr
			continue
		}
		p.dims, p.sa, p.sb = append(p.dims, d), append(p.sa, sl), append(p.sb, sr)
	}
	if len(p.dims) == 0 { // a single element
		p.dims, p.sa, p.sb = []int{1}, []int{0}, []int{0}
	}
	return p
}

func padDims(s shapes.Shape, rank int) []int {
	if s.Rank() == rank {
		return s.Dimensions
	}
	d := make([]int, rank)
	for i := range d {
		d[i] = 1
	}
	return d
}

// run applies k to a, b into dst.
func (p *bcastPlan) run(be *Backend, k binaryKernel, dst, a, b []float32) {
	if p.size == 0 {
		return
	}
	inner := p.dims[len(p.dims)-1]
	outer := p.size / max(inner, 1)
	if outer <= 1 || p.size < parallelMin { // as forRange, without a closure to allocate
		p.runRange(k, dst, a, b, 0, outer)
		return
	}
	be.forRange(outer, inner, func(lo, hi int) { p.runRange(k, dst, a, b, lo, hi) })
}

// runRange computes outer iterations [lo, hi) of run.
func (p *bcastPlan) runRange(k binaryKernel, dst, a, b []float32, lo, hi int) {
	n := len(p.dims)
	inner, ia, ib := p.dims[n-1], p.sa[n-1], p.sb[n-1]
	// Offsets of outer iteration lo.
	var small [8]int // no allocation up to rank 9
	idx := small[:]
	if n-1 > len(small) {
		idx = make([]int, n-1)
	}
	idx = idx[:n-1]
	oa, ob := 0, 0
	rem := lo
	for ax := n - 2; ax >= 0; ax-- {
		idx[ax] = rem % p.dims[ax]
		rem /= p.dims[ax]
		oa += idx[ax] * p.sa[ax]
		ob += idx[ax] * p.sb[ax]
	}
	for o := lo; o < hi; o++ {
		d := dst[o*inner : (o+1)*inner]
		switch {
		case ia != 0 && ib != 0:
			k.vv(d, a[oa:], b[ob:])
		case ia != 0:
			k.vs(d, a[oa:], b[ob])
		case ib != 0:
			k.sv(d, a[oa], b[ob:])
		default: // a run of length 1
			k.vv(d, a[oa:oa+1], b[ob:ob+1])
		}
		for ax := n - 2; ax >= 0; ax-- {
			idx[ax]++
			oa += p.sa[ax]
			ob += p.sb[ax]
			if idx[ax] < p.dims[ax] {
				break
			}
			oa -= p.sa[ax] * p.dims[ax]
			ob -= p.sb[ax] * p.dims[ax]
			idx[ax] = 0
		}
	}
}

// binary builds Add, Sub, Mul or Div: float32 operands run on the plan,
// everything else on simplego.
func (b *Builder) binary(op backends.OpType, lhs, rhs backends.Op, replay func(sb backends.Builder, l, r backends.Op) (backends.Op, error)) (backends.Op, error) {
	vs, err := b.checkOps(op.String(), []backends.Op{lhs, rhs})
	if err != nil {
		return nil, err
	}
	rep := func(sb backends.Builder, in []backends.Op) ([]backends.Op, error) {
		o, err := replay(sb, in[0], in[1])
		return []backends.Op{o}, err
	}
	if op, ok, err := b.fuseBinary(op, vs[0], vs[1]); ok || err != nil {
		return op, err
	}
	if !b.backend.plain {
		for i := range 2 {
			if f, ok := b.foldBroadcast(vs[i], vs[1-i]); ok {
				vs[i] = f
				break
			}
		}
	}
	so, err := replay(b.shadow, vs[0].shadow, vs[1].shadow)
	if err != nil {
		return nil, err
	}
	out, err := b.shadow.OpShape(so)
	if err != nil {
		return nil, err
	}
	var plan *bcastPlan
	if !b.backend.plain && out.DType == dtypes.Float32 {
		plan = newBcastPlan(vs[0].shape, vs[1].shape, out)
	}
	if plan == nil {
		return b.addShadowNode(&node{kind: kindDelegate, opType: op, inputs: vs, replay: rep}, so)
	}
	k := binaryKernels[op]
	exec := func(be *Backend, in []backends.Buffer, owned []bool) (backends.Buffer, int, error) {
		av, err := f32Data(be, in[0])
		if err != nil {
			return nil, -1, err
		}
		bv, err := f32Data(be, in[1])
		if err != nil {
			return nil, -1, err
		}
		buf, dst, consumed, err := outputFor(be, in, owned, out, 0, 1)
		if err != nil {
			return nil, -1, err
		}
		plan.run(be, k, dst, av, bv)
		return buf, consumed, nil
	}
	n := &node{kind: kindCustom, opType: op, inputs: vs, exec: exec}
	if ewOperands(vs[0].shape, vs[1].shape, out) {
		n.ew = &ewSpec{binary: &k}
	}
	return b.addShadowNode(n, so)
}

// addShadowNode adds n whose single result is the shadow op so.
func (b *Builder) addShadowNode(n *node, so backends.Op) (backends.Op, error) {
	res, err := b.addNode(n, []backends.Op{so})
	if err != nil {
		return nil, err
	}
	return res[0], nil
}

// Add implements backends.Builder.
func (b *Builder) Add(lhs, rhs backends.Op) (backends.Op, error) {
	return b.binary(backends.OpTypeAdd, lhs, rhs, func(sb backends.Builder, l, r backends.Op) (backends.Op, error) { return sb.Add(l, r) })
}

// Sub implements backends.Builder.
func (b *Builder) Sub(lhs, rhs backends.Op) (backends.Op, error) {
	return b.binary(backends.OpTypeSub, lhs, rhs, func(sb backends.Builder, l, r backends.Op) (backends.Op, error) { return sb.Sub(l, r) })
}

// Mul implements backends.Builder.
func (b *Builder) Mul(lhs, rhs backends.Op) (backends.Op, error) {
	return b.binary(backends.OpTypeMul, lhs, rhs, func(sb backends.Builder, l, r backends.Op) (backends.Op, error) { return sb.Mul(l, r) })
}

// Div implements backends.Builder.
func (b *Builder) Div(lhs, rhs backends.Op) (backends.Op, error) {
	return b.binary(backends.OpTypeDiv, lhs, rhs, func(sb backends.Builder, l, r backends.Op) (backends.Op, error) { return sb.Div(l, r) })
}

// ---------------------------------------------------------------- unary

// shadowUnary checks the one operand x of op what and replays the op on
// the shadow builder. It returns the operand's value, the shadow op, the
// value that already stands for that shadow op (simplego returns its
// operand for no-op ops; nil when there is none) and the output shape.
func (b *Builder) shadowUnary(what string, x backends.Op, replay func(sb backends.Builder, x backends.Op) (backends.Op, error)) (vs []*value, so backends.Op, existing backends.Op, out shapes.Shape, err error) {
	vs, err = b.checkOps(what, []backends.Op{x})
	if err != nil {
		return nil, nil, nil, out, err
	}
	so, err = replay(b.shadow, vs[0].shadow)
	if err != nil {
		return nil, nil, nil, out, err
	}
	if v, ok := b.byShadow[so]; ok {
		return vs, so, v, out, nil
	}
	out, err = b.shadow.OpShape(so)
	if err != nil {
		return nil, nil, nil, out, err
	}
	return vs, so, nil, out, nil
}

// oneResult turns a one-operand, one-result replay into a replayFn.
func oneResult(replay func(sb backends.Builder, x backends.Op) (backends.Op, error)) replayFn {
	return func(sb backends.Builder, in []backends.Op) ([]backends.Op, error) {
		o, err := replay(sb, in[0])
		return []backends.Op{o}, err
	}
}

// unary builds a float32 elementwise op from a kernel over slices (dst may
// be x); other dtypes run on simplego.
func (b *Builder) unary(op backends.OpType, x backends.Op, kernel func(dst, x []float32), replay func(sb backends.Builder, x backends.Op) (backends.Op, error)) (backends.Op, error) {
	vs, so, existing, out, err := b.shadowUnary(op.String(), x, replay)
	if err != nil || existing != nil {
		return existing, err
	}
	if b.backend.plain || out.DType != dtypes.Float32 || vs[0].shape.DType != dtypes.Float32 {
		return b.addShadowNode(&node{kind: kindDelegate, opType: op, inputs: vs, replay: oneResult(replay)}, so)
	}
	exec := func(be *Backend, in []backends.Buffer, owned []bool) (backends.Buffer, int, error) {
		xv, err := f32Data(be, in[0])
		if err != nil {
			return nil, -1, err
		}
		buf, dst, consumed, err := outputFor(be, in, owned, out, 0)
		if err != nil {
			return nil, -1, err
		}
		const chunk = 4096
		n := len(dst)
		be.forRange((n+chunk-1)/chunk, chunk, func(lo, hi int) {
			kernel(dst[lo*chunk:min(n, hi*chunk)], xv[lo*chunk:min(n, hi*chunk)])
		})
		return buf, consumed, nil
	}
	return b.addShadowNode(&node{kind: kindCustom, opType: op, inputs: vs, exec: exec, ew: &ewSpec{unary: kernel}}, so)
}

// Exp implements backends.Builder.
func (b *Builder) Exp(x backends.Op) (backends.Op, error) {
	return b.unary(backends.OpTypeExp, x, tensor.Exp, func(sb backends.Builder, x backends.Op) (backends.Op, error) { return sb.Exp(x) })
}

// Logistic implements backends.Builder: σ(x) = 1 / (1 + e^−x), computed as
// e^x / (1 + e^x) for x < 0 so that neither form overflows.
func (b *Builder) Logistic(x backends.Op) (backends.Op, error) {
	return b.unary(backends.OpTypeLogistic, x, logisticF32, func(sb backends.Builder, x backends.Op) (backends.Op, error) { return sb.Logistic(x) })
}

// Neg implements backends.Builder.
func (b *Builder) Neg(x backends.Op) (backends.Op, error) {
	return b.unary(backends.OpTypeNeg, x, func(d, x []float32) {
		x = x[:len(d)]
		for i, v := range x {
			d[i] = -v
		}
	}, func(sb backends.Builder, x backends.Op) (backends.Op, error) { return sb.Neg(x) })
}

// Sqrt implements backends.Builder (sqrtF32).
func (b *Builder) Sqrt(x backends.Op) (backends.Op, error) {
	return b.unary(backends.OpTypeSqrt, x, sqrtF32, func(sb backends.Builder, x backends.Op) (backends.Op, error) { return sb.Sqrt(x) })
}

// sqrtGo writes dst[i] = float32(√x[i]) (dst may be exactly x): the
// reference of sqrtF32, as simplego computes it.
func sqrtGo(dst, x []float32) {
	x = x[:len(dst)]
	for i, v := range x {
		dst[i] = float32(math.Sqrt(float64(v)))
	}
}

// Cos implements backends.Builder: float32(cos(float64(x))) per element,
// as simplego computes it, split over the workers (a training step's RoPE
// tables are 131,072 angles).
func (b *Builder) Cos(x backends.Op) (backends.Op, error) {
	return b.unary(backends.OpTypeCos, x, func(d, x []float32) {
		x = x[:len(d)]
		for i, v := range x {
			d[i] = float32(math.Cos(float64(v)))
		}
	}, func(sb backends.Builder, x backends.Op) (backends.Op, error) { return sb.Cos(x) })
}

// Sin implements backends.Builder: float32(sin(float64(x))) per element,
// as simplego computes it (see Cos).
func (b *Builder) Sin(x backends.Op) (backends.Op, error) {
	return b.unary(backends.OpTypeSin, x, func(d, x []float32) {
		x = x[:len(d)]
		for i, v := range x {
			d[i] = float32(math.Sin(float64(v)))
		}
	}, func(sb backends.Builder, x backends.Op) (backends.Op, error) { return sb.Sin(x) })
}

// Rsqrt implements backends.Builder.
func (b *Builder) Rsqrt(x backends.Op) (backends.Op, error) {
	return b.unary(backends.OpTypeRsqrt, x, func(d, x []float32) {
		x = x[:len(d)]
		for i, v := range x {
			d[i] = float32(1 / math.Sqrt(float64(v)))
		}
	}, func(sb backends.Builder, x backends.Op) (backends.Op, error) { return sb.Rsqrt(x) })
}

// logisticF32 writes dst[i] = σ(x[i]) (dst may be x) from e = e^−|x|:
// 1/(1+e) for x ≥ 0, e/(1+e) otherwise.
const one32 = 0x3f800000 // math.Float32bits(1)

func logisticF32(dst, x []float32) {
	x = x[:len(dst)]
	var e, num [256]float32
	for lo := 0; lo < len(dst); lo += len(e) {
		hi := min(len(dst), lo+len(e))
		eb, nb, xb := e[:hi-lo], num[:hi-lo], x[lo:hi]
		for i, v := range xb {
			eb[i] = math.Float32frombits(math.Float32bits(v) | 1<<31) // −|v|
		}
		tensor.Exp(eb, eb)
		for i, v := range xb {
			// Branch-free (the signs of activations are unpredictable):
			// the numerator is e for v < 0 (sign bit set) and 1 otherwise;
			// −0 takes e = 1, which gives the same 1/2.
			neg := uint32(int32(math.Float32bits(v)) >> 31)
			e := eb[i]
			nb[i] = math.Float32frombits(math.Float32bits(e)&neg | one32&^neg)
			eb[i] = 1 + e
		}
		divVV(dst[lo:hi], nb, eb) // IEEE division, as 1/(1+e) and e/(1+e)
	}
}

// ---------------------------------------------------------------- reductions

// reducePlan views a reduction as [outer, red, inner] (row-major) when the
// reduced axes, ignoring size-1 axes, are contiguous.
type reducePlan struct{ outer, red, inner int }

func newReducePlan(s shapes.Shape, axes []int) *reducePlan {
	rank := s.Rank()
	reduced := make([]bool, rank)
	for _, a := range axes {
		if a < 0 {
			a += rank
		}
		if a < 0 || a >= rank || reduced[a] {
			return nil
		}
		reduced[a] = true
	}
	p := &reducePlan{outer: 1, red: 1, inner: 1}
	phase := 0 // 0: before the reduced block, 1: in it, 2: after
	for a, d := range s.Dimensions {
		if d == 1 {
			continue
		}
		switch {
		case reduced[a] && phase == 2:
			return nil
		case reduced[a]:
			phase = 1
			p.red *= d
		case phase == 0:
			p.outer *= d
		default:
			phase = 2
			p.inner *= d
		}
	}
	return p
}

// reduce builds ReduceSum or ReduceMax over float32.
func (b *Builder) reduce(op backends.OpType, x backends.Op, axes []int, replay func(sb backends.Builder, x backends.Op) (backends.Op, error)) (backends.Op, error) {
	vs, so, existing, out, err := b.shadowUnary(op.String(), x, replay)
	if err != nil || existing != nil {
		return existing, err
	}
	var plan *reducePlan
	if !b.backend.plain && out.DType == dtypes.Float32 && len(axes) > 0 {
		plan = newReducePlan(vs[0].shape, axes)
	}
	if plan == nil {
		return b.addShadowNode(&node{kind: kindDelegate, opType: op, inputs: vs, replay: oneResult(replay)}, so)
	}
	red := make([]int, len(axes))
	for i, a := range axes {
		red[i] = (a + vs[0].shape.Rank()) % max(vs[0].shape.Rank(), 1)
	}
	slices.Sort(red)
	isMax := op == backends.OpTypeReduceMax
	exec := func(be *Backend, in []backends.Buffer, _ []bool) (backends.Buffer, int, error) {
		xv, err := f32Data(be, in[0])
		if err != nil {
			return nil, -1, err
		}
		buf, flat, err := be.NewSharedBuffer(0, out)
		if err != nil {
			return nil, -1, err
		}
		dst := flat.([]float32)
		p := plan
		if !isMax && p.inner > 1 {
			reduceSumCols(be, dst, xv, p)
			return buf, -1, nil
		}
		be.forRange(p.outer, p.red*p.inner, func(lo, hi int) {
			for o := lo; o < hi; o++ {
				src := xv[o*p.red*p.inner : (o+1)*p.red*p.inner]
				d := dst[o*p.inner : (o+1)*p.inner]
				switch {
				case p.inner == 1 && isMax:
					d[0] = tensor.Max(src)
				case p.inner == 1:
					d[0] = sumRun(src)
				default:
					init := float32(0)
					if isMax {
						init = float32(math.Inf(-1))
					}
					for i := range d {
						d[i] = init
					}
					for r := range p.red {
						row := src[r*p.inner : (r+1)*p.inner]
						if isMax {
							for i, v := range row {
								d[i] = max(d[i], v)
							}
						} else {
							for i, v := range row {
								d[i] += v
							}
						}
					}
				}
			}
		})
		return buf, -1, nil
	}
	return b.addShadowNode(&node{kind: kindCustom, opType: op, inputs: vs, exec: exec, reduceAxes: red}, so)
}

// reduceSumCols runs a ReduceSum whose plan keeps inner axes (inner > 1):
// for each outer index o, the column sums of the [red, inner] matrix at
// o·red·inner (tensor.ColSum, each column in row order from +0, as the
// scalar loop it replaced: bit-identical). The work is split over outer
// indices and, when those are fewer than the workers can share (a sum
// over the leading axes, such as a norm weight's gradient), over blocks
// of columns too.
func reduceSumCols(be *Backend, dst, x []float32, p *reducePlan) {
	cw := p.inner // columns per work item
	if w := be.Workers(); p.outer < 4*w && p.inner >= 64 && p.outer*p.red*p.inner >= parallelMin {
		cw = min(p.inner, (p.inner/(2*w)+31)&^31)
	}
	nc := (p.inner + cw - 1) / cw
	be.forRange(p.outer*nc, p.red*cw, func(lo, hi int) {
		for it := lo; it < hi; it++ {
			o, c0 := it/nc, it%nc*cw
			c1 := min(p.inner, c0+cw)
			tensor.ColSum(dst[o*p.inner+c0:o*p.inner+c1], x[o*p.red*p.inner+c0:(o+1)*p.red*p.inner], p.red, p.inner)
		}
	})
}

// sumRun adds x with eight interleaved partial sums.
func sumRun(x []float32) float32 {
	var s [8]float32
	n8 := len(x) &^ 7
	for i := 0; i < n8; i += 8 {
		c := x[i : i+8 : i+8]
		s[0] += c[0]
		s[1] += c[1]
		s[2] += c[2]
		s[3] += c[3]
		s[4] += c[4]
		s[5] += c[5]
		s[6] += c[6]
		s[7] += c[7]
	}
	t := ((s[0] + s[4]) + (s[2] + s[6])) + ((s[1] + s[5]) + (s[3] + s[7]))
	for _, v := range x[n8:] {
		t += v
	}
	return t
}

// ReduceMax implements backends.Builder.
func (b *Builder) ReduceMax(x backends.Op, axes ...int) (backends.Op, error) {
	axes = slices.Clone(axes)
	return b.reduce(backends.OpTypeReduceMax, x, axes, func(sb backends.Builder, x backends.Op) (backends.Op, error) {
		return sb.ReduceMax(x, slices.Clone(axes)...)
	})
}

// ---------------------------------------------------------------- data movement

// Transpose implements backends.Builder: out axis i is operand axis
// permutation[i]. Any dtype: elements are moved by size.
func (b *Builder) Transpose(x backends.Op, permutation ...int) (backends.Op, error) {
	perm := slices.Clone(permutation)
	one := func(sb backends.Builder, x backends.Op) (backends.Op, error) {
		return sb.Transpose(x, slices.Clone(perm)...)
	}
	replay := oneResult(one)
	vs, so, existing, out, err := b.shadowUnary("Transpose", x, one)
	if err != nil || existing != nil {
		return existing, err
	}
	if b.backend.plain {
		return b.addShadowNode(&node{kind: kindDelegate, opType: backends.OpTypeTranspose, inputs: vs, replay: replay}, so)
	}
	if isIdentityPerm(perm) {
		return vs[0], nil // GoMLX's DotGeneral gradient emits these
	}
	if op, ok, err := b.transposeSlice(vs[0], perm, out, so); ok || err != nil {
		return op, err
	}
	dims := slices.Clone(vs[0].shape.Dimensions)
	exec := func(be *Backend, in []backends.Buffer, _ []bool) (backends.Buffer, int, error) {
		src, buf, flat, err := be.srcAndOut(in[0], out)
		if err != nil {
			return nil, -1, err
		}
		if out.Size() > 0 {
			permuteAny(be, flat, src, dims, perm)
		}
		return buf, -1, nil
	}
	return b.addShadowNode(&node{kind: kindCustom, opType: backends.OpTypeTranspose, inputs: vs, exec: exec, perm: perm}, so)
}

// transposeSlice computes Transpose(x, perm) of a Slice x that this
// backend runs (unit strides) as one strided copy from the Slice's
// operand, when perm keeps the last axis last (so that the copy moves
// runs of it): the same bytes without writing the slice first.
// model/vjp's Attention slices o out of the fused forward's [o | m | l]
// and dQ, dK and dV out of the backward's packed gradients, each in the
// kernels' [B, kv, T, …] order, and transposes them to [B, T, kv, …].
func (b *Builder) transposeSlice(x *value, perm []int, out shapes.Shape, so backends.Op) (backends.Op, bool, error) {
	n := x.node
	last := len(perm) - 1
	if n.kind != kindCustom || n.opType != backends.OpTypeSlice || len(n.inputs) != 1 || last < 0 || perm[last] != last {
		return nil, false, nil
	}
	src := n.inputs[0]
	st := rowMajorStrides(src.shape.Dimensions)
	strides := make([]int, len(perm))
	for i, p := range perm {
		strides[i] = st[p]
	}
	exec := gatherExec(out, sliceOffset(n.sliceStarts, st), strides)
	op, err := b.addShadowNode(&node{kind: kindCustom, opType: backends.OpTypeTranspose, inputs: []*value{src}, exec: exec, label: "SliceTranspose"}, so)
	return op, true, err
}

// isIdentityPerm reports whether perm leaves every axis in place.
func isIdentityPerm(perm []int) bool {
	for i, p := range perm {
		if p != i {
			return false
		}
	}
	return true
}

// permuteAny is permute over flat slices of any element type (by size).
func permuteAny(be *Backend, dst, src any, dims, perm []int) {
	d, esz := rawBytes(dst)
	s, _ := rawBytes(src)
	switch esz {
	case 4:
		permuteParallel(be, asWords[uint32](d), asWords[uint32](s), dims, perm)
	case 8:
		permuteParallel(be, asWords[uint64](d), asWords[uint64](s), dims, perm)
	case 2:
		permuteParallel(be, asWords[uint16](d), asWords[uint16](s), dims, perm)
	default:
		permuteParallel(be, d, s, dims, perm)
	}
}

// permuteParallel splits permute over the first output axis.
func permuteParallel[T any](be *Backend, dst, src []T, dims, perm []int) {
	if len(perm) < 2 || len(dst) < parallelMin {
		permute(dst, src, dims, perm)
		return
	}
	st := rowMajorStrides(dims)
	n0 := dims[perm[0]]
	per := len(dst) / n0
	be.forRange(n0, per, func(lo, hi int) {
		// The slab lo…hi of the first output axis is the transpose of the
		// operand's slab along axis perm[0].
		sub := slices.Clone(dims)
		sub[perm[0]] = hi - lo
		permuteStrided(dst[lo*per:hi*per], src[lo*st[perm[0]]:], sub, st, perm)
	})
}

// BroadcastInDim implements backends.Builder: operand axis i becomes
// output axis broadcastAxes[i] (of the same size, or size 1 repeated).
func (b *Builder) BroadcastInDim(x backends.Op, outputShape shapes.Shape, broadcastAxes []int) (backends.Op, error) {
	outputShape = outputShape.Clone()
	axes := slices.Clone(broadcastAxes)
	vs, err := b.checkOps("BroadcastInDim", []backends.Op{x})
	if err != nil {
		return nil, err
	}
	replay := func(sb backends.Builder, in []backends.Op) ([]backends.Op, error) {
		o, err := sb.BroadcastInDim(in[0], outputShape.Clone(), slices.Clone(axes))
		return []backends.Op{o}, err
	}
	sos, err := replay(b.shadow, []backends.Op{vs[0].shadow})
	if err != nil {
		return nil, err
	}
	so := sos[0]
	if v, ok := b.byShadow[so]; ok {
		return v, nil
	}
	if b.backend.plain {
		return b.addShadowNode(&node{kind: kindDelegate, opType: backends.OpTypeBroadcastInDim, inputs: vs, replay: replay}, so)
	}
	// Source strides per output axis (0 where broadcast).
	in := vs[0].shape
	ist := rowMajorStrides(in.Dimensions)
	strides := make([]int, outputShape.Rank())
	for i, a := range axes {
		if in.Dimensions[i] != 1 {
			strides[a] = ist[i]
		}
	}
	out := outputShape
	exec := func(be *Backend, inb []backends.Buffer, _ []bool) (backends.Buffer, int, error) {
		src, err := be.BufferData(inb[0])
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
			be.gatherStridedPar(d, s, out.Dimensions, strides, esz)
		}
		return buf, -1, nil
	}
	return b.addShadowNode(&node{kind: kindCustom, opType: backends.OpTypeBroadcastInDim, inputs: vs, exec: exec,
		bcastFrom: vs[0], bcastAxes: axes}, so)
}

// foldBroadcast returns the operand that can stand for v, a custom
// BroadcastInDim, in a float32 binary op whose other operand has v's full
// shape: the broadcast's source as a scalar, or reshaped to v's rank with
// size-1 axes where it is broadcast. The binary kernels broadcast size-1
// axes by a zero stride, so the values are the same and the broadcast, if
// nothing else reads it, is never materialised (GoMLX's gradients
// broadcast scalars and reduced adjoints to full shapes, then multiply).
func (b *Builder) foldBroadcast(v, other *value) (*value, bool) {
	n := v.node
	src := n.bcastFrom
	if src == nil || src.shape.DType != dtypes.Float32 || v.shape.DType != dtypes.Float32 || !other.shape.Equal(v.shape) {
		return nil, false
	}
	if src.shape.Rank() == 0 {
		return src, true
	}
	dims := make([]int, v.shape.Rank())
	for i := range dims {
		dims[i] = 1
	}
	for j, a := range n.bcastAxes {
		if j > 0 && a <= n.bcastAxes[j-1] {
			return nil, false // a transposing broadcast
		}
		dims[a] = src.shape.Dimensions[j]
	}
	r, err := b.Reshape(src, dims...)
	if err != nil {
		return nil, false
	}
	rv, ok := r.(*value)
	return rv, ok
}

// Where implements backends.Builder: out[i] = cond[i] ? onTrue[i] : onFalse[i],
// each operand either of the output's shape or a scalar. float32 runs
// here, other dtypes on simplego.
func (b *Builder) Where(condition, onTrue, onFalse backends.Op) (backends.Op, error) {
	vs, err := b.checkOps("Where", []backends.Op{condition, onTrue, onFalse})
	if err != nil {
		return nil, err
	}
	replay := func(sb backends.Builder, in []backends.Op) ([]backends.Op, error) {
		o, err := sb.Where(in[0], in[1], in[2])
		return []backends.Op{o}, err
	}
	sos, err := replay(b.shadow, shadowOps(vs))
	if err != nil {
		return nil, err
	}
	so := sos[0]
	out, err := b.shadow.OpShape(so)
	if err != nil {
		return nil, err
	}
	if b.backend.plain || out.DType != dtypes.Float32 {
		return b.addShadowNode(&node{kind: kindDelegate, opType: backends.OpTypeWhere, inputs: vs, replay: replay}, so)
	}
	step := func(v *value) int { // 0 for a broadcast scalar
		if v.shape.IsScalar() && out.Size() != 1 {
			return 0
		}
		return 1
	}
	cs, ts, fs := step(vs[0]), step(vs[1]), step(vs[2])
	exec := func(be *Backend, in []backends.Buffer, owned []bool) (backends.Buffer, int, error) {
		cf, err := be.BufferData(in[0])
		if err != nil {
			return nil, -1, err
		}
		tv, err := f32Data(be, in[1])
		if err != nil {
			return nil, -1, err
		}
		fv, err := f32Data(be, in[2])
		if err != nil {
			return nil, -1, err
		}
		c := cf.([]bool)
		buf, dst, consumed, err := outputFor(be, in, owned, out, 1, 2)
		if err != nil {
			return nil, -1, err
		}
		n := len(dst)
		be.forRange((n+4095)/4096, 4096, func(lo, hi int) {
			for i := lo * 4096; i < min(n, hi*4096); i++ {
				if c[i*cs] {
					dst[i] = tv[i*ts]
				} else {
					dst[i] = fv[i*fs]
				}
			}
		})
		return buf, consumed, nil
	}
	return b.addShadowNode(&node{kind: kindCustom, opType: backends.OpTypeWhere, inputs: vs, exec: exec}, so)
}

// smallReshape is the size (elements) up to which Reshape copies the data
// here rather than ending a simplego segment (which reshapes for free only
// when it owns the buffer): decoding graphs reshape many small tensors
// between custom ops.
const smallReshape = 1 << 14

// Reshape implements backends.Builder.
func (b *Builder) Reshape(x backends.Op, dims ...int) (backends.Op, error) {
	dims = slices.Clone(dims)
	one := func(sb backends.Builder, x backends.Op) (backends.Op, error) {
		return sb.Reshape(x, slices.Clone(dims)...)
	}
	replay := oneResult(one)
	vs, so, existing, out, err := b.shadowUnary("Reshape", x, one)
	if err != nil || existing != nil {
		return existing, err
	}
	if !b.backend.plain && slices.Equal(dims, vs[0].shape.Dimensions) {
		return vs[0], nil // to its own shape: nothing to do
	}
	if b.backend.plain || out.Size() > smallReshape || vs[0].node.kind != kindCustom {
		return b.addShadowNode(&node{kind: kindDelegate, opType: backends.OpTypeReshape, inputs: vs, replay: replay}, so)
	}
	exec := func(be *Backend, in []backends.Buffer, _ []bool) (backends.Buffer, int, error) {
		src, buf, flat, err := be.srcAndOut(in[0], out)
		if err != nil {
			return nil, -1, err
		}
		d, _ := rawBytes(flat)
		s, _ := rawBytes(src)
		copy(d, s)
		return buf, -1, nil
	}
	return b.addShadowNode(&node{kind: kindCustom, opType: backends.OpTypeReshape, inputs: vs, exec: exec}, so)
}
