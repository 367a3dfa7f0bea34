// AVX2 subtraction of a scalar (subScalar).

#include "textflag.h"

// func subScalarAVX2(dst, x *float32, s float32, n int)
//
// dst[i] = x[i] − s for i < n (a positive multiple of 8), 32 lanes per
// iteration while 32 remain, then 8; dst may be exactly x.
TEXT ·subScalarAVX2(SB), NOSPLIT, $0-32
	MOVQ         dst+0(FP), DI
	MOVQ         x+8(FP), SI
	VBROADCASTSS s+16(FP), Y4
	MOVQ         n+24(FP), CX

loop32:
	CMPQ    CX, $32
	JLT     loop8
	VMOVUPS (SI), Y0
	VMOVUPS 32(SI), Y1
	VMOVUPS 64(SI), Y2
	VMOVUPS 96(SI), Y3
	VSUBPS  Y4, Y0, Y0
	VSUBPS  Y4, Y1, Y1
	VSUBPS  Y4, Y2, Y2
	VSUBPS  Y4, Y3, Y3
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	ADDQ    $128, SI
	ADDQ    $128, DI
	SUBQ    $32, CX
	JMP     loop32

loop8:
	TESTQ   CX, CX
	JZ      done
	VMOVUPS (SI), Y0
	VSUBPS  Y4, Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DI
	SUBQ    $8, CX
	JMP     loop8

done:
	VZEROUPPER
	RET
