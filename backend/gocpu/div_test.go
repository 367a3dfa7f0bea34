package gocpu

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestDivKernels compares divVV, divVS and divSV with Go's float32
// division bit for bit (NaNs as NaNs) over odd lengths, with zeros of both
// signs, infinities, NaN, huge and subnormal values, into a new slice and
// in place.
func TestDivKernels(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	special := []float32{0, float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN()), 3e38, -3e38, 1e-40, -1e-42, 1}
	gen := func(n int) []float32 {
		x := make([]float32, n)
		for i := range x {
			if r.IntN(4) == 0 {
				x[i] = special[r.IntN(len(special))]
			} else {
				x[i] = float32(r.NormFloat64())
			}
		}
		return x
	}
	same := func(what string, n int, got []float32, want func(i int) float32) {
		t.Helper()
		for i := range n {
			if w := want(i); math.Float32bits(got[i]) != math.Float32bits(w) && !(got[i] != got[i] && w != w) {
				t.Fatalf("%s n=%d: [%d] = %v, want %v", what, n, i, got[i], w)
			}
		}
	}
	for _, n := range []int{0, 1, 7, 8, 9, 15, 16, 17, 31, 100, 1000} {
		for _, s := range special {
			a, b := gen(n), gen(n)
			d := make([]float32, n)
			divVV(d, a, b)
			same("vv", n, d, func(i int) float32 { return a[i] / b[i] })
			divVS(d, a, s)
			same("vs", n, d, func(i int) float32 { return a[i] / s })
			divSV(d, s, b)
			same("sv", n, d, func(i int) float32 { return s / b[i] })
			ac, bc := slices.Clone(a), slices.Clone(b)
			divVV(ac, ac, b)
			same("vv in a", n, ac, func(i int) float32 { return a[i] / b[i] })
			divVV(bc, a, bc)
			same("vv in b", n, bc, func(i int) float32 { return a[i] / b[i] })
			ac, bc = slices.Clone(a), slices.Clone(b)
			divVS(ac, ac, s)
			same("vs in place", n, ac, func(i int) float32 { return a[i] / s })
			divSV(bc, s, bc)
			same("sv in place", n, bc, func(i int) float32 { return s / b[i] })
		}
	}
}

// BenchmarkDiv times divVV, divVS and divSV on 4096 elements (a fused
// group's tile, in L1). ns per op:
//
//	go test -run '^$' -bench 'Div$' ./backend/gocpu/
func BenchmarkDiv(b *testing.B) {
	const n = 4096
	r := rand.New(rand.NewPCG(1, 2))
	x, y, d := make([]float32, n), make([]float32, n), make([]float32, n)
	for i := range x {
		x[i], y[i] = float32(r.NormFloat64()), float32(r.NormFloat64())+3
	}
	b.Run("vv", func(b *testing.B) {
		for b.Loop() {
			divVV(d, x, y)
		}
	})
	b.Run("vs", func(b *testing.B) {
		for b.Loop() {
			divVS(d, x, 1.5)
		}
	})
	b.Run("sv", func(b *testing.B) {
		for b.Loop() {
			divSV(d, 1.5, y)
		}
	})
}
