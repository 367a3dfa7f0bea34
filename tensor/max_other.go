//go:build !amd64

package tensor

// Max is the largest element (NaN if any is NaN, −Inf if x is empty).
func Max(x []float32) float32 { return maxGo(x) }
