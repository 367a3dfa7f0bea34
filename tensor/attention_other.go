//go:build !amd64

package tensor

// attnSoftmax is attnSoftmaxGo off amd64.
func attnSoftmax(x []float32, mPrev float32) (m, sum float32) { return attnSoftmaxGo(x, mPrev) }

// attnGrad is attnGradGo off amd64.
func attnGrad(p, ds []float32, m, inv, d float32) { attnGradGo(p, ds, m, inv, d) }

// attnStridedN is nil off amd64: the tiles pack A into panels.
func attnStridedN(ks *gemmKernelSet) func(k int, a []float32, rs, ps, astep int, b []float32, ldb, bstep int, c []float32, ldc, cstep, n int, acc bool) {
	return nil
}

// maskedLead, maskedTrail and nonzero are their Go references off amd64.
func maskedLead(x []float32) int  { return maskedLeadGo(x) }
func maskedTrail(x []float32) int { return maskedTrailGo(x) }
func nonzero(x []float32) bool    { return nonzeroGo(x) }

// attnOutRows is attnOutRowsGo off amd64.
func attnOutRows(dst []float32, ldd int, o []float32, ldo int, mx, l []float32, n, h int) {
	attnOutRowsGo(dst, ldd, o, ldo, mx, l, n, h)
}

// attnRowStats is attnRowStatsGo off amd64.
func attnRowStats(d, mx, linv, x []float32, ldx int, f []float32, ldf, n, h int) {
	attnRowStatsGo(d, mx, linv, x, ldx, f, ldf, n, h)
}
