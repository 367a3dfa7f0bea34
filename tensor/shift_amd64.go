package tensor

//go:noescape
func subScalarAVX2(dst, x *float32, s float32, n int)

// subScalarVec runs subScalarAVX2 over the leading multiple of 8 of
// len(dst) elements and returns how many it did (0 without AVX2).
func subScalarVec(dst, x []float32, s float32) int {
	n8 := len(dst) &^ 7
	if !hasAVX2 || n8 == 0 {
		return 0
	}
	subScalarAVX2(&dst[0], &x[0], s, n8)
	return n8
}
