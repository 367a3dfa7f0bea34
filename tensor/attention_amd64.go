package tensor

//go:noescape
func attnSoftmaxAVX2(x *float32, n int, mPrev float32) (m, sum float32)

//go:noescape
func attnGradAVX2(p, ds *float32, n int, m, inv, d float32)

// attnSoftmax is attnSoftmaxGo, with attnSoftmaxAVX2 where the CPU has
// AVX2 and FMA (the same float32s: TestAttnRowKernels).
func attnSoftmax(x []float32, mPrev float32) (m, sum float32) {
	if !hasAVX2 || len(x) == 0 {
		return attnSoftmaxGo(x, mPrev)
	}
	return attnSoftmaxAVX2(&x[0], len(x), mPrev)
}

// attnGrad is attnGradGo, with attnGradAVX2 where the CPU has AVX2 and
// FMA (the same float32s: TestAttnRowKernels).
func attnGrad(p, ds []float32, m, inv, d float32) {
	ds = ds[:len(p)]
	if !hasAVX2 || len(p) == 0 {
		attnGradGo(p, ds, m, inv, d)
		return
	}
	attnGradAVX2(&p[0], &ds[0], len(p), m, inv, d)
}

// attnStridedN returns, for the AVX2 GEMM set, sgemm6x16StridedNAVX2: its
// micro-kernel on n tiles in one call, with A's element (i, p) of tile t
// read in place at a[t·astep + i·rs + p·ps]; nil for the other sets, whose
// tiles pack A into panels.
func attnStridedN(ks *gemmKernelSet) func(k int, a []float32, rs, ps, astep int, b []float32, ldb, bstep int, c []float32, ldc, cstep, n int, acc bool) {
	if ks.name != "avx2" {
		return nil
	}
	return func(k int, a []float32, rs, ps, astep int, b []float32, ldb, bstep int, c []float32, ldc, cstep, n int, acc bool) {
		sgemm6x16StridedNAVX2(k, &a[0], rs, ps, astep, &b[0], ldb, bstep, &c[0], ldc, cstep, n, acc)
	}
}

//go:noescape
func maskedLeadAVX2(x *float32, n int) int

//go:noescape
func maskedTrailAVX2(x *float32, n int) int

//go:noescape
func nonzeroAVX2(x *float32, n int) bool

// maskedLead is maskedLeadGo, with maskedLeadAVX2 where the CPU has AVX2.
func maskedLead(x []float32) int {
	if n := len(x) &^ 7; hasAVX2 && n > 0 {
		return maskedLeadAVX2(&x[0], n)
	}
	return maskedLeadGo(x)
}

// maskedTrail is maskedTrailGo, with maskedTrailAVX2 where the CPU has
// AVX2 (x's length must be a multiple of 8).
func maskedTrail(x []float32) int {
	if hasAVX2 && len(x) > 0 {
		return maskedTrailAVX2(&x[0], len(x)&^7)
	}
	return maskedTrailGo(x)
}

// nonzero is nonzeroGo, with nonzeroAVX2 over the whole 8-element blocks
// where the CPU has AVX2.
func nonzero(x []float32) bool {
	n := len(x) &^ 7
	if !hasAVX2 || n == 0 {
		return nonzeroGo(x)
	}
	return nonzeroAVX2(&x[0], n) || nonzeroGo(x[n:])
}

//go:noescape
func sgemm6x16StridedNAVX2(k int, a *float32, rs, ps, astep int, b *float32, ldb, bstep int, c *float32, ldc, cstep, n int, acc bool)

//go:noescape
func attnOutRowsAVX2(dst *float32, ldd int, o *float32, ldo int, mx, l *float32, n, h int)

// attnOutRows is attnOutRowsGo, with attnOutRowsAVX2 where the CPU has
// AVX2 (the same float32s: TestAttnOutRows).
func attnOutRows(dst []float32, ldd int, o []float32, ldo int, mx, l []float32, n, h int) {
	if !hasAVX2 || n <= 0 {
		attnOutRowsGo(dst, ldd, o, ldo, mx, l, n, h)
		return
	}
	_ = dst[(n-1)*ldd+h+1]
	_ = o[(n-1)*ldo+h-1]
	_, _ = mx[n-1], l[n-1]
	attnOutRowsAVX2(&dst[0], ldd, &o[0], ldo, &mx[0], &l[0], n, h)
}

//go:noescape
func attnRowStatsAVX2(d, mx, linv *float32, x *float32, ldx int, f *float32, ldf, n, h int)

// attnRowStats is attnRowStatsGo, with attnRowStatsAVX2 where the CPU has
// AVX2 and FMA (the same float32s: TestAttnRowStats).
func attnRowStats(d, mx, linv, x []float32, ldx int, f []float32, ldf, n, h int) {
	if !hasAVX2 || n <= 0 || h <= 0 {
		attnRowStatsGo(d, mx, linv, x, ldx, f, ldf, n, h)
		return
	}
	_, _, _ = d[n-1], mx[n-1], linv[n-1]
	_ = x[(n-1)*ldx+h-1]
	_ = f[(n-1)*ldf+h+1]
	attnRowStatsAVX2(&d[0], &mx[0], &linv[0], &x[0], ldx, &f[0], ldf, n, h)
}
