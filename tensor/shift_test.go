package tensor

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/viterin/vek/vek32"
)

// TestSubScalar compares subScalar with subScalarGo bit for bit (NaNs as
// NaNs) over odd lengths, special values (±0, ±Inf, NaN, huge, subnormal)
// in x and as s, into a new slice and in place.
func TestSubScalar(t *testing.T) {
	r := rand.New(rand.NewPCG(31, 32))
	special := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 3e38, -3e38, 1e-40, 1.5}
	for _, n := range []int{0, 1, 7, 8, 9, 15, 16, 17, 31, 32, 33, 100, 1000} {
		for _, s := range special {
			x := randVec(r, n)
			for i := range x {
				if r.IntN(4) == 0 {
					x[i] = special[r.IntN(len(special))]
				}
			}
			want := make([]float32, n)
			subScalarGo(want, x, s)
			got := make([]float32, n)
			SubScalar(got, x, s)
			inPlace := slices.Clone(x)
			SubScalar(inPlace, inPlace, s)
			for i := range want {
				for _, g := range []float32{got[i], inPlace[i]} {
					if math.Float32bits(g) != math.Float32bits(want[i]) && !(g != g && want[i] != want[i]) {
						t.Fatalf("n=%d s=%v: [%d] = %v, want %v", n, s, i, g, want[i])
					}
				}
			}
		}
	}
}

// BenchmarkSubScalar times subScalar, subScalarGo and vek's
// SubNumber_Into on one block of SumExpRows (256 elements, in L1). ns per
// op:
//
//	go test -run '^$' -bench SubScalar ./tensor/
func BenchmarkSubScalar(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	x, d := randVec(r, swigluBlock), make([]float32, swigluBlock)
	b.Run("SubScalar", func(b *testing.B) {
		for b.Loop() {
			SubScalar(d, x, 0.5)
		}
	})
	b.Run("subScalarGo", func(b *testing.B) {
		for b.Loop() {
			subScalarGo(d, x, 0.5)
		}
	})
	b.Run("vek", func(b *testing.B) {
		for b.Loop() {
			vek32.SubNumber_Into(d, x, 0.5)
		}
	})
}
