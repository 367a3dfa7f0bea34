package tensor

import "math"

//go:noescape
func maxAVX512(x *float32, n int, lanes *[32]float32) (unordered bool)

// Max is the largest element (NaN if any is NaN, −Inf if x is empty),
// as Go's max defines it: AVX-512 over blocks of 32 (NaNs flagged apart,
// since VMAXPS passes over them), the scalar maxGo for the rest and
// whenever the maximum is a zero, whose sign VMAXPS leaves to the order
// of the operands. The result is that of maxGo, bit for bit.
func Max(x []float32) float32 {
	n32 := len(x) &^ 31
	if !hasAVX512 || n32 == 0 {
		return maxGo(x)
	}
	var lanes [32]float32
	if maxAVX512(&x[0], n32, &lanes) {
		return float32(math.NaN())
	}
	// The lanes hold no NaN (flagged above): a plain comparison (Go's max,
	// which orders NaNs and signed zeros, costs ~20 ns a call here).
	t := lanes[0]
	for _, v := range lanes[1:] {
		if v > t {
			t = v
		}
	}
	t = max(t, maxGo(x[n32:]))
	if t == 0 {
		return maxGo(x)
	}
	return t
}
