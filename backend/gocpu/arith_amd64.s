// AVX2 float32 Add, Sub and Mul into a destination, 8 lanes at a time
// (vek's _Into kernels copy x to dst and then run in place: two passes).
// Each lane is the IEEE operation of its elements, as the scalar one.

#include "textflag.h"

// func addVVAVX2(dst, a, b *float32, n int)
//
// dst[i] = a[i] + b[i] for i < n (a positive multiple of 8); dst may be
// exactly a or b.
TEXT ·addVVAVX2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DX
	MOVQ n+24(FP), CX

addvv32:
	CMPQ    CX, $32
	JLT     addvv8
	VMOVUPS (SI), Y0
	VMOVUPS 32(SI), Y1
	VMOVUPS 64(SI), Y2
	VMOVUPS 96(SI), Y3
	VADDPS  (DX), Y0, Y0
	VADDPS  32(DX), Y1, Y1
	VADDPS  64(DX), Y2, Y2
	VADDPS  96(DX), Y3, Y3
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	ADDQ    $128, SI
	ADDQ    $128, DX
	ADDQ    $128, DI
	SUBQ    $32, CX
	JMP     addvv32

addvv8:
	TESTQ   CX, CX
	JZ      addvvdone
	VMOVUPS (SI), Y0
	VADDPS  (DX), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DX
	ADDQ    $32, DI
	SUBQ    $8, CX
	JMP     addvv8

addvvdone:
	VZEROUPPER
	RET

// func addVSAVX2(dst, a *float32, s float32, n int)
//
// dst[i] = a[i] + s for i < n (a positive multiple of 8); dst may be a.
TEXT ·addVSAVX2(SB), NOSPLIT, $0-32
	MOVQ         dst+0(FP), DI
	MOVQ         a+8(FP), SI
	VBROADCASTSS s+16(FP), Y4
	MOVQ         n+24(FP), CX

addvs32:
	CMPQ    CX, $32
	JLT     addvs8
	VMOVUPS (SI), Y0
	VMOVUPS 32(SI), Y1
	VMOVUPS 64(SI), Y2
	VMOVUPS 96(SI), Y3
	VADDPS  Y4, Y0, Y0
	VADDPS  Y4, Y1, Y1
	VADDPS  Y4, Y2, Y2
	VADDPS  Y4, Y3, Y3
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	ADDQ    $128, SI
	ADDQ    $128, DI
	SUBQ    $32, CX
	JMP     addvs32

addvs8:
	TESTQ   CX, CX
	JZ      addvsdone
	VMOVUPS (SI), Y0
	VADDPS  Y4, Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DI
	SUBQ    $8, CX
	JMP     addvs8

addvsdone:
	VZEROUPPER
	RET

// func subVVAVX2(dst, a, b *float32, n int)
//
// dst[i] = a[i] − b[i] for i < n (a positive multiple of 8); dst may be
// exactly a or b.
TEXT ·subVVAVX2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DX
	MOVQ n+24(FP), CX

subvv32:
	CMPQ    CX, $32
	JLT     subvv8
	VMOVUPS (SI), Y0
	VMOVUPS 32(SI), Y1
	VMOVUPS 64(SI), Y2
	VMOVUPS 96(SI), Y3
	VSUBPS  (DX), Y0, Y0
	VSUBPS  32(DX), Y1, Y1
	VSUBPS  64(DX), Y2, Y2
	VSUBPS  96(DX), Y3, Y3
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	ADDQ    $128, SI
	ADDQ    $128, DX
	ADDQ    $128, DI
	SUBQ    $32, CX
	JMP     subvv32

subvv8:
	TESTQ   CX, CX
	JZ      subvvdone
	VMOVUPS (SI), Y0
	VSUBPS  (DX), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DX
	ADDQ    $32, DI
	SUBQ    $8, CX
	JMP     subvv8

subvvdone:
	VZEROUPPER
	RET

// func mulVVAVX2(dst, a, b *float32, n int)
//
// dst[i] = a[i] × b[i] for i < n (a positive multiple of 8); dst may be
// exactly a or b.
TEXT ·mulVVAVX2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DX
	MOVQ n+24(FP), CX

mulvv32:
	CMPQ    CX, $32
	JLT     mulvv8
	VMOVUPS (SI), Y0
	VMOVUPS 32(SI), Y1
	VMOVUPS 64(SI), Y2
	VMOVUPS 96(SI), Y3
	VMULPS  (DX), Y0, Y0
	VMULPS  32(DX), Y1, Y1
	VMULPS  64(DX), Y2, Y2
	VMULPS  96(DX), Y3, Y3
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	ADDQ    $128, SI
	ADDQ    $128, DX
	ADDQ    $128, DI
	SUBQ    $32, CX
	JMP     mulvv32

mulvv8:
	TESTQ   CX, CX
	JZ      mulvvdone
	VMOVUPS (SI), Y0
	VMULPS  (DX), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DX
	ADDQ    $32, DI
	SUBQ    $8, CX
	JMP     mulvv8

mulvvdone:
	VZEROUPPER
	RET

// func mulVSAVX2(dst, a *float32, s float32, n int)
//
// dst[i] = a[i] × s for i < n (a positive multiple of 8); dst may be a.
TEXT ·mulVSAVX2(SB), NOSPLIT, $0-32
	MOVQ         dst+0(FP), DI
	MOVQ         a+8(FP), SI
	VBROADCASTSS s+16(FP), Y4
	MOVQ         n+24(FP), CX

mulvs32:
	CMPQ    CX, $32
	JLT     mulvs8
	VMOVUPS (SI), Y0
	VMOVUPS 32(SI), Y1
	VMOVUPS 64(SI), Y2
	VMOVUPS 96(SI), Y3
	VMULPS  Y4, Y0, Y0
	VMULPS  Y4, Y1, Y1
	VMULPS  Y4, Y2, Y2
	VMULPS  Y4, Y3, Y3
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	ADDQ    $128, SI
	ADDQ    $128, DI
	SUBQ    $32, CX
	JMP     mulvs32

mulvs8:
	TESTQ   CX, CX
	JZ      mulvsdone
	VMOVUPS (SI), Y0
	VMULPS  Y4, Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DI
	SUBQ    $8, CX
	JMP     mulvs8

mulvsdone:
	VZEROUPPER
	RET

// func subSVAVX2(dst *float32, s float32, b *float32, n int)
//
// dst[i] = s − b[i] for i < n (a positive multiple of 8); dst may be b.
TEXT ·subSVAVX2(SB), NOSPLIT, $0-32
	MOVQ         dst+0(FP), DI
	VBROADCASTSS s+8(FP), Y4
	MOVQ         b+16(FP), SI
	MOVQ         n+24(FP), CX

subsvloop:
	VSUBPS  (SI), Y4, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DI
	SUBQ    $8, CX
	JNZ     subsvloop
	VZEROUPPER
	RET

// func sqrtAVX2(dst, x *float32, n int)
//
// dst[i] = √x[i] for i < n (a positive multiple of 8): VSQRTPS, IEEE
// square root correctly rounded to float32, which is what
// float32(math.Sqrt(float64(x))) gives (rounding twice is exact for square
// roots from float64 to float32); dst may be exactly x.
TEXT ·sqrtAVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), CX

sqrt32:
	CMPQ    CX, $32
	JLT     sqrt8
	VSQRTPS (SI), Y0
	VSQRTPS 32(SI), Y1
	VSQRTPS 64(SI), Y2
	VSQRTPS 96(SI), Y3
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	ADDQ    $128, SI
	ADDQ    $128, DI
	SUBQ    $32, CX
	JMP     sqrt32

sqrt8:
	TESTQ   CX, CX
	JZ      sqrtdone
	VSQRTPS (SI), Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DI
	SUBQ    $8, CX
	JMP     sqrt8

sqrtdone:
	VZEROUPPER
	RET
