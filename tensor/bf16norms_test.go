package tensor

import (
	"math"
	"math/rand/v2"
	"testing"
)

// TestPackF32Norms: the panel path packs the same bits as PackF32 (row by
// row, scalar rounding), and the norms bound the exact ones tightly.
func TestPackF32Norms(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, tc := range []struct{ n, k int }{{1, 1}, {15, 7}, {16, 32}, {33, 45}, {64, 768}, {100, 17}} {
		src := make([]float32, tc.n*tc.k)
		for i := range src {
			// Large dynamic range, and some subnormal and zero values.
			src[i] = float32(rng.NormFloat64() * math.Exp2(float64(rng.IntN(40)-20)))
			switch rng.IntN(50) {
			case 0:
				src[i] = 0
			case 1:
				src[i] = math.Float32frombits(uint32(rng.IntN(1 << 23)))
			}
		}
		var want, got BF16Panels
		want.PackF32(src, tc.n, tc.k)
		xx, ee := make([]float64, tc.n), make([]float64, tc.n)
		got.PackF32Norms(src, tc.n, tc.k, nil, xx, ee)
		for i := range want.Data {
			if got.Data[i] != want.Data[i] {
				t.Fatalf("n=%d k=%d: packed value %d is %#x, want %#x", tc.n, tc.k, i, got.Data[i], want.Data[i])
			}
		}
		for j := range tc.n {
			var x2, e2 float64
			for c := range tc.k {
				v := float64(src[j*tc.k+c])
				e := v - float64(BF16ToF32(F32ToBF16(src[j*tc.k+c])))
				x2 += v * v
				e2 += e * e
				if math.Abs(e) > math.Abs(v)*math.Exp2(-8)+math.Exp2(-133) {
					t.Fatalf("rounding error %g of %g exceeds 2⁻⁸ relative", e, v)
				}
			}
			if xx[j] < x2 || xx[j] > x2*(1+2e-3) || ee[j] < e2 || ee[j] > e2*(1+2e-3) {
				t.Fatalf("n=%d k=%d row %d: norms %g, %g; exact %g, %g", tc.n, tc.k, j, xx[j], ee[j], x2, e2)
			}
		}
	}
	// Non-finite input makes the bounds non-finite (the search falls back).
	dst := make([]uint16, 20)
	src := make([]float32, 20)
	src[17] = float32(math.Inf(1))
	if _, ee := F32ToBF16Norms(dst, src); !math.IsNaN(ee) && !math.IsInf(ee, 1) {
		t.Fatalf("Inf input: ‖e‖² = %g", ee)
	}
	src[17], src[3] = 0, float32(math.NaN())
	if xx, _ := F32ToBF16Norms(dst, src); !math.IsNaN(xx) {
		t.Fatalf("NaN input: ‖x‖² = %g", xx)
	}
}
