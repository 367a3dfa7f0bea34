//go:build !amd64

package gocpu

// expF32 writes dst[i] = e^x[i] (dst may be x).
func expF32(dst, x []float32) {
	x = x[:len(dst)]
	for i, v := range x {
		dst[i] = exp32(v)
	}
}
