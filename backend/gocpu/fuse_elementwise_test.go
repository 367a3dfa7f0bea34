package gocpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/shapes"

	"github.com/cas-engine/cas/internal/cputime"
)

var noFuseOnce = sync.OnceValue(func() backends.Backend {
	b, err := New("nofuse")
	if err != nil {
		panic(err)
	}
	return b
})

// ewProg is a random graph over float32 values of one shape: values 0…3
// are parameters of the shape, 4 a scalar parameter, 5 a scalar constant;
// each op appends one value.
type ewProg struct {
	dims []int
	ops  []ewProgOp
	outs []int
}

type ewProgOp struct {
	kind string // a backends op name, or "Sum" (ReduceSum over all axes: a scalar)
	a, b int
}

const ewProgParams = 6

func randEWProg(r *rand.Rand, dims []int, nOps int) ewProg {
	p := ewProg{dims: dims}
	scalar := map[int]bool{4: true, 5: true}
	unary := []string{"Neg", "Sqrt", "Rsqrt", "Exp", "Logistic", "Cos", "Sin"}
	binary := []string{"Add", "Sub", "Mul", "Div", "Add", "Mul"}
	pick := func() int { // recent values more often
		nv := ewProgParams + len(p.ops)
		if r.IntN(3) > 0 && nv > ewProgParams {
			return nv - 1 - r.IntN(min(4, nv-ewProgParams))
		}
		return r.IntN(nv)
	}
	full := func() int {
		for {
			if v := pick(); !scalar[v] {
				return v
			}
		}
	}
	for range nOps {
		var op ewProgOp
		switch k := r.IntN(12); {
		case k == 0:
			op = ewProgOp{kind: "Sum", a: full()}
		case k < 4:
			op = ewProgOp{kind: unary[r.IntN(len(unary))], a: full()}
		default:
			op = ewProgOp{kind: binary[r.IntN(len(binary))], a: pick(), b: pick()}
			if scalar[op.a] && scalar[op.b] {
				op.a = full()
			}
			if r.IntN(2) == 0 {
				op.a, op.b = op.b, op.a
			}
		}
		if op.kind == "Sum" {
			scalar[ewProgParams+len(p.ops)] = true
		}
		p.ops = append(p.ops, op)
	}
	nv := ewProgParams + len(p.ops)
	p.outs = []int{nv - 1}
	for range r.IntN(4) {
		p.outs = append(p.outs, r.IntN(nv))
	}
	return p
}

// build records p on b and compiles it.
func (p ewProg) build(t *testing.T, be backends.Backend) backends.Executable {
	t.Helper()
	bd := be.Builder("ewprog")
	shape := shapes.Make(dtypes.Float32, p.dims...)
	var vals []backends.Op
	for i := range 4 {
		v, err := bd.Parameter(fmt.Sprintf("x%d", i), shape, nil)
		if err != nil {
			t.Fatal(err)
		}
		vals = append(vals, v)
	}
	s, err := bd.Parameter("s", shapes.Make(dtypes.Float32), nil)
	if err != nil {
		t.Fatal(err)
	}
	c, err := bd.Constant([]float32{0.9})
	if err != nil {
		t.Fatal(err)
	}
	vals = append(vals, s, c)
	axes := make([]int, len(p.dims))
	for i := range axes {
		axes[i] = i
	}
	for _, op := range p.ops {
		a, b := vals[op.a], vals[op.b]
		var v backends.Op
		switch op.kind {
		case "Sum":
			v, err = bd.ReduceSum(a, axes...)
		case "Neg":
			v, err = bd.Neg(a)
		case "Sqrt":
			v, err = bd.Sqrt(a)
		case "Rsqrt":
			v, err = bd.Rsqrt(a)
		case "Exp":
			v, err = bd.Exp(a)
		case "Logistic":
			v, err = bd.Logistic(a)
		case "Cos":
			v, err = bd.Cos(a)
		case "Sin":
			v, err = bd.Sin(a)
		case "Add":
			v, err = bd.Add(a, b)
		case "Sub":
			v, err = bd.Sub(a, b)
		case "Mul":
			v, err = bd.Mul(a, b)
		case "Div":
			v, err = bd.Div(a, b)
		}
		if err != nil {
			t.Fatalf("%s: %v", op.kind, err)
		}
		vals = append(vals, v)
	}
	var outs []backends.Op
	for _, o := range p.outs {
		outs = append(outs, vals[o])
	}
	e, err := bd.Compile(outs, nil)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// ewInputs returns the parameters' data: normal values with NaN, ±Inf,
// huge, tiny (subnormal) and zero elements mixed in.
func ewInputs(r *rand.Rand, n int) [][]float32 {
	special := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 3e38, -3e38, 1e-40, -1e-42, 0, float32(math.Copysign(0, -1))}
	in := make([][]float32, 6)
	for i := range 4 {
		x := make([]float32, n)
		for j := range x {
			if r.IntN(16) == 0 {
				x[j] = special[r.IntN(len(special))]
			} else {
				x[j] = float32(r.NormFloat64())
			}
		}
		in[i] = x
	}
	in[4] = []float32{float32(r.NormFloat64())}
	return in[:5]
}

// execEW runs e on be with the given data, donating the inputs marked.
func execEW(t *testing.T, be backends.Backend, e backends.Executable, dims []int, data [][]float32, donate []bool) [][]float32 {
	t.Helper()
	var in []backends.Buffer
	for i, x := range data {
		shape := shapes.Make(dtypes.Float32, dims...)
		if i == 4 {
			shape = shapes.Make(dtypes.Float32)
		}
		buf, err := be.BufferFromFlatData(0, append([]float32(nil), x...), shape)
		if err != nil {
			t.Fatal(err)
		}
		in = append(in, buf)
	}
	outs, err := e.Execute(in, donate, 0)
	if err != nil {
		t.Fatal(err)
	}
	res := make([][]float32, len(outs))
	for i, o := range outs {
		shape, err := be.BufferShape(o)
		if err != nil {
			t.Fatal(err)
		}
		res[i] = make([]float32, shape.Size())
		if err := be.BufferToFlatData(o, res[i]); err != nil {
			t.Fatal(err)
		}
		be.BufferFinalize(o)
	}
	for i, b := range in {
		if i >= len(donate) || !donate[i] {
			be.BufferFinalize(b)
		}
	}
	return res
}

// sameF32 reports whether x and y have the same bits, or are both NaN:
// when both operands of an op are NaN, x86 returns the first one's
// payload, and the unfused plan itself swaps the operands of Add and Mul
// when it writes in place (vekVV), so NaN payloads depend on buffer reuse
// with or without fusion.
func sameF32(x, y float32) bool {
	return math.Float32bits(x) == math.Float32bits(y) || (x != x && y != y)
}

func fusedSteps(e backends.Executable) (fused, total int) {
	for _, st := range e.(*Executable).steps {
		if strings.HasPrefix(st.name, "Fused(") {
			fused++
		}
		total++
	}
	return fused, total
}

// TestFusedElementwiseRandomGraphs: random graphs of elementwise ops (with
// ReduceSum results read back as scalars, so that some intermediates are
// read outside a group and some would-be groups would form a cycle),
// random outputs (intermediates, parameters, repeats) and random donated
// inputs (outputs written in place) give bit-identical results with and
// without loop fusion, over odd sizes and NaN/Inf/huge/subnormal inputs.
func TestFusedElementwiseRandomGraphs(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	fast, ref := fastOnce(), noFuseOnce()
	fusedTotal := 0
	for _, dims := range [][]int{{1}, {0}, {7}, {8}, {9}, {15}, {16}, {17}, {100}, {1000}, {2, 1, 3}, {3, 4097}, {40000}, {5, 0, 2}} {
		for trial := range 12 {
			p := randEWProg(r, dims, 3+r.IntN(20))
			n := shapes.Make(dtypes.Float32, dims...).Size()
			data := ewInputs(r, n)
			donate := make([]bool, 5)
			for i := range donate {
				donate[i] = r.IntN(2) == 0
			}
			ef, er := p.build(t, fast), p.build(t, ref)
			f, _ := fusedSteps(ef)
			fusedTotal += f
			got := execEW(t, fast, ef, dims, data, donate)
			want := execEW(t, ref, er, dims, data, donate)
			ef.Finalize()
			er.Finalize()
			for o := range want {
				if len(got[o]) != len(want[o]) {
					t.Fatalf("%v #%d %+v: output %d has %d elements, want %d", dims, trial, p, o, len(got[o]), len(want[o]))
				}
				for i := range want[o] {
					if !sameF32(got[o][i], want[o][i]) {
						t.Fatalf("%v #%d %+v: output %d [%d] = %v, want %v", dims, trial, p, o, i, got[o][i], want[o][i])
					}
				}
			}
		}
	}
	if fusedTotal == 0 {
		t.Error("no graph was fused")
	}
}

// TestFusedElementwiseAdamChain: an AdamW-like update (m, v and the new
// weight returned; m and v intermediates read only inside) runs as one
// fused step, bit-identical to the unfused plan; an intermediate also
// read by a ReduceSum stays an output of its group; a group never takes a
// node whose operand depends on a member through an outside op.
func TestFusedElementwiseAdamChain(t *testing.T) {
	fast, ref := fastOnce(), noFuseOnce()
	r := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{1, 17, 4096, 4097, 70000} {
		for _, sumOf := range []bool{false, true} {
			ef, er := buildAdam(t, fast, n, sumOf), buildAdam(t, ref, n, sumOf)
			if f, total := fusedSteps(ef); f != 1 || (!sumOf && total != 2) { // + the constants' segment
				var names []string
				for _, st := range ef.(*Executable).steps {
					names = append(names, st.name)
				}
				t.Errorf("n=%d sum=%v: steps %v, want one fused group", n, sumOf, names)
			}
			x := ewInputs(r, n)
			data := [][]float32{x[0], x[1], x[2], x[3], {0.01}}
			for i := range data[3] {
				data[3][i] = float32(math.Abs(float64(data[3][i])))
			}
			for _, donate := range [][]bool{nil, {true, true, true, true, false}} {
				got := execEW(t, fast, ef, []int{n}, data, donate)
				want := execEW(t, ref, er, []int{n}, data, donate)
				for o := range want {
					for i := range want[o] {
						if !sameF32(got[o][i], want[o][i]) {
							t.Fatalf("n=%d: output %d [%d] = %v, want %v", n, o, i, got[o][i], want[o][i])
						}
					}
				}
			}
			ef.Finalize()
			er.Finalize()
		}
	}
}

// buildAdam compiles an AdamW-like update of n weights on be (with sumOf,
// g² is also read by a ReduceSum and the new weight scaled by that sum).
func buildAdam(t testing.TB, be backends.Backend, n int, sumOf bool) backends.Executable {
	bd := be.Builder("adam")
	sh := shapes.Make(dtypes.Float32, n)
	sc := shapes.Make(dtypes.Float32)
	w, _ := bd.Parameter("w", sh, nil)
	g, _ := bd.Parameter("g", sh, nil)
	m, _ := bd.Parameter("m", sh, nil)
	v, _ := bd.Parameter("v", sh, nil)
	lr, _ := bd.Parameter("lr", sc, nil)
	b1, _ := bd.Constant([]float32{0.9})
	b1c, _ := bd.Constant([]float32{0.1})
	b2, _ := bd.Constant([]float32{0.999})
	b2c, _ := bd.Constant([]float32{0.001})
	eps, _ := bd.Constant([]float32{1e-8})
	must := func(o backends.Op, err error) backends.Op {
		if err != nil {
			t.Fatal(err)
		}
		return o
	}
	m1 := must(bd.Add(must(bd.Mul(b1, m)), must(bd.Mul(b1c, g))))
	g2 := must(bd.Mul(g, g))
	v1 := must(bd.Add(must(bd.Mul(v, b2)), must(bd.Mul(b2c, g2))))
	upd := must(bd.Div(m1, must(bd.Add(must(bd.Sqrt(v1)), eps))))
	w1 := must(bd.Sub(w, must(bd.Mul(lr, upd))))
	outs := []backends.Op{w1, m1, v1}
	if sumOf {
		s := must(bd.ReduceSum(g2, 0))
		outs = append(outs, s, must(bd.Mul(w1, s))) // reads w1 after the group: fine
	}
	e, err := bd.Compile(outs, nil)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// BenchmarkFusedAdam: the AdamW-like chain over 720,896 weights (a
// qwen3-25M projection), fused and unfused; CPU time per update.
func BenchmarkFusedAdam(b *testing.B) {
	const n = 720896
	r := rand.New(rand.NewPCG(1, 2))
	x := ewInputs(r, n)
	data := [][]float32{x[0], x[1], x[2], x[3], {0.01}}
	for _, c := range []struct {
		name string
		be   backends.Backend
	}{{"fused", fastOnce()}, {"unfused", noFuseOnce()}} {
		b.Run(c.name, func(b *testing.B) {
			e := buildAdam(b, c.be, n, false)
			defer e.Finalize()
			be := c.be
			var in []backends.Buffer
			for i, d := range data {
				sh := shapes.Make(dtypes.Float32, n)
				if i == 4 {
					sh = shapes.Make(dtypes.Float32)
				}
				buf, err := be.BufferFromFlatData(0, d, sh)
				if err != nil {
					b.Fatal(err)
				}
				in = append(in, buf)
			}
			cpu0 := cputime.Process()
			for b.Loop() {
				outs, err := e.Execute(in, nil, 0)
				if err != nil {
					b.Fatal(err)
				}
				for _, o := range outs {
					be.BufferFinalize(o)
				}
			}
			b.ReportMetric(float64((cputime.Process()-cpu0).Microseconds())/1e3/float64(b.N), "cpu-ms/op")
		})
	}
}

// TestFusedElementwiseBroadcast: random chains whose binary ops take, beside
// a value of the output's shape, one broadcast along the trailing axes (a
// [d₀ … d_{k−1}, 1 … 1] row value, such as RMSNorm's scale) or the leading
// axes (a [1 … 1, d_k … d_{n−1}] vector, such as its weight), on either side,
// give bit-identical results with and without loop fusion, over odd shapes
// whose rows do not divide the tiles, with NaN/Inf/huge/subnormal inputs.
// (No zero-sized shapes: simplego infers [2, 1, 3] for [2, 0, 3] ⊕ [1, 1, 3].)
func TestFusedElementwiseBroadcast(t *testing.T) {
	r := rand.New(rand.NewPCG(13, 14))
	fast, ref := fastOnce(), noFuseOnce()
	fusedTotal := 0
	for _, dims := range [][]int{{7}, {3, 5}, {2, 3, 17}, {4, 1, 100}, {5, 3, 1000}, {3, 4097}, {9, 8, 64}} {
		rank := len(dims)
		for trial := range 10 {
			k := r.IntN(rank + 1) // rows: axes ≥ k are 1; cols: axes < k are 1
			rowDims, colDims := append([]int(nil), dims...), append([]int(nil), dims...)
			for a := range rank {
				if a >= k {
					rowDims[a] = 1
				} else {
					colDims[a] = 1
				}
			}
			shapesIn := [][]int{dims, dims, rowDims, colDims, {}}
			build := func(be backends.Backend, ops [][3]int, outs []int) backends.Executable {
				bd := be.Builder("bcast")
				var vals []backends.Op
				for i, d := range shapesIn {
					v, err := bd.Parameter(fmt.Sprintf("p%d", i), shapes.Make(dtypes.Float32, d...), nil)
					if err != nil {
						t.Fatal(err)
					}
					vals = append(vals, v)
				}
				for _, op := range ops {
					a, b := vals[op[1]], vals[op[2]]
					var v backends.Op
					var err error
					switch op[0] {
					case 0:
						v, err = bd.Add(a, b)
					case 1:
						v, err = bd.Sub(a, b)
					case 2:
						v, err = bd.Mul(a, b)
					case 3:
						v, err = bd.Div(a, b)
					case 4:
						v, err = bd.Exp(a)
					case 5:
						v, err = bd.Neg(a)
					}
					if err != nil {
						t.Fatal(err)
					}
					vals = append(vals, v)
				}
				var res []backends.Op
				for _, o := range outs {
					res = append(res, vals[o])
				}
				e, err := bd.Compile(res, nil)
				if err != nil {
					t.Fatal(err)
				}
				return e
			}
			// Ops: binary ones take a full value and any operand; unary ones a full value.
			fullVals := []int{0, 1}
			var ops [][3]int
			for range 2 + r.IntN(10) {
				a := fullVals[len(fullVals)-1-r.IntN(min(3, len(fullVals)))]
				kind := r.IntN(6)
				b := r.IntN(5)
				if kind < 4 && r.IntN(2) == 0 {
					a, b = b, a
				}
				ops = append(ops, [3]int{kind, a, b})
				fullVals = append(fullVals, len(shapesIn)+len(ops)-1)
			}
			outs := []int{len(shapesIn) + len(ops) - 1, fullVals[r.IntN(len(fullVals))]}
			ef, er := build(fast, ops, outs), build(ref, ops, outs)
			f, _ := fusedSteps(ef)
			fusedTotal += f
			full := ewInputs(r, shapes.Make(dtypes.Float32, dims...).Size())
			data := [][]float32{full[0], full[1], ewInputs(r, shapes.Make(dtypes.Float32, rowDims...).Size())[2],
				ewInputs(r, shapes.Make(dtypes.Float32, colDims...).Size())[3], full[4]}
			donate := []bool{r.IntN(2) == 0, r.IntN(2) == 0, false, false, false}
			run := func(be backends.Backend, e backends.Executable) [][]float32 {
				var in []backends.Buffer
				for i, x := range data {
					buf, err := be.BufferFromFlatData(0, append([]float32(nil), x...), shapes.Make(dtypes.Float32, shapesIn[i]...))
					if err != nil {
						t.Fatal(err)
					}
					in = append(in, buf)
				}
				bufs, err := e.Execute(in, donate, 0)
				if err != nil {
					t.Fatal(err)
				}
				var res [][]float32
				for _, o := range bufs {
					s, err := be.BufferShape(o)
					if err != nil {
						t.Fatal(err)
					}
					x := make([]float32, s.Size())
					if err := be.BufferToFlatData(o, x); err != nil {
						t.Fatal(err)
					}
					res = append(res, x)
				}
				return res
			}
			got, want := run(fast, ef), run(ref, er)
			ef.Finalize()
			er.Finalize()
			for o := range want {
				for i := range want[o] {
					if len(got[o]) != len(want[o]) || !sameF32(got[o][i], want[o][i]) {
						t.Fatalf("%v k=%d #%d ops %v outs %v: output %d [%d] = %v, want %v", dims, k, trial, ops, outs, o, i, got[o][i], want[o][i])
					}
				}
			}
		}
	}
	if fusedTotal == 0 {
		t.Error("no graph was fused")
	}
}
