// AVX-512 running maximum of float32, 32 lanes (two registers) at a time,
// with a sticky flag for unordered (NaN) elements.

#include "textflag.h"

// func maxAVX512(x *float32, n int, lanes *[32]float32) (unordered bool)
//
// lanes[j] = the largest of x[32i + j] (i < n/32; n a positive multiple of
// 32) as VMAXPS orders them, NaNs ignored; unordered reports a NaN among
// the elements.
TEXT ·maxAVX512(SB), NOSPLIT, $0-25
	MOVQ    x+0(FP), SI
	MOVQ    n+8(FP), CX
	MOVQ    lanes+16(FP), DI
	VMOVUPS (SI), Z0
	VMOVUPS 64(SI), Z1
	KXORW   K3, K3, K3

loop:
	VMOVUPS   (SI), Z2
	VMOVUPS   64(SI), Z3
	VCMPPS    $3, Z2, Z2, K1     // unordered: NaN lanes
	VCMPPS    $3, Z3, Z3, K2
	KORW      K1, K3, K3
	KORW      K2, K3, K3
	VMAXPS    Z2, Z0, Z0
	VMAXPS    Z3, Z1, Z1
	ADDQ      $128, SI
	SUBQ      $32, CX
	JNZ       loop

	VMOVUPS Z0, (DI)
	VMOVUPS Z1, 64(DI)
	KORTESTW K3, K3
	SETNE   unordered+24(FP)
	VZEROUPPER
	RET
