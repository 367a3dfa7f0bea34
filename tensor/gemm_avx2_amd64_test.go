package tensor

import (
	"math"
	"math/big"
	"math/rand/v2"
	"slices"
	"testing"

	"golang.org/x/sys/cpu"
)

func skipNoAVX2(t *testing.T) {
	t.Helper()
	if !cpu.X86.HasAVX2 || !cpu.X86.HasFMA {
		t.Skip("no AVX2+FMA")
	}
}

// fma32 is the float32 fused multiply-add a·b + c rounded once to nearest
// even (VFMADD231PS on one lane). The product of two float32 is exact in
// float64, so math.FMA's float64 result differs from the exact sum only by
// its one rounding; rounding that again to float32 is exact unless it
// lands on a float32 midpoint or in the subnormal range, where the exact
// sum is rounded with big.Float instead.
func fma32(a, b, c float32) float32 {
	r := math.FMA(float64(a), float64(b), float64(c))
	if math.IsNaN(r) || math.IsInf(r, 0) {
		return float32(r)
	}
	bits := math.Float64bits(r)
	midpoint := bits&(1<<29-1) == 1<<28
	if !midpoint && (r == 0 || math.Abs(r) >= 0x1p-126) {
		return float32(r)
	}
	x := new(big.Float).SetPrec(1024).SetFloat64(float64(a))
	x.Mul(x, new(big.Float).SetFloat64(float64(b)))
	x.Add(x, new(big.Float).SetFloat64(float64(c)))
	f, _ := x.Float32()
	if f == 0 && r == 0 {
		return float32(r) // the sign of an exact zero, as IEEE 754 (and math.FMA) gives it
	}
	return f
}

// microFMARef is the reference of a mr×nr FMA micro-kernel (the micro
// contract of gemmKernelSet, evaluated as the assembly does): every output
// is a chain of float32 FMAs over p = 0…k−1 from +0, then added to C
// (acc) or stored.
func microFMARef(mr, nr, k int, a, b []float32, ldb int, c []float32, ldc int, acc bool) {
	for i := range mr {
		for j := range nr {
			var t float32
			for p := range k {
				t = fma32(a[p*mr+i], b[p*ldb+j], t)
			}
			if acc {
				c[i*ldc+j] += t
			} else {
				c[i*ldc+j] = t
			}
		}
	}
}

func sameF32(x, y float32) bool {
	return math.Float32bits(x) == math.Float32bits(y) || (x != x && y != y)
}

// TestSgemm6x16AVX2BitIdentical checks the AVX2 micro-kernel against the
// FMA-chain reference bit for bit, over depths around its unrolling (4)
// and the blocking's kc, strides wider than the tile, random values and
// special ones (NaN, ±Inf, huge, tiny, subnormal, −0), and that it writes
// nothing outside the 6×16 tile.
func TestSgemm6x16AVX2BitIdentical(t *testing.T) {
	skipNoAVX2(t)
	const mr, nr = 6, 16
	r := rand.New(rand.NewPCG(20, 1))
	special := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 3e38, -3e38, 1e-38, 1e-45, -1e-45, float32(math.Copysign(0, -1)), 0, 1, -1}
	for _, k := range []int{1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 100, 255, 256, 257, 1000} {
		for _, kind := range []string{"random", "special", "cancel"} {
			for _, acc := range []bool{false, true} {
				ldb, ldc := nr+3, nr+5
				a := randF32(r, k*mr)
				b := randF32(r, k*ldb)
				switch kind {
				case "special":
					for i := range a {
						if r.IntN(8) == 0 {
							a[i] = special[r.IntN(len(special))]
						}
					}
					for i := range b {
						if r.IntN(8) == 0 {
							b[i] = special[r.IntN(len(special))]
						}
					}
				case "cancel": // large terms that cancel: rounding-sensitive sums
					for i := range a {
						a[i] *= 1e6
					}
				}
				c := randF32(r, mr*ldc+7)
				want := slices.Clone(c)
				got := slices.Clone(c)
				microFMARef(mr, nr, k, a, b, ldb, want, ldc, acc)
				sgemm6x16AVX2(k, &a[0], &b[0], ldb, &got[0], ldc, acc)
				for i := range got {
					if !sameF32(got[i], want[i]) {
						t.Fatalf("k=%d %s acc=%v: c[%d] (row %d col %d) = %v (%#x), want %v (%#x)",
							k, kind, acc, i, i/ldc, i%ldc, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
					}
				}
			}
		}
	}
}

// TestTranspose8AVX2 checks the packing transpose against its definition
// for 6 and 8 rows (and 16 through the set's wrapper), depths that are
// multiples of 8 and 16, odd strides, special values, and that lanes
// outside the rows (6 and 7 for 6 rows) and past k are left alone.
func TestTranspose8AVX2(t *testing.T) {
	skipNoAVX2(t)
	r := rand.New(rand.NewPCG(20, 2))
	for _, rows := range []int{6, 8, 16} {
		for _, k := range []int{16, 32, 48, 64, 256, 1008} {
			if rows != 16 {
				k -= 8 // the kernel alone takes multiples of 8
			}
			for _, lds := range []int{k, k + 1, k + 13} {
				ldd := rows + 3
				src := randF32(r, rows*lds+5)
				src[r.IntN(len(src))] = float32(math.NaN())
				src[r.IntN(len(src))] = float32(math.Inf(-1))
				dst := randF32(r, k*ldd+9)
				want := slices.Clone(dst)
				for p := range k {
					for i := range rows {
						want[p*ldd+i] = src[i*lds+p]
					}
				}
				if rows == 16 {
					transposeAVX2(src, lds, dst, ldd, k, rows)
				} else {
					transpose8AVX2(&src[0], lds, &dst[0], ldd, k, rows)
				}
				for i := range dst {
					if !sameF32(dst[i], want[i]) {
						t.Fatalf("rows=%d k=%d lds=%d: dst[%d] = %v, want %v", rows, k, lds, i, dst[i], want[i])
					}
				}
			}
		}
	}
}

// TestPackPanelsFastMatchesSlow checks packPanels' transposing path (each
// set with a transpose, panel widths mr and nr) against the element-wise
// packPanelsSlow, with depths that leave a tail past the multiple of 16
// and row counts that leave a partial last panel.
func TestPackPanelsFastMatchesSlow(t *testing.T) {
	r := rand.New(rand.NewPCG(20, 3))
	for _, ks := range gemmSets() {
		if ks.transpose == nil {
			continue
		}
		for _, w := range []int{ks.mr, ks.nr} {
			for _, rows := range []int{1, w - 1, w, w + 1, 3*w + 2, 100} {
				for _, kc := range []int{1, 15, 16, 17, 33, 100, 256} {
					ld := kc + 5
					x := randF32(r, rows*ld+3)
					op := Operand{F32: x, RowStride: ld, ColStride: 1}
					pad := (rows + w - 1) / w * w
					got, want := make([]float32, pad*kc), make([]float32, pad*kc)
					tmp := make([]float32, max(kc, w))
					packPanels(got, &op, 2, ld, 1, rows, kc, w, tmp, ks)
					for q0 := 0; q0 < rows; q0 += w {
						packPanelsSlow(want[q0*kc:(q0+w)*kc], &op, 2+q0*ld, ld, 1, min(w, rows-q0), kc, w, tmp)
					}
					if !slices.Equal(got, want) {
						t.Fatalf("%s w=%d rows=%d kc=%d: fast packing differs", ks.name, w, rows, kc)
					}
				}
			}
		}
	}
}

// TestPackRunsAVX2 checks the kernel sets' packRuns against packDepthRuns
// (the plain-Go reference) bit for bit, NaN and Inf included, over odd
// depths, panel counts and source strides, and that it writes nothing
// past the panels (nor accepts another width).
func TestPackRunsAVX2(t *testing.T) {
	skipNoAVX2(t)
	r := rand.New(rand.NewPCG(3, 14))
	for _, w := range []int{6, 12, 16, 32} {
		for _, kc := range []int{1, 7, 8, 9, 15, 16, 17, 100, 256} {
			for _, panels := range []int{1, 2, 3, 7, 17} {
				for _, extra := range []int{0, 1, 5, 100} {
					ps := panels*w + extra
					src := randF32(r, (kc-1)*ps+panels*w)
					src[r.IntN(len(src))] = float32(math.NaN())
					src[r.IntN(len(src))] = float32(math.Inf(-1))
					n := panels * kc * w
					want := make([]float32, n+8)
					got := make([]float32, n+8)
					for i := range want {
						want[i] = float32(i)
						got[i] = float32(i)
					}
					packDepthRuns(want, src, 0, ps, panels*w, kc, w)
					if !packRunsAVX2Go(got, src, ps, kc, panels, w) {
						t.Fatalf("w %d: packRuns declined", w)
					}
					for i := range want {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("w %d kc %d panels %d ps %d: dst[%d] = %v, want %v", w, kc, panels, ps, i, got[i], want[i])
						}
					}
				}
			}
		}
	}
	if packRunsAVX2Go(make([]float32, 64), make([]float32, 64), 8, 1, 1, 8) {
		t.Fatal("packRuns accepted w = 8")
	}
}
