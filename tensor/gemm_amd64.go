package tensor

import "golang.org/x/sys/cpu"

// Assembly kernels of gemm_amd64.s. Lengths are in elements; every pointer
// must address enough memory for the documented accesses (the Go wrappers in
// gemm.go guarantee it).

//go:noescape
func sgemm12x32AVX512(k int, a, b *float32, ldb int, c *float32, ldc int, acc bool)

//go:noescape
func sgemm6x16AVX2(k int, a, b *float32, ldb int, c *float32, ldc int, acc bool)

//go:noescape
func packRunsAVX2(src *float32, ps int, dst *float32, kc, panels, w int)

//go:noescape
func transpose8AVX2(src *float32, lds int, dst *float32, ldd, k, rows int)

//go:noescape
func sdot4x4AVX512(k int, a *float32, lda int, w *float32, ldw int, out *float32)

//go:noescape
func sdot1x8AVX512(k int, a, w *float32, ldw int, out *float32)

//go:noescape
func transpose16AVX512(src *float32, lds int, dst *float32, ldd, k, rows int)

//go:noescape
func fmaPeakAVX512(n int) float32

//go:noescape
func fmaPeakAVX2(n int) float32

// gemmAsmSets lists the assembly kernel sets this CPU runs, best first.
func gemmAsmSets() []*gemmKernelSet {
	var sets []*gemmKernelSet
	if cpu.X86.HasAVX512F && cpu.X86.HasAVX512VL {
		set := &gemmKernelSet{
			name: "avx512",
			mr:   12, nr: 32,
			micro: func(k int, a, b []float32, ldb int, c []float32, ldc int, acc bool) {
				sgemm12x32AVX512(k, &a[0], &b[0], ldb, &c[0], ldc, acc)
			},
			dot4x4: func(k int, a []float32, lda int, w []float32, ldw int, out *[16]float32) {
				sdot4x4AVX512(k, &a[0], lda, &w[0], ldw, &out[0])
			},
			dot1x8: func(k int, a, w []float32, ldw int, out *[8]float32) {
				sdot1x8AVX512(k, &a[0], &w[0], ldw, &out[0])
			},
			dotAlign: 16,
			transpose: func(src []float32, lds int, dst []float32, ldd, k, rows int) {
				_ = src[(rows-1)*lds+k-1]
				_ = dst[(k-1)*ldd+rows-1]
				transpose16AVX512(&src[0], lds, &dst[0], ldd, k, rows)
			},
			peak:      func(n int) { fmaPeakAVX512(n) },
			peakFlops: 24 * 16 * 2,
		}
		if cpu.X86.HasAVX2 {
			// The AVX2 copies serve the 12- and 32-wide panels too (not
			// measured on an AVX-512 machine; tested against
			// packDepthRuns on any AVX2 one, TestPackRunsAVX2).
			set.packRuns = packRunsAVX2Go
		}
		sets = append(sets, set)
	}
	if cpu.X86.HasAVX2 && cpu.X86.HasFMA {
		sets = append(sets, &gemmKernelSet{
			name: "avx2",
			mr:   6, nr: 16,
			micro: func(k int, a, b []float32, ldb int, c []float32, ldc int, acc bool) {
				sgemm6x16AVX2(k, &a[0], &b[0], ldb, &c[0], ldc, acc)
			},
			// The dot kernels of the vector index (kernels_amd64.s): one
			// 8-lane accumulator per (row, column) pair folded by HSUM,
			// as sgemv8AVX2 folds it. dotAlign is 16 as with AVX-512, so
			// that the same shapes take the dot path on both (k = 8, say
			// the head dimension of a tiny BERT, stays on the packed
			// path: an embedding must not depend on the batch it is in,
			// and batching changes which products have k-contiguous
			// operands).
			dot4x4: func(k int, a []float32, lda int, w []float32, ldw int, out *[16]float32) {
				_, _ = a[3*lda+k-1], w[3*ldw+k-1]
				dot3x4AVX2(&a[0], lda, &w[0], ldw, k, &out[0])
				dot1x4AVX2(&a[3*lda], &w[0], ldw, k, &out[12])
			},
			dot1x8: func(k int, a, w []float32, ldw int, out *[8]float32) {
				_, _ = a[k-1], w[7*ldw+k-1]
				dot1x4AVX2(&a[0], &w[0], ldw, k, &out[0])
				dot1x4AVX2(&a[0], &w[4*ldw], ldw, k, &out[4])
			},
			dotAlign:  16,
			transpose: transposeAVX2,
			packRuns:  packRunsAVX2Go,
			peak:      func(n int) { fmaPeakAVX2(n) },
			peakFlops: 12 * 8 * 2,
		})
	}
	return sets
}

// transposeAVX2 is the AVX2 set's transpose (the contract in
// gemmKernelSet): rows is 16 (a 16-wide B panel, two blocks of 8 rows) or 6
// (an A panel); k is a positive multiple of 16.
func transposeAVX2(src []float32, lds int, dst []float32, ldd, k, rows int) {
	_ = src[(rows-1)*lds+k-1]
	_ = dst[(k-1)*ldd+rows-1]
	for r0 := 0; r0 < rows; r0 += 8 {
		transpose8AVX2(&src[r0*lds], lds, &dst[r0], ldd, k, min(8, rows-r0))
	}
}

// packRunsAVX2Go is the packRuns of both sets (the contract in
// gemmKernelSet): w is 6, 12, 16 or 32 (their mr and nr).
func packRunsAVX2Go(dst, src []float32, ps, kc, panels, w int) bool {
	if w != 6 && w != 12 && w != 16 && w != 32 {
		return false
	}
	_ = src[(kc-1)*ps+panels*w-1]
	_ = dst[panels*kc*w-1]
	packRunsAVX2(&src[0], ps, &dst[0], kc, panels, w)
	return true
}
