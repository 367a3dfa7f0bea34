// AVX-512 float32 division, 16 lanes at a time. VDIVPS is IEEE division:
// every lane equals the scalar quotient exactly.

#include "textflag.h"

// func divVVAVX512(dst, a, b *float32, n int)
//
// dst[i] = a[i] / b[i] for i < n (a positive multiple of 16); dst may be a
// or b.
TEXT ·divVVAVX512(SB), NOSPLIT, $0-32
	MOVQ    dst+0(FP), DI
	MOVQ    a+8(FP), SI
	MOVQ    b+16(FP), DX
	MOVQ    n+24(FP), CX

vvloop:
	VMOVUPS (SI), Z0
	VDIVPS  (DX), Z0, Z0
	VMOVUPS Z0, (DI)
	ADDQ    $64, SI
	ADDQ    $64, DX
	ADDQ    $64, DI
	SUBQ    $16, CX
	JNZ     vvloop
	VZEROUPPER
	RET

// func divVSAVX512(dst, a *float32, s float32, n int)
//
// dst[i] = a[i] / s for i < n (a positive multiple of 16); dst may be a.
TEXT ·divVSAVX512(SB), NOSPLIT, $0-32
	MOVQ         dst+0(FP), DI
	MOVQ         a+8(FP), SI
	VBROADCASTSS s+16(FP), Z1
	MOVQ         n+24(FP), CX

vsloop:
	VMOVUPS (SI), Z0
	VDIVPS  Z1, Z0, Z0
	VMOVUPS Z0, (DI)
	ADDQ    $64, SI
	ADDQ    $64, DI
	SUBQ    $16, CX
	JNZ     vsloop
	VZEROUPPER
	RET

// func divVVAVX2(dst, a, b *float32, n int)
//
// divVVAVX512 with 8 lanes: dst[i] = a[i] / b[i] for i < n (a positive
// multiple of 8); dst may be a or b.
TEXT ·divVVAVX2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ b+16(FP), DX
	MOVQ n+24(FP), CX

vv2loop:
	VMOVUPS (SI), Y0
	VDIVPS  (DX), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DX
	ADDQ    $32, DI
	SUBQ    $8, CX
	JNZ     vv2loop
	VZEROUPPER
	RET

// func divVSAVX2(dst, a *float32, s float32, n int)
//
// dst[i] = a[i] / s for i < n (a positive multiple of 8); dst may be a.
TEXT ·divVSAVX2(SB), NOSPLIT, $0-32
	MOVQ         dst+0(FP), DI
	MOVQ         a+8(FP), SI
	VBROADCASTSS s+16(FP), Y1
	MOVQ         n+24(FP), CX

vs2loop:
	VMOVUPS (SI), Y0
	VDIVPS  Y1, Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DI
	SUBQ    $8, CX
	JNZ     vs2loop
	VZEROUPPER
	RET

// func divSVAVX2(dst *float32, s float32, b *float32, n int)
//
// dst[i] = s / b[i] for i < n (a positive multiple of 8); dst may be b.
TEXT ·divSVAVX2(SB), NOSPLIT, $0-32
	MOVQ         dst+0(FP), DI
	VBROADCASTSS s+8(FP), Y1
	MOVQ         b+16(FP), SI
	MOVQ         n+24(FP), CX

sv2loop:
	VDIVPS  (SI), Y1, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DI
	SUBQ    $8, CX
	JNZ     sv2loop
	VZEROUPPER
	RET
