package tensor

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

func randBF16(rng *rand.Rand, n int) []uint16 {
	x := make([]uint16, n)
	for i := range x {
		x[i] = F32ToBF16(float32(rng.NormFloat64()))
	}
	return x
}

// TestDotBF16Block checks the blocked bfloat16 products, on this CPU's
// kernels and on the plain loop, against a float64 reference over odd
// shapes: m and n around the 4 × 4 blocks, k below, at and around the
// 32-element vector step.
func TestDotBF16Block(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	sets := map[string]*bf16KernelSet{"plain": nil}
	if bf16Kernels != nil {
		sets["avx512bf16"] = bf16Kernels
	} else {
		t.Log("no AVX512-BF16 on this CPU: only the plain loop is tested")
	}
	for name, ks := range sets {
		for _, m := range []int{1, 3, 4, 5, 9} {
			for _, n := range []int{1, 4, 7, 13} {
				for _, k := range []int{1, 31, 32, 33, 64, 100, 768} {
					a, w := randBF16(rng, m*k), randBF16(rng, n*k)
					ldo := n + 3
					out := make([]float32, m*ldo)
					for i := range out {
						out[i] = float32(math.NaN()) // every cell must be written
					}
					dotBF16Block(ks, out, ldo, a, m, w, n, k)
					for i := range m {
						for j := range n {
							var ref, mag float64
							for p := range k {
								v := float64(BF16ToF32(a[i*k+p])) * float64(BF16ToF32(w[j*k+p]))
								ref += v
								mag += math.Abs(v)
							}
							got := float64(out[i*ldo+j])
							if math.Abs(got-ref) > 1e-5*mag+1e-6 {
								t.Fatalf("%s m=%d n=%d k=%d: out[%d][%d] = %v, reference %v", name, m, n, k, i, j, got, ref)
							}
						}
					}
					for i := range m {
						for j := n; j < ldo && i*ldo+j < len(out); j++ {
							if !math.IsNaN(float64(out[i*ldo+j])) {
								t.Fatalf("%s: wrote out[%d][%d] beyond n", name, i, j)
							}
						}
					}
				}
			}
		}
	}
}

func TestF16ToBF16(t *testing.T) {
	src := []uint16{F32ToF16(1), F32ToF16(-2.5), F32ToF16(0.333), F32ToF16(65504), 0}
	dst := make([]uint16, len(src))
	F16ToBF16(dst, src, nil)
	for i, h := range src {
		if want := F32ToBF16(F16ToF32(h)); dst[i] != want {
			t.Errorf("%d: %#x, want %#x", i, dst[i], want)
		}
	}
}

// TestF16ToBF16AllCodes: the vector path converts every one of the 65,536
// binary16 codes (NaNs, infinities, subnormals included) to the bits of
// the scalar rounding, at every length and offset around its 16-value
// steps.
func TestF16ToBF16AllCodes(t *testing.T) {
	src := make([]uint16, 1<<16)
	for i := range src {
		src[i] = uint16(i)
	}
	dst := make([]uint16, len(src))
	F16ToBF16(dst, src, nil)
	for i, h := range src {
		if want := F32ToBF16(F16ToF32(h)); dst[i] != want {
			t.Fatalf("code %#04x: %#04x, want %#04x", h, dst[i], want)
		}
	}
	for n := range 50 {
		for off := range 3 {
			d := make([]uint16, n+1)
			d[n] = 0xbeef
			F16ToBF16(d[:n], src[0x3c00+off:0x3c00+off+n], nil)
			for i := range n {
				if want := F32ToBF16(F16ToF32(src[0x3c00+off+i])); d[i] != want {
					t.Fatalf("n=%d off=%d: [%d] = %#04x, want %#04x", n, off, i, d[i], want)
				}
			}
			if d[n] != 0xbeef {
				t.Fatalf("n=%d: wrote past the end", n)
			}
		}
	}
}

// BenchmarkDotBF16Block compares the bfloat16 block product of 64 queries
// against 1,024 rows of d 768 with the F32 GEMM (tensor.MatMulT) of the
// same shape, one thread: `go test -run '^$' -bench 'DotBF16|MatMulTSearch' ./tensor/`.
func BenchmarkDotBF16Block(b *testing.B) {
	const m, n, k = 64, 1024, 768
	rng := rand.New(rand.NewPCG(3, 4))
	a, w := randBF16(rng, m*k), randBF16(rng, n*k)
	out := make([]float32, m*n)
	for _, name := range []string{"kernels", "plain"} {
		ks := bf16Kernels
		if name == "plain" {
			ks = nil
		}
		if name == "kernels" && ks == nil {
			continue
		}
		b.Run(name, func(b *testing.B) {
			for b.Loop() {
				dotBF16Block(ks, out, n, a, m, w, n, k)
			}
			b.ReportMetric(float64(2*m*n*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
	}
}

func BenchmarkMatMulTSearch(b *testing.B) {
	const m, n, k = 64, 1024, 768
	rng := rand.New(rand.NewPCG(3, 4))
	a, w := make([]float32, m*k), make([]float32, n*k)
	for i := range a {
		a[i] = float32(rng.NormFloat64())
	}
	for i := range w {
		w[i] = float32(rng.NormFloat64())
	}
	out := make([]float32, m*n)
	b.Run(fmt.Sprintf("%dx%dx%d", m, n, k), func(b *testing.B) {
		for b.Loop() {
			MatMulT(out, a, w, m, n, k, 1)
		}
		b.ReportMetric(float64(2*m*n*k)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	})
}
