package tensor

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/viterin/vek/vek32"

	"github.com/cas-engine/cas/internal/cputime"
)

// gemvRef is the float64 reference of y[j] = Σ_p x[p]·w[j·ldw+p] and its
// magnitude Σ_p |x[p]·w[j·ldw+p]|.
func gemvRef(x []float64, w func(j, p int) float64, n, k int) (want, mag []float64) {
	want, mag = make([]float64, n), make([]float64, n)
	for j := range n {
		for p := range k {
			v := x[p] * w(j, p)
			want[j] += v
			mag[j] += math.Abs(v)
		}
	}
	return want, mag
}

// TestGemvT checks GemvT and GemvTBF16, with the assembly kernels and with
// the portable loop, against a float64 reference over odd shapes (zero
// sizes, n and k not multiples of the 8-row block or the 16-lane vector,
// padded rows), overwriting and accumulating, on one and two workers.
func TestGemvT(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 11))
	sets := []*gemvKernelSet{nil}
	if gemvKernels != nil {
		sets = append(sets, gemvKernels)
	}
	for _, ks := range sets {
		name := "go"
		if ks != nil {
			name = ks.name
		}
		for _, n := range []int{0, 1, 7, 8, 9, 16, 23, 67, 4099} {
			for _, k := range []int{0, 1, 15, 16, 17, 33, 64, 257} {
				if n*k > 1<<20 {
					continue
				}
				for _, pad := range []int{0, 5} {
					for _, acc := range []bool{false, true} {
						t.Run(fmt.Sprintf("%s/n%d/k%d/pad%d/acc%v", name, n, k, pad, acc), func(t *testing.T) {
							ldw := k + pad
							x := randF32(r, k)
							w := randF32(r, max(0, n*ldw))
							wb := toBF16(w)
							y0 := randF32(r, n)
							x64 := make([]float64, k)
							for p := range x {
								x64[p] = float64(x[p])
							}
							for _, bf := range []bool{false, true} {
								want, mag := gemvRef(x64, func(j, p int) float64 {
									if bf {
										return float64(BF16ToF32(wb[j*ldw+p]))
									}
									return float64(w[j*ldw+p])
								}, n, k)
								for _, workers := range []int{1, 2} {
									y := append([]float32(nil), y0...)
									rows := func(lo, hi int) {
										if bf {
											gemvRowsBF16(ks, y, x, wb, lo, hi, k, ldw, acc)
										} else {
											gemvRowsF32(ks, y, x, w, lo, hi, k, ldw, acc)
										}
									}
									gemvSplitForTest(n, workers, rows)
									for j := range n {
										wj := want[j]
										if acc {
											wj += float64(y0[j])
										}
										if d := math.Abs(float64(y[j]) - wj); d > gemmTol(k+1, mag[j]+math.Abs(float64(y0[j]))) {
											t.Fatalf("bf16=%v workers=%d: y[%d] = %g, want %g (diff %g)", bf, workers, j, y[j], wj, d)
										}
									}
								}
							}
						})
					}
				}
			}
		}
	}
}

// gemvSplitForTest runs rows [0, n) as workers ranges with inner
// boundaries at multiples of 8, as gemvSplit's chunks are (gemvSplit
// keeps small products on one goroutine).
func gemvSplitForTest(n, workers int, rows func(lo, hi int)) {
	for part := range workers {
		lo, hi := splitRange(n, workers, part, 8)
		if lo < hi {
			rows(lo, hi)
		}
	}
}

// TestGemvMatchesGemm checks that GemvT and GemvTBF16 equal MatMulT and
// MatMulTBF16 (Gemm's dot path at M = 1) bit for bit for k ≥ 16, so that
// decoding through either gives the same logits.
func TestGemvMatchesGemm(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 5))
	for _, s := range [][2]int{{8, 16}, {9, 17}, {67, 100}, {256, 256}, {1003, 512}, {704, 256}, {256, 704}, {4096, 256}} {
		n, k := s[0], s[1]
		x, w := randF32(r, k), randF32(r, n*k)
		wb := toBF16(w)
		got, want := make([]float32, n), make([]float32, n)
		GemvT(got, x, w, n, k, k, false, 2)
		MatMulT(want, x, w, 1, n, k, 2)
		for j := range n {
			if got[j] != want[j] {
				t.Fatalf("n=%d k=%d: GemvT y[%d] = %g, MatMulT %g", n, k, j, got[j], want[j])
			}
		}
		GemvTBF16(got, x, wb, n, k, k, false, 2)
		MatMulTBF16(want, x, wb, 1, n, k, 2)
		for j := range n {
			if got[j] != want[j] {
				t.Fatalf("n=%d k=%d: GemvTBF16 y[%d] = %g, MatMulTBF16 %g", n, k, j, got[j], want[j])
			}
		}
	}
}

// BenchmarkGemv streams the weight matrices of one decode step of the
// 4M and 25M benchmark models (every linear layer, then the tied output
// layer) through Gemm at M = 1 (MatMulT), GemvT and GemvTBF16. Each
// iteration also sums the same weights (float32) with vek32.Sum split
// over the workers, the read bandwidth cas bench cpu's streaming bound
// uses, timed right before the product so that other processes' load
// falls on both alike: of_stream is the product's time per token against
// that sum's (≥ 1 is faster than streaming the float32 weights).
//
//	go test -run '^$' -bench Gemv -cpu 1,2 ./tensor/
func BenchmarkGemv(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, m := range []struct {
		name                  string
		vocab, d, ffn, layers int
		q, kv                 int
	}{{"4M", 4096, 256, 704, 4, 256, 128}, {"25M", 16384, 512, 1408, 6, 512, 128}} {
		// [n, k] of each product of one token, in order.
		var shapes [][2]int
		for range m.layers {
			shapes = append(shapes, [2]int{m.q, m.d}, [2]int{m.kv, m.d}, [2]int{m.kv, m.d}, [2]int{m.d, m.q},
				[2]int{m.ffn, m.d}, [2]int{m.ffn, m.d}, [2]int{m.d, m.ffn})
		}
		shapes = append(shapes, [2]int{m.vocab, m.d})
		var ws [][]float32
		var wbs [][]uint16
		elems := 0
		for _, s := range shapes {
			w := randF32(r, s[0]*s[1])
			ws, wbs = append(ws, w), append(wbs, toBF16(w))
			elems += len(w)
		}
		x := randF32(r, 2048)
		y := make([]float32, m.vocab)
		var sink [64]float32
		stream := func() {
			for _, w := range ws {
				ParallelFor(len(w), 0, 4096, func(i, lo, hi int) { sink[i%64] += vek32.Sum(w[lo:hi]) })
			}
		}
		for _, c := range []struct {
			name  string
			bytes int
			run   func(i int, s [2]int)
		}{
			{"gemm", 4, func(i int, s [2]int) { MatMulT(y, x[:s[1]], ws[i], 1, s[0], s[1], 0) }},
			{"gemv", 4, func(i int, s [2]int) { GemvT(y, x, ws[i], s[0], s[1], s[1], false, 0) }},
			{"gemvbf16", 2, func(i int, s [2]int) { GemvTBF16(y, x, wbs[i], s[0], s[1], s[1], false, 0) }},
		} {
			b.Run(m.name+"/"+c.name, func(b *testing.B) {
				var ts, tp time.Duration
				cpu := time.Duration(0)
				for b.Loop() {
					t0 := time.Now()
					stream()
					t1 := time.Now()
					c0 := cputime.Process()
					for i, s := range shapes {
						c.run(i, s)
					}
					cpu += cputime.Process() - c0
					ts, tp = ts+t1.Sub(t0), tp+time.Since(t1)
				}
				gb := float64(b.N) * float64(elems*c.bytes) / 1e9
				b.ReportMetric(gb/tp.Seconds(), "GB/s")
				b.ReportMetric(gb/cpu.Seconds(), "GB/cpu-s")
				b.ReportMetric(ts.Seconds()/tp.Seconds(), "of_stream")
			})
		}
	}
}
