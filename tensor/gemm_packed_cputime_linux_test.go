package tensor

import (
	"math/rand/v2"
	"runtime"
	"testing"
)

// BenchmarkMatMulTPackedCPUTime: blocks of 96 of 1,000 packed queries
// against a tile of 256 packed rows of 768 (the flat search's fused
// product, the tile packed each time) next to MatMulT on the same
// 1,000 × 256 × 768 product, interleaved, each the best of the iterations
// in thread CPU time (robust to other processes), in GFLOP/cpu-s.
//
//	go test -run '^$' -bench MatMulTPackedCPUTime -benchtime 50x ./tensor/
func BenchmarkMatMulTPackedCPUTime(b *testing.B) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	const m, n, k, blk = 1000, 256, 768, 96
	r := rand.New(rand.NewPCG(1, 2))
	a, w := randF32(r, m*k), randF32(r, n*k)
	out := make([]float32, m*n)
	var left PackedLeft
	var right PackedRight
	left.Pack(a, m, k)
	step := max(1, blk/GemmBlockAlign()) * GemmBlockAlign()
	bestP, bestT := 1e9, 1e9
	for b.Loop() {
		t0 := threadCPU()
		right.Pack(w, n, k)
		for i0 := 0; i0 < m; i0 += step {
			MatMulTPacked(out, n, &left, i0, min(m, i0+step), &right)
		}
		t1 := threadCPU()
		MatMulT(out, a, w, m, n, k, 1)
		t2 := threadCPU()
		bestP, bestT = min(bestP, t1-t0), min(bestT, t2-t1)
	}
	flops := 2 * float64(m) * n * k
	b.ReportMetric(flops/bestP/1e9, "packed-GFLOP/cpu-s")
	b.ReportMetric(flops/bestT/1e9, "MatMulT-GFLOP/cpu-s")
}
