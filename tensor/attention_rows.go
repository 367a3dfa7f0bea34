package tensor

import "github.com/viterin/vek/vek32"

// Row kernels of the attention tiles: one row of scores (the keys of one
// tile that enter a query row's softmax) at a time, fused into one pass
// each (after the maximum) instead of Max, SubScalar, Exp, Sum and the
// vek32 scalings one after another; AVX2 versions in attention_amd64.s.

// attnSoftmaxGo sets m = max(mPrev, max_i x[i]), then x[i] = e^(x[i] − m)
// (Exp, so the float32s of the vector kernels) and returns m and
// sum = Σ x[i] summed in 8 lanes, lane i mod 8 in the order of i, folded
// as ((l0+l4)+(l2+l6)) + ((l1+l5)+(l3+l7)). An empty x gives (mPrev, 0).
func attnSoftmaxGo(x []float32, mPrev float32) (m, sum float32) {
	m = mPrev
	for _, v := range x {
		if v > m || v != v {
			m = v
		}
	}
	for i := range x {
		x[i] -= m
	}
	Exp(x, x)
	var l [8]float32
	for i, v := range x {
		l[i%8] += v
	}
	return m, ((l[0] + l[4]) + (l[2] + l[6])) + ((l[1] + l[5]) + (l[3] + l[7]))
}

// attnGradGo sets p[i] = e^(p[i] − m)·inv (the probability, m and 1/l
// the forward's) and ds[i] = (ds[i] − d)·p[i] (the score gradient, ds
// holding dO·vᵀ and d = Σ_h dO ⊙ o) for i < len(p).
func attnGradGo(p, ds []float32, m, inv, d float32) {
	ds = ds[:len(p)]
	for i := range p {
		p[i] -= m
	}
	Exp(p, p)
	for i, v := range p {
		v *= inv
		p[i] = v
		ds[i] = (ds[i] - d) * v
	}
}

// maskedLeadGo returns the length of the longest prefix of whole
// 8-element blocks of x (the last len(x) mod 8 elements not looked at)
// in which no element is > AttentionMaskedBias (a NaN is masked).
func maskedLeadGo(x []float32) int {
	n := 0
	for ; n+8 <= len(x); n += 8 {
		for _, v := range x[n : n+8] {
			if v > AttentionMaskedBias {
				return n
			}
		}
	}
	return n
}

// maskedTrailGo is maskedLeadGo from the end of x, whose length must be a
// multiple of 8.
func maskedTrailGo(x []float32) int {
	n := 0
	for ; n+8 <= len(x); n += 8 {
		for _, v := range x[len(x)-n-8 : len(x)-n] {
			if v > AttentionMaskedBias {
				return n
			}
		}
	}
	return n
}

// nonzeroGo reports whether some element of x is not ±0.
func nonzeroGo(x []float32) bool {
	for _, v := range x {
		if v != 0 {
			return true
		}
	}
	return false
}

// attnOutRowsGo writes the forward's rows: for i < n,
// dst[i·ldd + f] = o[i·ldo + f]·(1/l[i]) for f < h (vek32.MulNumber_Into's
// products), dst[i·ldd + h] = mx[i] and dst[i·ldd + h + 1] = l[i].
func attnOutRowsGo(dst []float32, ldd int, o []float32, ldo int, mx, l []float32, n, h int) {
	for i := range n {
		d := dst[i*ldd : i*ldd+h+2]
		vek32.MulNumber_Into(d[:h], o[i*ldo:i*ldo+h], 1/l[i])
		d[h], d[h+1] = mx[i], l[i]
	}
}

// attnRowStatsGo reads the backward's per-row values: for i < n, with
// y = f[i·ldf:] (a forward row: o, m, l), d[i] = Dot(x[i·ldx:][:h], y[:h])
// (D = Σ dO ⊙ o), mx[i] = y[h] and linv[i] = 1/y[h + 1].
func attnRowStatsGo(d, mx, linv, x []float32, ldx int, f []float32, ldf, n, h int) {
	for i := range n {
		y := f[i*ldf : i*ldf+h+2]
		d[i] = Dot(x[i*ldx:i*ldx+h], y[:h])
		mx[i], linv[i] = y[h], 1/y[h+1]
	}
}
