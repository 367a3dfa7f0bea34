//go:build !amd64

package gocpu

import "github.com/gomlx/gomlx/backends"

// arithAVX2 is nil off amd64: Add, Sub and Mul run on vek's kernels.
var arithAVX2 map[backends.OpType]binaryKernel

// sqrtF32 writes dst[i] = float32(√x[i]) (dst may be exactly x).
func sqrtF32(dst, x []float32) { sqrtGo(dst, x) }
