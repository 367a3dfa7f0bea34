package tensor

import "golang.org/x/sys/cpu"

//go:noescape
func expAVX512(dst, src *float32, n int)

//go:noescape
func expAVX2(dst, src *float32, n int)

//go:noescape
func mulSiluAVX2(dst, a, gate *float32, n int)

//go:noescape
func siluGradMulAVX2(dst, v, u, gate *float32, n int)

//go:noescape
func expShiftScaleAVX2(dst, src *float32, n int, shift, scale float32)

// hasAVX512 reports AVX-512F, for the Exp and Max kernels.
var hasAVX512 = cpu.X86.HasAVX512F

// hasAVX2 reports AVX2 and FMA (with the OS's YMM state), for the 8-lane
// Exp and Max kernels that run where AVX-512 is missing.
var hasAVX2 = cpu.X86.HasAVX2 && cpu.X86.HasFMA

// expLanes is the width of the Exp and Max kernels, chosen once from the
// CPU: 16 (expAVX512, maxAVX512), 8 (expAVX2, maxAVX2), or 0 (none: the
// scalar exp32 and maxGo).
var expLanes = func() int {
	switch {
	case hasAVX512:
		return 16
	case hasAVX2:
		return 8
	}
	return 0
}()

// Exp writes dst[i] = e^x[i] (dst may be x; x at least as long as dst)
// with the vector kernel of the CPU, expAVX512 (16 lanes) or expAVX2 (8
// lanes), which give the same float32 for every input: within 2 ulp of the
// correctly rounded value, +Inf above 88.7228, 0 below about −103.97,
// subnormals rounded once, NaN for NaN. The last len(dst) mod lanes
// elements go through the kernel in a zero-padded block, so each element's
// value depends on x[i] alone, not on its position or len(dst). Without
// AVX2 and FMA, exp32 (correctly rounded but for rare near-ties).
func Exp(dst, x []float32) {
	expWith(dst, x, expLanes)
}

// expWith is Exp with the kernel of the given width (16, 8 or 0; the CPU
// must have it): the tests run every path the CPU has.
func expWith(dst, x []float32, lanes int) {
	x = x[:len(dst)]
	n := len(dst)
	if lanes == 0 {
		for i, v := range x {
			dst[i] = exp32(v)
		}
		return
	}
	nb := n &^ (lanes - 1)
	if nb > 0 {
		expBlocks(&dst[0], &x[0], nb, lanes)
	}
	if nb < n {
		var buf [16]float32
		copy(buf[:], x[nb:])
		expBlocks(&buf[0], &buf[0], lanes, lanes)
		copy(dst[nb:], buf[:n-nb])
	}
}

// expBlocks runs the kernel of the given width over n elements (a positive
// multiple of lanes).
func expBlocks(dst, src *float32, n, lanes int) {
	if lanes == 16 {
		expAVX512(dst, src, n)
	} else {
		expAVX2(dst, src, n)
	}
}

// mulSiluVec runs mulSiluAVX2 over the longest prefix of d that is a
// multiple of 8 (none without AVX2 and FMA) and returns its length; the
// caller does the rest. It gives MulSilu's float32s whichever Exp kernel
// the CPU has (expAVX2's values are expAVX512's).
func mulSiluVec(d, a, g []float32) int {
	n := len(d) &^ 7
	if !hasAVX2 || n == 0 {
		return 0
	}
	mulSiluAVX2(&d[0], &a[:n][0], &g[:n][0], n)
	return n
}

// siluGradMulVec is mulSiluVec for SiluGradMul (siluGradMulAVX2).
func siluGradMulVec(d, v, u, g []float32) int {
	n := len(d) &^ 7
	if !hasAVX2 || n == 0 {
		return 0
	}
	siluGradMulAVX2(&d[0], &v[:n][0], &u[:n][0], &g[:n][0], n)
	return n
}

// expShiftScaleVec is mulSiluVec for expShiftScale (expShiftScaleAVX2).
func expShiftScaleVec(d, x []float32, shift, scale float32) int {
	n := len(d) &^ 7
	if !hasAVX2 || n == 0 {
		return 0
	}
	expShiftScaleAVX2(&d[0], &x[:n][0], n, shift, scale)
	return n
}
