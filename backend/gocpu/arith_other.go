//go:build !amd64

package gocpu

import "github.com/gomlx/gomlx/backends"

// arithAVX2 is nil off amd64: Add, Sub and Mul run on vek's kernels.
var arithAVX2 map[backends.OpType]binaryKernel
