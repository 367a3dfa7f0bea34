//go:build !amd64

package tensor

// gemmAsmSets is empty off amd64: the portable Go kernels are used.
func gemmAsmSets() []*gemmKernelSet { return nil }
