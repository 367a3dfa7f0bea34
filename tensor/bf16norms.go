package tensor

import "unsafe"

// F32ToBF16Norms rounds len(dst) float32 values of src to bfloat16 (as
// EncodeBF16: nearest, ties to even) and returns upper bounds of the
// squared norms ‖x‖² = Σ x_i² and ‖e‖² = Σ (x_i − x̃_i)², e being the
// rounding error vector. These are what an error bound of a bfloat16
// product needs (|q·x − q̃·x̃| ≤ ‖e_q‖‖x‖ + ‖q̃‖‖e_x‖, search/vector's
// screened flat search): the float32 partial sums are widened by
// (1 + 2⁻¹⁰), far more than their rounding (γ_n with n ≤ 65,536 terms
// summed in 16 lanes of ≤ 4,096 is below 2.5·10⁻⁴), so the returned values
// bound the exact sums. A NaN or infinite input makes them NaN or +Inf.
// On AVX-512 16 values are converted an instruction sequence, the same
// bits as the scalar path.
func F32ToBF16Norms(dst []uint16, src []float32) (xx, ee float64) {
	src = src[:len(dst)]
	done := f32ToBF16NormsVec(dst, src, &xx, &ee)
	for i := done; i < len(dst); i++ {
		h := F32ToBF16(src[i])
		dst[i] = h
		e := src[i] - BF16ToF32(h)
		xx += float64(src[i]) * float64(src[i])
		ee += float64(e) * float64(e)
	}
	const widen = 1 + 1.0/1024
	return xx * widen, ee * widen
}

// PackF32Norms packs n rows of k float32 values (row-major) as PackF32
// does — rounded to bfloat16, the same bits — and writes each row's
// F32ToBF16Norms bounds to xx[j] and ee[j] (‖x_j‖², ‖x_j − x̃_j‖²); scratch
// (returned, reused) is its working memory. Whole panels of 16 rows are
// converted row by row and laid out by the 16 × 16 word transpose, as in
// PackF16.
func (p *BF16Panels) PackF32Norms(src []float32, n, k int, scratch []float32, xx, ee []float64) []float32 {
	xx, ee = xx[:n], ee[:n]
	return p.packPanels(n, k, scratch,
		func(dst []uint16, j int) { xx[j], ee[j] = F32ToBF16Norms(dst, src[j*k:(j+1)*k]) },
		func(row []float32, j int) {
			// The row's bfloat16 values, through float32, for put (which
			// rounds them again: exactly, as they already are bfloat16).
			h := unsafe.Slice((*uint16)(unsafe.Pointer(&row[0])), k) // the first half of row
			xx[j], ee[j] = F32ToBF16Norms(h, src[j*k:(j+1)*k])
			for c := k - 1; c >= 0; c-- {
				row[c] = BF16ToF32(h[c])
			}
		})
}
