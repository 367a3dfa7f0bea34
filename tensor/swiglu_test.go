package tensor

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// TestSwiGLU compares MulSilu and SiluGradMul with float64 references
// over empty, single, odd and long inputs, large-magnitude gates (σ
// saturating at 0 and 1) and in place.
func TestSwiGLU(t *testing.T) {
	r := rand.New(rand.NewPCG(6, 1))
	for _, n := range []int{0, 1, 7, 255, 256, 257, 1000, 70001} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			v, u, g := make([]float32, n), make([]float32, n), make([]float32, n)
			for i := range g {
				v[i], u[i], g[i] = float32(r.NormFloat64()), float32(r.NormFloat64()), float32(r.NormFloat64()*4)
				if i%97 == 5 {
					g[i] = float32(r.NormFloat64() * 200) // saturated
				}
			}
			y, dg := make([]float32, n), make([]float32, n)
			MulSilu(y, u, g, 2)
			SiluGradMul(dg, v, u, g, 2)
			for i := range g {
				gd := float64(g[i])
				s := 1 / (1 + math.Exp(-gd))
				wy := float64(u[i]) * gd * s
				wdg := float64(v[i]) * float64(u[i]) * (s + gd*s*(1-s))
				if d := math.Abs(float64(y[i]) - wy); d > 1e-6*math.Abs(wy)+1e-30 {
					t.Fatalf("MulSilu [%d] (g=%g) = %g, want %g", i, g[i], y[i], wy)
				}
				// σ − σ² cancels near σ = 1: absolute error of g·(σ−σ²) is
				// about |g|·2⁻²⁴.
				tol := 1e-6*math.Abs(wdg) + 1e-7*math.Abs(float64(v[i]*u[i]))*(1+math.Abs(gd))
				if d := math.Abs(float64(dg[i]) - wdg); d > tol {
					t.Fatalf("SiluGradMul [%d] (g=%g) = %g, want %g", i, g[i], dg[i], wdg)
				}
			}
			// In place.
			y2 := append([]float32(nil), u...)
			MulSilu(y2, y2, g, 1)
			dg2 := append([]float32(nil), g...)
			SiluGradMul(dg2, v, u, dg2, 1)
			for i := range g {
				if y2[i] != y[i] || dg2[i] != dg[i] {
					t.Fatalf("in place [%d]: %g, %g, want %g, %g", i, y2[i], dg2[i], y[i], dg[i])
				}
			}
		})
	}
}

// BenchmarkSwiGLU times the fused SwiGLU forward and gate gradient on the
// 25M benchmark model's MLP activations ([8·256, 1408]).
func BenchmarkSwiGLU(b *testing.B) {
	n := 8 * 256 * 1408
	r := rand.New(rand.NewPCG(1, 2))
	v, u, g, d := make([]float32, n), make([]float32, n), make([]float32, n), make([]float32, n)
	for i := range g {
		v[i], u[i], g[i] = float32(r.NormFloat64()), float32(r.NormFloat64()), float32(r.NormFloat64())
	}
	benchBytes(b, "forward", 12*n, func() { MulSilu(d, u, g, 0) })
	benchBytes(b, "gate-gradient", 16*n, func() { SiluGradMul(d, v, u, g, 0) })
}
