package tensor

// ColSum writes the column sums of a row-major matrix: for c < len(dst),
//
//	dst[c] = Σ_{r < rows} src[r·stride + c],
//
// each column summed in row order starting from +0 (((0 + x₀) + x₁) + …),
// as colSumGo does, so every path gives colSumGo's result bit for bit
// (IEEE addition of the same operands in the same order). rows ≥ 0;
// stride ≥ len(dst) when rows > 1; src must hold (rows−1)·stride + len(dst)
// elements when rows > 0. dst must not overlap src. On amd64 with AVX2 the
// columns run 32 (then 8) at a time in YMM accumulators (colSumAVX2),
// reading each element once; the rest, and other CPUs, use colSumGo.
func ColSum(dst, src []float32, rows, stride int) {
	n := len(dst)
	if n == 0 {
		return
	}
	if rows <= 0 {
		clear(dst)
		return
	}
	_ = src[(rows-1)*stride+n-1] // bounds: the last element read
	done := colSumVec(dst, src, rows, stride)
	colSumGo(dst[done:], src[done:], rows, stride)
}

// colSumGo is ColSum's reference: a plain loop, row by row.
func colSumGo(dst, src []float32, rows, stride int) {
	clear(dst)
	for r := range rows {
		row := src[r*stride : r*stride+len(dst)]
		for c, v := range row {
			dst[c] += v
		}
	}
}
