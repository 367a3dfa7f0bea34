package tensor

import "golang.org/x/sys/cpu"

//go:noescape
func indexGEAVX512(x *float32, n int, thr float32) int

var hasIndexGEAVX512 = cpu.X86.HasAVX512F

// indexGEBlocks returns the smallest j < len(x)&^15 with x[j] ≥ thr
// (ordered), or len(x)&^15 when none or when the CPU lacks AVX-512 (0).
func indexGEBlocks(x []float32, thr float32) int {
	n := len(x) &^ 15
	if n == 0 || !hasIndexGEAVX512 {
		return 0
	}
	return indexGEAVX512(&x[0], n, thr)
}
