//go:build !amd64

package tensor

// asmKernels is nil off amd64: the portable Go kernels are used.
var asmKernels *kernelSet
