package gocpu

import (
	"github.com/cas-engine/cas/tensor"
	"github.com/gomlx/gomlx/backends"
)

//go:noescape
func addVVAVX2(dst, a, b *float32, n int)

//go:noescape
func subVVAVX2(dst, a, b *float32, n int)

//go:noescape
func mulVVAVX2(dst, a, b *float32, n int)

//go:noescape
func addVSAVX2(dst, a *float32, s float32, n int)

//go:noescape
func mulVSAVX2(dst, a *float32, s float32, n int)

//go:noescape
func subSVAVX2(dst *float32, s float32, b *float32, n int)

//go:noescape
func sqrtAVX2(dst, x *float32, n int)

// sqrtF32 writes dst[i] = float32(√x[i]) (dst may be exactly x): VSQRTPS
// for blocks of 8 where the CPU has AVX2, Go for the rest; the same bits
// (a float32 square root rounded through float64 is correctly rounded).
func sqrtF32(dst, x []float32) {
	x = x[:len(dst)]
	n8 := 0
	if hasAVX2 {
		if n8 = len(dst) &^ 7; n8 > 0 {
			sqrtAVX2(&dst[0], &x[0], n8)
		}
	}
	sqrtGo(dst[n8:], x[n8:])
}

// arithAVX2 is the kernel set of Add, Sub and Mul on AVX2 (nil without
// it): one pass from the operands to the destination, 8 lanes at a time
// (arith_amd64.s; Sub's vector − scalar is tensor.SubScalar, the same
// kernel the softmax shifts use), the scalar op for the last len mod 8
// elements. Every
// element is the IEEE result of its operands, as with vek's kernels,
// which it replaces because their _Into forms copy x into dst and then
// run in place (two passes; a third of a fused chain's time).
var arithAVX2 = func() map[backends.OpType]binaryKernel {
	if !hasAVX2 {
		return nil
	}
	add := func(a, b float32) float32 { return a + b }
	sub := func(a, b float32) float32 { return a - b }
	mul := func(a, b float32) float32 { return a * b }
	return map[backends.OpType]binaryKernel{
		backends.OpTypeAdd: {vv: vvAVX2(addVVAVX2, add), vs: vsAVX2(addVSAVX2, add), sv: commutedSV(vsAVX2(addVSAVX2, add))},
		backends.OpTypeSub: {vv: vvAVX2(subVVAVX2, sub), vs: tensor.SubScalar, sv: svAVX2(subSVAVX2, sub)},
		backends.OpTypeMul: {vv: vvAVX2(mulVVAVX2, mul), vs: vsAVX2(mulVSAVX2, mul), sv: commutedSV(vsAVX2(mulVSAVX2, mul))},
	}
}()

// vvAVX2 makes a vv kernel (dst may be exactly a or b) of an AVX2 kernel
// for blocks of 8 and op for the rest.
func vvAVX2(k func(dst, a, b *float32, n int), op func(a, b float32) float32) func(d, a, b []float32) {
	return func(d, a, b []float32) {
		a, b = a[:len(d)], b[:len(d)]
		n8 := len(d) &^ 7
		if n8 > 0 {
			k(&d[0], &a[0], &b[0], n8)
		}
		for i := n8; i < len(d); i++ {
			d[i] = op(a[i], b[i])
		}
	}
}

// vsAVX2 makes a vs kernel (dst may be exactly a).
func vsAVX2(k func(dst, a *float32, s float32, n int), op func(a, b float32) float32) func(d, a []float32, s float32) {
	return func(d, a []float32, s float32) {
		a = a[:len(d)]
		n8 := len(d) &^ 7
		if n8 > 0 {
			k(&d[0], &a[0], s, n8)
		}
		for i := n8; i < len(d); i++ {
			d[i] = op(a[i], s)
		}
	}
}

// svAVX2 makes an sv kernel (dst may be exactly b).
func svAVX2(k func(dst *float32, s float32, b *float32, n int), op func(a, b float32) float32) func(d []float32, s float32, b []float32) {
	return func(d []float32, s float32, b []float32) {
		b = b[:len(d)]
		n8 := len(d) &^ 7
		if n8 > 0 {
			k(&d[0], s, &b[0], n8)
		}
		for i := n8; i < len(d); i++ {
			d[i] = op(s, b[i])
		}
	}
}
