// AVX-512 e^x for float32, 16 lanes at a time.

#include "textflag.h"

DATA expc<>+0(SB)/4, $0x3fb8aa3b  // log2(e)
DATA expc<>+4(SB)/4, $0x3f318000  // ln2 high part (0.693359375)
DATA expc<>+8(SB)/4, $0xb95e8083  // ln2 low part (-2.12194440e-4)
DATA expc<>+12(SB)/4, $0x42b17218 // upper clamp 88.7228394
DATA expc<>+16(SB)/4, $0xc2d00000 // lower clamp -104
DATA expc<>+20(SB)/4, $0x3f800000 // 1
DATA expc<>+24(SB)/4, $0x3f000000 // 1/2
DATA expc<>+28(SB)/4, $0x3e2aaaab // 1/6
DATA expc<>+32(SB)/4, $0x3d2aaaab // 1/24
DATA expc<>+36(SB)/4, $0x3c088889 // 1/120
DATA expc<>+40(SB)/4, $0x3ab60b61 // 1/720
DATA expc<>+44(SB)/4, $0x39500d01 // 1/5040
DATA expc<>+48(SB)/4, $0x42b20000 // 89: inputs above overflow to +Inf
GLOBL expc<>(SB), RODATA|NOPTR, $52

// func expAVX512(dst, src *float32, n int)
//
// dst[i] = e^src[i] for i < n (a positive multiple of 16): k = round(x·log2 e),
// r = x − k·ln2 (two-part ln2, FMA), e^r by its Taylor polynomial of degree 7,
// scaled by 2^k with VSCALEFPS (which gives +Inf, 0 and subnormals exactly).
// x is first clamped to [−104, 89] with NaN kept (x is the second operand
// of VMAXPS/VMINPS, which they return when an operand is NaN).
TEXT ·expAVX512(SB), NOSPLIT, $0-24
	MOVQ         dst+0(FP), DI
	MOVQ         src+8(FP), SI
	MOVQ         n+16(FP), CX
	VBROADCASTSS expc<>+0(SB), Z16
	VBROADCASTSS expc<>+4(SB), Z17
	VBROADCASTSS expc<>+8(SB), Z18
	VBROADCASTSS expc<>+48(SB), Z19
	VBROADCASTSS expc<>+16(SB), Z20
	VBROADCASTSS expc<>+20(SB), Z21
	VBROADCASTSS expc<>+24(SB), Z22
	VBROADCASTSS expc<>+28(SB), Z23
	VBROADCASTSS expc<>+32(SB), Z24
	VBROADCASTSS expc<>+36(SB), Z25
	VBROADCASTSS expc<>+40(SB), Z26
	VBROADCASTSS expc<>+44(SB), Z27

loop:
	VMOVUPS       (SI), Z0
	VMINPS        Z0, Z19, Z0          // min(89, x), NaN kept
	VMAXPS        Z0, Z20, Z0          // max(-104, x), NaN kept
	VMULPS        Z16, Z0, Z1          // x·log2 e
	VRNDSCALEPS   $0, Z1, Z1           // k = round to nearest
	VMOVAPS       Z0, Z2
	VFNMADD231PS  Z17, Z1, Z2          // r = x − k·ln2hi
	VFNMADD231PS  Z18, Z1, Z2          // r −= k·ln2lo
	VMOVAPS       Z27, Z3              // p = 1/5040
	VFMADD213PS   Z26, Z2, Z3          // p = p·r + 1/720
	VFMADD213PS   Z25, Z2, Z3
	VFMADD213PS   Z24, Z2, Z3
	VFMADD213PS   Z23, Z2, Z3
	VFMADD213PS   Z22, Z2, Z3
	VFMADD213PS   Z21, Z2, Z3
	VFMADD213PS   Z21, Z2, Z3          // p = 1 + r(1 + r(1/2 + …))
	VSCALEFPS     Z1, Z3, Z3           // p·2^k
	VMOVUPS       Z3, (DI)
	ADDQ          $64, SI
	ADDQ          $64, DI
	SUBQ          $16, CX
	JNZ           loop
	VZEROUPPER
	RET
