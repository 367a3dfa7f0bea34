// AVX-512 and AVX2 e^x for float32, 16 and 8 lanes at a time, and the
// AVX2 SwiGLU kernels built on the 8-lane one.

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
DATA expc<>+52(SB)/4, $0x80000000 // the sign bit (the AVX2 SiLU kernels negate g)
GLOBL expc<>(SB), RODATA|NOPTR, $56

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

// EXPCONSTS8 loads the constants of EXP8 into Y4–Y15.
#define EXPCONSTS8 \
	VBROADCASTSS expc<>+0(SB), Y4; \
	VBROADCASTSS expc<>+4(SB), Y5; \
	VBROADCASTSS expc<>+8(SB), Y6; \
	VBROADCASTSS expc<>+48(SB), Y7; \
	VBROADCASTSS expc<>+16(SB), Y8; \
	VBROADCASTSS expc<>+20(SB), Y9; \
	VBROADCASTSS expc<>+24(SB), Y10; \
	VBROADCASTSS expc<>+28(SB), Y11; \
	VBROADCASTSS expc<>+32(SB), Y12; \
	VBROADCASTSS expc<>+36(SB), Y13; \
	VBROADCASTSS expc<>+40(SB), Y14; \
	VBROADCASTSS expc<>+44(SB), Y15

// EXP8 sets Y3 = e^Y0 in 8 lanes (Y0–Y2 clobbered; constants in Y4–Y15,
// Y9 = 1), expAVX512's algorithm and operations in its order (see
// expAVX2): clamp to [−104, 89] with NaN kept (x is VMINPS/VMAXPS's second
// operand), k = round(x·log2 e), r = x − k·ln2hi − k·ln2lo, p = 1 + r(1 +
// r(1/2 + … r/5040)) by Horner FMAs, then p·2^k1·2^k2 (k1 = ⌊k/2⌋, k2 = k −
// k1; each 2^kj = kj<<23 + the bits of 1.0).
#define EXP8 \
	VMINPS       Y0, Y7, Y0; \
	VMAXPS       Y0, Y8, Y0; \
	VMULPS       Y4, Y0, Y1; \
	VROUNDPS     $0, Y1, Y1; \
	VMOVAPS      Y0, Y2; \
	VFNMADD231PS Y5, Y1, Y2; \
	VFNMADD231PS Y6, Y1, Y2; \
	VMOVAPS      Y15, Y3; \
	VFMADD213PS  Y14, Y2, Y3; \
	VFMADD213PS  Y13, Y2, Y3; \
	VFMADD213PS  Y12, Y2, Y3; \
	VFMADD213PS  Y11, Y2, Y3; \
	VFMADD213PS  Y10, Y2, Y3; \
	VFMADD213PS  Y9, Y2, Y3; \
	VFMADD213PS  Y9, Y2, Y3; \
	VCVTPS2DQ    Y1, Y1; \
	VPSRAD       $1, Y1, Y0; \
	VPSUBD       Y0, Y1, Y1; \
	VPSLLD       $23, Y0, Y0; \
	VPSLLD       $23, Y1, Y1; \
	VPADDD       Y9, Y0, Y0; \
	VPADDD       Y9, Y1, Y1; \
	VMULPS       Y0, Y3, Y3; \
	VMULPS       Y1, Y3, Y3

// SIGMOIDNEG8 sets Y3 = σ(g) = 1/(1 + e^−g) for the 8 floats at (DX): −g
// by flipping the sign bit (exact), e^−g by EXP8, then one correctly
// rounded addition and division — SiLU's sigmoidBlock, value for value.
#define SIGMOIDNEG8 \
	VBROADCASTSS expc<>+52(SB), Y1; \
	VXORPS       (DX), Y1, Y0; \
	EXP8; \
	VADDPS       Y9, Y3, Y3; \
	VDIVPS       Y3, Y9, Y3

// func expAVX2(dst, src *float32, n int)
//
// dst[i] = e^src[i] for i < n (a positive multiple of 8), with expAVX512's
// algorithm and operations in the same order, 8 lanes at a time: the same
// clamp, k = round(x·log2 e) (VROUNDPS $0 rounds as VRNDSCALEPS $0 does),
// r and the degree-7 polynomial p by the same FMAs. AVX2 has no VSCALEFPS:
// p·2^k is p·2^k1·2^k2 with k1 = ⌊k/2⌋ and k2 = k − k1, both in [−75, 64]
// for k in [−150, 128], so 2^k1 and 2^k2 are normal floats built from their
// exponent bits, p·2^k1 is exact and the second product rounds p·2^k once,
// as VSCALEFPS does (overflow to +Inf and subnormal results included). The
// result is expAVX512's bit for bit. A NaN lane converts k to 0x80000000,
// whose halves give 2^k1 = 2^k2 = 1: the NaN p (x's, quieted) passes
// through the products as it does through VSCALEFPS.
TEXT ·expAVX2(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ n+16(FP), CX
	EXPCONSTS8

loop:
	VMOVUPS (SI), Y0
	EXP8
	VMOVUPS Y3, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DI
	SUBQ    $8, CX
	JNZ     loop
	VZEROUPPER
	RET

// func mulSiluAVX2(dst, a, gate *float32, n int)
//
// dst[i] = a[i]·(g·σ(g)), g = gate[i], for i < n (a positive multiple of 8;
// dst may be a or gate): MulSilu's Go loop over sigmoidBlock's σ, the same
// operations in the same order (the products commute), so the same
// float32s.
TEXT ·mulSiluAVX2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ a+8(FP), SI
	MOVQ gate+16(FP), DX
	MOVQ n+24(FP), CX
	EXPCONSTS8

loop:
	SIGMOIDNEG8
	VMULPS  (DX), Y3, Y3    // g·σ
	VMULPS  (SI), Y3, Y3    // a·(g·σ)
	VMOVUPS Y3, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DX
	ADDQ    $32, DI
	SUBQ    $8, CX
	JNZ     loop
	VZEROUPPER
	RET

// func siluGradMulAVX2(dst, v, u, gate *float32, n int)
//
// dst[i] = (v[i]·u[i])·(σ + g·(σ − σ·σ)), g = gate[i], σ = σ(g), for i < n
// (a positive multiple of 8; dst may be any operand): SiluGradMul's Go
// loop, the same operations in the same order, each rounded (no FMA), so
// the same float32s.
TEXT ·siluGradMulAVX2(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ v+8(FP), SI
	MOVQ u+16(FP), BX
	MOVQ gate+24(FP), DX
	MOVQ n+32(FP), CX
	EXPCONSTS8

loop:
	SIGMOIDNEG8
	VMULPS  Y3, Y3, Y1      // σ·σ
	VSUBPS  Y1, Y3, Y1      // σ − σ·σ
	VMULPS  (DX), Y1, Y1    // g·(σ − σ·σ)
	VADDPS  Y3, Y1, Y1      // σ + g·(σ − σ·σ)
	VMOVUPS (SI), Y2
	VMULPS  (BX), Y2, Y2    // v·u
	VMULPS  Y1, Y2, Y2
	VMOVUPS Y2, (DI)
	ADDQ    $32, SI
	ADDQ    $32, BX
	ADDQ    $32, DX
	ADDQ    $32, DI
	SUBQ    $8, CX
	JNZ     loop
	VZEROUPPER
	RET

// func expShiftScaleAVX2(dst, src *float32, n int, shift, scale float32)
//
// dst[i] = (e^(src[i] − shift))·scale for i < n (a positive multiple of 8;
// dst may be src): SubScalar, Exp (EXP8, expAVX2's operations) and a
// product, each rounded as they are, so the same float32s in one pass
// instead of three over the block. EXP8 takes every Y register, so shift
// and scale are read from the frame as 8-lane vectors.
TEXT ·expShiftScaleAVX2(SB), NOSPLIT, $64-32
	MOVQ         dst+0(FP), DI
	MOVQ         src+8(FP), SI
	MOVQ         n+16(FP), CX
	VBROADCASTSS shift+24(FP), Y0
	VMOVUPS      Y0, 0(SP)
	VBROADCASTSS scale+28(FP), Y0
	VMOVUPS      Y0, 32(SP)
	EXPCONSTS8

loop:
	VMOVUPS (SI), Y0
	VSUBPS  0(SP), Y0, Y0   // x − shift
	EXP8
	VMULPS  32(SP), Y3, Y3  // e^(x − shift)·scale
	VMOVUPS Y3, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DI
	SUBQ    $8, CX
	JNZ     loop
	VZEROUPPER
	RET
