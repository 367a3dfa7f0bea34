package gocpu

import "golang.org/x/sys/cpu"

// hasAVX512 reports AVX-512F, for the division kernels.
var hasAVX512 = cpu.X86.HasAVX512F

//go:noescape
func divVVAVX512(dst, a, b *float32, n int)

//go:noescape
func divVSAVX512(dst, a *float32, s float32, n int)

// divVV writes dst[i] = a[i] / b[i] (dst may be exactly a or b): AVX-512
// for blocks of 16, plain Go for the rest; both are IEEE division.
func divVV(dst, a, b []float32) {
	a, b = a[:len(dst)], b[:len(dst)]
	n16 := 0
	if hasAVX512 {
		if n16 = len(dst) &^ 15; n16 > 0 {
			divVVAVX512(&dst[0], &a[0], &b[0], n16)
		}
	}
	for i := n16; i < len(dst); i++ {
		dst[i] = a[i] / b[i]
	}
}

// divVS writes dst[i] = a[i] / s (dst may be exactly a).
func divVS(dst, a []float32, s float32) {
	a = a[:len(dst)]
	n16 := 0
	if hasAVX512 {
		if n16 = len(dst) &^ 15; n16 > 0 {
			divVSAVX512(&dst[0], &a[0], s, n16)
		}
	}
	for i := n16; i < len(dst); i++ {
		dst[i] = a[i] / s
	}
}
