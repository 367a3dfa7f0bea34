package tensor

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// BenchmarkExpCPUTime times Exp's paths over a 4,096-float block (L1) and
// a 16,384-float logits row, in CPU time of the running thread (which
// other processes on a shared machine do not inflate): ns per element.
//
//	go test -run '^$' -bench ExpCPUTime ./tensor/
func BenchmarkExpCPUTime(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 4))
	for _, n := range []int{256, 4096, 16384} {
		x := make([]float32, n)
		for i := range x {
			x[i] = rng.Float32()*40 - 30
		}
		dst := make([]float32, n)
		for _, lanes := range vecPaths() {
			b.Run(fmt.Sprintf("n%d/lanes%d", n, lanes), func(b *testing.B) {
				benchCPU(b, n, func() { expWith(dst, x, lanes) })
			})
		}
	}
}

// BenchmarkMaxCPUTime times Max's paths over a 16,384-float row in CPU
// time of the running thread: ns per element.
func BenchmarkMaxCPUTime(b *testing.B) {
	rng := rand.New(rand.NewPCG(3, 5))
	x := make([]float32, 16384)
	for i := range x {
		x[i] = rng.Float32()*100 - 50
	}
	for _, lanes := range vecPaths() {
		b.Run(fmt.Sprintf("lanes%d", lanes), func(b *testing.B) {
			benchCPU(b, len(x), func() { x[0] = maxWith(x, lanes) - 1 })
		})
	}
}
