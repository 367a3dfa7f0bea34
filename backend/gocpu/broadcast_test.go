package gocpu

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gomlx/gomlx/backends"
	"github.com/gomlx/gomlx/pkg/core/dtypes"
	"github.com/gomlx/gomlx/pkg/core/graph"

	"github.com/cas-engine/cas/internal/cputime"
)

// TestBinaryFoldsBroadcast: a float32 binary op with a broadcast operand
// (a scalar, or a reduced tensor, broadcast to the other operand's shape)
// reads the broadcast's source with zero strides: the results equal
// simplego's bit for bit, and the broadcast is not executed unless
// something else reads it.
func TestBinaryFoldsBroadcast(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 25))
	x, s, c := randTensor(r, dtypes.Float32, 4, 5, 6), randTensor(r, dtypes.Float32, 4, 5), randTensor(r, dtypes.Float32)
	cases := []struct {
		name   string
		fn     func(x, s, c *graph.Node) *graph.Node
		bcasts int // broadcasts still executed
	}{
		{"reduced adjoint times x", func(x, s, c *graph.Node) *graph.Node {
			return graph.Mul(graph.BroadcastToDims(graph.ExpandAxes(s, -1), 4, 5, 6), x)
		}, 0},
		{"x over a broadcast scalar", func(x, s, c *graph.Node) *graph.Node {
			return graph.Div(x, graph.BroadcastToDims(c, 4, 5, 6))
		}, 0},
		{"broadcast minus x", func(x, s, c *graph.Node) *graph.Node {
			return graph.Sub(graph.BroadcastToDims(graph.ExpandAxes(s, -1), 4, 5, 6), x)
		}, 0},
		{"broadcast also returned", func(x, s, c *graph.Node) *graph.Node {
			b := graph.BroadcastToDims(graph.ExpandAxes(s, -1), 4, 5, 6)
			return graph.Add(graph.Add(b, x), graph.Mul(b, b))
		}, 1},
	}
	prof := newProfiling(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fn := func(in []*graph.Node) []*graph.Node { return []*graph.Node{tc.fn(in[0], in[1], in[2])} }
			prof.Profile(true)
			got, gs, err := run(t, prof, fn, x, s, c)
			if err != nil {
				t.Fatal(err)
			}
			n, _ := opRuns(prof, "BroadcastInDim")
			if n != tc.bcasts {
				t.Errorf("%d broadcasts executed, want %d", n, tc.bcasts)
			}
			want, ws, err := run(t, plainOnce(), fn, x, s, c)
			if err != nil {
				t.Fatal(err)
			}
			assertSame(t, got[0], want[0], gs[0], ws[0])
		})
	}
}

// BenchmarkSoftmaxGradBroadcast times a softmax-gradient-shaped product,
// p · (g − broadcast(Σ g·p)) over the 4M model's attention scores
// [8, 4, 256, 256], in CPU time per execution.
func BenchmarkSoftmaxGradBroadcast(b *testing.B) {
	r := rand.New(rand.NewPCG(7, 26))
	p, g := randTensor(r, dtypes.Float32, 8, 4, 256, 256), randTensor(r, dtypes.Float32, 8, 4, 256, 256)
	exec, err := graph.NewExec(fastOnce(), func(p, g *graph.Node) *graph.Node {
		s := graph.ReduceSum(graph.Mul(g, p), -1)
		return graph.Mul(p, graph.Sub(g, graph.BroadcastToDims(graph.ExpandAxes(s, -1), 8, 4, 256, 256)))
	})
	if err != nil {
		b.Fatal(err)
	}
	cpu0 := cputime.Process()
	for b.Loop() {
		out, err := exec.Exec(p, g)
		if err != nil {
			b.Fatal(err)
		}
		out[0].FinalizeAll()
	}
	b.ReportMetric(float64((cputime.Process()-cpu0).Microseconds())/1e3/float64(b.N), "cpu-ms/op")
}

// BenchmarkMulScalarLeftCPUTime times Mul's sv kernel (a scalar, or a
// value broadcast along the last axis, on the left: 411 of the 822 Mul
// calls of a 25M training step, 154M of its 332M elements) against the
// scalar Go loop it replaced, over a row (512), a tensor in L2 (65,536)
// and one past the caches (8,388,608, AdamW's largest), in process CPU
// time per element.
//
//	go test -run '^$' -bench MulScalarLeftCPUTime ./backend/gocpu/
func BenchmarkMulScalarLeftCPUTime(b *testing.B) {
	loop := func(d []float32, s float32, x []float32) {
		x = x[:len(d)]
		for i := range d {
			d[i] = s * x[i]
		}
	}
	for _, n := range []int{512, 65536, 8388608} {
		x, d := make([]float32, n), make([]float32, n)
		for i := range x {
			x[i] = float32(i)
		}
		for _, k := range []struct {
			name string
			sv   func(d []float32, s float32, x []float32)
		}{{"kernel", binaryKernels[backends.OpTypeMul].sv}, {"loop", loop}} {
			b.Run(fmt.Sprintf("%d/%s", n, k.name), func(b *testing.B) {
				k.sv(d, 1.5, x)
				cpu0 := cputime.Process()
				for b.Loop() {
					k.sv(d, 1.5, x)
				}
				b.ReportMetric(float64(cputime.Process()-cpu0)/float64(b.N)/float64(n), "cpu-ns/elem")
			})
		}
	}
}
