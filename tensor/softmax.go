package tensor

import (
	"math"

	"github.com/viterin/vek/vek32"
)

// Softmax over the last axis, forward and backward, fused: one pass over
// each row where the unfused graph (max, subtract, exp, sum, divide; and
// for the gradient five to seven elementwise ops over the whole tensor)
// makes several. Attention's softmax over [B, H, T, S] scores is the
// model's largest such tensor after the logits.

// softmaxMinElems is the number of elements below which the softmax
// kernels run on the calling goroutine.
const softmaxMinElems = 1 << 15

// SoftmaxRows writes dst = softmax(x) over each row of n contiguous
// elements (len(x) a multiple of n; dst may be x):
//
//	p_i = e^(x_i − m) / Σ_j e^(x_j − m),   m = max_j x_j,
//
// as graph.Softmax computes it (max subtracted, exponentials summed, then
// normalised; the division is a product by the reciprocal of the sum, so
// results differ from the division by at most 1 ulp). A row holding NaN,
// or +Inf, gives NaNs, as the unfused graph does. Rows are split over up
// to workers goroutines (≤ 0: GOMAXPROCS). Softmax (norm.go) is the
// sampler's one-row softmax, with a float64 sum and a uniform result for
// an all −Inf row; this one reproduces the model graph's.
func SoftmaxRows(dst, x []float32, n, workers int) {
	rows := softmaxRows("SoftmaxRows", len(dst), len(x), n)
	if rows == 0 {
		return
	}
	run := func(lo, hi int) {
		for r := lo; r < hi; r++ {
			softmaxRow(dst[r*n:(r+1)*n], x[r*n:(r+1)*n])
		}
	}
	if len(dst) < softmaxMinElems {
		run(0, rows)
		return
	}
	ParallelFor(rows, workers, 1, func(_, lo, hi int) { run(lo, hi) })
}

// SoftmaxGradRows writes the gradient of the loss with respect to the
// softmax's input from its output p and the gradient g with respect to
// that output, row by row (rows of n contiguous elements; dst may be p or
// g):
//
//	dx_i = p_i · (g_i − Σ_j g_j p_j).
func SoftmaxGradRows(dst, p, g []float32, n, workers int) {
	rows := softmaxRows("SoftmaxGradRows", len(dst), len(p), n)
	checkLen("SoftmaxGradRows: g", len(g), len(dst))
	if rows == 0 {
		return
	}
	run := func(lo, hi int) {
		for r := lo; r < hi; r++ {
			pr, gr, d := p[r*n:(r+1)*n], g[r*n:(r+1)*n], dst[r*n:(r+1)*n]
			dot := Dot(gr, pr)
			if &d[0] == &pr[0] {
				for i, pv := range pr {
					d[i] = pv * (gr[i] - dot)
				}
				continue
			}
			if &d[0] == &gr[0] {
				vek32.SubNumber_Inplace(d, dot)
			} else {
				SubScalar(d, gr, dot)
			}
			vek32.Mul_Inplace(d, pr)
		}
	}
	if len(dst) < softmaxMinElems {
		run(0, rows)
		return
	}
	ParallelFor(rows, workers, 1, func(_, lo, hi int) { run(lo, hi) })
}

// softmaxRows checks the lengths of a softmax kernel's operands and
// returns the number of rows.
func softmaxRows(what string, ndst, nx, n int) int {
	checkLen(what+": x", nx, ndst)
	if ndst == 0 {
		return 0
	}
	if n <= 0 || ndst%n != 0 {
		panic(what + ": length is not a multiple of the row length")
	}
	return ndst / n
}

// softmaxRow is one row of SoftmaxRows (dst may be x).
func softmaxRow(dst, x []float32) {
	m := Max(x)
	if &dst[0] == &x[0] {
		vek32.SubNumber_Inplace(dst, m)
	} else {
		SubScalar(dst, x, m)
	}
	Exp(dst, dst)
	vek32.MulNumber_Inplace(dst, 1/vek32.Sum(dst))
}

// SumExpRows writes dst[r] = Σ_i e^(x_i − m) with m = max_i x_i for each row
// of n contiguous elements (len(x) = len(dst)·n): the normaliser of a
// softmax or log-sum-exp, m + log dst[r], without writing the exponentials
// (the shift is graph.Softmax's and graph.LogSoftmax's). Rows are split over
// up to workers goroutines (≤ 0: GOMAXPROCS).
func SumExpRows(dst, x []float32, n, workers int) {
	checkLen("SumExpRows: x", len(x), len(dst)*n)
	sumExpRowsWith(dst, x, n, workers, func(m, s float32) float32 { return s })
}

// LogSumExpRows writes dst[r] = log(Σ_i e^(x_i − m)) + m, m = max_i x_i,
// for each row of n contiguous elements: SumExpRows' sum, its logarithm
// rounded from float64 (as simplego's Log) and the float32 sum with m, so
// the float32s of ReduceMax, SumExpRows, Log and Add run one by one, from
// one read of each row instead of two (the maximum is the pass's own).
func LogSumExpRows(dst, x []float32, n, workers int) {
	checkLen("LogSumExpRows: x", len(x), len(dst)*n)
	sumExpRowsWith(dst, x, n, workers, func(m, s float32) float32 { return float32(math.Log(float64(s))) + m })
}

// sumExpRowsWith is SumExpRows and LogSumExpRows: dst[r] = out(m, s) for
// each row's maximum m and Σ e^(x_i − m) = s.
func sumExpRowsWith(dst, x []float32, n, workers int, out func(m, s float32) float32) {
	run := func(lo, hi int) {
		var buf [swigluBlock]float32
		for r := lo; r < hi; r++ {
			row := x[r*n : (r+1)*n]
			m := Max(row)
			var s float32
			for b := 0; b < n; b += len(buf) {
				e := buf[:min(len(buf), n-b)]
				SubScalar(e, row[b:b+len(e)], m)
				Exp(e, e)
				s += vek32.Sum(e)
			}
			dst[r] = out(m, s)
		}
	}
	if len(x) < softmaxMinElems {
		run(0, len(dst))
		return
	}
	ParallelFor(len(dst), workers, 1, func(_, lo, hi int) { run(lo, hi) })
}

// expShiftScale writes dst[i] = e^(x[i] − shift)·scale for i < len(dst)
// (x at least as long; dst may be exactly x): SubScalar, Exp and, unless
// scale is 1, the product, each rounded as those do (x·1 = x), so every
// path gives expShiftScaleGo's float32s. On amd64 with AVX2 the three run
// in one pass, 8 lanes at a time (expShiftScaleAVX2), the last len(dst)
// mod 8 in Go: the log-sum-exp's gradient then reads and writes a
// vocabulary row once instead of three times (≈ 28% less CPU time an
// element on Zen 3). SumExpRows keeps its three passes over a 256-float
// L1 block: there the fused pass measured ≈ 4% slower.
func expShiftScale(dst, x []float32, shift, scale float32) {
	x = x[:len(dst)]
	done := expShiftScaleVec(dst, x, shift, scale)
	expShiftScaleGo(dst[done:], x[done:], shift, scale)
}

// expShiftScaleGo is expShiftScale's reference: the three passes.
func expShiftScaleGo(dst, x []float32, shift, scale float32) {
	SubScalar(dst, x, shift)
	Exp(dst, dst)
	if scale != 1 {
		vek32.MulNumber_Inplace(dst, scale)
	}
}

// ExpShiftScaleRows writes dst_i = g · e^(x_i − l) for each row of n
// contiguous elements, with g and l per row (len(g) = len(l) = rows; dst
// may be x): the gradient of log-sum-exp, g ⊙ softmax(x), when l is the
// row's log-sum-exp.
func ExpShiftScaleRows(dst, x, l, g []float32, n, workers int) {
	rows := len(l)
	checkLen("ExpShiftScaleRows: dst", len(dst), rows*n)
	checkLen("ExpShiftScaleRows: x", len(x), rows*n)
	checkLen("ExpShiftScaleRows: g", len(g), rows)
	run := func(lo, hi int) {
		for r := lo; r < hi; r++ {
			d, xr := dst[r*n:(r+1)*n], x[r*n:(r+1)*n]
			expShiftScale(d, xr, l[r], g[r])
		}
	}
	if len(dst) < softmaxMinElems {
		run(0, rows)
		return
	}
	ParallelFor(rows, workers, 1, func(_, lo, hi int) { run(lo, hi) })
}
