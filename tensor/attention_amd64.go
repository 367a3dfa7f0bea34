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
