package tensor

import "math"

// exp32 returns e^x rounded to float32: x = k·ln2 + r with |r| ≤ ln2/2,
// e^r by its Taylor polynomial to degree 9 in float64 (relative error
// below 1e-11, so the float32 rounding is that of the exact value but for
// rare near-ties), scaled by 2^k exactly.
func exp32(x float32) float32 {
	switch {
	case x != x:
		return x
	case x > 88.72284:
		return float32(math.Inf(1))
	case x < -103.97208:
		return 0
	}
	const (
		log2e = 1.4426950408889634
		ln2hi = 6.93147180369123816490e-01
		ln2lo = 1.90821492927058770002e-10
		// Adding 1.5·2⁵² rounds a float64 of magnitude < 2⁵¹ to an
		// integer, left in the low bits of the mantissa.
		shifter = 6755399441055744.0
	)
	xd := float64(x)
	t := xd*log2e + shifter
	k := t - shifter
	r := xd - k*ln2hi - k*ln2lo
	p := 1 + r*(1+r*(1.0/2+r*(1.0/6+r*(1.0/24+r*(1.0/120+r*(1.0/720+r*(1.0/5040+r*(1.0/40320+r*(1.0/362880)))))))))
	ki := int64(math.Float64bits(t)<<13) >> 13 // the signed integer k
	return float32(p * math.Float64frombits(uint64(ki+1023)<<52))
}

// maxGo is the largest element (NaN if any is NaN, −Inf if x is
// empty), with eight independent running maxima: the reference of Max.
func maxGo(x []float32) float32 {
	inf := float32(math.Inf(-1))
	m := [8]float32{inf, inf, inf, inf, inf, inf, inf, inf}
	n8 := len(x) &^ 7
	for i := 0; i < n8; i += 8 {
		c := x[i : i+8 : i+8]
		m[0] = max(m[0], c[0])
		m[1] = max(m[1], c[1])
		m[2] = max(m[2], c[2])
		m[3] = max(m[3], c[3])
		m[4] = max(m[4], c[4])
		m[5] = max(m[5], c[5])
		m[6] = max(m[6], c[6])
		m[7] = max(m[7], c[7])
	}
	t := max(max(m[0], m[4]), max(m[2], m[6]), max(m[1], m[5]), max(m[3], m[7]))
	for _, v := range x[n8:] {
		t = max(t, v)
	}
	return t
}
