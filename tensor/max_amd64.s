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

// func maxAVX2(x *float32, n int, lanes *[32]float32) (unordered bool)
//
// maxAVX512 with four YMM registers for its two ZMM ones: lanes[j] = the
// largest of x[32i + j] (i < n/32; n a positive multiple of 32) as VMAXPS
// orders them (a NaN is kept in its lane only when it comes last there);
// unordered reports a NaN among the elements (VCMPPS unordered of pairs of
// vectors, ORed into two sticky masks).
TEXT ·maxAVX2(SB), NOSPLIT, $0-25
	MOVQ    x+0(FP), SI
	MOVQ    n+8(FP), CX
	MOVQ    lanes+16(FP), DI
	VMOVUPS (SI), Y0
	VMOVUPS 32(SI), Y1
	VMOVUPS 64(SI), Y2
	VMOVUPS 96(SI), Y3
	VXORPS  Y8, Y8, Y8
	VXORPS  Y9, Y9, Y9

loop:
	VMOVUPS (SI), Y4
	VMOVUPS 32(SI), Y5
	VMOVUPS 64(SI), Y6
	VMOVUPS 96(SI), Y7
	VCMPPS  $3, Y5, Y4, Y10      // unordered: a NaN in either
	VCMPPS  $3, Y7, Y6, Y11
	VORPS   Y10, Y8, Y8
	VORPS   Y11, Y9, Y9
	VMAXPS  Y4, Y0, Y0
	VMAXPS  Y5, Y1, Y1
	VMAXPS  Y6, Y2, Y2
	VMAXPS  Y7, Y3, Y3
	ADDQ    $128, SI
	SUBQ    $32, CX
	JNZ     loop

	VMOVUPS   Y0, (DI)
	VMOVUPS   Y1, 32(DI)
	VMOVUPS   Y2, 64(DI)
	VMOVUPS   Y3, 96(DI)
	VORPS     Y9, Y8, Y8
	VMOVMSKPS Y8, AX
	TESTL     AX, AX
	SETNE     unordered+24(FP)
	VZEROUPPER
	RET
