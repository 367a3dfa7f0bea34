package tensor

// RowDots writes dst[j] = ⟨a_j, b_j⟩ for the len(dst) rows of a and b
// (n contiguous elements each), with SquaredNorms' arithmetic: the
// ReduceSum(Mul(a, b)) over a last axis that RMSNorm (Σ x², and Σ g⊙y in
// its gradient) and the softmax gradient compute, without writing the
// product. Rows are split over up to workers goroutines (≤ 0: GOMAXPROCS).
func RowDots(dst, a, b []float32, n, workers int) {
	checkLen("RowDots: a", len(a), len(dst)*n)
	checkLen("RowDots: b", len(b), len(dst)*n)
	run := func(lo, hi int) {
		for j := lo; j < hi; j++ {
			dst[j] = kernels.dot(a[j*n:(j+1)*n], b[j*n:(j+1)*n])
		}
	}
	if len(a) < softmaxMinElems {
		run(0, len(dst))
		return
	}
	ParallelFor(len(dst), workers, 1, func(_, lo, hi int) { run(lo, hi) })
}

// RMSNormGradRows writes the gradient of y = x·r (RMSNorm's normalisation,
// r = 1/√(mean(x²) + ε) per row; Zhang & Sennrich 2019) with respect to x,
// row by row, from the output gradient g, the output y, r and c =
// mean(g⊙y) per row (len(r) = len(c) = rows; rows of n elements; dst may
// be g or y):
//
//	dx_i = r · (g_i − y_i · c).
func RMSNormGradRows(dst, g, y, r, c []float32, n, workers int) {
	rows := len(r)
	checkLen("RMSNormGradRows: dst", len(dst), rows*n)
	checkLen("RMSNormGradRows: g", len(g), rows*n)
	checkLen("RMSNormGradRows: y", len(y), rows*n)
	checkLen("RMSNormGradRows: c", len(c), rows)
	run := func(lo, hi int) {
		for j := lo; j < hi; j++ {
			rj, cj := r[j], c[j]
			gr, yr, d := g[j*n:(j+1)*n], y[j*n:(j+1)*n], dst[j*n:(j+1)*n]
			for i, gv := range gr {
				d[i] = rj * (gv - yr[i]*cj)
			}
		}
	}
	if len(dst) < softmaxMinElems {
		run(0, rows)
		return
	}
	ParallelFor(rows, workers, 1, func(_, lo, hi int) { run(lo, hi) })
}
