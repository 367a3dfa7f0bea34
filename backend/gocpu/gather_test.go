package gocpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
)

// randIDs returns n ids in [lo, hi).
func randIDs(r *rand.Rand, n, lo, hi int) []int32 {
	ids := make([]int32, n)
	for i := range ids {
		ids[i] = int32(lo + r.IntN(hi-lo))
	}
	return ids
}

// sameBits fails t unless got and want are equal bit for bit (as float32).
func sameBits(t *testing.T, what string, got, want []float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range want {
		if math.Float32bits(float32(got[i])) != math.Float32bits(float32(want[i])) {
			t.Fatalf("%s: [%d] = %v, want %v", what, i, got[i], want[i])
		}
	}
}

// TestRowGather compares the row Gather with simplego bit for bit: tables
// of odd shapes, int32 and int64 ids (with ids out of range, which both
// clamp), rows of several sizes (split over the workers for the larger).
func TestRowGather(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, c := range []struct {
		table []int
		ids   []int
	}{
		{[]int{1, 7}, []int{3}},
		{[]int{37, 5, 3}, []int{4, 6}},
		{[]int{9, 17}, []int{1}},
		{[]int{100, 512}, []int{8, 100}},
		{[]int{1000, 1}, []int{15}},
	} {
		n := 1
		for _, d := range c.ids {
			n *= d
		}
		v := c.table[0]
		ids := randIDs(r, n, -2, v+3)
		for _, wide := range []bool{false, true} {
			fn := func(in []*graph.Node) []*graph.Node {
				g := in[0].Graph()
				idx := graph.Const(g, tensors.FromFlatDataAndDimensions(ids, c.ids...))
				if wide {
					idx = graph.ConvertDType(idx, dtypes.Int64)
				}
				return []*graph.Node{graph.Gather(in[0], graph.ExpandAxes(idx, -1))}
			}
			got, want, gs, ws := runFastPlain(t, fastOnce(), fn, fn, randTensor(r, dtypes.Float32, c.table...))
			if !gs[0].Equal(ws[0]) {
				t.Fatalf("%v: shape %s, want %s", c, gs[0], ws[0])
			}
			sameBits(t, "gather", got[0], want[0])
		}
	}
}

// TestRowScatterGrad: the gradient of a row Gather (a ScatterSum of the
// adjoint's rows into zeros, in place) equals simplego's bit for bit, with
// repeated ids (whose rows add up in index order) and rows wide enough to
// be split over the workers.
func TestRowScatterGrad(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for _, c := range []struct{ v, d, n int }{{1, 3, 5}, {13, 7, 40}, {50, 512, 300}, {20, 65, 1000}} {
		ids := randIDs(r, c.n, 0, c.v)
		fn := func(in []*graph.Node) []*graph.Node {
			g := in[0].Graph()
			idx := graph.Const(g, tensors.FromFlatDataAndDimensions(ids, c.n))
			rows := graph.Gather(in[0], graph.ExpandAxes(idx, -1))
			loss := graph.ReduceAllSum(graph.Mul(rows, in[1]))
			return []*graph.Node{graph.Gradient(loss, in[0])[0]}
		}
		got, want, _, _ := runFastPlain(t, fastOnce(), fn, fn,
			randTensor(r, dtypes.Float32, c.v, c.d), randTensor(r, dtypes.Float32, c.n, c.d))
		sameBits(t, "scatter", got[0], want[0])
	}
}

// TestRowScatterOperand: ScatterSum into an operand that stays in use (a
// copy) adds the rows in index order and drops ids outside [0, V), as XLA
// does (simplego does not check them), against a plain loop.
func TestRowScatterOperand(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	const v, d, n = 6, 33, 50
	ids := randIDs(r, n, -2, v+2)
	op, upd := randTensor(r, dtypes.Float32, v, d), randTensor(r, dtypes.Float32, n, d)
	fn := func(in []*graph.Node) []*graph.Node {
		idx := graph.Const(in[0].Graph(), tensors.FromFlatDataAndDimensions(ids, n, 1))
		return []*graph.Node{graph.ScatterSum(in[0], idx, in[1], false, false), in[0]}
	}
	got, _, err := run(t, fastOnce(), fn, op, upd)
	if err != nil {
		t.Fatal(err)
	}
	want := flat64(op)
	u := flat64(upd)
	for i, id := range ids {
		if id < 0 || int(id) >= v {
			continue
		}
		for c := range d {
			want[int(id)*d+c] = float64(float32(want[int(id)*d+c]) + float32(u[i*d+c]))
		}
	}
	sameBits(t, "scatter", got[0], want)
	sameBits(t, "operand", got[1], flat64(op))
}

// TestRowGatherCustom: the row Gather and ScatterSum run here; a Gather of
// columns stays on simplego.
func TestRowGatherCustom(t *testing.T) {
	bb := fastOnce().Builder("gather")
	op := mustOp(t)
	table := op(bb.Parameter("t", shapes.Make(dtypes.Float32, 10, 4), nil))
	ids := op(bb.Parameter("ids", shapes.Make(dtypes.Int32, 3, 1), nil))
	rows := op(bb.Gather(table, ids, 1, []int{1}, []int{0}, []int{0}, []int{1, 4}, false))
	if n := rows.(*value).node; n.kind != kindCustom {
		t.Fatal("row Gather delegated")
	}
	sum := op(bb.ScatterSum(table, ids, rows, 1, []int{1}, []int{0}, []int{0}, false, false))
	if n := sum.(*value).node; n.kind != kindCustom || n.opType != backends.OpTypeScatterSum {
		t.Fatal("row ScatterSum delegated")
	}
	cols := op(bb.Gather(table, ids, 1, []int{0}, []int{1}, []int{1}, []int{10, 1}, false))
	if n := cols.(*value).node; n.kind == kindCustom {
		t.Fatal("column Gather taken for a row Gather")
	}
}

// BenchmarkRowGatherScatter times the embedding lookup of the 25M model's
// training step (2048 rows of 512 from 16384) and its gradient, here and
// on simplego.
func BenchmarkRowGatherScatter(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	const v, d, n = 16384, 512, 2048
	ids := randIDs(r, n, 0, v)
	table, w := randTensor(r, dtypes.Float32, v, d), randTensor(r, dtypes.Float32, n, d)
	fn := func(in []*graph.Node) []*graph.Node {
		idx := graph.Const(in[0].Graph(), tensors.FromFlatDataAndDimensions(ids, n))
		rows := graph.Gather(in[0], graph.ExpandAxes(idx, -1))
		return []*graph.Node{rows, graph.Gradient(graph.ReduceAllSum(graph.Mul(rows, in[1])), in[0])[0]}
	}
	for _, c := range []struct {
		name string
		be   backends.Backend
	}{{"gocpu", fastOnce()}, {"simplego", plainOnce()}} {
		b.Run(c.name, func(b *testing.B) {
			exec, err := graph.NewExec(c.be, fn)
			if err != nil {
				b.Fatal(err)
			}
			tc, err := table.LocalClone() // a tensor binds to the first backend using it
			if err != nil {
				b.Fatal(err)
			}
			wc, err := w.LocalClone()
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				outs, err := exec.Exec(tc, wc)
				if err != nil {
					b.Fatal(err)
				}
				for _, o := range outs {
					o.FinalizeAll()
				}
			}
		})
	}
}

// TestScatterSumDelegated: a ScatterSum that is not a float32 row scatter
// (here bfloat16) runs on simplego and its result is an op of this
// builder.
func TestScatterSumDelegated(t *testing.T) {
	bb := fastOnce().Builder("scatter-bf16")
	op := mustOp(t)
	table := op(bb.Parameter("t", shapes.Make(dtypes.BFloat16, 10, 4), nil))
	ids := op(bb.Parameter("ids", shapes.Make(dtypes.Int32, 3, 1), nil))
	upd := op(bb.Parameter("u", shapes.Make(dtypes.BFloat16, 3, 4), nil))
	sum := op(bb.ScatterSum(table, ids, upd, 1, []int{1}, []int{0}, []int{0}, false, false))
	v, ok := sum.(*value)
	if !ok || v.node.kind != kindDelegate {
		t.Fatalf("bf16 ScatterSum gave %T, want a delegated op", sum)
	}
	if s, err := bb.OpShape(sum); err != nil || !s.Equal(shapes.Make(dtypes.BFloat16, 10, 4)) {
		t.Fatalf("shape %v, %v", s, err)
	}
}
