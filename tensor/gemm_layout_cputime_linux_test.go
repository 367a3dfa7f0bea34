package tensor

import (
	"math/rand/v2"
	"runtime"
	"testing"
)

// BenchmarkGemmLayoutCPUTime measures one-core GEMM efficiency (GFLOP per
// CPU-second of the thread, see BenchmarkGemmCPUTime) of the product of a
// linear layer's weight gradient in the 4M model's training step,
// ∂W[704, 256] = Σ over 8·256 tokens, in the four operand layouts: "T" for
// A is A stored [K, M] (the activations, contracted over their leading
// token axes: what the weight gradient reads), "N" row-major [M, K]; for B,
// "N" is [K, N] row-major and "T" is Wᵀ of W [N, K] (the forward x·Wᵀ).
//
//	go test -run '^$' -bench GemmLayoutCPUTime ./tensor/
func BenchmarkGemmLayoutCPUTime(b *testing.B) {
	const m, n, k = 704, 256, 2048
	r := rand.New(rand.NewPCG(1, 9))
	a, w := randF32(r, m*k), randF32(r, n*k)
	out := make([]float32, m*n)
	aN, aT := Operand{F32: a, RowStride: k, ColStride: 1}, Operand{F32: a, RowStride: 1, ColStride: m}
	bN, bT := Operand{F32: w, RowStride: n, ColStride: 1}, Operand{F32: w, RowStride: 1, ColStride: k}
	for _, c := range []struct {
		name string
		a, b Operand
	}{{"TN", aT, bN}, {"NN", aN, bN}, {"NT", aN, bT}, {"TT", aT, bT}} {
		b.Run(c.name, func(b *testing.B) {
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
