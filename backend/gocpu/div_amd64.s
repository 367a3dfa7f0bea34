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
