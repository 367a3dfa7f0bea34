package tensor

//go:noescape
func colSumAVX2(dst, src *float32, rows, stride, n int)

// colSumVec runs colSumAVX2 over the leading multiple of 8 of len(dst)
// columns (rows > 0) and returns how many it did (0 without AVX2).
func colSumVec(dst, src []float32, rows, stride int) int {
	n8 := len(dst) &^ 7
	if !hasAVX2 || n8 == 0 {
		return 0
	}
	colSumAVX2(&dst[0], &src[0], rows, stride, n8)
	return n8
}
