//go:build !amd64

package tensor

// bf16Kernels is nil off amd64: DotBF16Block runs its plain loop.
var bf16Kernels *bf16KernelSet

// f16ToBF16Vec has no vector kernel here (see the amd64 version).
func f16ToBF16Vec(dst, src []uint16) int { return 0 }
