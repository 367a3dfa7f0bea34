package tensor

import "math"

//go:noescape
func maxAVX512(x *float32, n int, lanes *[32]float32) (unordered bool)

//go:noescape
func maxAVX2(x *float32, n int, lanes *[32]float32) (unordered bool)

// Max is the largest element (NaN if any is NaN, −Inf if x is empty),
// as Go's max defines it: AVX-512 (maxAVX512) or, without it, AVX2
// (maxAVX2) over blocks of 32 (NaNs flagged apart, since VMAXPS passes
// over them), the scalar maxGo for the rest and whenever the maximum is a
// zero, whose sign VMAXPS leaves to the order of the operands. The result
// is that of maxGo, bit for bit, on every path.
func Max(x []float32) float32 {
	return maxWith(x, expLanes)
}

// maxWith is Max with the kernel of the given width (16: maxAVX512, 8:
// maxAVX2, 0: maxGo alone; the CPU must have it).
func maxWith(x []float32, lanes int) float32 {
	n32 := len(x) &^ 31
	if lanes == 0 || n32 == 0 {
		return maxGo(x)
	}
	var lanesMax [32]float32
	var unordered bool
	if lanes == 16 {
		unordered = maxAVX512(&x[0], n32, &lanesMax)
	} else {
		unordered = maxAVX2(&x[0], n32, &lanesMax)
	}
	if unordered {
		return float32(math.NaN())
	}
	// The lanes hold no NaN (flagged above): a plain comparison (Go's max,
	// which orders NaNs and signed zeros, costs ~20 ns a call here).
	t := lanesMax[0]
	for _, v := range lanesMax[1:] {
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
