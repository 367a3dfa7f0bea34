package gocpu

import (
	"math/rand/v2"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"
)

// planRecorder wraps a Backend to keep the Executable of the last graph
// compiled through it.
type planRecorder struct {
	*Backend
	last *Executable
}

func (r *planRecorder) Builder(name string) backends.Builder {
	return &recordingBuilder{Builder: r.Backend.Builder(name).(*Builder), r: r}
}

type recordingBuilder struct {
	*Builder
	r *planRecorder
}

func (b *recordingBuilder) Compile(outputs []backends.Op, shardings []*backends.ShardingSpec) (backends.Executable, error) {
	e, err := b.Builder.Compile(outputs, shardings)
	if err == nil {
		b.r.last = e.(*Executable)
	}
	return e, err
}

// stepCounts counts the steps of the last compiled plan by name.
func (r *planRecorder) stepCounts() map[string]int {
	steps := map[string]int{}
	for _, st := range r.last.steps {
		steps[st.name]++
	}
	return steps
}

// TestDotGeneralGradientIsAProduct: graph.Gradient of a DotGeneral, which
// GoMLX v0.26 writes as ReduceSum(Mul(broadcast v, broadcast other)),
// runs as matrix products on this backend (fuse.go) in every axis
// arrangement a model produces: the gradients equal simplego's direct
// evaluation (to float32 rounding relative to the gradient's largest
// entry), and no value as large as the outer product is computed (products
// under 4096 elements stay as they are: see fuseReduceSumMul).
// This is the one fix of GoMLX's DotGeneral gradient in the project
// (docs/upstream/gomlx-dotgeneral-grad.md); training and cas bench cpu both
// run through it.
func TestDotGeneralGradientIsAProduct(t *testing.T) {
	cases := []struct {
		name           string
		lhs, rhs       []int
		lc, lb, rc, rb []int
		outer          int // elements of the outer product GoMLX's VJP builds
	}{
		{"linear [B,T,in]·[out,in]", []int{2, 8, 24}, []int{32, 24}, []int{2}, nil, []int{1}, nil, 2 * 8 * 24 * 32},
		{"attention btkrh,bksh->bkrts", []int{2, 6, 2, 3, 16}, []int{2, 2, 7, 16}, []int{4}, []int{0, 2}, []int{3}, []int{0, 1}, 2 * 6 * 2 * 3 * 16 * 7},
		{"two contracting axes swapped", []int{6, 8, 10}, []int{10, 8, 12}, []int{2, 1}, nil, []int{0, 1}, nil, 6 * 8 * 10 * 12},
		{"batch axis in the middle", []int{8, 4, 24}, []int{24, 4, 20}, []int{2}, []int{1}, []int{0}, []int{1}, 8 * 4 * 24 * 20},
		{"contract the first axis", []int{40, 12}, []int{40, 10}, []int{0}, nil, []int{0}, nil, 40 * 12 * 10},
	}
	r := rand.New(rand.NewPCG(7, 22))
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			lhs, rhs := randTensor(r, dtypes.Float32, c.lhs...), randTensor(r, dtypes.Float32, c.rhs...)
			fn := func(in []*graph.Node) []*graph.Node {
				y := graph.DotGeneral(in[0], c.lc, c.lb, in[1], c.rc, c.rb)
				// A loss whose output adjoint is not constant.
				loss := graph.ReduceAllSum(graph.Mul(y, graph.Sin(y)))
				return graph.Gradient(loss, in[0], in[1])
			}
			rec := &planRecorder{Backend: fastOnce().(*Backend)}
			got, want, gs, ws := runFastPlain(t, rec, fn, fn, lhs, rhs)
			for o, name := range []string{"lhs", "rhs"} {
				if !gs[o].Equal(ws[o]) {
					t.Fatalf("%s gradient shape %s, want %s", name, gs[o], ws[o])
				}
				assertNearScale(t, name+" gradient", got[o], want[o])
			}
			if rec.last == nil {
				t.Fatal("no executable recorded")
			}
			if rec.last.largest >= c.outer {
				t.Errorf("largest value has %d elements: the outer product (%d) is still built", rec.last.largest, c.outer)
			}
		})
	}
}
