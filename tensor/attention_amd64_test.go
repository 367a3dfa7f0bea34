package tensor

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestSgemm6x16Rows checks sgemm6x16RowsAVX2 against sgemm6x16AVX2 on the
// transposed panel, bit for bit, and against a float64 product within
// rounding, over depths around the unrolling by 4, strides and both
// modes (overwrite, accumulate), with NaN and Inf in A.
func TestSgemm6x16Rows(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2 and FMA")
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for _, k := range []int{1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 100, 1000} {
		for _, acc := range []bool{false, true} {
			for trial := range 3 {
				t.Run(fmt.Sprintf("k%d_acc%v_%d", k, acc, trial), func(t *testing.T) {
					lda, ldb, ldc := k+rng.IntN(9), 16+rng.IntN(5), 16+rng.IntN(7)
					a := make([]float32, 5*lda+k)
					b := make([]float32, (k-1)*ldb+16)
					for i := range a {
						a[i] = float32(rng.NormFloat64())
					}
					for i := range b {
						b[i] = float32(rng.NormFloat64())
					}
					if trial == 2 {
						a[rng.IntN(k)] = float32(math.NaN())
						a[3*lda+rng.IntN(k)] = float32(math.Inf(1))
					}
					c0 := make([]float32, 6*ldc)
					for i := range c0 {
						c0[i] = float32(rng.NormFloat64())
					}
					got, want := append([]float32(nil), c0...), append([]float32(nil), c0...)
					sgemm6x16RowsAVX2(k, &a[0], lda, &b[0], ldb, &got[0], ldc, acc)
					panel := make([]float32, 6*k)
					for i := range 6 {
						for p := range k {
							panel[p*6+i] = a[i*lda+p]
						}
					}
					sgemm6x16AVX2(k, &panel[0], &b[0], ldb, &want[0], ldc, acc)
					for i := range 6 {
						for j := range ldc {
							x, y := got[i*ldc+j], want[i*ldc+j]
							if math.Float32bits(x) != math.Float32bits(y) && !(x != x && y != y) {
								t.Fatalf("C[%d][%d] = %g, panel kernel %g", i, j, x, y)
							}
							if j >= 16 || trial == 2 {
								continue
							}
							ref := 0.0
							if acc {
								ref = float64(c0[i*ldc+j])
							}
							for p := range k {
								ref += float64(a[i*lda+p]) * float64(b[p*ldb+j])
							}
							if math.Abs(float64(x)-ref) > 1e-5*math.Sqrt(float64(k))*(1+math.Abs(ref)) {
								t.Fatalf("C[%d][%d] = %g, want %g", i, j, x, ref)
							}
						}
					}
				})
			}
		}
	}
}

// BenchmarkSgemm6x16Rows compares, for one 6×128 tile of probabilities
// times 128 rows of V (O += P·V of one panel), the row-reading kernel with
// transposing the tile into a panel and running sgemm6x16AVX2 (four
// 16-column tiles of the 64 features).
func BenchmarkSgemm6x16Rows(b *testing.B) {
	if !hasAVX2 {
		b.Skip("no AVX2 and FMA")
	}
	const k, ld, h = 128, 272, 64
	x, v := make([]float32, 6*ld), make([]float32, k*h)
	for i := range x {
		x[i] = float32(i%7) * 0.1
	}
	for i := range v {
		v[i] = float32(i%5) * 0.1
	}
	c, panel := make([]float32, 6*h), make([]float32, 6*k)
	ks := gemmKernels
	b.Run("rows", func(b *testing.B) {
		for b.Loop() {
			for f := 0; f < h; f += 16 {
				sgemm6x16RowsAVX2(k, &x[0], ld, &v[f], h, &c[f], h, true)
			}
		}
	})
	b.Run("transpose+panel", func(b *testing.B) {
		if ks.transpose == nil || ks.mr != 6 {
			b.Skip("not the AVX2 set")
		}
		for b.Loop() {
			ks.transpose(x, ld, panel, 6, k, 6)
			for f := 0; f < h; f += 16 {
				sgemm6x16AVX2(k, &panel[0], &v[f], h, &c[f], h, true)
			}
		}
	})
}
