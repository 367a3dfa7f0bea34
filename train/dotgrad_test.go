package train

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
	"github.com/gomlx/gomlx/pkg/core/tensors"
)

// TestFastDotGeneralVJP: the matrix-product VJP equals GoMLX's own on
// linear layers, attention-style batched contractions, several contracting
// axes paired out of order, outer products and batch axes in the middle.
func TestFastDotGeneralVJP(t *testing.T) {
	cases := []struct {
		name           string
		lhs, rhs       []int
		lc, lb, rc, rb []int
	}{
		{"linear [B,T,in]·[out,in]", []int{2, 3, 4}, []int{5, 4}, []int{2}, nil, []int{1}, nil},
		{"attention btkrh,bksh->bkrts", []int{2, 3, 2, 2, 4}, []int{2, 2, 5, 4}, []int{4}, []int{0, 2}, []int{3}, []int{0, 1}},
		{"two contracting axes swapped", []int{3, 4, 5}, []int{5, 4, 6}, []int{2, 1}, nil, []int{0, 1}, nil},
		{"outer product", []int{3}, []int{4}, nil, nil, nil, nil},
		{"batch axis in the middle", []int{4, 2, 3}, []int{3, 2, 5}, []int{2}, []int{1}, []int{0}, []int{1}},
		{"contract the first axis", []int{6, 3}, []int{6, 2}, []int{0}, nil, []int{0}, nil},
	}
	b := testBackend(t)
	rng := rand.New(rand.NewPCG(1, 2))
	random := func(dims []int) *tensors.Tensor {
		n := 1
		for _, d := range dims {
			n *= d
		}
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(rng.NormFloat64())
		}
		return tensors.FromFlatDataAndDimensions(v, dims...)
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			exec, err := graph.NewExec(b, func(lhs, rhs, vSeed *graph.Node) []*graph.Node {
				y := graph.DotGeneral(lhs, c.lc, c.lb, rhs, c.rc, c.rb)
				v := graph.Reshape(vSeed, y.Shape().Dimensions...)
				want := gomlxDotVJP(y, []*graph.Node{v}, y.Shape())
				got, ok := fastDotGeneralVJP(y, v)
				if !ok {
					panic("axes not readable")
				}
				return []*graph.Node{got[0], want[0], got[1], want[1]}
			})
			if err != nil {
				t.Fatal(err)
			}
			out := shapeOfDot(c.lhs, c.rhs, c.lc, c.lb, c.rc, c.rb)
			res, err := exec.Exec(random(c.lhs), random(c.rhs), random([]int{out}))
			if err != nil {
				t.Fatal(err)
			}
			for k, name := range []string{"lhs", "rhs"} {
				got, want := res[2*k], res[2*k+1]
				if !got.Shape().Equal(want.Shape()) {
					t.Fatalf("%s adjoint shape %s, want %s", name, got.Shape(), want.Shape())
				}
				g, w := tensors.MustCopyFlatData[float32](got), tensors.MustCopyFlatData[float32](want)
				for i := range w {
					if math.Abs(float64(g[i]-w[i])) > 1e-5*(1+math.Abs(float64(w[i]))) {
						t.Fatalf("%s adjoint[%d] = %g, GoMLX's %g", name, i, g[i], w[i])
					}
				}
			}
		})
	}
}

// shapeOfDot is the element count of DotGeneral's output.
func shapeOfDot(lhs, rhs, lc, lb, rc, rb []int) int {
	n := 1
	for _, a := range lb {
		n *= lhs[a]
	}
	for _, a := range crossAxes(len(lhs), lc, lb) {
		n *= lhs[a]
	}
	for _, a := range crossAxes(len(rhs), rc, rb) {
		n *= rhs[a]
	}
	return n
}

// TestFastDotGradientInTraining: with the fast VJP installed, a linear
// layer's training gradient no longer materialises [B, T, out, in].
func TestFastDotGradientInTraining(t *testing.T) {
	EnableFastDotGradient()
	b := testBackend(t)
	var biggest int
	exec, err := graph.NewExec(b, func(x, w *graph.Node) *graph.Node {
		y := graph.DotGeneral(x, []int{2}, nil, w, []int{1}, nil) // [B, T, out]
		loss := graph.ReduceAllSum(graph.Square(y))
		grads := graph.Gradient(loss, x, w)
		for _, n := range x.Graph().Nodes() {
			biggest = max(biggest, n.Shape().Size())
		}
		return graph.Add(graph.ReduceAllSum(grads[0]), graph.ReduceAllSum(grads[1]))
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := exec.Exec(tensors.FromShape(shapes.Make(dtypes.Float32, 2, 8, 16)), tensors.FromShape(shapes.Make(dtypes.Float32, 32, 16))); err != nil {
		t.Fatal(err)
	}
	if biggest >= 2*8*32*16 {
		t.Errorf("largest node has %d elements: the outer product [B,T,out,in] = %d is still built", biggest, 2*8*32*16)
	}
}
