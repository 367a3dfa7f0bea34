package tensor

import (
	"math/rand/v2"
	"runtime"
	"testing"
)

// BenchmarkGemmLayoutCPUTime measures one-core GEMM efficiency (GFLOP per
// CPU-second of the thread, see BenchmarkGemmCPUTime) of weight-gradient
// products of the training step, ∂W[M, N] = Σ over K = 8·256 tokens, in the
// four operand layouts: "T" for A is A stored [K, M] (the output gradient
// or activations, contracted over their leading token axes: what a weight
// gradient reads), "N" row-major [M, K]; for B, "N" is [K, N] row-major and
// "T" is Wᵀ of W [N, K] (the forward x·Wᵀ). Shapes: the 4M model's MLP
// (704×256), a quarter of the 25M model's output layer (4096×512: the
// rows one of two workers takes of 16384) and the whole of it
// ("lm-head-V", 16384×512, the vocabulary stride of the real dlogits).
//
//	go test -run '^$' -bench GemmLayoutCPUTime ./tensor/
func BenchmarkGemmLayoutCPUTime(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 9))
	for _, s := range []struct {
		name    string
		m, n, k int
	}{{"mlp", 704, 256, 2048}, {"lm-head", 4096, 512, 2048}, {"lm-head-V", 16384, 512, 2048}} {
		m, n, k := s.m, s.n, s.k
		a, w := randF32(r, m*k), randF32(r, n*k)
		out := make([]float32, m*n)
		aN, aT := Operand{F32: a, RowStride: k, ColStride: 1}, Operand{F32: a, RowStride: 1, ColStride: m}
		bN, bT := Operand{F32: w, RowStride: n, ColStride: 1}, Operand{F32: w, RowStride: 1, ColStride: k}
		for _, c := range []struct {
			name string
			a, b Operand
		}{{"TN", aT, bN}, {"NN", aN, bN}, {"NT", aN, bT}, {"TT", aT, bT}} {
			b.Run(s.name+"/"+c.name, func(b *testing.B) {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				g := Gemm{Batch: 1, M: m, N: n, K: k, A: c.a, B: c.b, Workers: 1}
				g.mustRun(out)
				t0 := threadCPU()
				for b.Loop() {
					g.mustRun(out)
				}
				b.ReportMetric(2*float64(m*n*k)*float64(b.N)/(threadCPU()-t0)/1e9, "GFLOP/cpu-s")
			})
		}
	}
}
