package gocpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/shapes"
)

// TestTransposeSlice: a Transpose of a Slice this backend runs is one
// strided copy from the Slice's operand (a SliceTranspose step, no Slice
// or Transpose left) when the permutation keeps the last axis, and both
// run as before otherwise; the bytes equal simplego's.
func TestTransposeSlice(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 5))
	cases := []struct {
		dims   []int
		ranges []graph.SliceAxisSpec
		perm   []int
		fused  bool
	}{
		// The attention's o out of [o | m | l], and dK out of the packed gradients.
		{[]int{2, 2, 33, 4, 66}, []graph.SliceAxisSpec{graph.AxisRange(), graph.AxisRange(), graph.AxisRange(), graph.AxisRange(), graph.AxisRange(0, 64)}, []int{0, 2, 1, 3, 4}, true},
		{[]int{3, 2, 40, 6, 64}, []graph.SliceAxisSpec{graph.AxisRange(), graph.AxisRange(), graph.AxisRange(), graph.AxisRange(4, 5), graph.AxisRange()}, []int{0, 2, 1, 3, 4}, true},
		{[]int{8, 2, 255, 6, 64}, []graph.SliceAxisSpec{graph.AxisRange(), graph.AxisRange(), graph.AxisRange(), graph.AxisRange(0, 4), graph.AxisRange()}, []int{0, 2, 1, 3, 4}, true}, // split over the workers
		{[]int{40, 30, 70}, []graph.SliceAxisSpec{graph.AxisRange(1, 39), graph.AxisRange(2, 29), graph.AxisRange(3, 67)}, []int{1, 0, 2}, true},
		// The last axis moves: a Slice, then a Transpose.
		{[]int{40, 30, 70}, []graph.SliceAxisSpec{graph.AxisRange(1, 39), graph.AxisRange(), graph.AxisRange(3, 67)}, []int{0, 2, 1}, false},
	}
	for _, c := range cases {
		t.Run(fmt.Sprintf("%v/%v", c.dims, c.perm), func(t *testing.T) {
			x := randTensor(r, dtypes.Float32, c.dims...)
			fn := func(in []*graph.Node) []*graph.Node {
				return []*graph.Node{graph.TransposeAllAxes(graph.Slice(graph.Neg(in[0]), c.ranges...), c.perm...)}
			}
			rec := &planRecorder{Backend: fastOnce().(*Backend)}
			got, want, gs, ws := runFastPlain(t, rec, fn, fn, x)
			if !slices.Equal(got[0], want[0]) || !gs[0].Equal(ws[0]) {
				t.Fatalf("got %v, want %v (shapes %v, %v)", got[0][:8], want[0][:8], gs[0], ws[0])
			}
			steps := rec.stepCounts()
			if fused := steps["SliceTranspose"] == 1 && steps["Slice"] == 0 && steps["Transpose"] == 0; fused != c.fused {
				t.Errorf("steps %v, want fused = %v", steps, c.fused)
			}
		})
	}
}

// TestFoldZeroPad: ReduceSum over a Concatenate of one operand with
// broadcast zeros (through Reshapes, as model/vjp's Attention builds dK
// and dV) sums the operand alone: no Concatenate, no broadcast, and for a
// size-1 operand no ReduceSum step either, whose results then equal
// simplego's exactly, ±0, NaN and ±Inf included (sums of several terms
// within 1e-6: this backend's order of summation is not simplego's). Nonzero constants, two live operands and
// a concatenation along an axis not summed are left alone.
func TestFoldZeroPad(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 6))
	const b, tt, kv, rr, h = 3, 37, 2, 4, 64
	cases := []struct {
		name  string
		fill  float64 // the padding's value
		width int     // the operand's width on the concatenated axis
		axes  []int
		both  bool // a second live operand
		folds bool
	}{
		{"dK", 0, 1, []int{3}, false, true},
		{"negzero", math.Copysign(0, -1), 1, []int{3}, false, true},
		{"wide", 0, 2, []int{3}, false, true},
		{"two-axes", 0, 1, []int{1, 3}, false, true},
		{"ones", 1, 1, []int{3}, false, false},
		{"two-live", 0, 1, []int{3}, true, false},
		{"other-axis", 0, 1, []int{4}, false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			x := randTensor(r, dtypes.Float32, b, tt, kv, c.width, h)
			flat := x.Value().([][][][][]float32)
			flat[0][0][0][0][0] = float32(math.NaN())
			flat[0][1][0][0][1] = float32(math.Inf(-1))
			flat[1][0][1][0][2] = float32(math.Copysign(0, -1))
			fn := func(in []*graph.Node) []*graph.Node {
				g := graph.Neg(in[0]) // a custom op's result
				pad := graph.BroadcastToShape(graph.Scalar(g.Graph(), g.DType(), c.fill), shapes.Make(g.DType(), b, tt, kv, rr-c.width, h))
				parts := []*graph.Node{g, pad}
				if c.both {
					parts[1] = graph.Neg(graph.SliceAxis(graph.Concatenate([]*graph.Node{g, g, g, g}, 3), 3, graph.AxisRange(0, rr-c.width)))
				}
				padded := graph.Reshape(graph.Concatenate(parts, 3), b, tt, kv*rr, h)
				return []*graph.Node{graph.ReduceSum(graph.Reshape(padded, b, tt, kv, rr, h), c.axes...)}
			}
			rec := &planRecorder{Backend: fastOnce().(*Backend)}
			got, want, gs, ws := runFastPlain(t, rec, fn, fn, x)
			if !gs[0].Equal(ws[0]) {
				t.Fatalf("shape %v, want %v", gs[0], ws[0])
			}
			if !c.folds || c.width > 1 || len(c.axes) > 1 {
				// Sums of several terms: this backend's order, not simplego's.
				assertRelNear(t, c.name, finite(got[0]), finite(want[0]), 1e-6)
			} else {
				for i := range got[0] {
					if g, w := got[0][i], want[0][i]; g != w && !(math.IsNaN(g) && math.IsNaN(w)) {
						t.Fatalf("element %d: %v, want %v", i, g, w)
					}
				}
			}
			steps := rec.stepCounts()
			folded := steps["Concatenate"] == 0 && steps["BroadcastInDim"] == 0
			if folded != c.folds {
				t.Errorf("steps %v, want folded = %v", steps, c.folds)
			}
			if c.folds && c.width == 1 && len(c.axes) == 1 && steps["ReduceSum"] != 0 {
				t.Errorf("steps %v: the sum over a size-1 axis is left", steps)
			}
		})
	}
}

// finite replaces NaN and ±Inf by 0 (assertRelNear compares the rest).
func finite(x []float64) []float64 {
	y := slices.Clone(x)
	for i, v := range y {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			y[i] = 0
		}
	}
	return y
}
