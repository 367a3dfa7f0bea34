package tensor

import (
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/viterin/vek/vek32"
)

// BenchmarkGemvKernel streams a [65536, 512] weight matrix (128 MB in
// float32, 64 MB in bfloat16: past the caches) through the 8-row GEMV
// kernels on one thread, in the two row orders: "adjacent", 8 neighbouring
// rows per call with the next 8 rows' lines prefetched (the order before
// gemvRows read 8 streams), and "streams", gemvRows's order (rows m/8
// apart, 8 ascending streams). Each round also sums the float32 matrix
// with vek32.Sum, the sequential read cas bench cpu's streaming bound
// uses, just before the product. Bytes read per second of thread CPU time
// (which other processes on a shared machine inflate less than wall time)
// and of wall time, and the product's speed over the sum's in CPU time:
//
//	go test -run '^$' -bench GemvKernel -benchtime 5x ./tensor/
func BenchmarkGemvKernel(b *testing.B) {
	ks := gemvKernels
	if ks == nil {
		b.Skip("no GEMV kernels on this CPU")
	}
	const n, k = 65536, 512
	r := rand.New(rand.NewPCG(1, 2))
	w := randF32(r, n*k)
	wb := toBF16(w)
	x := randF32(r, k)
	y := make([]float32, n)
	var sink float32
	for _, c := range []struct {
		name  string
		bytes int
		run   func()
	}{
		{"f32/adjacent", 4, func() {
			for j := 0; j < n; j += 8 {
				*(*[8]float32)(y[j:]) = ks.f32(k, x, w[j*k:], k, 8*k*4)
			}
		}},
		{"f32/streams", 4, func() { gemvRowsF32(ks, y, x, w, 0, n, k, k, false) }},
		{"bf16/adjacent", 2, func() {
			for j := 0; j < n; j += 8 {
				*(*[8]float32)(y[j:]) = ks.bf16(k, x, wb[j*k:], k, 8*k*2)
			}
		}},
		{"bf16/streams", 2, func() { gemvRowsBF16(ks, y, x, wb, 0, n, k, k, false) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			runtime.LockOSThread() // threadCPU measures this thread
			defer runtime.UnlockOSThread()
			var cpu, wall, sumCPU float64
			for b.Loop() {
				s0 := threadCPU()
				sink += vek32.Sum(w)
				c0, t0 := threadCPU(), time.Now()
				c.run()
				wall += time.Since(t0).Seconds()
				cpu += threadCPU() - c0
				sumCPU += c0 - s0
			}
			gb := float64(b.N*n*k*c.bytes) / 1e9
			b.ReportMetric(gb/cpu, "GB/cpu-s")
			b.ReportMetric(gb/wall, "GB/s")
			b.ReportMetric(float64(b.N*n*k*4)/1e9/sumCPU, "sum-GB/cpu-s")
			b.ReportMetric(gb/cpu/(float64(b.N*n*k*4)/1e9/sumCPU), "of_sum")
		})
	}
	_ = sink
}
