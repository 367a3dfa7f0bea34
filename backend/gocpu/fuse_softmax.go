package gocpu

import (
	"slices"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/shapes"

	"github.com/cas-engine/cas/tensor"
)

// The fused softmax (tensor.SoftmaxRows and SoftmaxGradRows) and
// log-sum-exp (SumExpRows, ExpShiftScaleRows), routed from the op chains
// GoMLX emits:
//
//   - forward, graph.Softmax(x, -1):
//     Div(e, Reshape(ReduceSum(e, last))) with e = Exp(Sub(x, Reshape(ReduceMax(x, last))))
//     (the max behind a StopGradient, whose Identity this backend drops);
//   - gradient, as model/vjp's Softmax writes it (its custom VJP):
//     Mul(p, Sub(g, Reshape(ReduceSum(Mul(g, p), last)))), dx = p ⊙ (g − Σ g⊙p);
//   - the straight-through term that carries that gradient, p + (x − x)
//     with the second x behind a StopGradient: Add(p, Sub(x, x)) is p (it
//     differs only where x is ±Inf or NaN, where p + (x − x) is NaN), and
//     so is Add(p, ReduceSum(Sub(x, x))) (model/vjp's LogSumExp);
//   - the sum of a softmax's exponentials, ReduceSum(Exp(Sub(x,
//     Reshape(ReduceMax(x, last)))), last), without writing them, and the
//     log-sum-exp built on it, Add(Log(that sum), Reshape(ReduceMax(x,
//     last))), with the maximum from the same pass;
//   - the gradient of log-sum-exp as vjp.LogSumExp writes it,
//     Mul(broadcast g, Exp(Sub(x, l))) with g and l one value per row:
//     g·e^(x − l) in one pass.
//
// Each is recognised when its last op is built; the ops before it, left
// without readers, are dropped at Compile. On "nofast" everything runs on
// simplego unchanged.

// Identity implements backends.Builder: x itself (an identity has no work
// to do, and a recorded one would copy its operand between segments; GoMLX
// emits one per StopGradient). On "nofast" it is recorded for simplego.
func (b *Builder) Identity(x backends.Op) (backends.Op, error) {
	vs, err := b.checkOps("Identity", []backends.Op{x})
	if err != nil {
		return nil, err
	}
	if !b.backend.plain {
		return vs[0], nil
	}
	return b.record1(backends.OpTypeIdentity, []backends.Op{x}, func(sb backends.Builder, in []backends.Op) (backends.Op, error) {
		return sb.Identity(in[0])
	})
}

// fuseBinary applies the softmax rewrites to Add, Mul and Div of float32
// operands, the SwiGLU and RMSNorm-gradient ones (fuse_swiglu.go,
// fuse_rmsnorm.go) to Mul and the rotary embedding's (fuse_rope.go) to Add
// and Sub; ok reports whether it did.
func (b *Builder) fuseBinary(op backends.OpType, lhs, rhs *value) (backends.Op, bool, error) {
	if b.backend.plain || lhs.shape.DType != dtypes.Float32 || rhs.shape.DType != dtypes.Float32 {
		return nil, false, nil
	}
	switch op {
	case backends.OpTypeAdd:
		for i, v := range [2]*value{lhs, rhs} {
			other := [2]*value{rhs, lhs}[i]
			if isZeroTerm(v) && v.shape.Equal(other.shape) {
				return other, true, nil
			}
		}
		if op, ok, err := b.fuseRope(lhs, rhs); ok || err != nil {
			return op, ok, err
		}
		if op, ok, err := b.fuseLogSumExp(lhs, rhs); ok || err != nil {
			return op, ok, err
		}
	case backends.OpTypeSub:
		if op, ok, err := b.fuseRopeGrad(lhs, rhs); ok || err != nil {
			return op, ok, err
		}
	case backends.OpTypeDiv:
		if x := softmaxInput(lhs, rhs); x != nil {
			op, err := b.softmaxOp(x)
			return op, true, err
		}
	case backends.OpTypeMul:
		if op, ok, err := b.fuseExpShiftScale(lhs, rhs); ok || err != nil {
			return op, ok, err
		}
		if op, ok, err := b.fuseSwiGLU(lhs, rhs); ok || err != nil {
			return op, ok, err
		}
		if op, ok, err := b.fuseRMSNormGrad(lhs, rhs); ok || err != nil {
			return op, ok, err
		}
		for i, v := range [2]*value{lhs, rhs} {
			p := [2]*value{rhs, lhs}[i]
			if g := softmaxGradInput(v, p); g != nil {
				op, err := b.softmaxGradOp(p, g)
				return op, true, err
			}
		}
	}
	return nil, false, nil
}

// lastAxisReduction returns the operand x of v = Reshape…(Reduce(x, last
// axis)) with v of x's shape but a last axis of 1 (nil if v is not one).
func lastAxisReduction(v *value, op backends.OpType) *value {
	for v.node.opType == backends.OpTypeReshape && len(v.node.inputs) == 1 {
		v = v.node.inputs[0]
		if v.node.opType == op {
			break
		}
	}
	n := v.node
	if n.opType != op || len(n.inputs) != 1 {
		return nil
	}
	x := n.inputs[0]
	r := x.shape.Rank()
	if r == 0 || !slices.Equal(n.reduceAxes, []int{r - 1}) {
		return nil
	}
	return x
}

// keptShape reports whether s is x's shape with a last axis of 1 (never
// for a scalar x, which has no last axis).
func keptShape(s, x shapes.Shape) bool {
	r := x.Rank()
	return r > 0 && s.Rank() == r && s.DType == x.DType && slices.Equal(s.Dimensions[:r-1], x.Dimensions[:r-1]) && s.Dimensions[r-1] == 1
}

// softmaxInput returns x when num / den is graph.Softmax(x, -1) (nil
// otherwise).
func softmaxInput(num, den *value) *value {
	e := num.node
	if e.opType != backends.OpTypeExp || len(e.inputs) != 1 {
		return nil
	}
	sub := e.inputs[0].node
	if !keptShape(den.shape, num.shape) || (lastAxisReduction(den, backends.OpTypeReduceSum) != num &&
		(len(sub.inputs) == 0 || sumExpOf(den) != sub.inputs[0])) {
		return nil
	}
	if sub.opType != backends.OpTypeSub || len(sub.inputs) != 2 {
		return nil
	}
	x, m := sub.inputs[0], sub.inputs[1]
	if !x.shape.Equal(num.shape) || lastAxisReduction(m, backends.OpTypeReduceMax) != x || !keptShape(m.shape, x.shape) {
		return nil
	}
	return x
}

// softmaxGradInput returns g when v = Sub(g, Reshape(ReduceSum(Mul(g, p),
// last))), so that p · v is the softmax gradient (nil otherwise).
func softmaxGradInput(v, p *value) *value {
	n := v.node
	if n.opType != backends.OpTypeSub || len(n.inputs) != 2 || !v.shape.Equal(p.shape) {
		return nil
	}
	g, s := n.inputs[0], n.inputs[1]
	if !g.shape.Equal(p.shape) || !keptShape(s.shape, p.shape) {
		return nil
	}
	a, c := rowDotOperands(s)
	if (a == g && c == p) || (a == p && c == g) {
		return g
	}
	return nil
}

// softmaxOp records the fused softmax of x over its last axis.
func (b *Builder) softmaxOp(x *value) (backends.Op, error) {
	out := x.shape
	n := out.Dimensions[out.Rank()-1]
	return b.addLabeled("Softmax", []*value{x}, out, f32Exec(out, func(be *Backend, dst []float32, in [][]float32) {
		tensor.SoftmaxRows(dst, in[0], n, be.workers)
	}, 0))
}

// softmaxGradOp records the fused softmax gradient p ⊙ (g − Σ g⊙p).
func (b *Builder) softmaxGradOp(p, g *value) (backends.Op, error) {
	out := p.shape
	n := out.Dimensions[out.Rank()-1]
	return b.addLabeled("SoftmaxGrad", []*value{p, g}, out, f32Exec(out, func(be *Backend, dst []float32, in [][]float32) {
		tensor.SoftmaxGradRows(dst, in[0], in[1], n, be.workers)
	}, 1, 0))
}

// addLabeled records a fused custom op named label (in profiles and
// errors) with output shape out.
func (b *Builder) addLabeled(label string, vs []*value, out shapes.Shape, exec customFn) (backends.Op, error) {
	op, err := b.addCustom(backends.OpTypeInvalid, vs, out, exec)
	if err != nil {
		return nil, err
	}
	op.(*value).node.label = label
	return op, nil
}

// rowDotOperands returns a and b when v = Reshape…(Σ_last a⊙b), as row dot
// products (rowDotsOp) or as ReduceSum(Mul(a, b), last); nil otherwise.
func rowDotOperands(v *value) (a, b *value) {
	v = reshapeSource(v)
	if n := v.node; n.label == "RowDots" && len(n.inputs) == 2 {
		return n.inputs[0], n.inputs[1]
	}
	prod := lastAxisReduction(v, backends.OpTypeReduceSum)
	if prod == nil || prod.node.opType != backends.OpTypeMul || len(prod.node.inputs) != 2 {
		return nil, nil
	}
	return prod.node.inputs[0], prod.node.inputs[1]
}

// isZeroTerm reports whether v is a straight-through zero: Sub(x, x), or
// a ReduceSum, Reshape or BroadcastInDim of one (model/vjp's Attention
// spreads the keys' term over the query heads).
func isZeroTerm(v *value) bool {
	n := v.node
	for len(n.inputs) == 1 {
		switch {
		case n.opType == backends.OpTypeReduceSum, n.opType == backends.OpTypeReshape:
			n = n.inputs[0].node
		case n.opType == backends.OpTypeBroadcastInDim && n.bcastFrom != nil:
			n = n.bcastFrom.node
		default:
			return false
		}
	}
	return n.opType == backends.OpTypeSub && len(n.inputs) == 2 && n.inputs[0] == n.inputs[1]
}

// sumExpOf returns x when v = Reshape…(SumExp(x)) (nil otherwise).
func sumExpOf(v *value) *value {
	v = reshapeSource(v)
	if n := v.node; n.label == "SumExp" && len(n.inputs) == 1 {
		return n.inputs[0]
	}
	return nil
}

// fuseSumExp computes ReduceSum(Exp(Sub(x, Reshape(ReduceMax(x, last)))),
// last) of float32 x as SumExp(x) (tensor.SumExpRows); ok reports whether
// it did.
func (b *Builder) fuseSumExp(x backends.Op, axes []int) (backends.Op, bool, error) {
	e, isValue := x.(*value)
	if b.backend.plain || !isValue || e.b != b || e.shape.DType != dtypes.Float32 || e.shape.Rank() == 0 ||
		len(axes) != 1 || (axes[0] != e.shape.Rank()-1 && axes[0] != -1) {
		return nil, false, nil
	}
	if e.node.opType != backends.OpTypeExp || len(e.node.inputs) != 1 {
		return nil, false, nil
	}
	sub := e.node.inputs[0].node
	if sub.opType != backends.OpTypeSub || len(sub.inputs) != 2 {
		return nil, false, nil
	}
	xv, m := sub.inputs[0], sub.inputs[1]
	if !xv.shape.Equal(e.shape) || lastAxisReduction(m, backends.OpTypeReduceMax) != xv || !keptShape(m.shape, xv.shape) {
		return nil, false, nil
	}
	dims := xv.shape.Dimensions
	n := dims[len(dims)-1]
	out := shapes.Make(dtypes.Float32, dims[:len(dims)-1]...)
	op, err := b.addLabeled("SumExp", []*value{xv}, out, f32Exec(out, func(be *Backend, dst []float32, in [][]float32) {
		if n == 0 {
			clear(dst)
		} else {
			tensor.SumExpRows(dst, in[0], n, be.workers)
		}
	}))
	return op, true, err
}

// fuseLogSumExp computes Add(Reshape…(Log(SumExp(x))), Reshape…(ReduceMax(x,
// last))) of float32 x, either order (model/vjp's LogSumExp: log Σ
// e^(x − m) + m), as LogSumExp(x) (tensor.LogSumExpRows, the same float32s):
// the maximum comes from the pass that sums, so the ReduceMax, Log and
// SumExp, left without readers, are dropped at Compile and the rows (the
// 134 MB of a 25M training step's logits) are read once, not twice. ok
// reports whether it did.
func (b *Builder) fuseLogSumExp(lhs, rhs *value) (backends.Op, bool, error) {
	if !lhs.shape.Equal(rhs.shape) {
		return nil, false, nil
	}
	for i, l := range [2]*value{lhs, rhs} {
		m := [2]*value{rhs, lhs}[i]
		l = reshapeSource(l)
		if l.node.opType != backends.OpTypeLog || len(l.node.inputs) != 1 {
			continue
		}
		x := sumExpOf(l.node.inputs[0])
		if x == nil || lastAxisReduction(m, backends.OpTypeReduceMax) != x {
			continue
		}
		dims := x.shape.Dimensions
		n := dims[len(dims)-1]
		if n == 0 || lhs.shape.Size()*n != x.shape.Size() {
			return nil, false, nil
		}
		out := lhs.shape
		op, err := b.addLabeled("LogSumExp", []*value{x}, out, f32Exec(out, func(be *Backend, dst []float32, in [][]float32) {
			tensor.LogSumExpRows(dst, in[0], n, be.workers)
		}))
		return op, true, err
	}
	return nil, false, nil
}

// perRow returns the value holding v's one value per row when v (of
// shape s) is constant along s's last axis: v itself with a last axis of
// 1, or a BroadcastInDim along the last axis of such a value or of one
// without that axis; nil otherwise.
func perRow(v *value, s shapes.Shape) *value {
	r := s.Rank()
	if keptShape(v.shape, s) {
		return v
	}
	n := v.node
	src := n.bcastFrom
	if n.opType != backends.OpTypeBroadcastInDim || src == nil || !v.shape.Equal(s) || src.shape.DType != s.DType {
		return nil
	}
	switch {
	case keptShape(src.shape, s) && slices.Equal(n.bcastAxes, identityAxes(r)):
		return src
	case src.shape.Rank() == r-1 && slices.Equal(src.shape.Dimensions, s.Dimensions[:r-1]) && slices.Equal(n.bcastAxes, identityAxes(r-1)):
		return src
	}
	return nil
}

func identityAxes(n int) []int {
	a := make([]int, n)
	for i := range a {
		a[i] = i
	}
	return a
}

// fuseExpShiftScale computes Mul(g, Exp(Sub(x, l))) with g and l one value
// per row of x as ExpShiftScale (tensor.ExpShiftScaleRows); ok reports
// whether it did.
func (b *Builder) fuseExpShiftScale(lhs, rhs *value) (backends.Op, bool, error) {
	for i, e := range [2]*value{lhs, rhs} {
		v := [2]*value{rhs, lhs}[i]
		if e.node.opType != backends.OpTypeExp || len(e.node.inputs) != 1 || e.shape.Rank() == 0 || !v.shape.Equal(e.shape) {
			continue
		}
		sub := e.node.inputs[0].node
		if sub.opType != backends.OpTypeSub || len(sub.inputs) != 2 || !sub.inputs[0].shape.Equal(e.shape) {
			continue
		}
		x, l := sub.inputs[0], sub.inputs[1]
		g := perRow(v, e.shape)
		if g == nil || !keptShape(l.shape, e.shape) {
			continue
		}
		out := e.shape
		n := out.Dimensions[out.Rank()-1]
		op, err := b.addLabeled("ExpShiftScale", []*value{x, l, g}, out, f32Exec(out, func(be *Backend, dst []float32, in [][]float32) {
			tensor.ExpShiftScaleRows(dst, in[0], in[1], in[2], n, be.workers)
		}, 0))
		return op, true, err
	}
	return nil, false, nil
}
