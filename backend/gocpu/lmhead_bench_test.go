package gocpu

import (
	"math/rand/v2"
	"testing"

	"github.com/gomlx/gomlx/pkg/core/graph"
	"github.com/gomlx/gomlx/pkg/core/tensors"

	"github.com/cas-engine/cas/internal/cputime"
)

// BenchmarkLMHeadGrad is the 25M benchmark model's output-layer weight
// gradient as a training step builds it (bench/cpubench.Qwen25M, 8×256
// tokens): ∂E[V, H] = Σ_{b,t} dlogits[b, t, v]·x[b, t, h], the graph
// gradient's ReduceSum(Mul) that fuse.go turns into (built here
// directly): a DotGeneral contracting the leading token axes of [8, 256, 16384, 1] and
// [8, 256, 1, 512]. It reports the wall-clock rate and the rate per
// process CPU-second (which other processes inflate less).
//
//	go test -run '^$' -bench LMHeadGrad -count 5 ./backend/gocpu/
func BenchmarkLMHeadGrad(b *testing.B) {
	const bs, t, v, h = 8, 256, 16384, 512
	r := rand.New(rand.NewPCG(4, 19))
	dl, x := make([]float32, bs*t*v), make([]float32, bs*t*h)
	for i := range dl {
		dl[i] = r.Float32() - 0.5
	}
	for i := range x {
		x[i] = r.Float32() - 0.5
	}
	exec, err := graph.NewExec(fastOnce(), func(dl, x *graph.Node) *graph.Node {
		// The DotGeneral fuseReduceSumMul builds from the gradient's
		// ReduceSum(Mul(dl[…, v, 1], x[…, 1, h]), 0, 1).
		d := graph.DotGeneral(graph.ExpandAxes(dl, -1), []int{0, 1}, nil, graph.ExpandAxes(x, 2), []int{0, 1}, nil)
		return graph.Reshape(d, v, h)
	})
	if err != nil {
		b.Fatal(err)
	}
	dlT := tensors.FromFlatDataAndDimensions(dl, bs, t, v)
	xT := tensors.FromFlatDataAndDimensions(x, bs, t, h)
	run := func() {
		out, err := exec.Exec(dlT, xT)
		if err != nil {
			b.Fatal(err)
		}
		out[0].FinalizeAll()
	}
	run()
	cpu0 := cputime.Process()
	for b.Loop() {
		run()
	}
	flops := 2 * float64(bs*t) * v * h * float64(b.N)
	b.ReportMetric(flops/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	b.ReportMetric(flops/(cputime.Process()-cpu0).Seconds()/1e9, "GFLOP/cpu-s")
}
