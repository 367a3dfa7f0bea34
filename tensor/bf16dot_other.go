//go:build !amd64

package tensor

// bf16Kernels is nil off amd64: DotBF16Block runs its plain loop.
var bf16Kernels *bf16KernelSet
