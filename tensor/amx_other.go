//go:build !amd64

package tensor

// amxKernel is nil off amd64: DotBF16Panels runs its plain loop.
var amxKernel amxBlockFunc

// hasTransposeWords16 is false off amd64: PackF16 packs row by row.
const hasTransposeWords16 = false

func transposeWords16(dst, src []uint16, words int) { panic("unreachable") }
