//go:build vexp

package cpubackend

import (
	"fmt"
	"math"
	"testing"

	"github.com/viterin/vek/vek32"
)

func TestVekExp(t *testing.T) {
	xs := []float32{-1e30, -1000, -104, -103, -88.5, -88, -87, -10, -1, -1e-8, 0, 1e-8, 0.5, 1, 10, 80, 88, 88.7, 88.8, 89, 100, float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))}
	got := vek32.Exp(xs)
	for i, x := range xs {
		fmt.Printf("%g -> %g (want %g)\n", x, got[i], float32(math.Exp(float64(x))))
	}
	n := 1 << 20
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(-87 + 175*float64(i)/float64(n))
	}
	g := vek32.Exp(x)
	maxu := 0.0
	for i, v := range x {
		w := float32(math.Exp(float64(v)))
		ulp := float64(math.Nextafter32(w, float32(math.Inf(1))) - w)
		maxu = max(maxu, math.Abs(float64(g[i]-w))/ulp)
	}
	fmt.Println("max ulp", maxu)
	l := vek32.Log([]float32{-1, 0, 1e-40, 1, 2, float32(math.NaN()), float32(math.Inf(1)), 1e30})
	fmt.Println("log", l)
}
