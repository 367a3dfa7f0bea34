package tensor

// SwiGLU (Shazeer 2020), the gated MLP activation silu(g) ⊙ u with
// silu(g) = g·σ(g), forward and backward, fused: one pass each where the
// unfused graph writes σ(g), g·σ(g) and the products separately.

// swigluBlock is the block of elements the SwiGLU kernels exponentiate at
// once (on the stack).
const swigluBlock = 256

// sigmoidBlock writes s[i] = σ(g[i]) = 1 / (1 + e^−g[i]) (len(s) ≤
// swigluBlock) with the Exp kernel of width lanes (expWith): 0 for g below
// about −88 (e^−g overflows to +Inf), 1 above about 17.
func sigmoidBlock(s, g []float32, lanes int) {
	g = g[:len(s)]
	for i, v := range g {
		s[i] = -v
	}
	expWith(s, s, lanes)
	for i, e := range s {
		s[i] = 1 / (1 + e)
	}
}

// MulSilu writes dst[i] = a[i] · silu(g[i]) = a[i] · (g[i] · σ(g[i])) (dst
// may be a or g): the SwiGLU forward (a = up) and its gradient with
// respect to up (a = the output's gradient). With AVX2 and FMA one pass of
// mulSiluAVX2 (σ by expAVX2's exponential, then the same roundings as
// below), else mulSiluGo; both give the same float32s. Elements are split
// over up to workers goroutines (≤ 0: GOMAXPROCS).
func MulSilu(dst, a, g []float32, workers int) {
	checkLen("MulSilu: a", len(a), len(dst))
	checkLen("MulSilu: g", len(g), len(dst))
	swigluParallel(len(dst), workers, func(lo, hi int) {
		d, ab, gb := dst[lo:hi], a[lo:hi], g[lo:hi]
		n := mulSiluVec(d, ab, gb)
		mulSiluGo(d[n:], ab[n:], gb[n:], expLanes)
	})
}

// mulSiluGo is MulSilu on one goroutine (σ by the Exp kernel of width
// lanes).
func mulSiluGo(d, a, g []float32, lanes int) {
	sigmoidBlocks(g[:len(d)], lanes, func(b, e int, sb []float32) {
		ab, gb, db := a[b:e], g[b:e], d[b:e]
		for i, sv := range sb {
			db[i] = ab[i] * (gb[i] * sv)
		}
	})
}

// SiluGradMul writes the SwiGLU gradient with respect to the gate,
//
//	dst[i] = v[i] · u[i] · silu′(g[i]),   silu′(g) = σ + g·(σ − σ²),
//
// for the output's gradient v and the up projection u (dst may be any
// operand), as (v·u)·(σ + g·(σ − σ·σ)) with every operation rounded (no
// FMA): siluGradMulAVX2 with AVX2 and FMA, else siluGradMulGo, the same
// float32s.
func SiluGradMul(dst, v, u, g []float32, workers int) {
	checkLen("SiluGradMul: v", len(v), len(dst))
	checkLen("SiluGradMul: u", len(u), len(dst))
	checkLen("SiluGradMul: g", len(g), len(dst))
	swigluParallel(len(dst), workers, func(lo, hi int) {
		d, vb, ub, gb := dst[lo:hi], v[lo:hi], u[lo:hi], g[lo:hi]
		n := siluGradMulVec(d, vb, ub, gb)
		siluGradMulGo(d[n:], vb[n:], ub[n:], gb[n:], expLanes)
	})
}

// siluGradMulGo is SiluGradMul on one goroutine, σ by sigmoidBlock (the
// Exp kernel of width lanes). The explicit conversions round each product
// (Go may otherwise fuse a product and a sum into an FMA, as GOAMD64=v3
// builds do), so the values do not depend on the build.
func siluGradMulGo(d, v, u, g []float32, lanes int) {
	sigmoidBlocks(g[:len(d)], lanes, func(b, e int, sb []float32) {
		vb, ub, gb, db := v[b:e], u[b:e], g[b:e], d[b:e]
		for i, sv := range sb {
			sq := float32(sv * sv)
			t := float32(gb[i] * (sv - sq))
			db[i] = (vb[i] * ub[i]) * (sv + t)
		}
	})
}

// sigmoidBlocks calls fn(b, e, σ(g[b:e])) for blocks [b, e) of at most
// swigluBlock elements covering g, σ by sigmoidBlock (the Exp kernel of
// width lanes).
func sigmoidBlocks(g []float32, lanes int, fn func(b, e int, s []float32)) {
	var s [swigluBlock]float32
	for b := 0; b < len(g); b += swigluBlock {
		e := min(len(g), b+swigluBlock)
		sb := s[:e-b]
		sigmoidBlock(sb, g[b:e], lanes)
		fn(b, e, sb)
	}
}

// swigluParallel runs fn over [0, n) in ranges aligned to swigluBlock, on
// up to workers goroutines when n is large enough.
func swigluParallel(n, workers int, fn func(lo, hi int)) {
	if n < softmaxMinElems {
		if n > 0 {
			fn(0, n)
		}
		return
	}
	ParallelFor(n, workers, swigluBlock, func(_, lo, hi int) { fn(lo, hi) })
}
