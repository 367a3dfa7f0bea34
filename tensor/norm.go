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
// overflowing). Sums are taken in float64. An empty x is left as is; −Inf
// entries get probability 0.
func Softmax(x []float32) {
	if len(x) == 0 {
		return
	}
	m := maxOf(x)
	if math.IsInf(float64(m), -1) {
		// Every entry is −Inf: the distribution is undefined; use uniform.
		u := float32(1 / float64(len(x)))
		for i := range x {
			x[i] = u
		}
		return
	}
	var sum float64
	for i, v := range x {
		e := math.Exp(float64(v - m))
		x[i] = float32(e)
		sum += e
	}
	inv := 1 / sum
	for i := range x {
		x[i] = float32(float64(x[i]) * inv)
	}
}

// LogSoftmax replaces x by log softmax(x)ᵢ = xᵢ − m − log Σⱼ exp(xⱼ − m).
func LogSoftmax(x []float32) {
	if len(x) == 0 {
		return
	}
	m := maxOf(x)
	if math.IsInf(float64(m), -1) {
		l := float32(-math.Log(float64(len(x))))
		for i := range x {
			x[i] = l
		}
		return
	}
	var sum float64
	for _, v := range x {
		sum += math.Exp(float64(v - m))
	}
	lse := float64(m) + math.Log(sum)
	for i, v := range x {
		x[i] = float32(float64(v) - lse)
	}
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
