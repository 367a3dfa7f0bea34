package tensor

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestExp checks the vectorized exp (and its scalar tail) within 2 ulp
// of the correctly rounded value, with the IEEE special cases exact.
func TestExp(t *testing.T) {
	xs := []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), -1e30, 1e30, 88.72, 88.73, -103.9, -104, -87.3, 0, -0, -88.5, -100, 1e-8}
	r := rand.New(rand.NewPCG(7, 13))
	for range 100003 {
		xs = append(xs, float32(r.Float64()*200-105))
	}
	got := make([]float32, len(xs))
	Exp(got, xs)
	for i, x := range xs {
		want := float32(math.Exp(float64(x)))
		if got[i] == want || (got[i] != got[i] && want != want) {
			continue
		}
		ulp := math.Nextafter32(want, float32(math.Inf(1))) - want
		if math.IsInf(float64(want), 0) || math.Abs(float64(got[i]-want)) > 2*float64(ulp) {
			t.Fatalf("exp(%g) = %g, want %g", x, got[i], want)
		}
	}
	// In place.
	Exp(xs[:32], xs[:32])
	if xs[10] != 1 {
		t.Fatalf("in place exp(0) = %v", xs[10])
	}
}

func TestExp32(t *testing.T) {
	for _, x := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), -1e30, 1e30, 88.72, 88.73, -103.9, -104, -87.3, 0, -0} {
		got, want := exp32(x), float32(math.Exp(float64(x)))
		if !(got == want || (got != got && want != want)) {
			t.Errorf("exp32(%g) = %g, want %g", x, got, want)
		}
	}
	r := rand.New(rand.NewPCG(7, 11))
	for range 200000 {
		x := float32(r.Float64()*200 - 105)
		got, want := exp32(x), float32(math.Exp(float64(x)))
		if got != want {
			ulp := math.Nextafter32(want, float32(math.Inf(1))) - want
			if d := math.Abs(float64(got - want)); d > float64(ulp) {
				t.Fatalf("exp32(%g) = %g, want %g (more than 1 ulp)", x, got, want)
			}
		}
	}
}

// TestMax checks the maximum (AVX-512 blocks and the Go rest) against a
// plain scan, bit for bit, NaN and empty runs included, and signed zeros:
// the result's sign is Go's max's (+0 when both zeros occur).
func TestMax(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, n := range []int{0, 1, 7, 8, 9, 31, 32, 33, 64, 1001} {
		{ // signed zeros
			x := make([]float32, n)
			for i := range x {
				x[i] = -rng.Float32() * 10
				if i%3 == 0 {
					x[i] = float32(math.Copysign(0, -1))
				}
			}
			if n > 5 {
				x[n-5] = 0 // one +0 among −0s and negatives
			}
			want := float32(math.Inf(-1))
			for _, v := range x {
				want = max(want, v)
			}
			if got := Max(x); math.Float32bits(got) != math.Float32bits(want) {
				t.Errorf("n=%d with zeros: Max = %v (bits %x), want %v (bits %x)", n, got, math.Float32bits(got), want, math.Float32bits(want))
			}
		}
		x := make([]float32, n)
		for i := range x {
			x[i] = rng.Float32()*100 - 50
		}
		want := float32(math.Inf(-1))
		for _, v := range x {
			want = max(want, v)
		}
		if got := Max(x); got != want {
			t.Errorf("n=%d: Max = %v, want %v", n, got, want)
		}
		if n > 0 {
			x[rng.IntN(n)] = float32(math.NaN())
			if got := maxGo(x); !math.IsNaN(float64(got)) {
				t.Errorf("n=%d with a NaN: maxGo = %v, want NaN", n, got)
			}
			y := slices.Clone(x)
			y[n-1] = float32(math.NaN()) // in the Go tail when n is not a multiple of 32
			if got := Max(y); !math.IsNaN(float64(got)) {
				t.Errorf("n=%d with a last NaN: Max = %v, want NaN", n, got)
			}
			if got := Max(x); !math.IsNaN(float64(got)) {
				t.Errorf("n=%d with a NaN: Max = %v, want NaN", n, got)
			}
		}
	}
}

// BenchmarkMax times the maximum of a row of the 25M model's logits
// (16384 floats, the softmax's ReduceMax): the kernel against maxGo.
func BenchmarkMax(b *testing.B) {
	rng := rand.New(rand.NewPCG(5, 7))
	x := make([]float32, 16384)
	for i := range x {
		x[i] = rng.Float32()*100 - 50
	}
	for _, k := range []struct {
		name string
		fn   func([]float32) float32
	}{{"kernel", Max}, {"go", maxGo}} {
		b.Run(k.name, func(b *testing.B) {
			b.SetBytes(int64(4 * len(x)))
			for b.Loop() {
				x[0] = k.fn(x) - 1
			}
		})
	}
}
