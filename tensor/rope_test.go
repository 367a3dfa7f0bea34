package tensor

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestRopeRows compares the fused rotary embedding and its gradient with
// the float64 formulas over zero rows, one position and head, odd head
// counts and long rows, and checks that the gradient is the forward's
// transpose: ⟨rope(x), g⟩ = ⟨x, rope′(g)⟩.
func TestRopeRows(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 21))
	for _, c := range []struct{ rows, heads, h int }{{0, 2, 4}, {1, 1, 2}, {3, 5, 6}, {7, 2, 64}, {300, 4, 128}} {
		t.Run(fmt.Sprintf("%dx%dx%d", c.rows, c.heads, c.h), func(t *testing.T) {
			n := c.rows * c.heads * c.h
			x, g := make([]float32, n), make([]float32, n)
			cos, sin := make([]float32, c.rows*c.h), make([]float32, c.rows*c.h)
			for i := range x {
				x[i], g[i] = float32(r.NormFloat64()), float32(r.NormFloat64())
			}
			for i := range cos {
				a := r.Float64() * 100
				cos[i], sin[i] = float32(math.Cos(a)), float32(math.Sin(a))
			}
			y, dx := make([]float32, n), make([]float32, n)
			RopeRows(y, x, cos, sin, c.heads, c.h, false, 2)
			RopeRows(dx, g, cos, sin, c.heads, c.h, true, 2)
			half := c.h / 2
			var lhs, rhs float64
			for i := range x {
				row, j := i/(c.heads*c.h), i%c.h
				cv, sv := float64(cos[row*c.h+j]), float64(sin[row*c.h+j])
				rot := float64(x[i-half*min(j/half, 1)]) // rot(x) = [−x₂, x₁]
				if j < half {
					rot = -float64(x[i+half])
				}
				want := float64(x[i])*cv + rot*sv
				if math.Abs(float64(y[i])-want) > 1e-6*(1+math.Abs(want)) {
					t.Fatalf("y[%d] = %g, want %g", i, y[i], want)
				}
				lhs += float64(y[i]) * float64(g[i])
				rhs += float64(x[i]) * float64(dx[i])
			}
			if math.Abs(lhs-rhs) > 1e-5*(1+math.Abs(lhs))*math.Sqrt(float64(n+1)) {
				t.Fatalf("⟨rope(x), g⟩ = %g, ⟨x, rope′(g)⟩ = %g", lhs, rhs)
			}
		})
	}
}

// BenchmarkRopeRows runs the forward and the gradient over one 25M
// layer's queries (8 × 256 positions, 8 heads of 64).
func BenchmarkRopeRows(b *testing.B) {
	const rows, heads, h = 8 * 256, 8, 64
	x, y := make([]float32, rows*heads*h), make([]float32, rows*heads*h)
	cos, sin := make([]float32, rows*h), make([]float32, rows*h)
	for range b.N {
		RopeRows(y, x, cos, sin, heads, h, false, 0)
		RopeRows(x, y, cos, sin, heads, h, true, 0)
	}
}
