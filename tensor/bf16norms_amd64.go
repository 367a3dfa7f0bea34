package tensor

//go:noescape
func f32ToBF16NormsAVX512(dst *uint16, src *float32, n int, sums *float32)

// f32ToBF16NormsVec converts the first len(dst)&^15 values as
// F32ToBF16Norms does, adds their sums of squares to *xx and *ee, and
// returns how many it converted (0 without AVX-512).
func f32ToBF16NormsVec(dst []uint16, src []float32, xx, ee *float64) int {
	n := len(dst) &^ 15
	if n == 0 || !hasF16ToBF16Vec {
		return 0
	}
	_ = src[n-1]
	var sums [32]float32
	f32ToBF16NormsAVX512(&dst[0], &src[0], n, &sums[0])
	for l := range 16 {
		*xx += float64(sums[l])
		*ee += float64(sums[16+l])
	}
	return n
}
