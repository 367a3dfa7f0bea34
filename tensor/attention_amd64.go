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

//go:noescape
func sgemm6x16StridedAVX2(k int, a *float32, rs, ps int, b *float32, ldb int, c *float32, ldc int, acc bool)

// attnStrided returns, for the AVX2 GEMM set, its micro-kernel with A's
// element (i, p) read in place at a[i·rs + p·ps] (sgemm6x16StridedAVX2);
// nil for the other sets, whose tiles pack A into panels.
func attnStrided(ks *gemmKernelSet) func(k int, a []float32, rs, ps int, b []float32, ldb int, c []float32, ldc int, acc bool) {
	if ks.name != "avx2" {
		return nil
	}
	return func(k int, a []float32, rs, ps int, b []float32, ldb int, c []float32, ldc int, acc bool) {
		sgemm6x16StridedAVX2(k, &a[0], rs, ps, &b[0], ldb, &c[0], ldc, acc)
	}
}
