package tensor

import (
	"sync"
	"time"

	"github.com/viterin/vek/vek32"
)

// The limits GEMM throughput is measured against.

// FMAPeak measures the arithmetic peak in GFLOP/s: every worker (≤ 0:
// GOMAXPROCS) runs independent register-only fused multiply-adds of the
// widest kernel set (no memory traffic). One FMA counts two floating-point
// operations. Like the GEMM benchmarks it reports the best of short bursts
// repeated for about dur, so that on a shared machine both sides of a
// ratio are measured the same way.
func FMAPeak(workers int, dur time.Duration) float64 {
	ks := gemmKernels
	if ks.peak == nil {
		return VekDotPeak(workers, dur)
	}
	const rounds = 1 << 12 // ≈ 3 MFLOP, about 30 µs a call
	return peakRun(workers, dur, float64(rounds*ks.peakFlops), func() { ks.peak(rounds) })
}

// VekDotPeak measures a tight vek FMA loop: vek32.Dot over two 1024-element
// vectors that stay in L1 (8 KiB), on every worker, best of bursts as
// FMAPeak. Each element costs one multiply-add (two flops) and two loads,
// so this is the best a vek-based kernel streaming both operands reaches.
func VekDotPeak(workers int, dur time.Duration) float64 {
	const n, reps = 1024, 16
	x, y := make([]float32, n), make([]float32, n)
	for i := range x {
		x[i], y[i] = 1, 1e-3
	}
	return peakRun(workers, dur, float64(2*n*reps), func() {
		var s float32
		for range reps {
			s += vek32.Dot(x, y)
		}
		if s == -1 { // keep the work observable
			panic("unreachable")
		}
	})
}

// peakRun runs bursts in which every worker calls fn (flops operations
// each) 8 times, repeated for about dur (at least 3 bursts), and returns
// the best burst's total rate in GFLOP/s.
func peakRun(workers int, dur time.Duration, flops float64, fn func()) float64 {
	w := Workers(workers)
	const calls = 8
	burst := func() float64 {
		var wg sync.WaitGroup
		t0 := time.Now()
		for range w {
			wg.Go(func() {
				for range calls {
					fn()
				}
			})
		}
		wg.Wait()
		return float64(w*calls) * flops / time.Since(t0).Seconds() / 1e9
	}
	burst() // warm up (clock ramp, page faults)
	best := 0.0
	start := time.Now()
	for i := 0; i < 3 || time.Since(start) < dur; i++ {
		best = max(best, burst())
	}
	return best
}
