package gocpu

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"
)

// TestSlice: unit-stride slices of a custom op's result (run here) and
// of a parameter (large: here; small: simplego), strided ones (simplego),
// in float32 and int32, of odd shapes and empty ranges, equal simplego's
// exactly.
func TestSlice(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 3))
	cases := []struct {
		dims   []int
		ranges []graph.SliceAxisSpec
	}{
		{[]int{5, 6}, []graph.SliceAxisSpec{graph.AxisRange(1, 4), graph.AxisRange(2)}},
		{[]int{2, 3, 4, 7}, []graph.SliceAxisSpec{graph.AxisRange(), graph.AxisRange(1, 2), graph.AxisRange(), graph.AxisRange(0, 5)}},
		{[]int{2, 3, 4, 7}, []graph.SliceAxisSpec{graph.AxisRange(), graph.AxisRange(), graph.AxisRange(), graph.AxisRange(5, 7)}},
		{[]int{3, 4}, []graph.SliceAxisSpec{graph.AxisRange(2, 2), graph.AxisRange()}},
		{[]int{9, 11}, []graph.SliceAxisSpec{graph.AxisRange(1, 8).Stride(3), graph.AxisRange(2)}},
		{[]int{4, 64, 70}, []graph.SliceAxisSpec{graph.AxisRange(1), graph.AxisRange(), graph.AxisRange(3, 67)}},
		{[]int{7, 3, 200, 70}, []graph.SliceAxisSpec{graph.AxisRange(1, 6), graph.AxisRange(1), graph.AxisRange(), graph.AxisRange(3, 67)}}, // split over the workers
	}
	for _, c := range cases {
		for _, dt := range []dtypes.DType{dtypes.Float32, dtypes.Int32} {
			for _, custom := range []bool{true, false} {
				t.Run(fmt.Sprintf("%v/%v/custom=%v", c.dims, dt, custom), func(t *testing.T) {
					x := randTensor(r, dtypes.Float32, c.dims...)
					fn := func(in []*graph.Node) []*graph.Node {
						v := in[0]
						if custom {
							v = graph.Neg(v) // a custom op's result
						}
						return []*graph.Node{graph.Slice(graph.ConvertDType(v, dt), c.ranges...)}
					}
					got, want, gs, ws := runFastPlain(t, fastOnce(), fn, fn, x)
					if !slices.Equal(got[0], want[0]) || !gs[0].Equal(ws[0]) {
						t.Fatalf("got %v %v\nwant %v %v", gs[0], got[0], ws[0], want[0])
					}
				})
			}
		}
	}
}

// TestConcatenate: concatenations along every axis, of custom ops'
// results (run here) and of parameters, in float32 and int32, equal
// simplego's exactly. (simplego panics on an empty operand.)
func TestConcatenate(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 4))
	for _, dims := range [][]int{{3, 4, 5}, {2, 1, 7}, {1, 300, 70}, {40, 30, 70}} { // the last split over the workers
		for axis := range len(dims) {
			for _, dt := range []dtypes.DType{dtypes.Float32, dtypes.Int32} {
				for _, custom := range []bool{true, false} {
					t.Run(fmt.Sprintf("%v/axis%d/%v/custom=%v", dims, axis, dt, custom), func(t *testing.T) {
						other := slices.Clone(dims)
						other[axis] = 3
						x, y := randTensor(r, dtypes.Float32, dims...), randTensor(r, dtypes.Float32, other...)
						fn := func(in []*graph.Node) []*graph.Node {
							a, b := in[0], in[1]
							if custom {
								a = graph.Neg(a)
							}
							return []*graph.Node{graph.Concatenate([]*graph.Node{graph.ConvertDType(a, dt), graph.ConvertDType(b, dt), graph.ConvertDType(a, dt)}, axis)}
						}
						got, want, gs, ws := runFastPlain(t, fastOnce(), fn, fn, x, y)
						if !slices.Equal(got[0], want[0]) || !gs[0].Equal(ws[0]) {
							t.Fatalf("got %v %v\nwant %v %v", gs[0], got[0], ws[0], want[0])
						}
					})
				}
			}
		}
	}
}
