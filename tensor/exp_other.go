//go:build !amd64

package tensor

// Exp writes dst[i] = e^x[i] (dst may be x; x at least as long as dst).
func Exp(dst, x []float32) {
	x = x[:len(dst)]
	for i, v := range x {
		dst[i] = exp32(v)
	}
}
