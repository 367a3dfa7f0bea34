//go:build gemmtune

package tensor

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"golang.org/x/sys/unix"
	"testing"
)

func threadCPU() float64 {
	var ts unix.Timespec
	unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts)
	return float64(ts.Nano()) / 1e9
}

func TestTune(t *testing.T) {
	runtime.LockOSThread()
	ks := gemmKernels
	t0 := threadCPU()
	ks.peak(1 << 22)
	peak := float64(1<<22) * float64(ks.peakFlops) / (threadCPU() - t0) / 1e9
	fmt.Printf("peak %.1f GFLOP/s per cpu-second\n", peak)
	r := rand.New(rand.NewPCG(1, 1))
	for _, s := range [][3]int{{1024, 1024, 1024}, {256, 256, 256}, {2048, 896, 896}, {2048, 4864, 896}, {2048, 896, 4864}} {
		m, n, k := s[0], s[1], s[2]
		a, w := randF32(r, m*k), randF32(r, n*k)
		out := make([]float32, m*n)
		for _, lay := range []string{"NT", "NN"} {
			g := Gemm{Batch: 1, M: m, N: n, K: k, A: RowMajor(a, m, k), B: Transposed(w, k, n), Workers: 1}
			if lay == "NN" {
				g.B = RowMajor(w, k, n)
			}
			g.run(out, ks)
			best := 0.0
			for range 3 {
				t0 := threadCPU()
				g.run(out, ks)
				gf := 2 * float64(m*n*k) / (threadCPU() - t0) / 1e9
				best = max(best, gf)
			}
			fmt.Printf("%v %s %.1f GFLOP/s  %.0f%% of peak\n", s, lay, best, 100*best/peak)
		}
	}
}

func TestTuneDecode(t *testing.T) {
	runtime.LockOSThread()
	ks := gemmKernels
	packed := *ks
	packed.dot4x4 = nil
	r := rand.New(rand.NewPCG(1, 1))
	for _, s := range [][2]int{{896, 896}, {4864, 896}, {896, 4864}, {1408, 512}} {
		n, k := s[0], s[1]
		w := randF32(r, n*k)
		for _, m := range []int{1, 2, 4, 8, 12, 16, 24, 32, 64} {
			a := randF32(r, m*k)
			out := make([]float32, m*n)
			line := fmt.Sprintf("M%d N%d K%d", m, n, k)
			for _, set := range []*gemmKernelSet{ks, &packed} {
				g := Gemm{Batch: 1, M: m, N: n, K: k, A: RowMajor(a, m, k), B: Transposed(w, k, n), Workers: 1}
				reps := max(3, 200000000/(m*n*k))
				g.run(out, set)
				t0 := threadCPU()
				for range reps {
					g.run(out, set)
				}
				gf := 2 * float64(m*n*k) * float64(reps) / (threadCPU() - t0) / 1e9
				line += fmt.Sprintf("  %.1f", gf)
			}
			fmt.Println(line)
		}
	}
}
