package gocpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/cas-engine/cas/tensor"
)

// logisticScalar is the kernel before it was vectorized (a scalar
// division per element): σ(x) = 1/(1+e) for x ≥ 0 and e/(1+e) below, e =
// e^−|x| from tensor.Exp on the same 256-element blocks. The blocked kernel
// must equal it bit for bit (both divisions are IEEE).
func logisticScalar(dst, x []float32) {
	var e [256]float32
	for lo := 0; lo < len(dst); lo += len(e) {
		hi := min(len(dst), lo+len(e))
		eb := e[:hi-lo]
		for i, v := range x[lo:hi] {
			eb[i] = -float32(math.Abs(float64(v)))
		}
		tensor.Exp(eb, eb)
		for i, v := range x[lo:hi] {
			if v >= 0 {
				dst[lo+i] = 1 / (1 + eb[i])
			} else {
				dst[lo+i] = eb[i] / (1 + eb[i])
			}
		}
	}
}

// TestLogisticF32 compares the kernel with logisticScalar bit for bit,
// and checks it within 2e-7 of σ computed in float64, over lengths around the block and vector sizes
// (0, 1, 15, 16, 17, 255, 256, 257, 1000) and special values.
func TestLogisticF32(t *testing.T) {
	r := rand.New(rand.NewPCG(19, 1))
	for _, n := range []int{0, 1, 15, 16, 17, 255, 256, 257, 1000} {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(r.NormFloat64() * 8)
		}
		specials := []float32{0, float32(math.Copysign(0, -1)), 1e-30, -1e-30, 88, -88, 104, -104, float32(math.Inf(1)), float32(math.Inf(-1))}
		for i := range min(n, len(specials)) {
			x[i] = specials[i]
		}
		dst, want := make([]float32, n), make([]float32, n)
		logisticF32(dst, x)
		logisticScalar(want, x)
		for i, v := range x {
			if math.Float32bits(dst[i]) != math.Float32bits(want[i]) {
				t.Fatalf("n=%d: σ(%g) = %g, scalar kernel %g", n, v, dst[i], want[i])
			}
			if exact := 1 / (1 + math.Exp(-float64(v))); math.Abs(float64(dst[i])-exact) > 2e-7 {
				t.Fatalf("n=%d: σ(%g) = %g, exact %g", n, v, dst[i], exact)
			}
		}
		logisticF32(x, x) // in place
		for i := range x {
			if x[i] != dst[i] {
				t.Fatalf("n=%d: in place [%d] = %g, want %g", n, i, x[i], dst[i])
			}
		}
	}
}

// BenchmarkLogisticF32 times σ over a SwiGLU gate of the 4M model's step
// (8·255 tokens × 704) on one goroutine: the kernel ("blocked") against
// the scalar-division version it replaced.
func BenchmarkLogisticF32(b *testing.B) {
	x := make([]float32, 8*255*704)
	r := rand.New(rand.NewPCG(19, 2))
	for i := range x {
		x[i] = float32(r.NormFloat64() * 3)
	}
	dst := make([]float32, len(x))
	for _, k := range []struct {
		name string
		fn   func(dst, x []float32)
	}{{"blocked", logisticF32}, {"scalar", logisticScalar}} {
		b.Run(k.name, func(b *testing.B) {
			b.SetBytes(int64(8 * len(x)))
			for b.Loop() {
				k.fn(dst, x)
			}
		})
	}
}
