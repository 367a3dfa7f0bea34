package tensor

import "golang.org/x/sys/cpu"

// Assembly kernels of gemv_amd64.s; lengths and strides in elements, pf in
// bytes.

//go:noescape
func sgemv8AVX512(k int, x, w *float32, ldw, pf int, out *float32)

//go:noescape
func bgemv8AVX512(k int, x *float32, w *uint16, ldw, pf int, out *float32)

//go:noescape
func sgemv8AVX2(k int, x, w *float32, ldw, pf int, out *float32)

//go:noescape
func bgemv8AVX2(k int, x *float32, w *uint16, ldw, pf int, out *float32)

// gemvAsm returns the AVX-512 GEMV kernels, else the AVX2 ones, or nil
// without AVX2 and FMA. Both sets take k in multiples of 16, the GEMM's
// dotAlign on both.
func gemvAsm() *gemvKernelSet {
	switch {
	case cpu.X86.HasAVX512F && cpu.X86.HasAVX512VL:
		return gemvAsmSet("avx512", sgemv8AVX512Go, bgemv8AVX512Go)
	case cpu.X86.HasAVX2 && cpu.X86.HasFMA:
		return gemvAsmSet("avx2", sgemv8AVX2Go, bgemv8AVX2Go)
	}
	return nil
}

// gemvAsmSet is a pair of 8-row kernels for gemvKernelSet.
func gemvAsmSet(name string, f32 func(k int, x, w []float32, ldw, pf int) [8]float32,
	bf16 func(k int, x []float32, w []uint16, ldw, pf int) [8]float32) *gemvKernelSet {
	return &gemvKernelSet{name: name, align: 16, f32: f32, bf16: bf16}
}

// The assembly kernels with their sums returned by value (each calls its
// kernel directly, so out stays on its stack), bounds checked once per
// call, on the last weight read.

func sgemv8AVX512Go(k int, x, w []float32, ldw, pf int) (out [8]float32) {
	_ = w[7*ldw+k-1]
	sgemv8AVX512(k, &x[0], &w[0], ldw, pf, &out[0])
	return out
}

func bgemv8AVX512Go(k int, x []float32, w []uint16, ldw, pf int) (out [8]float32) {
	_ = w[7*ldw+k-1]
	bgemv8AVX512(k, &x[0], &w[0], ldw, pf, &out[0])
	return out
}

func sgemv8AVX2Go(k int, x, w []float32, ldw, pf int) (out [8]float32) {
	_ = w[7*ldw+k-1]
	sgemv8AVX2(k, &x[0], &w[0], ldw, pf, &out[0])
	return out
}

func bgemv8AVX2Go(k int, x []float32, w []uint16, ldw, pf int) (out [8]float32) {
	_ = w[7*ldw+k-1]
	bgemv8AVX2(k, &x[0], &w[0], ldw, pf, &out[0])
	return out
}
