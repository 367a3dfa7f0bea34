package gocpu

import "golang.org/x/sys/cpu"

// hasAVX512 reports AVX-512F, and hasAVX2 AVX2, for the division kernels.
var (
	hasAVX512 = cpu.X86.HasAVX512F
	hasAVX2   = cpu.X86.HasAVX2
)

//go:noescape
func divVVAVX512(dst, a, b *float32, n int)

//go:noescape
func divVSAVX512(dst, a *float32, s float32, n int)

//go:noescape
func divVVAVX2(dst, a, b *float32, n int)

//go:noescape
func divVSAVX2(dst, a *float32, s float32, n int)

//go:noescape
func divSVAVX2(dst *float32, s float32, b *float32, n int)

// divVV writes dst[i] = a[i] / b[i] (dst may be exactly a or b): AVX-512
// for blocks of 16, or without it AVX2 for blocks of 8, plain Go for the
// rest; all are IEEE division (bit-identical).
func divVV(dst, a, b []float32) {
	a, b = a[:len(dst)], b[:len(dst)]
	n16 := 0
	switch {
	case hasAVX512:
		if n16 = len(dst) &^ 15; n16 > 0 {
			divVVAVX512(&dst[0], &a[0], &b[0], n16)
		}
	case hasAVX2:
		if n16 = len(dst) &^ 7; n16 > 0 {
			divVVAVX2(&dst[0], &a[0], &b[0], n16)
		}
	}
	for i := n16; i < len(dst); i++ {
		dst[i] = a[i] / b[i]
	}
}

// divVS writes dst[i] = a[i] / s (dst may be exactly a), with the
// kernels of divVV.
func divVS(dst, a []float32, s float32) {
	a = a[:len(dst)]
	n16 := 0
	switch {
	case hasAVX512:
		if n16 = len(dst) &^ 15; n16 > 0 {
			divVSAVX512(&dst[0], &a[0], s, n16)
		}
	case hasAVX2:
		if n16 = len(dst) &^ 7; n16 > 0 {
			divVSAVX2(&dst[0], &a[0], s, n16)
		}
	}
	for i := n16; i < len(dst); i++ {
		dst[i] = a[i] / s
	}
}

// divSV writes dst[i] = s / b[i] (dst may be exactly b): AVX2 for blocks
// of 8 (also where AVX-512 is present), plain Go for the rest.
func divSV(dst []float32, s float32, b []float32) {
	b = b[:len(dst)]
	n8 := 0
	if hasAVX2 {
		if n8 = len(dst) &^ 7; n8 > 0 {
			divSVAVX2(&dst[0], s, &b[0], n8)
		}
	}
	for i := n8; i < len(dst); i++ {
		dst[i] = s / b[i]
	}
}
