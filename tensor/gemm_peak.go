package tensor

import (
	"sync"
	"time"

	"github.com/viterin/vek/vek32"
)

// The limits GEMM throughput is measured against.

// FMAPeak measures the arithmetic peak in GFLOP/s: every worker (≤ 0:
// GOMAXPROCS) runs independent register-only fused multiply-adds of the
// widest kernel set (no memory traffic) for about dur (at least one round
// of 2²⁰ instructions). One FMA counts two floating-point operations.
func FMAPeak(workers int, dur time.Duration) float64 {
	ks := gemmKernels
	if ks.peak == nil {
		return VekDotPeak(workers, dur)
	}
	const rounds = 1 << 14
	return peakRun(workers, dur, float64(rounds*ks.peakFlops), func() { ks.peak(rounds) })
}

// VekDotPeak measures a tight vek FMA loop: vek32.Dot over two 1024-element
// vectors that stay in L1 (8 KiB), repeated on every worker for about dur.
// Each element costs one multiply-add (two flops) and two loads, so this is
// the best a vek-based kernel streaming both operands reaches.
func VekDotPeak(workers int, dur time.Duration) float64 {
	const n, reps = 1024, 256
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

// peakRun runs fn (flops operations each) on every worker until dur has
// passed and returns the total rate in GFLOP/s.
func peakRun(workers int, dur time.Duration, flops float64, fn func()) float64 {
	w := Workers(workers)
	rates := make([]float64, w)
	var wg sync.WaitGroup
	for i := range w {
		wg.Go(func() {
			fn() // warm up (clock ramp, page faults)
			t0 := time.Now()
			count := 0
			for {
				fn()
				count++
				if time.Since(t0) >= dur {
					break
				}
			}
			rates[i] = float64(count) * flops / time.Since(t0).Seconds()
		})
	}
	wg.Wait()
	var total float64
	for _, r := range rates {
		total += r
	}
	return total / 1e9
}
