package tensor

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestRMSNormKernels compares RowDots and RMSNormGradRows with float64
// references over zero rows, single elements, odd and long rows, in and
// out of place.
func TestRMSNormKernels(t *testing.T) {
	r := rand.New(rand.NewPCG(8, 1))
	for _, c := range []struct{ rows, n int }{{0, 4}, {1, 1}, {5, 1}, {3, 7}, {9, 64}, {300, 200}, {2, 5000}} {
		t.Run(fmt.Sprintf("%dx%d", c.rows, c.n), func(t *testing.T) {
			m := c.rows * c.n
			a, b, g, y := make([]float32, m), make([]float32, m), make([]float32, m), make([]float32, m)
			for i := range a {
				a[i], b[i], g[i], y[i] = float32(r.NormFloat64()), float32(r.NormFloat64()), float32(r.NormFloat64()), float32(r.NormFloat64())
			}
			rs, cs := make([]float32, c.rows), make([]float32, c.rows)
			for j := range rs {
				rs[j], cs[j] = float32(r.Float64()+0.5), float32(r.NormFloat64())
			}
			dots := make([]float32, c.rows)
			RowDots(dots, a, b, c.n, 2)
			dx := make([]float32, m)
			RMSNormGradRows(dx, g, y, rs, cs, c.n, 2)
			for j := range c.rows {
				want, abs := 0.0, 0.0
				for i := range c.n {
					p := float64(a[j*c.n+i]) * float64(b[j*c.n+i])
					want += p
					abs += math.Abs(p)
				}
				if d := math.Abs(float64(dots[j]) - want); d > 1e-6*abs+1e-30 {
					t.Fatalf("row %d: dot %g, want %g", j, dots[j], want)
				}
				for i := range c.n {
					k := j*c.n + i
					w := float64(rs[j]) * (float64(g[k]) - float64(y[k])*float64(cs[j]))
					scale := float64(rs[j]) * (math.Abs(float64(g[k])) + math.Abs(float64(y[k]*cs[j])))
					if d := math.Abs(float64(dx[k]) - w); d > 1e-6*scale+1e-30 {
						t.Fatalf("[%d] = %g, want %g", k, dx[k], w)
					}
				}
			}
			RMSNormGradRows(g, g, y, rs, cs, c.n, 1) // in place
			for k := range g {
				if g[k] != dx[k] {
					t.Fatalf("in place [%d] = %g, want %g", k, g[k], dx[k])
				}
			}
		})
	}
}

// BenchmarkRMSNormKernels times the row dots and the gradient on the 25M
// benchmark model's hidden states ([8·256, 512]).
func BenchmarkRMSNormKernels(b *testing.B) {
	const rows, n = 8 * 256, 512
	r := rand.New(rand.NewPCG(1, 2))
	g, y, d := make([]float32, rows*n), make([]float32, rows*n), make([]float32, rows*n)
	for i := range g {
		g[i], y[i] = float32(r.NormFloat64()), float32(r.NormFloat64())
	}
	rs, cs := make([]float32, rows), make([]float32, rows)
	for j := range rs {
		rs[j], cs[j] = 1, 0.5
	}
	benchBytes(b, "rowdots", 8*rows*n, func() { RowDots(cs, g, y, n, 0) })
	benchBytes(b, "gradient", 12*rows*n, func() { RMSNormGradRows(d, g, y, rs, cs, n, 0) })
}
