package tensor

import (
	"unsafe"

	"golang.org/x/sys/cpu"
	"golang.org/x/sys/unix"
)

//go:noescape
func amxBF16Block(cfg *byte, a *uint16, lda int, nqb int, b *uint16, panel int, nrb int, ksteps int, c *float32, ldc int)

// hasTransposeWords16: transposeWords16 runs here (AVX-512).
var hasTransposeWords16 = cpu.X86.HasAVX512F

// transposeWords16 writes dst[q·16 + r] = src[r·words + q] for 32-bit
// words (pairs of uint16), r < 16 and q < words (a positive multiple of 16),
// with the GEMM's register transpose (which moves bits, never rounds).
func transposeWords16(dst, src []uint16, words int) {
	_ = src[2*(16*words)-1]
	_ = dst[2*(16*words)-1]
	transpose16AVX512((*float32)(unsafe.Pointer(&src[0])), words, (*float32)(unsafe.Pointer(&dst[0])), 16, words, 16)
}

// amxTileConfig is LDTILECFG's 64 bytes: palette 1, eight tiles of 16 rows
// × 64 bytes.
var amxTileConfig = func() [64]byte {
	var c [64]byte
	c[0] = 1
	for t := range 8 {
		c[16+2*t] = 64
		c[48+t] = 16
	}
	return c
}()

// amxKernel is the AMX block kernel where the CPU has AMX-BF16 and Linux
// grants the tile data state (arch_prctl ARCH_REQ_XCOMP_PERM, Linux ≥ 5.16);
// nil otherwise.
var amxKernel = func() amxBlockFunc {
	if !cpu.X86.HasAMXTile || !cpu.X86.HasAMXBF16 {
		return nil
	}
	const archReqXCompPerm, xfeatureXTileData = 0x1023, 18
	if _, _, errno := unix.Syscall(unix.SYS_ARCH_PRCTL, archReqXCompPerm, xfeatureXTileData, 0); errno != 0 {
		return nil
	}
	return func(out []float32, ldo int, q []uint16, nqb int, p *BF16Panels) {
		cfg := amxTileConfig
		amxBF16Block(&cfg[0], &q[0], p.KPad, nqb, &p.Data[0], 16*p.KPad, p.NPad/32, p.KPad/32, &out[0], ldo)
	}
}()
