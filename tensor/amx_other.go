//go:build !amd64

package tensor

// amxKernel is nil off amd64: DotBF16Panels runs its plain loop.
var amxKernel amxBlockFunc
