//go:build !amd64

package tensor

// subScalarVec does nothing off amd64: subScalarGo does every element.
func subScalarVec(dst, x []float32, s float32) int { return 0 }
