package tensor

// SwiGLU (Shazeer 2020), the gated MLP activation silu(g) ⊙ u with
// silu(g) = g·σ(g), forward and backward, fused: one pass each where the
// unfused graph writes σ(g), g·σ(g) and the products separately.

// swigluBlock is the block of elements the SwiGLU kernels exponentiate at
// once (on the stack).
const swigluBlock = 256

// sigmoidBlock writes s[i] = σ(g[i]) = 1 / (1 + e^−g[i]) (len(s) ≤
// swigluBlock): 0 for g below about −88 (e^−g overflows to +Inf), 1 above
// about 17.
func sigmoidBlock(s, g []float32) {
	g = g[:len(s)]
	for i, v := range g {
		s[i] = -v
	}
	Exp(s, s)
	for i, e := range s {
		s[i] = 1 / (1 + e)
	}
}

// MulSilu writes dst[i] = a[i] · silu(g[i]) = a[i] · g[i] · σ(g[i]) (dst
// may be a or g): the SwiGLU forward (a = up) and its gradient with
// respect to up (a = the output's gradient). Elements are split over up
// to workers goroutines (≤ 0: GOMAXPROCS).
func MulSilu(dst, a, g []float32, workers int) {
	checkLen("MulSilu: a", len(a), len(dst))
	checkLen("MulSilu: g", len(g), len(dst))
	sigmoidBlocks(len(dst), g, workers, func(b, e int, sb []float32) {
		ab, gb, d := a[b:e], g[b:e], dst[b:e]
		for i, sv := range sb {
			d[i] = ab[i] * (gb[i] * sv)
		}
	})
}

// SiluGradMul writes the SwiGLU gradient with respect to the gate,
//
//	dst[i] = v[i] · u[i] · silu′(g[i]),   silu′(g) = σ + g·(σ − σ²),
//
// for the output's gradient v and the up projection u (dst may be any
// operand).
func SiluGradMul(dst, v, u, g []float32, workers int) {
	checkLen("SiluGradMul: v", len(v), len(dst))
	checkLen("SiluGradMul: u", len(u), len(dst))
	checkLen("SiluGradMul: g", len(g), len(dst))
	sigmoidBlocks(len(dst), g, workers, func(b, e int, sb []float32) {
		vb, ub, gb, d := v[b:e], u[b:e], g[b:e], dst[b:e]
		for i, sv := range sb {
			d[i] = (vb[i] * ub[i]) * (sv + gb[i]*(sv-sv*sv))
		}
	})
}

// sigmoidBlocks calls fn(b, e, σ(g[b:e])) for blocks [b, e) of at most
// swigluBlock elements covering [0, n), split over up to workers
// goroutines by swigluParallel.
func sigmoidBlocks(n int, g []float32, workers int, fn func(b, e int, s []float32)) {
	swigluParallel(n, workers, func(lo, hi int) {
		var s [swigluBlock]float32
		for b := lo; b < hi; b += swigluBlock {
			e := min(hi, b+swigluBlock)
			sb := s[:e-b]
			sigmoidBlock(sb, g[b:e])
			fn(b, e, sb)
		}
	})
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
