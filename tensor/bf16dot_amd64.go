package tensor

import "golang.org/x/sys/cpu"

//go:noescape
func bdot4x4AVX512BF16(k int, a *uint16, lda int, w *uint16, ldw int, out *float32)

//go:noescape
func bdotPeakAVX512BF16(n int)

//go:noescape
func bdot1x4AVX512BF16(k int, a *uint16, w *uint16, ldw int, out *float32)

//go:noescape
func f16ToBF16AVX512(dst, src *uint16, n int)

// hasF16ToBF16Vec: f16ToBF16AVX512 runs here (AVX-512 with F16C).
var hasF16ToBF16Vec = cpu.X86.HasAVX512F

// f16ToBF16Vec converts the first len(dst)&^15 values as F16ToBF16 does
// and returns how many it converted (0 without AVX-512).
func f16ToBF16Vec(dst, src []uint16) int {
	n := len(dst) &^ 15
	if n == 0 || !hasF16ToBF16Vec {
		return 0
	}
	_ = src[n-1]
	f16ToBF16AVX512(&dst[0], &src[0], n)
	return n
}

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
