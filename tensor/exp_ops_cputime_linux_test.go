package tensor

import (
	"math/rand/v2"
	"runtime"
	"testing"
)

// BenchmarkExpOpsCPUTime times, on one thread in thread CPU time (which
// other processes on a shared machine do not inflate), the kernels of a
// training step that exponentiate, on the 25M benchmark model's shapes:
// the SwiGLU forward and gate gradient ([8·256, 1408]), the log-sum-exp
// and its gradient over 64 rows of the vocabulary (16,384), and the
// softmax of one layer's attention scores ([8, 8, 256, 256]). CPU ns per
// element:
//
//	go test -run '^$' -bench ExpOpsCPUTime ./tensor/
func BenchmarkExpOpsCPUTime(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	n := 8 * 256 * 1408
	v, u, g, d := make([]float32, n), make([]float32, n), make([]float32, n), make([]float32, n)
	for i := range g {
		v[i], u[i], g[i] = float32(r.NormFloat64()), float32(r.NormFloat64()), float32(r.NormFloat64())
	}
	const rows, vocab = 64, 16384
	x := randVec(r, rows*vocab)
	s, l, gs := make([]float32, rows), make([]float32, rows), make([]float32, rows)
	e := make([]float32, len(x))
	sc := randVec(r, 8*8*256*256)
	p := make([]float32, len(sc))
	for _, c := range []struct {
		name string
		n    int
		f    func()
	}{
		{"MulSilu", n, func() { MulSilu(d, u, g, 1) }},
		{"SiluGradMul", n, func() { SiluGradMul(d, v, u, g, 1) }},
		{"SumExpRows", len(x), func() { SumExpRows(s, x, vocab, 1) }},
		{"ExpShiftScaleRows", len(x), func() { ExpShiftScaleRows(e, x, l, gs, vocab, 1) }},
		{"SoftmaxRows", len(sc), func() { SoftmaxRows(p, sc, 256, 1) }},
	} {
		b.Run(c.name, func(b *testing.B) { benchCPU(b, c.n, c.f) })
	}
}

// benchCPU runs f b.N times on a locked thread and reports the thread CPU
// time per element of the n it handles.
func benchCPU(b *testing.B, n int, f func()) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	f()
	t0 := threadCPU()
	for b.Loop() {
		f()
	}
	b.ReportMetric((threadCPU()-t0)/float64(b.N)/float64(n)*1e9, "cpu-ns/elem")
}
