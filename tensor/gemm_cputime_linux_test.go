package tensor

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"

	"github.com/cas-engine/cas/internal/cputime"
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

// BenchmarkGemmMicroCPUTime measures the micro-kernel alone (the set
// gemmKernels, depth kc of its blocking) in thread CPU time, as a share of
// the register FMA peak measured right before each round (so that a round
// slowed by another process on a shared core is compared with a peak slowed
// the same way; the median of the per-round shares is reported). "L1":
// 16 A micro-panels (L2) against one B micro-panel (L1), as the inner loop
// of the packed path runs; "L3": a different B micro-panel (of 64, 1 MiB
// for AVX2) every 16 calls, as when the jr loop moves on.
//
//	go test -run '^$' -bench GemmMicroCPUTime ./tensor/
func BenchmarkGemmMicroCPUTime(b *testing.B) {
	ks := gemmKernels
	if ks.peak == nil {
		b.Skip("no FMA peak kernel")
	}
	kc := ks.blocking().kc
	const panels, bPanels, calls = 16, 64, 32
	r := rand.New(rand.NewPCG(1, 8))
	a := randF32(r, ks.mr*kc*panels)
	bb := randF32(r, ks.nr*kc*bPanels)
	c := make([]float32, panels*ks.mr*ks.nr)
	for _, name := range []string{"L1", "L3"} {
		b.Run(name, func(b *testing.B) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			const peakRounds = 1 << 14
			var shares []float64
			flops := 2 * float64(ks.mr*ks.nr*kc*panels*calls)
			round := 0
			for b.Loop() {
				tp := threadCPU()
				ks.peak(peakRounds)
				t0 := threadCPU()
				for range calls {
					bp := bb
					if name == "L3" {
						bp = bb[round%bPanels*ks.nr*kc:]
						round++
					}
					for i := range panels {
						ks.micro(kc, a[i*ks.mr*kc:], bp, ks.nr, c[i*ks.mr*ks.nr:], ks.nr, true)
					}
				}
				t1 := threadCPU()
				peak := float64(peakRounds*ks.peakFlops) / (t0 - tp)
				shares = append(shares, flops/(t1-t0)/peak)
			}
			slices.Sort(shares)
			b.ReportMetric(100*shares[len(shares)/2], "%peak")
		})
	}
}

// BenchmarkGemmPackCPUTime measures packPanels on k-contiguous rows (A of
// x·Wᵀ in panels of mr, W in panels of nr: the transposing path when the
// set has one, else element by element) in thread CPU time per element,
// the source a 1024×1024 matrix packed in depth slices of kc.
//
//	go test -run '^$' -bench GemmPackCPUTime ./tensor/
func BenchmarkGemmPackCPUTime(b *testing.B) {
	ks := gemmKernels
	const rows, k = 1024, 1024
	kc := ks.blocking().kc
	r := rand.New(rand.NewPCG(1, 9))
	op := RowMajor(randF32(r, rows*k), rows, k)
	for _, w := range []int{ks.mr, ks.nr} {
		pad := (rows + w - 1) / w * w
		dst := make([]float32, pad*kc)
		tmp := make([]float32, max(kc, w))
		for _, slow := range []bool{false, true} {
			name := fmt.Sprintf("w%d", w)
			set := ks
			if slow {
				name += "/slow"
				s := *ks
				s.transpose = nil
				set = &s
			}
			b.Run(name, func(b *testing.B) {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				t0 := threadCPU()
				for b.Loop() {
					for pc := 0; pc < k; pc += kc {
						packPanels(dst, &op, pc, k, 1, rows, min(kc, k-pc), w, tmp, set)
					}
				}
				b.ReportMetric((threadCPU()-t0)/float64(b.N*rows*k)*1e9, "ns/elem")
			})
		}
	}
}

// BenchmarkGemmWorkersCPUTime measures what splitting a product over
// workers costs in CPU: GFLOP per CPU-second of the whole process (all
// workers; other processes do not inflate it, unlike wall time) next to
// the wall rate, for x·Wᵀ on 1 and 2 workers. With 2 workers a 1024³
// product is split into column ranges whose tasks share one packing of A
// (gemmPre).
//
//	go test -run '^$' -bench GemmWorkersCPUTime ./tensor/
func BenchmarkGemmWorkersCPUTime(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 10))
	for _, s := range [][3]int{{1024, 1024, 1024}, {2048, 896, 4864}, {256, 704, 256}} {
		m, n, k := s[0], s[1], s[2]
		a, w := randF32(r, m*k), randF32(r, n*k)
		out := make([]float32, m*n)
		for _, workers := range []int{1, 2} {
			b.Run(fmt.Sprintf("M%d/N%d/K%d/W%d", m, n, k, workers), func(b *testing.B) {
				MatMulT(out, a, w, m, n, k, workers)
				c0 := cputime.Process()
				for b.Loop() {
					MatMulT(out, a, w, m, n, k, workers)
				}
				fl := 2 * float64(m) * float64(n) * float64(k) * float64(b.N)
				b.ReportMetric(fl/(cputime.Process()-c0).Seconds()/1e9, "GFLOP/cpu-s")
				b.ReportMetric(fl/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

// BenchmarkGemmModelCPUTime is gemmModelShapes (the 25M training step's
// products in gocpu's layouts) on one worker in thread CPU time: GFLOP per
// CPU-second, to compare with BenchmarkGemmCPUTime's 1024³.
//
//	go test -run '^$' -bench GemmModelCPUTime ./tensor/
func BenchmarkGemmModelCPUTime(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 12))
	for _, s := range gemmModelShapes {
		b.Run(s.name, func(b *testing.B) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			g := s.gemm(r, 1)
			out := make([]float32, s.m*s.n)
			g.mustRun(out)
			t0 := threadCPU()
			for b.Loop() {
				g.mustRun(out)
			}
			b.ReportMetric(2*float64(s.m*s.n*s.k)*float64(b.N)/(threadCPU()-t0)/1e9, "GFLOP/cpu-s")
		})
	}
}
