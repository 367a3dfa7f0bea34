package tensor

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestSgemm6x16Strided checks sgemm6x16StridedNAVX2 on one tile against
// sgemm6x16AVX2 on the packed panel, bit for bit, and against a float64 product within
// rounding, over depths around the unrolling by 4, A as rows (ps = 1), as
// columns (rs = 1) and packed (rs = 1, ps = 6), strides and both modes
// (overwrite, accumulate), with NaN and Inf in A.
func TestSgemm6x16Strided(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2 and FMA")
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for _, k := range []int{1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 100, 1000} {
		for _, acc := range []bool{false, true} {
			for trial := range 9 {
				t.Run(fmt.Sprintf("k%d_acc%v_%d", k, acc, trial), func(t *testing.T) {
					ldb, ldc := 16+rng.IntN(5), 16+rng.IntN(7)
					var rs, ps int
					switch trial % 3 {
					case 0: // rows
						rs, ps = k+rng.IntN(9), 1
					case 1: // columns
						rs, ps = 1, 6+rng.IntN(70)
					default: // a packed panel
						rs, ps = 1, 6
					}
					a := make([]float32, 5*rs+(k-1)*ps+1)
					b := make([]float32, (k-1)*ldb+16)
					for i := range a {
						a[i] = float32(rng.NormFloat64())
					}
					for i := range b {
						b[i] = float32(rng.NormFloat64())
					}
					nonFinite := trial >= 6
					if nonFinite {
						a[rng.IntN(k)*ps] = float32(math.NaN())
						a[3*rs+rng.IntN(k)*ps] = float32(math.Inf(1))
					}
					c0 := make([]float32, 6*ldc)
					for i := range c0 {
						c0[i] = float32(rng.NormFloat64())
					}
					got, want := append([]float32(nil), c0...), append([]float32(nil), c0...)
					sgemm6x16StridedNAVX2(k, &a[0], rs, ps, 0, &b[0], ldb, 0, &got[0], ldc, 0, 1, acc)
					panel := make([]float32, 6*k)
					for i := range 6 {
						for p := range k {
							panel[p*6+i] = a[i*rs+p*ps]
						}
					}
					sgemm6x16AVX2(k, &panel[0], &b[0], ldb, &want[0], ldc, acc)
					for i := range 6 {
						for j := range ldc {
							x, y := got[i*ldc+j], want[i*ldc+j]
							if math.Float32bits(x) != math.Float32bits(y) && !(x != x && y != y) {
								t.Fatalf("C[%d][%d] = %g, panel kernel %g", i, j, x, y)
							}
							if j >= 16 || nonFinite {
								continue
							}
							ref := 0.0
							if acc {
								ref = float64(c0[i*ldc+j])
							}
							for p := range k {
								ref += float64(a[i*rs+p*ps]) * float64(b[p*ldb+j])
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

// TestSgemm6x16StridedN checks sgemm6x16StridedNAVX2 on n tiles against
// sgemm6x16AVX2 on each tile's packed panel, bit for bit, over tile counts, depths around the
// unrolling by 4, steps of A, B and C (zero included: tiles sharing an
// operand), both modes and a NaN in A.
func TestSgemm6x16StridedN(t *testing.T) {
	if !hasAVX2 {
		t.Skip("no AVX2 and FMA")
	}
	rng := rand.New(rand.NewPCG(15, 16))
	for _, n := range []int{1, 2, 3, 7, 11, 16} {
		for _, k := range []int{1, 3, 4, 5, 8, 9, 17, 64, 100} {
			for _, acc := range []bool{false, true} {
				for trial := range 4 {
					rs, ps := k+rng.IntN(5), 1 // rows of a tile of P or dS
					astep, bstep := 0, 16*k    // chunks of one panel
					ldb, ldc, cstep := 16, 16*n+rng.IntN(5), 16
					if trial%2 == 1 { // feature panels of one chunk
						rs, ps, astep, bstep = 1, 6+rng.IntN(60), 6, 0
						ldb, ldc = 16+rng.IntN(9), 16+rng.IntN(5)
						cstep = 6 * ldc
					}
					a := make([]float32, (n-1)*astep+5*rs+(k-1)*ps+1)
					b := make([]float32, (n-1)*bstep+(k-1)*ldb+16)
					c0 := make([]float32, (n-1)*cstep+5*ldc+16)
					for _, x := range [][]float32{a, b, c0} {
						for i := range x {
							x[i] = float32(rng.NormFloat64())
						}
					}
					if trial >= 2 {
						a[rng.IntN(len(a))] = float32(math.NaN())
					}
					got, want := append([]float32(nil), c0...), append([]float32(nil), c0...)
					sgemm6x16StridedNAVX2(k, &a[0], rs, ps, astep, &b[0], ldb, bstep, &got[0], ldc, cstep, n, acc)
					panel := make([]float32, 6*k)
					for i := range n {
						for r := range 6 {
							for p := range k {
								panel[p*6+r] = a[i*astep+r*rs+p*ps]
							}
						}
						sgemm6x16AVX2(k, &panel[0], &b[i*bstep], ldb, &want[i*cstep], ldc, acc)
					}
					for i := range got {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("n%d k%d acc %v trial %d: C[%d] = %g, packed panels %g", n, k, acc, trial, i, got[i], want[i])
						}
					}
				}
			}
		}
	}
}

// BenchmarkSgemm6x16Strided compares, for one 6×128 tile of probabilities
// times 128 rows of V (O += P·V of one panel), the strided kernel reading
// the tile's rows (the four 16-column tiles of the 64 features in one
// call) with transposing the tile into a panel and running sgemm6x16AVX2
// on each of the four.
func BenchmarkSgemm6x16Strided(b *testing.B) {
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
			sgemm6x16StridedNAVX2(k, &x[0], ld, 1, 0, &v[0], h, 16, &c[0], h, 16, h/16, true)
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

// TestAttentionStridedMatchesPacked checks that the attention tiles give
// the same float32s, bit for bit, whether the AVX2 set reads A in place
// (sgemm6x16StridedNAVX2) or packs it into panels for sgemm6x16AVX2.
func TestAttentionStridedMatchesPacked(t *testing.T) {
	var avx2 *gemmKernelSet
	for _, ks := range gemmAsmSets() {
		if ks.name == "avx2" {
			avx2 = ks
		}
	}
	if avx2 == nil {
		t.Skip("no AVX2 GEMM set")
	}
	packed := *avx2
	packed.name = "avx2-packed" // attnStridedN: nil
	rng := rand.New(rand.NewPCG(8, 9))
	for _, c := range []attentionCase{
		{b: 2, heads: 8, kv: 2, t: 70, h: 64, causal: true, pad: 9},
		{b: 2, heads: 6, kv: 2, t: 33, h: 12, bq: 4, bk: 8, randomBias: true},
		{b: 1, heads: 3, kv: 1, t: 41, h: 5, causal: true},
	} {
		qs, k, v, bias, dO := attentionInputs(rng, c)
		a := &Attention{Batch: c.b, Heads: c.heads, KVHeads: c.kv, T: c.t, S: c.t, HeadDim: c.h, QueryTile: c.bq, KeyTile: c.bk, Workers: 2}
		var fwd, grads [2][]float32
		for i, ks := range []*gemmKernelSet{avx2, &packed} {
			fwd[i] = make([]float32, c.b*c.t*c.heads*(c.h+2))
			grads[i] = make([]float32, c.b*c.kv*c.t*(c.heads/c.kv+2)*c.h)
			a.forwardWith(ks, fwd[i], qs, k, v, bias)
			a.backwardWith(ks, grads[i], qs, k, v, bias, fwd[i], dO)
		}
		for i := range fwd[0] {
			if math.Float32bits(fwd[0][i]) != math.Float32bits(fwd[1][i]) {
				t.Fatalf("%v: fwd[%d] = %g strided, %g packed", c, i, fwd[0][i], fwd[1][i])
			}
		}
		for i := range grads[0] {
			if math.Float32bits(grads[0][i]) != math.Float32bits(grads[1][i]) {
				t.Fatalf("%v: grads[%d] = %g strided, %g packed", c, i, grads[0][i], grads[1][i])
			}
		}
	}
}
