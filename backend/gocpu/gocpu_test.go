package gocpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/backends/simplego"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/dtypes/bfloat16"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
)

// Backends are created once per test binary (a backend owns buffer pools).
var (
	fastOnce = sync.OnceValue(func() backends.Backend {
		b, err := New("")
		if err != nil {
			panic(err)
		}
		return b
	})
	plainOnce = sync.OnceValue(func() backends.Backend {
		b, err := simplego.New("")
		if err != nil {
			panic(err)
		}
		return b
	})
)

// run executes fn on backend b and returns the outputs' flat values as
// float64 together with their shapes.
func run(t *testing.T, b backends.Backend, fn func([]*graph.Node) []*graph.Node, args ...*tensors.Tensor) ([][]float64, []shapes.Shape, error) {
	t.Helper()
	exec, err := graph.NewExec(b, fn)
	if err != nil {
		return nil, nil, err
	}
	in := make([]any, len(args))
	for i, a := range args {
		c, err := a.LocalClone() // a tensor binds to the first backend using it
		if err != nil {
			return nil, nil, err
		}
		in[i] = c
	}
	outs, err := exec.Exec(in...)
	if err != nil {
		return nil, nil, err
	}
	vals := make([][]float64, len(outs))
	shs := make([]shapes.Shape, len(outs))
	for i, o := range outs {
		vals[i] = flat64(o)
		shs[i] = o.Shape()
	}
	return vals, shs, nil
}

func flat64(t *tensors.Tensor) []float64 {
	var out []float64
	t.ConstFlatData(func(flat any) {
		switch x := flat.(type) {
		case []float32:
			for _, v := range x {
				out = append(out, float64(v))
			}
		case []float64:
			out = append(out, x...)
		case []bfloat16.BFloat16:
			for _, v := range x {
				out = append(out, float64(v.Float32()))
			}
		case []int32:
			for _, v := range x {
				out = append(out, float64(v))
			}
		case []int64:
			for _, v := range x {
				out = append(out, float64(v))
			}
		case []bool:
			for _, v := range x {
				if v {
					out = append(out, 1)
				} else {
					out = append(out, 0)
				}
			}
		default:
			panic(fmt.Sprintf("flat64: %T", flat))
		}
	})
	return out
}

func randTensor(r *rand.Rand, dt dtypes.DType, dims ...int) *tensors.Tensor {
	n := 1
	for _, d := range dims {
		n *= d
	}
	switch dt {
	case dtypes.Float32:
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(r.NormFloat64())
		}
		return tensors.FromFlatDataAndDimensions(x, dims...)
	case dtypes.Float64:
		x := make([]float64, n)
		for i := range x {
			x[i] = r.NormFloat64()
		}
		return tensors.FromFlatDataAndDimensions(x, dims...)
	case dtypes.BFloat16:
		x := make([]bfloat16.BFloat16, n)
		for i := range x {
			x[i] = bfloat16.FromFloat32(float32(r.NormFloat64()))
		}
		return tensors.FromFlatDataAndDimensions(x, dims...)
	}
	panic(dt)
}

type dotCase struct {
	name           string
	lhs, rhs       []int
	lc, lb, rc, rb []int
	dt             dtypes.DType
}

var dotCases = []dotCase{
	{"NT", []int{5, 7}, []int{9, 7}, []int{1}, nil, []int{1}, nil, dtypes.Float32},
	{"NN", []int{5, 7}, []int{7, 9}, []int{1}, nil, []int{0}, nil, dtypes.Float32},
	{"TN", []int{7, 5}, []int{7, 9}, []int{0}, nil, []int{0}, nil, dtypes.Float32},
	{"TT", []int{7, 5}, []int{9, 7}, []int{0}, nil, []int{1}, nil, dtypes.Float32},
	{"linear3d", []int{2, 3, 13}, []int{17, 13}, []int{2}, nil, []int{1}, nil, dtypes.Float32},
	{"linear-big", []int{3, 37, 130}, []int{101, 130}, []int{2}, nil, []int{1}, nil, dtypes.Float32},
	{"decode", []int{1, 1, 64}, []int{100, 64}, []int{2}, nil, []int{1}, nil, dtypes.Float32},
	{"decode8", []int{8, 1, 96}, []int{75, 96}, []int{2}, nil, []int{1}, nil, dtypes.Float32},
	{"qk", []int{2, 3, 5, 8}, []int{2, 3, 6, 8}, []int{3}, []int{0, 1}, []int{3}, []int{0, 1}, dtypes.Float32},
	{"pv", []int{2, 3, 5, 6}, []int{2, 3, 6, 8}, []int{3}, []int{0, 1}, []int{2}, []int{0, 1}, dtypes.Float32},
	{"batch-mid", []int{5, 2, 8}, []int{2, 8, 3}, []int{2}, []int{1}, []int{1}, []int{0}, dtypes.Float32},
	{"batch-reversed", []int{2, 3, 4, 5}, []int{3, 2, 5, 6}, []int{3}, []int{1, 0}, []int{2}, []int{0, 1}, dtypes.Float32},
	{"two-contracting", []int{3, 4, 5}, []int{5, 6, 4}, []int{1, 2}, nil, []int{2, 0}, nil, dtypes.Float32},
	{"negative-axes", []int{4, 6}, []int{3, 6}, []int{-1}, nil, []int{-1}, nil, dtypes.Float32},
	{"rope-einsum", []int{2, 3, 4, 2, 5}, []int{2, 2}, []int{3}, nil, []int{1}, nil, dtypes.Float32},
	{"grad-dW", []int{2, 3, 7}, []int{2, 3, 5}, []int{0, 1}, nil, []int{0, 1}, nil, dtypes.Float32},
	{"vector", []int{33}, []int{33}, []int{0}, nil, []int{0}, nil, dtypes.Float32},
	{"outer", []int{4}, []int{3}, nil, nil, nil, nil, dtypes.Float32},
	{"unit-dims", []int{1, 5, 1, 7}, []int{1, 7, 1}, []int{3}, []int{0}, []int{1}, []int{0}, dtypes.Float32},
	{"bf16-NT", []int{6, 40}, []int{33, 40}, []int{1}, nil, []int{1}, nil, dtypes.BFloat16},
	{"bf16-qk", []int{2, 5, 16}, []int{2, 7, 16}, []int{2}, []int{0}, []int{2}, []int{0}, dtypes.BFloat16},
	{"bf16-rope", []int{3, 2, 5}, []int{2, 2}, []int{1}, nil, []int{1}, nil, dtypes.BFloat16},
	{"f64-delegated", []int{5, 7}, []int{9, 7}, []int{1}, nil, []int{1}, nil, dtypes.Float64},
}

func dotFn(c dotCase, abs bool) func([]*graph.Node) []*graph.Node {
	return func(in []*graph.Node) []*graph.Node {
		l, r := in[0], in[1]
		if abs {
			l, r = graph.Abs(l), graph.Abs(r)
		}
		return []*graph.Node{graph.DotGeneral(l, c.lc, c.lb, r, c.rc, c.rb)}
	}
}

func contractSize(c dotCase) int {
	k := 1
	for _, a := range c.lc {
		if a < 0 {
			a += len(c.lhs)
		}
		k *= c.lhs[a]
	}
	return k
}

// TestDotGeneralMatchesPlain compares every layout with simplego's result:
// |fast − plain| ≤ 2·(K+2)·u·Σ|lhs·rhs| (both float32 sums), or half a BF16
// ulp of the magnitude for BF16 outputs.
func TestDotGeneralMatchesPlain(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 1))
	for _, c := range dotCases {
		t.Run(c.name, func(t *testing.T) {
			lhs, rhs := randTensor(r, c.dt, c.lhs...), randTensor(r, c.dt, c.rhs...)
			got, want, gs, ws := runFastPlain(t, fastOnce(), dotFn(c, false), dotFn(c, false), lhs, rhs)
			mag, _, err := run(t, plainOnce(), dotFn(c, true), lhs, rhs)
			if err != nil {
				t.Fatal(err)
			}
			if !gs[0].Equal(ws[0]) {
				t.Fatalf("shape %s, want %s", gs[0], ws[0])
			}
			k := contractSize(c)
			for i := range want[0] {
				tol := 2 * float64(k+2) * 6e-8 * mag[0][i]
				if c.dt == dtypes.BFloat16 {
					tol = mag[0][i] * (1.0 / 128)
				}
				if d := math.Abs(got[0][i] - want[0][i]); !(d <= tol+1e-30) {
					t.Fatalf("out[%d] = %v, plain %v (|diff| %g > %g)", i, got[0][i], want[0][i], d, tol)
				}
			}
		})
	}
}

// TestDotGeneralRandomShapes draws random ranks, axis roles and sizes
// (including 1s and odd sizes) and compares with simplego.
func TestDotGeneralRandomShapes(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 2))
	for it := range 60 {
		nb, nc := r.IntN(3), 1+r.IntN(2)
		nlx, nrx := r.IntN(3), r.IntN(3)
		dim := func() int { return 1 + r.IntN(9) + r.IntN(2)*r.IntN(40) }
		batch := make([]int, nb)
		contr := make([]int, nc)
		for i := range batch {
			batch[i] = dim()
		}
		for i := range contr {
			contr[i] = dim()
		}
		// Shuffle each operand's axes: role per axis.
		build := func(nx int) (dims, bAxes, cAxes []int) {
			roles := make([]int, 0, nb+nc+nx) // 0..nb-1 batch, nb.. contracting, -1 cross
			for i := range nb + nc {
				roles = append(roles, i)
			}
			for range nx {
				roles = append(roles, -1)
			}
			r.Shuffle(len(roles), func(i, j int) { roles[i], roles[j] = roles[j], roles[i] })
			bAxes, cAxes = make([]int, nb), make([]int, nc)
			for a, role := range roles {
				switch {
				case role < 0:
					dims = append(dims, dim())
				case role < nb:
					dims = append(dims, batch[role])
					bAxes[role] = a
				default:
					dims = append(dims, contr[role-nb])
					cAxes[role-nb] = a
				}
			}
			return
		}
		ld, lb, lc := build(nlx)
		rd, rb, rc := build(nrx)
		c := dotCase{fmt.Sprint("random", it), ld, rd, lc, lb, rc, rb, dtypes.Float32}
		lhs, rhs := randTensor(r, c.dt, ld...), randTensor(r, c.dt, rd...)
		got, _, err := run(t, fastOnce(), dotFn(c, false), lhs, rhs)
		if err != nil {
			t.Fatalf("%+v: %v", c, err)
		}
		want, _, err := run(t, plainOnce(), dotFn(c, false), lhs, rhs)
		if err != nil {
			t.Fatalf("%+v: plain: %v", c, err)
		}
		mag, _, _ := run(t, plainOnce(), dotFn(c, true), lhs, rhs)
		k := contractSize(c)
		for i := range want[0] {
			tol := 2 * float64(k+2) * 6e-8 * mag[0][i]
			if d := math.Abs(got[0][i] - want[0][i]); !(d <= tol+1e-30) {
				t.Fatalf("%+v: out[%d] = %v, plain %v", c, i, got[0][i], want[0][i])
			}
		}
	}
}

// TestDotGeneralZeroSized: simplego rejects zero-sized axes; here empty
// cross or batch axes give empty results and an empty contraction zeros.
func TestDotGeneralZeroSized(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 3))
	cases := []struct {
		c         dotCase
		wantShape []int
	}{
		{dotCase{"M0", []int{0, 5}, []int{3, 5}, []int{1}, nil, []int{1}, nil, dtypes.Float32}, []int{0, 3}},
		{dotCase{"N0", []int{4, 5}, []int{0, 5}, []int{1}, nil, []int{1}, nil, dtypes.Float32}, []int{4, 0}},
		{dotCase{"K0", []int{4, 0}, []int{3, 0}, []int{1}, nil, []int{1}, nil, dtypes.Float32}, []int{4, 3}},
		{dotCase{"batch0", []int{0, 2, 5}, []int{0, 3, 5}, []int{2}, []int{0}, []int{2}, []int{0}, dtypes.Float32}, []int{0, 2, 3}},
		{dotCase{"K0-bf16", []int{2, 0}, []int{3, 0}, []int{1}, nil, []int{1}, nil, dtypes.BFloat16}, []int{2, 3}},
	}
	for _, tc := range cases {
		t.Run(tc.c.name, func(t *testing.T) {
			lhs, rhs := randTensor(r, tc.c.dt, tc.c.lhs...), randTensor(r, tc.c.dt, tc.c.rhs...)
			got, gs, err := run(t, fastOnce(), dotFn(tc.c, false), lhs, rhs)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(gs[0].Dimensions, tc.wantShape) {
				t.Fatalf("shape %s, want %v", gs[0], tc.wantShape)
			}
			for i, v := range got[0] {
				if v != 0 {
					t.Fatalf("out[%d] = %v, want 0", i, v)
				}
			}
		})
	}
}

// TestMLPWithGradientsMatchesPlain runs a two-layer network, its softmax
// cross-entropy-like loss and the gradients of every weight on both
// backends: the segmentation must not change anything but rounding.
func TestMLPWithGradientsMatchesPlain(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 4))
	x, w1, w2 := randTensor(r, dtypes.Float32, 6, 5, 24), randTensor(r, dtypes.Float32, 40, 24), randTensor(r, dtypes.Float32, 11, 40)
	fn := func(in []*graph.Node) []*graph.Node {
		x, w1, w2 := in[0], in[1], in[2]
		h := graph.DotGeneral(x, []int{2}, nil, w1, []int{1}, nil)
		h = graph.Mul(h, graph.Logistic(h))
		h = graph.Div(h, graph.Sqrt(graph.AddScalar(graph.ReduceAndKeep(graph.Square(h), graph.ReduceMean, -1), 1e-5)))
		logits := graph.Einsum("bth,vh->btv", h, w2)
		probs := graph.Softmax(logits, -1)
		att := graph.Einsum("btv,bsv->bts", probs, probs)
		loss := graph.ReduceAllSum(graph.Mul(graph.Log(graph.AddScalar(probs, 1e-6)), graph.OnesLike(probs)))
		loss = graph.Add(loss, graph.ReduceAllSum(att))
		grads := graph.Gradient(loss, w1, w2, x)
		return append([]*graph.Node{loss, logits}, grads...)
	}
	got, want, _, _ := runFastPlain(t, fastOnce(), fn, fn, x, w1, w2)
	for o := range want {
		assertNearScale(t, fmt.Sprintf("output %d", o), got[o], want[o])
	}
}

// assertNearScale fails unless every got[i] is within float32 rounding of
// sums, 1e-4 of want's largest magnitude (+1e-6), of want[i].
func assertNearScale(t *testing.T, name string, got, want []float64) {
	t.Helper()
	scale := 0.0
	for _, v := range want {
		scale = max(scale, math.Abs(v))
	}
	for i := range want {
		if d := math.Abs(got[i] - want[i]); d > 1e-4*scale+1e-6 {
			t.Fatalf("%s [%d]: %v, simplego %v", name, i, got[i], want[i])
		}
	}
}

// refPad pads a row-major array element by element (XLA semantics).
func refPad(x []float64, dims []int, fill float64, cfg []backends.PadAxis) ([]float64, []int) {
	rank := len(dims)
	out := make([]int, rank)
	for a := range rank {
		out[a] = cfg[a].Start + cfg[a].End + dims[a] + max(dims[a]-1, 0)*cfg[a].Interior
	}
	n := 1
	for _, d := range out {
		n *= d
	}
	res := make([]float64, n)
	for i := range res {
		res[i] = fill
	}
	idx := make([]int, rank)
	for i, v := range x {
		rem := i
		for a := rank - 1; a >= 0; a-- {
			idx[a] = rem % dims[a]
			rem /= dims[a]
		}
		o, ok := 0, true
		for a := range rank {
			p := cfg[a].Start + idx[a]*(cfg[a].Interior+1)
			if p < 0 || p >= out[a] {
				ok = false
				break
			}
			o = o*out[a] + p
		}
		if ok {
			res[o] = v
		}
	}
	return res, out
}

func TestPadMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 5))
	cases := []struct {
		dims []int
		cfg  []backends.PadAxis
	}{
		{[]int{5}, []backends.PadAxis{{Start: 2, End: 3}}},
		{[]int{5}, []backends.PadAxis{{Start: -2, End: 1, Interior: 2}}},
		{[]int{3, 4}, []backends.PadAxis{{Start: 1, End: 0, Interior: 1}, {Start: 0, End: 2, Interior: 0}}},
		{[]int{3, 4}, []backends.PadAxis{{Start: -1, End: -1}, {Start: -3, End: 2, Interior: 1}}},
		{[]int{2, 3, 4}, []backends.PadAxis{{Start: 1}, {End: 1, Interior: 3}}}, // last axis unconfigured
		{[]int{4, 1}, []backends.PadAxis{{Start: 0, End: 0, Interior: 5}, {Start: 2, End: 2, Interior: 7}}},
		{[]int{0, 3}, []backends.PadAxis{{Start: 2, End: 1}, {Start: 1}}},
		{[]int{3}, []backends.PadAxis{{Start: -3, End: 0}}},
	}
	for _, tc := range cases {
		x := randTensor(r, dtypes.Float32, tc.dims...)
		cfg := tc.cfg
		got, gs, err := run(t, fastOnce(), func(in []*graph.Node) []*graph.Node {
			return []*graph.Node{graph.Pad(in[0], graph.Const(in[0].Graph(), float32(-7)), cfg...)}
		}, x)
		if err != nil {
			t.Fatalf("%v %+v: %v", tc.dims, tc.cfg, err)
		}
		full := make([]backends.PadAxis, len(tc.dims))
		copy(full, tc.cfg)
		want, wdims := refPad(flat64(x), tc.dims, -7, full)
		if !slices.Equal(gs[0].Dimensions, wdims) || !slices.Equal(got[0], want) {
			t.Fatalf("%v %+v:\n got %v %v\nwant %v %v", tc.dims, tc.cfg, gs[0], got[0], wdims, want)
		}
	}
	// Other dtypes: int32 and bool go through the same byte copies.
	got, _, err := run(t, fastOnce(), func(in []*graph.Node) []*graph.Node {
		g := in[0].Graph()
		x := graph.Const(g, []int32{1, 2, 3})
		b := graph.Const(g, []bool{true, true})
		return []*graph.Node{
			graph.Pad(x, graph.Const(g, int32(9)), backends.PadAxis{Start: 1, End: 1, Interior: 1}),
			graph.Pad(b, graph.Const(g, false), backends.PadAxis{Start: 0, End: 2}),
		}
	}, randTensor(r, dtypes.Float32, 1))
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got[0], []float64{9, 1, 9, 2, 9, 3, 9}) || !slices.Equal(got[1], []float64{1, 1, 0, 0}) {
		t.Fatalf("int32/bool pad: %v %v", got[0], got[1])
	}
}

// TestSliceGradientUsesPad: the gradient of Slice is a Pad, which simplego
// lacks; d/dx Σ w ⊙ x[1:4:2, 2:] is w placed at those positions.
func TestSliceGradientUsesPad(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 6))
	x := randTensor(r, dtypes.Float32, 5, 6)
	w := randTensor(r, dtypes.Float32, 2, 4)
	got, _, err := run(t, fastOnce(), func(in []*graph.Node) []*graph.Node {
		s := graph.Slice(in[0], graph.AxisRange(1, 4).Stride(2), graph.AxisRange(2))
		loss := graph.ReduceAllSum(graph.Mul(s, in[1]))
		return graph.Gradient(loss, in[0])
	}, x, w)
	if err != nil {
		t.Fatal(err)
	}
	wf := flat64(w)
	want := make([]float64, 30)
	for i, row := range []int{1, 3} {
		for j := range 4 {
			want[row*6+2+j] = wf[i*4+j]
		}
	}
	if !slices.Equal(got[0], want) {
		t.Fatalf("gradient\n got %v\nwant %v", got[0], want)
	}
	if _, _, err := run(t, plainOnce(), func(in []*graph.Node) []*graph.Node {
		s := graph.Slice(in[0], graph.AxisRange(1, 4).Stride(2), graph.AxisRange(2))
		return graph.Gradient(graph.ReduceAllSum(graph.Mul(s, in[1])), in[0])
	}, x, w); err == nil {
		t.Log("note: the plain backend now supports Pad too")
	}
}

func TestDynamicSliceAndUpdate(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	x := randTensor(r, dtypes.Float32, 4, 5, 3)
	xf := flat64(x)
	at := func(i, j, k int) float64 { return xf[(i*5+j)*3+k] }
	cases := []struct {
		start []int32
		size  []int
		clamp []int // effective start after clamping
	}{
		{[]int32{1, 2, 0}, []int{2, 3, 3}, []int{1, 2, 0}},
		{[]int32{3, 4, 2}, []int{2, 2, 2}, []int{2, 3, 1}},       // clamped high
		{[]int32{-5, 0, 1}, []int{1, 5, 1}, []int{0, 0, 1}},      // clamped low
		{[]int32{0, 0, 0}, []int{0, 2, 3}, []int{0, 0, 0}},       // empty slice
		{[]int32{100, 100, 100}, []int{4, 5, 3}, []int{0, 0, 0}}, // whole
	}
	for _, tc := range cases {
		size := tc.size
		got, gs, err := run(t, fastOnce(), func(in []*graph.Node) []*graph.Node {
			g := in[0].Graph()
			idx := []*graph.Node{graph.Const(g, tc.start[0]), graph.Const(g, int64(tc.start[1])), graph.Const(g, tc.start[2])}
			s := graph.DynamicSlice(in[0], idx, size)
			upd := graph.AddScalar(graph.ZerosLike(s), 100)
			u := graph.DynamicUpdateSlice(in[0], upd, idx)
			return []*graph.Node{s, u}
		}, x)
		if err != nil {
			t.Fatalf("%v: %v", tc, err)
		}
		if !slices.Equal(gs[0].Dimensions, size) {
			t.Fatalf("%v: slice shape %s", tc, gs[0])
		}
		c := tc.clamp
		n := 0
		for i := range size[0] {
			for j := range size[1] {
				for k := range size[2] {
					if got[0][n] != at(c[0]+i, c[1]+j, c[2]+k) {
						t.Fatalf("%v: slice[%d,%d,%d] = %v, want %v", tc, i, j, k, got[0][n], at(c[0]+i, c[1]+j, c[2]+k))
					}
					n++
				}
			}
		}
		for i := range 4 {
			for j := range 5 {
				for k := range 3 {
					want := at(i, j, k)
					if i >= c[0] && i < c[0]+size[0] && j >= c[1] && j < c[1]+size[1] && k >= c[2] && k < c[2]+size[2] {
						want = 100
					}
					if g := got[1][(i*5+j)*3+k]; g != want {
						t.Fatalf("%v: update[%d,%d,%d] = %v, want %v", tc, i, j, k, g, want)
					}
				}
			}
		}
	}
}

// TestDynamicUpdateSliceInPlace runs a KV-cache-like loop: the donated
// cache is updated in place step after step; the values must be those of a
// fresh computation, and the input tensor the caller keeps must not change.
func TestDynamicUpdateSliceInPlace(t *testing.T) {
	be := fastOnce()
	exec, err := graph.NewExec(be, func(cache, row, pos *graph.Node) *graph.Node {
		zero := graph.Const(cache.Graph(), int32(0))
		return graph.DynamicUpdateSlice(cache, graph.ExpandAxes(row, 0), []*graph.Node{pos, zero})
	})
	if err != nil {
		t.Fatal(err)
	}
	cache := tensors.FromFlatDataAndDimensions(make([]float32, 12), 4, 3)
	kept := cache
	for step := range 4 {
		row := tensors.FromFlatDataAndDimensions([]float32{float32(step), float32(step) + .5, -1}, 3)
		donated, err := graph.DonateTensorBuffer(cache, be, 0)
		if err != nil {
			t.Fatal(err)
		}
		out, err := exec.Exec(donated, row, int32(step))
		if err != nil {
			t.Fatal(err)
		}
		cache = out[0]
		if step == 0 {
			kept = nil // donated: no longer valid
		}
	}
	_ = kept
	want := []float64{0, .5, -1, 1, 1.5, -1, 2, 2.5, -1, 3, 3.5, -1}
	if got := flat64(cache); !slices.Equal(got, want) {
		t.Fatalf("cache %v, want %v", got, want)
	}
	// Without donation the input is left untouched.
	in := tensors.FromFlatDataAndDimensions(make([]float32, 12), 4, 3)
	out, err := exec.Exec(in, tensors.FromFlatDataAndDimensions([]float32{1, 2, 3}, 3), int32(1))
	if err != nil {
		t.Fatal(err)
	}
	if got := flat64(in); slices.ContainsFunc(got, func(v float64) bool { return v != 0 }) {
		t.Fatalf("input changed: %v", got)
	}
	if got := flat64(out[0]); got[3] != 1 || got[5] != 3 {
		t.Fatalf("output %v", got)
	}
}

// TestDynamicUpdateSliceKVCacheInPlace builds a decode step's cache write
// as the model does (one zero start index shared by three axes, so the
// step lists that slot three times) and checks that the donated cache is
// updated in its own buffer, not copied, with the right values.
func TestDynamicUpdateSliceKVCacheInPlace(t *testing.T) {
	be := fastOnce()
	cs := shapes.Make(dtypes.Float32, 1, 2, 5, 3) // [B, k, S, h]
	us := shapes.Make(dtypes.Float32, 1, 2, 1, 3)
	b := be.Builder("kv")
	op := mustOp(t)
	cache := op(b.Parameter("cache", cs, nil))
	upd := op(b.Parameter("upd", us, nil))
	pos := op(b.Parameter("pos", shapes.Make(dtypes.Int32), nil))
	zero := op(b.Constant([]int32{0}))
	out := op(b.DynamicUpdateSlice(cache, upd, []backends.Op{zero, zero, pos, zero}))
	exec, err := b.Compile([]backends.Op{out}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer exec.Finalize()
	cacheData := make([]float32, cs.Size())
	cb, err := be.BufferFromFlatData(0, cacheData, cs)
	if err != nil {
		t.Fatal(err)
	}
	for step := range 3 {
		before, _ := be.BufferData(cb)
		ub, err := be.BufferFromFlatData(0, []float32{1, 2, 3, 4, 5, 6}, us)
		if err != nil {
			t.Fatal(err)
		}
		pb, err := be.BufferFromFlatData(0, []int32{int32(step + 1)}, shapes.Make(dtypes.Int32))
		if err != nil {
			t.Fatal(err)
		}
		res, err := exec.Execute([]backends.Buffer{cb, ub, pb}, []bool{true, true, true}, 0)
		if err != nil {
			t.Fatal(err)
		}
		after, _ := be.BufferData(res[0])
		if &after.([]float32)[0] != &before.([]float32)[0] {
			t.Fatalf("step %d: the cache was copied into a new buffer, not updated in place", step)
		}
		cb = res[0]
	}
	got, _ := be.BufferData(cb)
	// Slots 1..3 of each of the 2 heads hold the update's row of that head.
	for k := range 2 {
		for s := range 5 {
			for h := range 3 {
				want := float32(0)
				if s >= 1 && s <= 3 {
					want = float32(k*3 + h + 1)
				}
				if v := got.([]float32)[(k*5+s)*3+h]; v != want {
					t.Fatalf("cache[0, %d, %d, %d] = %g, want %g", k, s, h, v, want)
				}
			}
		}
	}
}

// TestExecutableEdgeCases: outputs that are inputs, repeated outputs,
// constants, unused parameters and multi-output ops, run repeatedly so that
// recycled buffers would show.
func TestExecutableEdgeCases(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	x, y := randTensor(r, dtypes.Float32, 3, 4), randTensor(r, dtypes.Float32, 4, 2)
	fn := func(in []*graph.Node) []*graph.Node {
		x, y := in[0], in[1]
		g := x.Graph()
		p := graph.Dot(x, y)                          // custom
		q := graph.Add(p, graph.Const(g, float32(1))) // delegated after custom
		state := graph.Const(g, []uint64{1, 2, 3})
		_, bits := graph.RandomUniform(state, shapes.Make(dtypes.Float32, 2))
		c := graph.Const(g, []float32{4, 5})
		same := graph.ConvertDType(x, dtypes.Float32) // simplego returns x itself
		return []*graph.Node{x, p, q, q, c, bits, same, graph.Dot(p, graph.Const(g, []float32{1, 1}))}
	}
	want, _, err := run(t, plainOnce(), fn, x, y)
	if err != nil {
		t.Fatal(err)
	}
	for rep := range 3 {
		got, _, err := run(t, fastOnce(), fn, x, y)
		if err != nil {
			t.Fatal(err)
		}
		for o := range want {
			for i := range want[o] {
				if math.Abs(got[o][i]-want[o][i]) > 1e-5*(1+math.Abs(want[o][i])) {
					t.Fatalf("rep %d output %d [%d]: %v, want %v", rep, o, i, got[o][i], want[o][i])
				}
			}
		}
	}
}

func TestNewConfig(t *testing.T) {
	for _, tc := range []struct {
		config, wantErr string
	}{
		{"", ""},
		{"workers=1", ""},
		{"workers=2,ops_sequential", ""},
		{"nofast", ""},
		{"workers=x", "workers"},
		{"bogus", "bogus"},
	} {
		b, err := New(tc.config)
		if tc.wantErr == "" {
			if err != nil {
				t.Fatalf("%q: %v", tc.config, err)
			}
			if b.String() != BackendName || !strings.Contains(b.Name(), BackendName) {
				t.Fatalf("%q: name %q", tc.config, b.Name())
			}
			caps := b.Capabilities()
			if !caps.Operations[backends.OpTypePad] || !caps.Operations[backends.OpTypeDynamicSlice] {
				t.Fatalf("capabilities lack Pad/DynamicSlice")
			}
			b.Finalize()
			continue
		}
		if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Fatalf("%q: error %v, want %q", tc.config, err, tc.wantErr)
		}
	}
	// Registered under its name.
	b, err := backends.NewWithConfig(BackendName + ":workers=1")
	if err != nil {
		t.Fatal(err)
	}
	b.Finalize()
}

// TestPlainModeDelegatesEverything: with "nofast" every op replays on
// simplego; DotGeneral results then equal simplego's bit for bit.
func TestPlainModeDelegatesEverything(t *testing.T) {
	b, err := New("nofast")
	if err != nil {
		t.Fatal(err)
	}
	defer b.Finalize()
	r := rand.New(rand.NewPCG(7, 9))
	c := dotCases[5]
	lhs, rhs := randTensor(r, c.dt, c.lhs...), randTensor(r, c.dt, c.rhs...)
	got, want, _, _ := runFastPlain(t, b, dotFn(c, false), dotFn(c, false), lhs, rhs)
	if !slices.Equal(got[0], want[0]) {
		t.Fatal("nofast DotGeneral differs from simplego")
	}
}

// TestPlanGroupsIndependentProducts builds a layer directly on the Builder:
// n = tanh(x); q, k, v = n·Wqᵀ, n·Wkᵀ, n·Wvᵀ; out = |max(q, k)·vᵀ| (tanh,
// max and abs run on simplego). The three projections share one stage, so
// the plan is: segment, 3 products, segment, product, segment.
func TestPlanGroupsIndependentProducts(t *testing.T) {
	bb := fastOnce().Builder("plan")
	f32 := func(dims ...int) shapes.Shape { return shapes.Make(dtypes.Float32, dims...) }
	must := func(op backends.Op, err error) backends.Op {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return op
	}
	x := must(bb.Parameter("x", f32(4, 8), nil))
	var ws []backends.Op
	for _, name := range []string{"wq", "wk", "wv"} {
		ws = append(ws, must(bb.Parameter(name, f32(8, 8), nil)))
	}
	n := must(bb.Tanh(x))
	var qkv []backends.Op
	for _, w := range ws {
		qkv = append(qkv, must(bb.DotGeneral(n, []int{1}, nil, w, []int{1}, nil)))
	}
	s := must(bb.Max(qkv[0], qkv[1]))
	out := must(bb.DotGeneral(s, []int{1}, nil, qkv[2], []int{1}, nil))
	out = must(bb.Abs(out))
	exe, err := bb.Compile([]backends.Op{out}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e := exe.(*Executable)
	var kinds []string
	for _, st := range e.steps {
		if st.seg != nil {
			kinds = append(kinds, "seg")
		} else {
			kinds = append(kinds, st.name)
		}
	}
	want := []string{"seg", "DotGeneral", "DotGeneral", "DotGeneral", "seg", "DotGeneral", "seg"}
	if !slices.Equal(kinds, want) {
		t.Fatalf("plan %v, want %v", kinds, want)
	}
	if names, _ := e.Inputs(); !slices.Equal(names, []string{"x", "wq", "wk", "wv"}) {
		t.Fatalf("input names %v", names)
	}
	e.Finalize()
	if _, err := e.Execute(nil, nil, 0); err == nil {
		t.Fatal("finalized executable ran")
	}
}

// TestReduceSumOfProductFused: sums over broadcasting products (GoMLX's
// DotGeneral gradient) become DotGenerals; the results equal simplego's
// direct evaluation, in every axis arrangement.
func TestReduceSumOfProductFused(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 10))
	cases := []struct {
		a, b []int
		axes []int
	}{
		{[]int{3, 1, 50, 7}, []int{3, 40, 50, 1}, []int{2}},       // batch, rhs cross, contract, lhs cross
		{[]int{8, 30, 1, 20}, []int{8, 30, 25, 1}, []int{0, 1}},   // weight gradient: contract B, T
		{[]int{8, 30, 25, 1}, []int{1, 1, 25, 20}, []int{2}},      // input gradient
		{[]int{1, 20, 30}, []int{40, 20, 1}, []int{1}},            // cross order reversed (needs a transpose)
		{[]int{2, 60, 1, 1, 9}, []int{2, 1, 70, 1, 9}, []int{-1}}, // trivial axis kept, negative axis
		{[]int{6, 1, 40}, []int{1, 50, 1}, []int{0}},              // a sum over one operand: not fused
	}
	for _, tc := range cases {
		a, b := randTensor(r, dtypes.Float32, tc.a...), randTensor(r, dtypes.Float32, tc.b...)
		axes := tc.axes
		fn := func(in []*graph.Node) []*graph.Node {
			return []*graph.Node{graph.ReduceSum(graph.Mul(in[0], in[1]), axes...)}
		}
		got, gs, err := run(t, fastOnce(), fn, a, b)
		if err != nil {
			t.Fatalf("%v: %v", tc, err)
		}
		want, ws, err := run(t, plainOnce(), fn, a, b)
		if err != nil {
			t.Fatalf("%v: plain: %v", tc, err)
		}
		if !gs[0].Equal(ws[0]) {
			t.Fatalf("%v: shape %s, want %s", tc, gs[0], ws[0])
		}
		for i := range want[0] {
			if d := math.Abs(got[0][i] - want[0][i]); d > 1e-4*(1+math.Abs(want[0][i])) {
				t.Fatalf("%v: [%d] = %v, want %v", tc, i, got[0][i], want[0][i])
			}
		}
	}
}

// TestElementwiseMatchesPlain compares the float32 elementwise ops,
// reductions, transposes and broadcasts with simplego over broadcasting
// patterns, axis sets and dtypes (non-float32 ones are delegated).
func TestElementwiseMatchesPlain(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 12))
	type tc struct {
		name   string
		shapes [][]int
		fn     func(in []*graph.Node) *graph.Node
	}
	bin := func(f func(a, b *graph.Node) *graph.Node) func(in []*graph.Node) *graph.Node {
		return func(in []*graph.Node) *graph.Node { return f(in[0], in[1]) }
	}
	cases := []tc{
		{"add-same", [][]int{{3, 5, 7}, {3, 5, 7}}, bin(graph.Add)},
		{"sub-row", [][]int{{4, 6, 300}, {4, 6, 1}}, bin(graph.Sub)},
		{"sub-row-rev", [][]int{{4, 6, 1}, {4, 6, 300}}, bin(graph.Sub)},
		{"div-row", [][]int{{64, 1000}, {64, 1}}, bin(graph.Div)},
		{"div-col-rev", [][]int{{1, 1000}, {64, 1000}}, bin(graph.Div)},
		{"mul-weight", [][]int{{2, 3, 33}, {1, 1, 33}}, bin(graph.Mul)},
		{"mul-outer", [][]int{{5, 1, 7}, {1, 6, 1}}, bin(graph.Mul)},
		{"mul-scalar", [][]int{{5, 9}, {}}, bin(graph.Mul)},
		{"mul-scalar-rev", [][]int{{}, {5, 9}}, bin(graph.Mul)},          // sv: the scalar on the left
		{"mul-row-rev", [][]int{{4, 6, 1}, {4, 6, 300}}, bin(graph.Mul)}, // sv per row
		{"add-row-rev", [][]int{{4, 6, 1}, {4, 6, 300}}, bin(graph.Add)},
		{"add-big", [][]int{{256, 1024}, {256, 1024}}, bin(graph.Add)},
		{"sub-mid", [][]int{{3, 1, 4, 5}, {3, 6, 4, 5}}, bin(graph.Sub)},
		{"exp", [][]int{{1000, 70}}, func(in []*graph.Node) *graph.Node { return graph.Exp(in[0]) }},
		{"logistic", [][]int{{33, 17}}, func(in []*graph.Node) *graph.Node { return graph.Logistic(graph.MulScalar(in[0], 30)) }},
		{"neg-sqrt-rsqrt", [][]int{{9, 9}}, func(in []*graph.Node) *graph.Node {
			a := graph.Abs(in[0])
			return graph.Add(graph.Neg(graph.Sqrt(a)), graph.Rsqrt(graph.AddScalar(a, 1)))
		}},
		{"reduce-last", [][]int{{6, 5, 301}}, func(in []*graph.Node) *graph.Node { return graph.ReduceSum(in[0], -1) }},
		{"reduce-first", [][]int{{300, 5, 6}}, func(in []*graph.Node) *graph.Node { return graph.ReduceSum(in[0], 0) }},
		{"reduce-mid2", [][]int{{3, 40, 50, 6}}, func(in []*graph.Node) *graph.Node { return graph.ReduceSum(in[0], 1, 2) }},
		{"reduce-gapped", [][]int{{3, 4, 5, 6}}, func(in []*graph.Node) *graph.Node { return graph.ReduceSum(in[0], 0, 2) }},
		{"reduce-leading", [][]int{{600, 7, 130}}, func(in []*graph.Node) *graph.Node { return graph.ReduceSum(in[0], 0) }},     // column blocks
		{"reduce-leading-odd", [][]int{{3, 40, 1001}}, func(in []*graph.Node) *graph.Node { return graph.ReduceSum(in[0], 1) }}, // column blocks, 3 outer
		{"reduce-groups", [][]int{{16, 2, 4, 64}}, func(in []*graph.Node) *graph.Node { return graph.ReduceSum(in[0], 2) }},     // GQA's K/V gradient
		{"max-last", [][]int{{7, 1025}}, func(in []*graph.Node) *graph.Node { return graph.ReduceMax(in[0], 1) }},
		{"max-all", [][]int{{7, 13}}, func(in []*graph.Node) *graph.Node { return graph.ReduceAllMax(in[0]) }},
		{"softmax", [][]int{{4, 3, 100}}, func(in []*graph.Node) *graph.Node { return graph.Softmax(in[0], -1) }},
		{"transpose", [][]int{{3, 4, 5, 6}}, func(in []*graph.Node) *graph.Node { return graph.TransposeAllAxes(in[0], 2, 0, 3, 1) }},
		{"transpose-big", [][]int{{64, 300, 8}}, func(in []*graph.Node) *graph.Node { return graph.TransposeAllAxes(in[0], 1, 2, 0) }},
		{"transpose-int", [][]int{{3, 5}}, func(in []*graph.Node) *graph.Node {
			return graph.ConvertDType(graph.TransposeAllAxes(graph.ConvertDType(in[0], dtypes.Int64), 1, 0), dtypes.Float32)
		}},
		{"where", [][]int{{40, 30}, {40, 30}}, func(in []*graph.Node) *graph.Node {
			return graph.Where(graph.GreaterThan(in[0], in[1]), in[0], graph.Exp(in[1]))
		}},
		{"where-scalars", [][]int{{40, 30}}, func(in []*graph.Node) *graph.Node {
			g := in[0].Graph()
			return graph.Where(graph.GreaterThan(in[0], graph.ZerosLike(in[0])), graph.Const(g, float32(1)), graph.Const(g, float32(-2)))
		}},
		{"where-scalar-cond", [][]int{{4, 3}, {4, 3}}, func(in []*graph.Node) *graph.Node {
			return graph.Where(graph.Const(in[0].Graph(), true), graph.Neg(in[0]), in[1])
		}},
		{"reshape-chain", [][]int{{6, 4}}, func(in []*graph.Node) *graph.Node {
			x := graph.Reshape(graph.Exp(in[0]), 2, 3, 4)
			return graph.Reshape(graph.Neg(graph.Transpose(x, 0, 2)), 24)
		}},
		{"broadcast", [][]int{{3, 1, 5}}, func(in []*graph.Node) *graph.Node {
			return graph.BroadcastToDims(graph.ExpandAxes(in[0], 0), 2, 3, 4, 5)
		}},
		{"broadcast-big", [][]int{{3, 1, 5000}}, func(in []*graph.Node) *graph.Node { // split over the workers
			return graph.BroadcastToDims(graph.ExpandAxes(in[0], 0), 5, 3, 7, 5000)
		}},
		{"broadcast-scalar-big", [][]int{{}}, func(in []*graph.Node) *graph.Node { return graph.BroadcastToDims(in[0], 300, 512) }},
		{"broadcast-bool", [][]int{{3, 1}}, func(in []*graph.Node) *graph.Node {
			m := graph.BroadcastToDims(graph.GreaterThan(in[0], graph.ZerosLike(in[0])), 3, 7)
			return graph.ConvertDType(m, dtypes.Float32)
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var args []*tensors.Tensor
			for _, s := range c.shapes {
				args = append(args, randTensor(r, dtypes.Float32, s...))
			}
			fn := func(in []*graph.Node) []*graph.Node { return []*graph.Node{c.fn(in)} }
			got, want, gs, ws := runFastPlain(t, fastOnce(), fn, fn, args...)
			if !gs[0].Equal(ws[0]) {
				t.Fatalf("shape %s, want %s", gs[0], ws[0])
			}
			for i := range want[0] {
				w := want[0][i]
				if d := math.Abs(got[0][i] - w); d > 2e-6*math.Abs(w)+1e-5*math.Sqrt(float64(len(want[0]))) && !(math.IsNaN(w) && math.IsNaN(got[0][i])) {
					t.Fatalf("[%d] = %v, want %v", i, got[0][i], w)
				}
			}
		})
	}
}

// FuzzNewConfig: any configuration string (from $GOMLX_BACKEND) yields a
// backend or an error, never a panic.
func FuzzNewConfig(f *testing.F) {
	for _, s := range []string{"", "workers=2", "workers=-1", "nofast,ops_sequential", "workers=", "=", ",,", "parallelism=x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, config string) {
		b, err := New(config)
		if err == nil {
			b.Finalize()
		}
	})
}

// TestBinaryKernelsAliasing runs every binary kernel with the destination
// distinct from, equal to the first and equal to the second operand
// (vek's SIMD kernels reject overlapping slices; the kernels must route an
// aliased destination to an in-place form), against plain Go arithmetic.
func TestBinaryKernelsAliasing(t *testing.T) {
	ref := map[backends.OpType]func(a, b float32) float32{
		backends.OpTypeAdd: func(a, b float32) float32 { return a + b },
		backends.OpTypeSub: func(a, b float32) float32 { return a - b },
		backends.OpTypeMul: func(a, b float32) float32 { return a * b },
		backends.OpTypeDiv: func(a, b float32) float32 { return a / b },
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for op, f := range ref {
		k := binaryKernels[op]
		for _, n := range []int{0, 1, 7, 8, 33, 1000} {
			a, b := make([]float32, n), make([]float32, n)
			for i := range n {
				a[i], b[i] = rng.Float32()*4-2, rng.Float32()*4+0.5
			}
			const s = float32(1.75)
			for _, alias := range []string{"none", "a", "b"} {
				check := func(kind string, got []float32, want func(i int) float32) {
					t.Helper()
					for i := range n {
						if w := want(i); got[i] != w {
							t.Fatalf("%v %s n=%d dst=%s: [%d] = %v, want %v", op, kind, n, alias, i, got[i], w)
						}
					}
				}
				ac, bc := slices.Clone(a), slices.Clone(b)
				d := make([]float32, n)
				switch alias {
				case "a":
					d = ac
				case "b":
					d = bc
				}
				k.vv(d, ac, bc)
				check("vv", d, func(i int) float32 { return f(a[i], b[i]) })
				if alias == "b" {
					continue // vs and sv have one slice operand
				}
				ac = slices.Clone(a)
				if alias == "a" {
					d = ac
				}
				k.vs(d, ac, s)
				check("vs", d, func(i int) float32 { return f(a[i], s) })
				ac = slices.Clone(a)
				if alias == "a" {
					d = ac
				}
				k.sv(d, s, ac)
				check("sv", d, func(i int) float32 { return f(s, a[i]) })
			}
		}
	}
}

// runFastPlain runs fast on b and plain (the same graph, or its unfused
// form) on simplego with the same arguments, failing t on either's error,
// and returns both outputs and their shapes.
func runFastPlain(t *testing.T, b backends.Backend, fast, plain func([]*graph.Node) []*graph.Node, args ...*tensors.Tensor) (got, want [][]float64, gs, ws []shapes.Shape) {
	t.Helper()
	got, gs, err := run(t, b, fast, args...)
	if err != nil {
		t.Fatal(err)
	}
	want, ws, err = run(t, plainOnce(), plain, args...)
	if err != nil {
		t.Fatal(err)
	}
	return got, want, gs, ws
}
