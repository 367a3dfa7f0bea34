package gocpu

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"

	"github.com/cas-engine/cas/model/vjp"
)

// TestFusedSoftmax: the softmax and its gradient run as one fused kernel
// each (the plan has Softmax and SoftmaxGrad steps and no Exp, Div or Sub
// over the scores), with results equal to simplego's evaluation of the
// same graph to float32 rounding, forward and gradient, over odd shapes:
// T = 1, one row, zero rows, long rows, masked
// (−1e30) scores. GoMLX's own graph.Softmax routes its forward chain the
// same way (its VJP then runs unfused, still equal to simplego's).
func TestFusedSoftmax(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 8))
	shapes := [][]int{{2, 3, 5}, {1, 1, 1}, {1, 7}, {0, 6}, {2, 2, 3, 33}, {2, 4099}}
	for _, custom := range []bool{true, false} {
		for _, dims := range shapes {
			t.Run(fmt.Sprintf("custom=%v/%v", custom, dims), func(t *testing.T) {
				x := randTensor(r, dtypes.Float32, dims...)
				x.MutableFlatData(func(flat any) {
					f := flat.([]float32)
					for i := range f {
						f[i] *= 3
						if i%5 == 3 && dims[len(dims)-1] > 1 {
							f[i] = -1e30 // masked
						}
					}
				})
				w := randTensor(r, dtypes.Float32, dims...)
				fn := func(in []*graph.Node) []*graph.Node {
					var p *graph.Node
					if custom {
						p = vjp.Softmax(in[0])
					} else {
						p = graph.Softmax(in[0], -1)
					}
					// A loss whose adjoint varies along the rows.
					if in[0].Shape().Size() == 0 {
						return []*graph.Node{p} // GoMLX cannot differentiate this
					}
					loss := graph.ReduceAllSum(graph.Mul(graph.Mul(p, in[1]), graph.Sin(p)))
					return []*graph.Node{p, graph.Gradient(loss, in[0])[0]}
				}
				rec := &planRecorder{Backend: fastOnce().(*Backend)}
				got, want, _, _ := runFastPlain(t, rec, fn, fn, x, w)
				for o, name := range []string{"softmax", "gradient"}[:len(want)] {
					assertRelNear(t, name, got[o], want[o], 1e-5)
				}
				if rec.last == nil || len(got[0]) == 0 || dims[len(dims)-1] == 0 {
					return
				}
				steps := rec.stepCounts()
				if steps["Softmax"] != 1 {
					t.Errorf("forward not fused: steps %v", steps)
				}
				// GoMLX's VJP of graph.Softmax reads its exponentials.
				if custom && (steps["SoftmaxGrad"] != 1 || steps["Exp"] != 0 || steps["ReduceMax"] != 0 || steps["Div"] != 0 || steps["Sub"] != 0) {
					t.Errorf("gradient not fused: steps %v", steps)
				}
			})
		}
	}
}

// TestFusedSoftmaxNotMatched: near misses of the pattern (a softmax over
// another axis, a sum over another axis) are computed op by op, and
// correctly.
func TestFusedSoftmaxNotMatched(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 8))
	x := randTensor(r, dtypes.Float32, 4, 4)
	fn := func(in []*graph.Node) []*graph.Node {
		a := graph.Softmax(in[0], 0)
		e := graph.Exp(graph.Sub(in[0], graph.StopGradient(graph.ReduceAndKeep(in[0], graph.ReduceMax, -1))))
		b := graph.Div(e, graph.ReduceAndKeep(e, graph.ReduceSum, 0))
		return []*graph.Node{a, b}
	}
	rec := &planRecorder{Backend: fastOnce().(*Backend)}
	got, want, _, _ := runFastPlain(t, rec, fn, fn, x)
	for o := range want {
		for i := range want[o] {
			if d := math.Abs(got[o][i] - want[o][i]); d > 1e-6 {
				t.Fatalf("output %d [%d] = %g, want %g", o, i, got[o][i], want[o][i])
			}
		}
	}
	if rec.stepCounts()["Softmax"] != 0 {
		t.Fatalf("a softmax over axis 0 or a sum over axis 0 was fused")
	}
}

// TestFusedLogSumExp: model/vjp's LogSumExp runs as one kernel (LogSumExp:
// no ReduceMax, SumExp, Log or Exp step) and its gradient as another
// (ExpShiftScale),
// equal to simplego's evaluation of GoMLX's own log-sum-exp and VJP to
// float32 rounding, over T = 1, one row and long rows.
func TestFusedLogSumExp(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 11))
	for _, dims := range [][]int{{2, 3, 1}, {1, 9}, {2, 3, 300}, {2, 5000}} {
		t.Run(fmt.Sprint(dims), func(t *testing.T) {
			x := randTensor(r, dtypes.Float32, dims...)
			build := func(custom bool) func(in []*graph.Node) []*graph.Node {
				return func(in []*graph.Node) []*graph.Node {
					var l *graph.Node
					if custom {
						l = vjp.LogSumExp(in[0])
					} else {
						mx := graph.StopGradient(graph.ReduceAndKeep(in[0], graph.ReduceMax, -1))
						s := graph.ReduceSum(graph.Exp(graph.Sub(in[0], mx)), -1)
						l = graph.Add(graph.Log(s), graph.Reshape(mx, s.Shape().Dimensions...))
					}
					loss := graph.ReduceAllSum(graph.Mul(l, graph.Sin(l)))
					return []*graph.Node{l, graph.Gradient(loss, in[0])[0]}
				}
			}
			rec := &planRecorder{Backend: fastOnce().(*Backend)}
			got, want, _, _ := runFastPlain(t, rec, build(true), build(false), x)
			for o, name := range []string{"log-sum-exp", "gradient"} {
				assertRelNear(t, name, got[o], want[o], 2e-6)
			}
			steps := rec.stepCounts()
			if steps["LogSumExp"] != 1 || steps["ExpShiftScale"] != 1 || steps["Exp"] != 0 || steps["SumExp"] != 0 ||
				steps["ReduceMax"] != 0 || steps["Log"] != 0 {
				t.Errorf("not fused: steps %v", steps)
			}
		})
	}
}

// assertRelNear fails when an element of got differs from want by more
// than tol times want's largest magnitude, or is NaN.
func assertRelNear(t *testing.T, name string, got, want []float64, tol float64) {
	t.Helper()
	scale := 1e-30
	for _, v := range want {
		scale = max(scale, math.Abs(v))
	}
	for i := range want {
		if d := math.Abs(got[i] - want[i]); d > tol*scale || math.IsNaN(got[i]) {
			t.Fatalf("%s[%d] = %g, want %g (largest %g)", name, i, got[i], want[i], scale)
		}
	}
}

// TestFuseRankZero: products and quotients of scalars, one of them a sum
// with no axes, are not softmax patterns (the matchers once indexed the
// last axis of a rank-0 shape and panicked).
func TestFuseRankZero(t *testing.T) {
	r := rand.New(rand.NewPCG(2, 9))
	x := randTensor(r, dtypes.Float32)
	fn := func(in []*graph.Node) []*graph.Node {
		s := graph.ReduceSum(in[0])
		return []*graph.Node{graph.Mul(s, in[0]), graph.Div(graph.Exp(in[0]), s), graph.Sub(in[0], graph.Mul(s, in[0]))}
	}
	got, want, _, _ := runFastPlain(t, &planRecorder{Backend: fastOnce().(*Backend)}, fn, fn, x)
	for o := range want {
		for i := range want[o] {
			if got[o][i] != want[o][i] {
				t.Fatalf("output %d [%d] = %g, want %g", o, i, got[o][i], want[o][i])
			}
		}
	}
}
