package tensor

import "golang.org/x/sys/cpu"

//go:noescape
func expAVX512(dst, src *float32, n int)

// hasAVX512 reports AVX-512F, for the Exp and Max kernels.
var hasAVX512 = cpu.X86.HasAVX512F

// Exp writes dst[i] = e^x[i] (dst may be x; x at least as long as dst):
// AVX-512 for blocks of 16 (within 2 ulp of the correctly rounded value),
// exp32 for the rest.
func Exp(dst, x []float32) {
	x = x[:len(dst)]
	n16 := 0
	if hasAVX512 {
		n16 = len(dst) &^ 15
		if n16 > 0 {
			expAVX512(&dst[0], &x[0], n16)
		}
	}
	for i := n16; i < len(dst); i++ {
		dst[i] = exp32(x[i])
	}
}
