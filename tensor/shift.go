package tensor

// SubScalar writes dst[i] = x[i] − s for i < len(dst) (x at least as long;
// dst may be exactly x): IEEE subtraction per element, so every path
// equals subScalarGo bit for bit. On amd64 with AVX2, 8 lanes at a time
// in one pass (subScalarAVX2; vek32.SubNumber_Into copies x into dst and
// then subtracts in place, about a fifth of SumExpRows and
// ExpShiftScaleRows), the last len(dst) mod 8 in Go.
func SubScalar(dst, x []float32, s float32) {
	x = x[:len(dst)]
	done := subScalarVec(dst, x, s)
	subScalarGo(dst[done:], x[done:], s)
}

// subScalarGo is SubScalar's reference: a plain loop.
func subScalarGo(dst, x []float32, s float32) {
	x = x[:len(dst)]
	for i, v := range x {
		dst[i] = v - s
	}
}
