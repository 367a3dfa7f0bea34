package tensor

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"testing"

	"golang.org/x/sys/unix"
)

// threadCPU is the CPU time of the calling OS thread in seconds.
func threadCPU() float64 {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return float64(ts.Nano()) / 1e9
}

// BenchmarkGemmCPUTime measures one-core GEMM efficiency in CPU time of the
// running thread, which other processes on a shared machine do not
// inflate: GFLOP per CPU-second, and that as a share of the register FMA
// peak measured the same way.
//
//	go test -run '^$' -bench GemmCPUTime ./tensor/
func BenchmarkGemmCPUTime(b *testing.B) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	ks := gemmKernels
	peak := 0.0
	if ks.peak != nil {
		const rounds = 1 << 20
		t0 := threadCPU()
		ks.peak(rounds)
		peak = float64(rounds) * float64(ks.peakFlops) / (threadCPU() - t0) / 1e9
	}
	r := rand.New(rand.NewPCG(1, 7))
	for _, s := range [][3]int{{256, 256, 256}, {1024, 1024, 1024}, {2048, 896, 4864}, {1, 4864, 896}, {16, 4864, 896}} {
		m, n, k := s[0], s[1], s[2]
		a, w := randF32(r, m*k), randF32(r, n*k)
		out := make([]float32, m*n)
		b.Run(fmt.Sprintf("M%d/N%d/K%d", m, n, k), func(b *testing.B) {
			runtime.LockOSThread() // sub-benchmarks run on their own goroutine
			defer runtime.UnlockOSThread()
			g := Gemm{Batch: 1, M: m, N: n, K: k, A: RowMajor(a, m, k), B: Transposed(w, k, n), Workers: 1}
			g.run(out, ks)
			t0 := threadCPU()
			for b.Loop() {
				g.run(out, ks)
			}
			gf := 2 * float64(m) * float64(n) * float64(k) * float64(b.N) / (threadCPU() - t0) / 1e9
			b.ReportMetric(gf, "GFLOP/cpu-s")
			if peak > 0 {
				b.ReportMetric(100*gf/peak, "%peak")
			}
		})
	}
}
