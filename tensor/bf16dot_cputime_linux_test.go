package tensor

import (
	"math/rand/v2"
	"runtime"
	"testing"
)

// BenchmarkDotBF16CPUTime compares, in CPU time of the running thread
// (which other processes on a shared machine do not inflate), the bfloat16
// products (VDPBF16PS dot kernel; AMX tiles, alone and with the packing a
// search tile needs) with the F32 GEMM on the flat-search shape (64
// queries × 1,024 rows × d 768): GFLOP per CPU-second.
//
//	go test -run '^$' -bench DotBF16CPUTime ./tensor/
func BenchmarkDotBF16CPUTime(b *testing.B) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	const m, n, k = 64, 1024, 768
	rng := rand.New(rand.NewPCG(5, 6))
	a16, w16 := randBF16(rng, m*k), randBF16(rng, n*k)
	a32, w32 := randF32(rng, m*k), randF32(rng, n*k)
	out := make([]float32, m*n)
	cases := map[string]func(){
		"f32-gemm": func() { MatMulT(out, a32, w32, m, n, k, 1) },
	}
	if bf16Kernels != nil {
		cases["bf16-vdpbf16ps"] = func() { dotBF16Block(bf16Kernels, out, n, a16, m, w16, n, k) }
	}
	if amxKernel != nil {
		// AMX: the product alone, and with the rows packed from F16 codes
		// and the queries rounded first, as a flat search tile does.
		var p BF16Panels
		h := make([]uint16, n*k)
		EncodeF16(h, w32)
		scratch := p.PackF16(h, n, k, nil)
		qb := PadBF16Queries(nil, a32, m, k)
		cases["bf16-amx"] = func() { DotBF16Panels(out, n, qb, m, &p) }
		cases["bf16-amx+pack"] = func() {
			scratch = p.PackF16(h, n, k, scratch)
			qb = PadBF16Queries(qb, a32, m, k)
			DotBF16Panels(out, n, qb, m, &p)
		}
	}
	if bf16Kernels != nil && gemmKernels.peak != nil {
		// The register peaks of the two instructions, measured the same way.
		const rounds = 1 << 20
		t0 := threadCPU()
		gemmKernels.peak(rounds)
		f32 := float64(rounds) * float64(gemmKernels.peakFlops) / (threadCPU() - t0) / 1e9
		t0 = threadCPU()
		bf16Kernels.peak(rounds)
		bf := float64(rounds) * 1536 / (threadCPU() - t0) / 1e9
		b.Logf("register peak: F32 FMA %.0f GFLOP/cpu-s, VDPBF16PS %.0f GFLOP/cpu-s (%.2f×)", f32, bf, bf/f32)
	}
	for name, f := range cases {
		b.Run(name, func(b *testing.B) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			f()
			t0 := threadCPU()
			for b.Loop() {
				f()
			}
			b.ReportMetric(2*float64(m*n*k)*float64(b.N)/(threadCPU()-t0)/1e9, "GFLOP/cpu-s")
		})
	}
}
