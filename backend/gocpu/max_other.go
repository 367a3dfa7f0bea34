//go:build !amd64

package gocpu

// maxRun is the largest element (NaN if any is NaN, −Inf if x is empty).
func maxRun(x []float32) float32 { return maxRunGo(x) }
