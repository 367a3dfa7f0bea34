package gocpu

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
)

// TestTinyDotMatchesPlain: products with a tiny right operand (tinyPlan)
// equal simplego's, with the contracting axis first, in the middle and
// last, one to three outputs per element, rhs axes in either order, T = 1
// and a single element; and RoPE's rotate_half with its gradient (the
// ReduceSum of a broadcast product that fuse.go rewrites into one).
func TestTinyDotMatchesPlain(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 23))
	cases := []struct {
		lhs, rhs []int
		lc, rc   []int
	}{
		{[]int{4, 6, 3, 2, 16}, []int{2, 2}, []int{3}, []int{1}}, // btnjh,ij->btnih
		{[]int{4, 6, 3, 2, 16}, []int{2, 2}, []int{3}, []int{0}}, // rhs transposed
		{[]int{5, 7}, []int{7, 3}, []int{1}, []int{0}},           // contracting axis last
		{[]int{3, 9, 11}, []int{3}, []int{0}, []int{0}},          // first; one output
		{[]int{1, 1, 2, 1}, []int{2, 2}, []int{2}, []int{1}},     // T = 1
		{[]int{1}, []int{1, 4}, []int{0}, []int{0}},              // a single element
		{[]int{2, 3, 8}, []int{3, 8}, []int{2}, []int{1}},        // wider rhs
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%v·%v", c.lhs, c.rhs), func(t *testing.T) {
			x, w := randTensor(r, dtypes.Float32, c.lhs...), randTensor(r, dtypes.Float32, c.rhs...)
			p, err := newDotPlan(shapes.Make(dtypes.Float32, c.lhs...), c.lc, nil, shapes.Make(dtypes.Float32, c.rhs...), c.rc, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			if p.tiny == nil {
				t.Fatal("not planned as a tiny product")
			}
			fn := func(in []*graph.Node) []*graph.Node {
				return []*graph.Node{graph.DotGeneral(in[0], c.lc, nil, in[1], c.rc, nil)}
			}
			got, want, gs, ws := runFastPlain(t, fastOnce(), fn, fn, x, w)
			if !gs[0].Equal(ws[0]) {
				t.Fatalf("shape %s, want %s", gs[0], ws[0])
			}
			assertNearScale(t, "product", got[0], want[0])
		})
	}
	t.Run("rotate_half and its gradient", func(t *testing.T) {
		x := randTensor(r, dtypes.Float32, 2, 5, 3, 16)
		fn := func(in []*graph.Node) []*graph.Node {
			halves := graph.Reshape(in[0], 2, 5, 3, 2, 8)
			rot := graph.Const(in[0].Graph(), [][]float32{{0, -1}, {1, 0}})
			y := graph.Reshape(graph.Einsum("btnjh,ij->btnih", halves, rot), 2, 5, 3, 16)
			loss := graph.ReduceAllSum(graph.Mul(y, graph.Sin(in[0])))
			return append([]*graph.Node{y}, graph.Gradient(loss, in[0])...)
		}
		got, want, _, _ := runFastPlain(t, fastOnce(), fn, fn, x)
		for o := range want {
			assertNearScale(t, fmt.Sprintf("output %d", o), got[o], want[o])
		}
	})
	// Not tiny: batch axes, two contracting axes, a large rhs.
	for _, c := range []struct {
		lhs, rhs       []int
		lc, lb, rc, rb []int
	}{
		{[]int{2, 3, 4}, []int{2, 4, 2}, []int{2}, []int{0}, []int{1}, []int{0}},
		{[]int{3, 2, 2}, []int{2, 2, 2}, []int{1, 2}, nil, []int{0, 1}, nil},
		{[]int{3, 80}, []int{80, 2}, []int{1}, nil, []int{0}, nil},
	} {
		p, err := newDotPlan(shapes.Make(dtypes.Float32, c.lhs...), c.lc, c.lb, shapes.Make(dtypes.Float32, c.rhs...), c.rc, c.rb, 0)
		if err != nil {
			t.Fatal(err)
		}
		if p.tiny != nil {
			t.Errorf("%v·%v planned as tiny", c.lhs, c.rhs)
		}
	}
}

// BenchmarkTinyDot times RoPE's rotate_half of the 25M model's queries in
// the training step ([8, 256, 8, 2, 32]·[2, 2]) with tinyPlan and with
// the GEMM path it replaces.
func BenchmarkTinyDot(b *testing.B) {
	ls, rs := shapes.Make(dtypes.Float32, 8, 256, 8, 2, 32), shapes.Make(dtypes.Float32, 2, 2)
	r := rand.New(rand.NewPCG(7, 24))
	x, w := randTensor(r, dtypes.Float32, ls.Dimensions...), randTensor(r, dtypes.Float32, 2, 2)
	be := fastOnce().(*Backend)
	for _, name := range []string{"tiny", "gemm"} {
		b.Run(name, func(b *testing.B) {
			p, err := newDotPlan(ls, []int{3}, nil, rs, []int{1}, nil, 0)
			if err != nil {
				b.Fatal(err)
			}
			if name == "gemm" {
				p.tiny = nil
			}
			xb, err := be.BufferFromFlatData(0, tensors.MustCopyFlatData[float32](x), ls)
			if err != nil {
				b.Fatal(err)
			}
			wb, err := be.BufferFromFlatData(0, tensors.MustCopyFlatData[float32](w), rs)
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				out, _, err := p.exec(be, []backends.Buffer{xb, wb}, nil)
				if err != nil {
					b.Fatal(err)
				}
				be.BufferFinalize(out)
			}
		})
	}
}

// TestSumOfSquaresNotRewritten: ReduceSum(Mul(x, x)) of one decoded
// token's hidden state of a small model (32 floats: an RMSNorm statistic)
// is not turned into a DotGeneral (its size-1 axes are batch axes, so it
// would be a GEMM of 1×1 blocks, not a tinyPlan) but into row dot
// products; the rope-gradient form
// (no batch, one contracting axis) is.
func TestSumOfSquaresNotRewritten(t *testing.T) {
	bb := fastOnce().Builder("squares")
	op := mustOp(t)
	x := op(bb.Parameter("x", shapes.Make(dtypes.Float32, 1, 1, 32), nil))
	sq := op(bb.Mul(x, x))
	sum := op(bb.ReduceSum(sq, 2))
	if n := sum.(*value).node; n.label != "RowDots" { // row dot products (fuse_rmsnorm.go)
		t.Fatalf("sum of squares became %s %q", n.opType, n.label)
	}
	v := op(bb.Parameter("v", shapes.Make(dtypes.Float32, 4, 5, 3, 8, 2, 1), nil))
	rot := op(bb.Parameter("rot", shapes.Make(dtypes.Float32, 1, 1, 1, 1, 2, 2), nil))
	prod := op(bb.Mul(v, rot))
	g := op(bb.ReduceSum(prod, 4))
	found := false
	for _, n := range bb.(*Builder).nodes {
		found = found || (n.opType == backends.OpTypeDotGeneral && n.kind == kindCustom)
	}
	if !found || g.(*value).node.opType == backends.OpTypeReduceSum {
		t.Fatal("the rotation's gradient was not rewritten into a product")
	}
}

// mustOp returns a function that passes a builder call's op through and
// fails t on its error: x := op(bb.Mul(a, b)).
func mustOp(t *testing.T) func(backends.Op, error) backends.Op {
	return func(o backends.Op, err error) backends.Op {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
}
