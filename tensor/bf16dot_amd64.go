package tensor

import "golang.org/x/sys/cpu"

//go:noescape
func bdot4x4AVX512BF16(k int, a *uint16, lda int, w *uint16, ldw int, out *float32)

//go:noescape
func bdotPeakAVX512BF16(n int)

//go:noescape
func bdot1x4AVX512BF16(k int, a *uint16, w *uint16, ldw int, out *float32)

// bf16Kernels is the AVX512-BF16 set where the CPU has it (nil: the plain
// loop of dotBF16Block).
var bf16Kernels = func() *bf16KernelSet {
	if !cpu.X86.HasAVX512F || !cpu.X86.HasAVX512BW || !cpu.X86.HasAVX512BF16 {
		return nil
	}
	return &bf16KernelSet{
		peak: bdotPeakAVX512BF16,
		dot4x4: func(k int, a []uint16, lda int, w []uint16, ldw int, out *[16]float32) {
			_ = a[3*lda+k-1]
			_ = w[3*ldw+k-1]
			bdot4x4AVX512BF16(k, &a[0], lda, &w[0], ldw, &out[0])
		},
		dot1x4: func(k int, a, w []uint16, ldw int, out *[4]float32) {
			_ = a[k-1]
			_ = w[3*ldw+k-1]
			bdot1x4AVX512BF16(k, &a[0], &w[0], ldw, &out[0])
		},
	}
}()
