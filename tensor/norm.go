package tensor

import (
	"math"

	"github.com/viterin/vek/vek32"
)

// SquaredNorms writes dst[j] = ‖x_j‖² = ⟨x_j, x_j⟩ for the len(dst) rows of
// x (dimension d), with the same arithmetic as DotRows, so that
// ‖q − x‖² = ‖q‖² + ‖x‖² − 2⟨q, x⟩ is consistent across the index.
func SquaredNorms(dst, x []float32, d int) {
	checkLen("rows", len(x), len(dst)*d)
	for j := range dst {
		row := x[j*d : (j+1)*d]
		dst[j] = kernels.dot(row, row)
	}
}

// L2Normalize scales every row of x (dimension d) to unit Euclidean norm,
// x_j ← x_j / ‖x_j‖₂, in place. All-zero rows are left as they are.
func L2Normalize(x []float32, d int) {
	if d <= 0 {
		return
	}
	for j := 0; j+d <= len(x); j += d {
		row := x[j : j+d]
		n := vek32.Norm(row)
		if n > 0 && !math.IsInf(float64(n), 0) {
			vek32.MulNumber_Inplace(row, 1/n)
		}
	}
}

// Softmax replaces x by softmax(x)ᵢ = exp(xᵢ − m) / Σⱼ exp(xⱼ − m) with
// m = maxⱼ xⱼ (the shift leaves the result unchanged and keeps exp from
// overflowing). The exponentials are vek's AVX2 exp (relative error ≈ 1e−7)
// of the shifted values, 0 below the smallest normal float32 (see
// expShifted); the sum is taken in float64. An empty x is left as is; −Inf entries get
// probability 0; if every entry is −Inf the result is uniform.
func Softmax(x []float32) {
	if len(x) == 0 {
		return
	}
	m := maxOf(x)
	if math.IsInf(float64(m), -1) {
		u := float32(1 / float64(len(x)))
		for i := range x {
			x[i] = u
		}
		return
	}
	sum := expShifted(x, m)
	vek32.MulNumber_Inplace(x, float32(1/sum))
}

// expShifted replaces x by exp(x − m) and returns the float64 sum of the
// results. The shifted values are clamped at −87.5 before vek's exp, which
// is wrong below −88 (it returns large negative numbers between −103 and
// −88), and exponentials below the smallest normal float32 (x − m below
// about −87.3, −Inf included) are set to 0.
func expShifted(x []float32, m float32) float64 {
	vek32.SubNumber_Inplace(x, m)
	vek32.MaximumNumber_Inplace(x, -87.5)
	vek32.Exp_Inplace(x)
	var sum float64
	for i, v := range x {
		if v < 0x1p-126 {
			x[i], v = 0, 0
		}
		sum += float64(v)
	}
	return sum
}

// LogSoftmax replaces x by log softmax(x)ᵢ = xᵢ − LogSumExp(x).
func LogSoftmax(x []float32) {
	if len(x) == 0 {
		return
	}
	if m := maxOf(x); math.IsInf(float64(m), -1) {
		l := float32(-math.Log(float64(len(x))))
		for i := range x {
			x[i] = l
		}
		return
	}
	lse := LogSumExp(x)
	for i, v := range x {
		x[i] = float32(float64(v) - lse)
	}
}

// LogSumExp returns log Σᵢ exp(xᵢ) = m + log Σᵢ exp(xᵢ − m), m = maxᵢ xᵢ,
// with Softmax's exponentials (vek's AVX2 exp of the shifted values in
// float32, clamped at −104, summed in float64): within a few float32 ulps
// of the float64 value, at a fraction of math.Exp's cost (a decode step's
// log-probability over the vocabulary). x is not modified. An empty x or
// one that is all −Inf gives −Inf; a +Inf or NaN maximum is returned as is.
func LogSumExp(x []float32) float64 {
	if len(x) == 0 {
		return math.Inf(-1)
	}
	m := maxOf(x)
	if math.IsInf(float64(m), 0) || m != m {
		return float64(m)
	}
	var sum float64
	const chunk = 4096
	var buf [chunk]float32
	for lo := 0; lo < len(x); lo += chunk {
		b := buf[:copy(buf[:], x[lo:])]
		sum += expShifted(b, m)
	}
	return float64(m) + math.Log(sum)
}

func maxOf(x []float32) float32 {
	m := x[0]
	for _, v := range x[1:] {
		if v > m {
			m = v
		}
	}
	return m
}
