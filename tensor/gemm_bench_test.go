package tensor

import (
	"fmt"
	"math/rand/v2"
	"testing"
	"time"
)

// Benchmarks report GFLOP/s (2·M·N·K per product) next to ns/op. Compare
// them with BenchmarkFMAPeak, the register-only limit of the same cores,
// and BenchmarkVekDotPeak, a tight vek FMA loop:
//
//	go test -run '^$' -bench 'Gemm|Peak' ./tensor/

func reportGFLOPS(b *testing.B, flops float64) {
	b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

// BenchmarkGemmSquare: M = N = K products in the two layouts of a
// transformer: x·Wᵀ (weights [out, in], "NT") and x·W ("NN").
func BenchmarkGemmSquare(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 1))
	for _, n := range []int{256, 512, 1024, 2048} {
		a, w := randF32(r, n*n), randF32(r, n*n)
		out := make([]float32, n*n)
		for _, lay := range []string{"NT", "NN"} {
			b.Run(fmt.Sprintf("%d/%s", n, lay), func(b *testing.B) {
				for b.Loop() {
					if lay == "NT" {
						MatMulT(out, a, w, n, n, n, 0)
					} else {
						MatMul(out, a, w, n, n, n, 0)
					}
				}
				reportGFLOPS(b, 2*float64(n)*float64(n)*float64(n))
			})
		}
	}
}

// BenchmarkGemmSerial is the 1024³ x·Wᵀ product on one core.
func BenchmarkGemmSerial(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	n := 1024
	a, w := randF32(r, n*n), randF32(r, n*n)
	out := make([]float32, n*n)
	for b.Loop() {
		MatMulT(out, a, w, n, n, n, 1)
	}
	reportGFLOPS(b, 2*float64(n)*float64(n)*float64(n))
}

// gemmDecodeShapes are (N, K) projections of Qwen2.5-0.5B (hidden 896,
// MLP 4864) and of the 25M benchmark model (hidden 512, MLP 1408).
var gemmDecodeShapes = [][2]int{{896, 896}, {4864, 896}, {896, 4864}, {1408, 512}, {512, 1408}}

// BenchmarkGemmDecode: M rows (the tokens of a decoding batch) against a
// weight matrix [N, K].
func BenchmarkGemmDecode(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 3))
	for _, s := range gemmDecodeShapes {
		n, k := s[0], s[1]
		w := randF32(r, n*k)
		for _, m := range []int{1, 4, 8, 16, 32, 64} {
			a := randF32(r, m*k)
			out := make([]float32, m*n)
			b.Run(fmt.Sprintf("M%d/N%d/K%d", m, n, k), func(b *testing.B) {
				for b.Loop() {
					MatMulT(out, a, w, m, n, k, 0)
				}
				reportGFLOPS(b, 2*float64(m)*float64(n)*float64(k))
			})
		}
	}
}

// BenchmarkGemmAttention: batched q·kᵀ and p·v of 8 rows × 14 heads,
// 256 tokens, head dim 64.
func BenchmarkGemmAttention(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 4))
	const batch, t, h = 8 * 14, 256, 64
	q, k := randF32(r, batch*t*h), randF32(r, batch*t*h)
	scores := make([]float32, batch*t*t)
	b.Run("qk", func(b *testing.B) {
		for b.Loop() {
			BatchMatMulT(scores, q, k, batch, t, t, h, 0)
		}
		reportGFLOPS(b, 2*float64(batch)*t*t*h)
	})
	out := make([]float32, batch*t*h)
	b.Run("pv", func(b *testing.B) {
		g := Gemm{Batch: batch, M: t, N: h, K: t, A: RowMajor(scores, t, t), B: RowMajor(k, t, h)}
		for b.Loop() {
			if err := g.Run(out); err != nil {
				b.Fatal(err)
			}
		}
		reportGFLOPS(b, 2*float64(batch)*t*t*h)
	})
}

// BenchmarkGemmBF16 is the decode and square products with BF16 weights.
func BenchmarkGemmBF16(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 5))
	for _, s := range [][3]int{{1, 4864, 896}, {8, 4864, 896}, {1024, 1024, 1024}} {
		m, n, k := s[0], s[1], s[2]
		a, w := randF32(r, m*k), toBF16(randF32(r, n*k))
		out := make([]float32, m*n)
		b.Run(fmt.Sprintf("M%d/N%d/K%d", m, n, k), func(b *testing.B) {
			for b.Loop() {
				MatMulTBF16(out, a, w, m, n, k, 0)
			}
			reportGFLOPS(b, 2*float64(m)*float64(n)*float64(k))
		})
	}
}

// BenchmarkFMAPeak is the register-only FMA limit on all cores ("all") and
// one ("1").
func BenchmarkFMAPeak(b *testing.B) { benchPeak(b, FMAPeak) }

// BenchmarkVekDotPeak is a tight vek FMA loop (vek32.Dot on L1-resident
// vectors) on all cores and one.
func BenchmarkVekDotPeak(b *testing.B) { benchPeak(b, VekDotPeak) }

// benchPeak runs a 20 ms GFLOP/s probe on all cores (workers0) and one
// (workers1).
func benchPeak(b *testing.B, peak func(workers int, d time.Duration) float64) {
	for _, w := range []int{0, 1} {
		b.Run(fmt.Sprint("workers", w), func(b *testing.B) {
			var g float64
			for b.Loop() {
				g = peak(w, 20*time.Millisecond)
			}
			b.ReportMetric(g, "GFLOP/s")
		})
	}
}

// BenchmarkGemmLMHeadGrad is the 25M model's output-layer weight gradient
// as gocpu runs it: ∂E[V, H] = Σ_t dlogits[t, v]·x[t, h] over the 8·256
// tokens, A = dlogits read depth-major ([T, V] contracted over T), B = x
// row-major [T, H], V = 16384, H = 512, on all cores (wall clock).
func BenchmarkGemmLMHeadGrad(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 6))
	const v, h, t = 16384, 512, 2048
	dl, x := randF32(r, t*v), randF32(r, t*h)
	out := make([]float32, v*h)
	g := Gemm{Batch: 1, M: v, N: h, K: t, A: Operand{F32: dl, RowStride: 1, ColStride: v}, B: RowMajor(x, t, h)}
	for b.Loop() {
		g.mustRun(out)
	}
	reportGFLOPS(b, 2*float64(v)*h*t)
}

// gemmModelShape is one product of the 25M model's training step (batch
// 8 × 256 tokens, hidden 512, MLP 1408, vocabulary 16384) with gocpu's
// operand strides: A(i, p) at i·ars + p·acs, B(p, j) at p·brs + j·bcs.
type gemmModelShape struct {
	name               string
	m, n, k            int
	ars, acs, brs, bcs int
}

// gemmModelShapes are the products of the 25M training step that take
// most of its GEMM time: the output layer's forward, weight gradient and
// input gradient, the weight gradients of the MLP, attention and k/v
// projections (A depth-major: activations contracted over their token
// axis), and the forward x·Wᵀ and input-gradient dY·W of the MLP.
var gemmModelShapes = []gemmModelShape{
	{"lm-fwd", 2048, 16384, 512, 512, 1, 1, 512},
	{"lm-dW", 16384, 512, 2048, 1, 16384, 512, 1},
	{"lm-dX", 2048, 512, 16384, 16384, 1, 512, 1},
	{"mlp-dW1", 1408, 512, 2048, 1, 1408, 512, 1},
	{"mlp-dW2", 512, 1408, 2048, 1, 512, 1408, 1},
	{"attn-dW", 512, 512, 2048, 1, 512, 512, 1},
	{"kv-dW", 128, 512, 2048, 1, 128, 512, 1},
	{"mlp-fwd-up", 2048, 1408, 512, 512, 1, 1, 512},
	{"mlp-fwd-down", 2048, 512, 1408, 1408, 1, 1, 1408},
	{"mlp-dX", 2048, 512, 1408, 1408, 1, 512, 1},
}

// gemm returns the product of the shape over fresh random operands.
func (s gemmModelShape) gemm(r *rand.Rand, workers int) Gemm {
	return Gemm{Batch: 1, M: s.m, N: s.n, K: s.k,
		A:       Operand{F32: randF32(r, s.m*s.k), RowStride: s.ars, ColStride: s.acs},
		B:       Operand{F32: randF32(r, s.k*s.n), RowStride: s.brs, ColStride: s.bcs},
		Workers: workers}
}

// BenchmarkGemmModel is gemmModelShapes on 2 workers in wall time (see
// BenchmarkGemmModelCPUTime for one worker in thread CPU time).
//
//	go test -run '^$' -bench GemmModel/ ./tensor/
func BenchmarkGemmModel(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 11))
	for _, s := range gemmModelShapes {
		b.Run(s.name, func(b *testing.B) {
			g := s.gemm(r, 2)
			out := make([]float32, s.m*s.n)
			g.mustRun(out)
			for b.Loop() {
				g.mustRun(out)
			}
			reportGFLOPS(b, 2*float64(s.m)*float64(s.n)*float64(s.k))
		})
	}
}
