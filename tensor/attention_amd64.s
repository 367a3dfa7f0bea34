// AVX2 row kernels of the attention tiles (attention_rows.go): the
// softmax of one row of scores in place, and the probabilities and their
// score gradient of one row of the backward, with expAVX2's e^x
// (exp_amd64.s) inlined.

#include "textflag.h"
#include "avx2_amd64.h"

// The constants of expAVX2 (exp_amd64.s's expc<>): the scalars broadcast
// into registers, the polynomial's coefficients as 8-lane vectors read by
// the FMAs (AVX2 has no embedded broadcast), which frees the registers
// the row kernels need.
DATA attnc<>+0(SB)/4, $0x3fb8aa3b  // log2(e)
DATA attnc<>+4(SB)/4, $0x3f318000  // ln2 high part (0.693359375)
DATA attnc<>+8(SB)/4, $0xb95e8083  // ln2 low part (-2.12194440e-4)
DATA attnc<>+12(SB)/4, $0x42b20000 // 89: inputs above overflow to +Inf
DATA attnc<>+16(SB)/4, $0xc2d00000 // lower clamp -104
DATA attnc<>+20(SB)/4, $0x3f800000 // 1
GLOBL attnc<>(SB), RODATA|NOPTR, $24

#define POLY8(off, bits) \
	DATA attnpoly<>+(off+0)(SB)/4, bits; \
	DATA attnpoly<>+(off+4)(SB)/4, bits; \
	DATA attnpoly<>+(off+8)(SB)/4, bits; \
	DATA attnpoly<>+(off+12)(SB)/4, bits; \
	DATA attnpoly<>+(off+16)(SB)/4, bits; \
	DATA attnpoly<>+(off+20)(SB)/4, bits; \
	DATA attnpoly<>+(off+24)(SB)/4, bits; \
	DATA attnpoly<>+(off+28)(SB)/4, bits

POLY8(0, $0x39500d01)   // 1/5040
POLY8(32, $0x3ab60b61)  // 1/720
POLY8(64, $0x3c088889)  // 1/120
POLY8(96, $0x3d2aaaab)  // 1/24
POLY8(128, $0x3e2aaaab) // 1/6
POLY8(160, $0x3f000000) // 1/2
GLOBL attnpoly<>(SB), RODATA|NOPTR, $192

// The range of e^x's fast path (EXP8F): x ≥ −86 makes n = round(x·log2 e)
// ≥ −124 and x ≤ 88 makes n ≤ 127, so 2^n is a normal float32 and
// neither clamp of EXP8M (89, −104) changes x.
DATA attnfast<>+0(SB)/4, $0xc2ac0000 // -86
DATA attnfast<>+4(SB)/4, $0x42b00000 // 88
GLOBL attnfast<>(SB), RODATA|NOPTR, $8

// attnmask<>+32−4·n holds the mask of the first n of 8 lanes (n ≤ 8).
DATA attnmask<>+0(SB)/8, $0xffffffffffffffff
DATA attnmask<>+8(SB)/8, $0xffffffffffffffff
DATA attnmask<>+16(SB)/8, $0xffffffffffffffff
DATA attnmask<>+24(SB)/8, $0xffffffffffffffff
DATA attnmask<>+32(SB)/8, $0
DATA attnmask<>+40(SB)/8, $0
DATA attnmask<>+48(SB)/8, $0
DATA attnmask<>+56(SB)/8, $0
GLOBL attnmask<>(SB), RODATA|NOPTR, $64

// EXPCONSTS loads the register constants of EXP8M into Y4–Y9.
#define EXPCONSTS \
	VBROADCASTSS attnc<>+0(SB), Y4; \
	VBROADCASTSS attnc<>+4(SB), Y5; \
	VBROADCASTSS attnc<>+8(SB), Y6; \
	VBROADCASTSS attnc<>+12(SB), Y7; \
	VBROADCASTSS attnc<>+16(SB), Y8; \
	VBROADCASTSS attnc<>+20(SB), Y9

// EXP8POLY is the part of EXP8M and EXP8F they share: Y1 = n = round(x·log2 e)
// (as int32), Y2 = r = x − n·ln 2 (in two parts) and Y3 = the polynomial
// p(r) ≈ e^r, for x in Y0 (Y4–Y9 from EXPCONSTS).
#define EXP8POLY \
	VMULPS       Y4, Y0, Y1; \
	VROUNDPS     $0, Y1, Y1; \
	VMOVAPS      Y0, Y2; \
	VFNMADD231PS Y5, Y1, Y2; \
	VFNMADD231PS Y6, Y1, Y2; \
	VMOVUPS      attnpoly<>+0(SB), Y3; \
	VFMADD213PS  attnpoly<>+32(SB), Y2, Y3; \
	VFMADD213PS  attnpoly<>+64(SB), Y2, Y3; \
	VFMADD213PS  attnpoly<>+96(SB), Y2, Y3; \
	VFMADD213PS  attnpoly<>+128(SB), Y2, Y3; \
	VFMADD213PS  attnpoly<>+160(SB), Y2, Y3; \
	VFMADD213PS  Y9, Y2, Y3; \
	VFMADD213PS  Y9, Y2, Y3; \
	VCVTPS2DQ    Y1, Y1

// EXP8M sets Y3 = e^Y0 in 8 lanes (Y0–Y2 clobbered; Y4–Y9 from
// EXPCONSTS): exp_amd64.s's EXP8, the same operations in the same order
// (the coefficients read from memory instead of Y10–Y15), so the same
// float32s as Exp.
#define EXP8M \
	VMINPS       Y0, Y7, Y0; \
	VMAXPS       Y0, Y8, Y0; \
	EXP8POLY; \
	VPSRAD       $1, Y1, Y0; \
	VPSUBD       Y0, Y1, Y1; \
	VPSLLD       $23, Y0, Y0; \
	VPSLLD       $23, Y1, Y1; \
	VPADDD       Y9, Y0, Y0; \
	VPADDD       Y9, Y1, Y1; \
	VMULPS       Y0, Y3, Y3; \
	VMULPS       Y1, Y3, Y3

// EXP8F is EXP8M for lanes with −86 ≤ Y0 ≤ 88 (attnfast<>; not NaN): the
// clamps left out (they do not change such an x) and the polynomial
// scaled by 2^n in one product instead of 2^⌊n/2⌋ and then 2^(n−⌊n/2⌋).
// Both are exact but for the last rounding (2^⌊n/2⌋ leaves the product
// normal; 2^n is a normal float32), which rounds the same real number, so
// the float32s are EXP8M's (TestAttnRowKernels' range trials).
#define EXP8F \
	EXP8POLY; \
	VPSLLD       $23, Y1, Y1; \
	VPADDD       Y9, Y1, Y1; \
	VMULPS       Y1, Y3, Y3

// TAILMASK sets Y12 to the mask of the first DX (1…7) lanes (AX clobbered).
#define TAILMASK \
	LEAQ    attnmask<>+32(SB), AX; \
	SHLQ    $2, DX; \
	SUBQ    DX, AX; \
	VMOVUPS (AX), Y12

// func attnSoftmaxAVX2(x *float32, n int, mPrev float32) (m, sum float32)
//
// m = max(mPrev, x[0], …, x[n−1]) (n ≥ 1), then x[i] = e^(x[i] − m) and
// sum = Σ x[i]: lane i mod 8 of one accumulator takes x[i] in the order
// of i, the lanes folded by HSUM (attnSoftmaxGo's order). The maximum
// takes 8 lanes (VMAXPS) and then the last n mod 8 one by one; a NaN among
// the x may or may not reach m, but e^(NaN − m) makes the sum NaN either
// way.
TEXT ·attnSoftmaxAVX2(SB), NOSPLIT, $0-32
	MOVQ         x+0(FP), SI
	MOVQ         n+8(FP), CX
	VBROADCASTSS mPrev+16(FP), Y10
	MOVQ         SI, DI
	MOVQ         CX, DX
	CMPQ         DX, $8
	JB           maxfold
	// Over the whole vectors, also their minimum (Y14) and their NaN
	// lanes (Y15), for the fast path's range.
	VMOVUPS      (DI), Y14
	VXORPS       Y15, Y15, Y15

maxloop:
	VMOVUPS (DI), Y0
	VMAXPS  Y0, Y10, Y10
	VMINPS  Y0, Y14, Y14
	VCMPPS  $3, Y0, Y0, Y1
	VORPS   Y1, Y15, Y15
	ADDQ    $32, DI
	SUBQ    $8, DX
	CMPQ    DX, $8
	JAE     maxloop

maxfold:
	VEXTRACTF128 $1, Y10, X0
	VMAXPS       X0, X10, X10
	VMOVHLPS     X10, X0, X0
	VMAXPS       X0, X10, X10
	VMOVSHDUP    X10, X0
	VMAXSS       X0, X10, X10
	TESTQ        DX, DX
	JZ           maxdone

maxtail:
	VMAXSS (DI), X10, X10
	ADDQ   $4, DI
	DECQ   DX
	JNZ    maxtail

maxdone:
	VBROADCASTSS X10, Y10
	EXPCONSTS
	VXORPS       Y11, Y11, Y11
	MOVQ         SI, DI
	MOVQ         CX, DX
	CMPQ         DX, $8
	JB           exptail
	// The fast path when no whole vector holds a NaN and min − m ≥ −86
	// (then every x − m is in [−86, 0], or m is NaN or ±Inf and the
	// comparison fails).
	VSUBPS       Y10, Y14, Y14
	VBROADCASTSS attnfast<>+0(SB), Y0
	VCMPPS       $9, Y0, Y14, Y14 // NGE_US: not (min − m ≥ −86)
	VORPS        Y14, Y15, Y15
	VMOVMSKPS    Y15, AX
	TESTL        AX, AX
	JNZ          exploop

fastexploop:
	VMOVUPS (DI), Y0
	VSUBPS  Y10, Y0, Y0
	EXP8F
	VMOVUPS Y3, (DI)
	VADDPS  Y3, Y11, Y11
	ADDQ    $32, DI
	SUBQ    $8, DX
	CMPQ    DX, $8
	JAE     fastexploop
	JMP     exptail

exploop:
	VMOVUPS (DI), Y0
	VSUBPS  Y10, Y0, Y0
	EXP8M
	VMOVUPS Y3, (DI)
	VADDPS  Y3, Y11, Y11
	ADDQ    $32, DI
	SUBQ    $8, DX
	CMPQ    DX, $8
	JAE     exploop

exptail:
	TESTQ      DX, DX
	JZ         done
	TAILMASK
	VMASKMOVPS (DI), Y12, Y0
	VSUBPS     Y10, Y0, Y0
	EXP8M
	VANDPS     Y12, Y3, Y3
	VMASKMOVPS Y3, Y12, (DI)
	VADDPS     Y3, Y11, Y11

done:
	HSUM(Y11, X11, X0)
	MOVSS X10, m+24(FP)
	MOVSS X11, sum+28(FP)
	VZEROUPPER
	RET

// func attnGradAVX2(p, ds *float32, n int, m, inv, d float32)
//
// p[i] = e^(p[i] − m)·inv and then ds[i] = (ds[i] − d)·p[i] for i < n
// (n ≥ 1): the probabilities and the score gradient of one row of the
// backward, each float32 operation IEEE (attnGradGo's).
TEXT ·attnGradAVX2(SB), NOSPLIT, $0-36
	MOVQ         p+0(FP), SI
	MOVQ         ds+8(FP), DI
	MOVQ         n+16(FP), DX
	VBROADCASTSS m+24(FP), Y10
	VBROADCASTSS inv+28(FP), Y11
	VBROADCASTSS d+32(FP), Y13
	EXPCONSTS
	CMPQ         DX, $8
	JB           gradtail
	// The fast path when no whole vector holds a NaN and every p − m of
	// them is in [−86, 88]: min (Y14) and max (Y15) of the whole vectors,
	// their NaN lanes (Y12).
	MOVQ         SI, R8
	MOVQ         DX, CX
	VMOVUPS      (R8), Y14
	VMOVAPS      Y14, Y15
	VXORPS       Y12, Y12, Y12

rangeloop:
	VMOVUPS (R8), Y0
	VMINPS  Y0, Y14, Y14
	VMAXPS  Y0, Y15, Y15
	VCMPPS  $3, Y0, Y0, Y1
	VORPS   Y1, Y12, Y12
	ADDQ    $32, R8
	SUBQ    $8, CX
	CMPQ    CX, $8
	JAE     rangeloop
	VSUBPS       Y10, Y14, Y14
	VSUBPS       Y10, Y15, Y15
	VBROADCASTSS attnfast<>+0(SB), Y0
	VBROADCASTSS attnfast<>+4(SB), Y1
	VCMPPS       $9, Y0, Y14, Y14 // NGE_US: not (min − m ≥ −86)
	VCMPPS       $6, Y1, Y15, Y15 // NLE_US: not (max − m ≤ 88)
	VORPS        Y14, Y12, Y12
	VORPS        Y15, Y12, Y12
	VMOVMSKPS    Y12, AX
	TESTL        AX, AX
	JNZ          gradloop

fastgradloop:
	VMOVUPS (SI), Y0
	VSUBPS  Y10, Y0, Y0
	EXP8F
	VMULPS  Y11, Y3, Y3
	VMOVUPS Y3, (SI)
	VMOVUPS (DI), Y0
	VSUBPS  Y13, Y0, Y0
	VMULPS  Y3, Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DI
	SUBQ    $8, DX
	CMPQ    DX, $8
	JAE     fastgradloop
	JMP     gradtail

gradloop:
	VMOVUPS (SI), Y0
	VSUBPS  Y10, Y0, Y0
	EXP8M
	VMULPS  Y11, Y3, Y3
	VMOVUPS Y3, (SI)
	VMOVUPS (DI), Y0
	VSUBPS  Y13, Y0, Y0
	VMULPS  Y3, Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DI
	SUBQ    $8, DX
	CMPQ    DX, $8
	JAE     gradloop

gradtail:
	TESTQ      DX, DX
	JZ         graddone
	TAILMASK
	VMASKMOVPS (SI), Y12, Y0
	VSUBPS     Y10, Y0, Y0
	EXP8M
	VMULPS     Y11, Y3, Y3
	VMASKMOVPS Y3, Y12, (SI)
	VMASKMOVPS (DI), Y12, Y0
	VSUBPS     Y13, Y0, Y0
	VMULPS     Y3, Y0, Y0
	VMASKMOVPS Y0, Y12, (DI)

graddone:
	VZEROUPPER
	RET

// func sgemm6x16StridedNAVX2(k int, a *float32, rs, ps, astep int, b *float32, ldb, bstep int, c *float32, ldc, cstep, n int, acc bool)
//
// For each tile t < n (n ≥ 1), one after another, with A from
// a + t·astep, B from b + t·bstep and C at c + t·cstep (steps in floats,
// ≥ 0): C[i·ldc + j] (+)= Σ_{p<k} A[i·rs + p·ps] · B[p·ldb + j] for i < 6,
// j < 16, k ≥ 1. It is sgemm6x16AVX2 (gemm_amd64.s) with A read in place
// with any strides instead of from a packed panel (rs = 1, ps = 6): rows
// of a tile of P or dS (ps = 1), or columns of a block of Q or dO (rs = 1,
// ps = h), so the attention tiles need not pack them, and n tiles (the
// chunks of one panel, the feature panels of one chunk) for one call's
// overhead. The same twelve accumulators from +0, one VFMADD231PS per
// step in the order of p, then with acc one addition to C: the float32s
// of sgemm6x16AVX2 on the packed panel, tile by tile
// (TestSgemm6x16Strided, TestSgemm6x16StridedN).
TEXT ·sgemm6x16StridedNAVX2(SB), NOSPLIT, $0-97
	MOVQ    rs+16(FP), R12
	SHLQ    $2, R12
	MOVQ    ps+24(FP), R14
	SHLQ    $2, R14
	MOVQ    ldb+48(FP), BX
	SHLQ    $2, BX
	MOVQ    ldc+72(FP), R8
	SHLQ    $2, R8
	MOVBLZX acc+96(FP), R9
	LEAQ    (BX)(BX*2), R11

tilestrn:
	MOVQ    k+0(FP), CX
	MOVQ    a+8(FP), SI
	MOVQ    b+40(FP), DI
	MOVQ    c+64(FP), DX
	LEAQ    (R12)(R12*2), R13
	ADDQ    SI, R13
	MOVQ    DX, R10
	PREFETCHT0 (R10)
	PREFETCHT0 60(R10)
	ADDQ    R8, R10
	PREFETCHT0 (R10)
	PREFETCHT0 60(R10)
	ADDQ    R8, R10
	PREFETCHT0 (R10)
	PREFETCHT0 60(R10)
	ADDQ    R8, R10
	PREFETCHT0 (R10)
	PREFETCHT0 60(R10)
	ADDQ    R8, R10
	PREFETCHT0 (R10)
	PREFETCHT0 60(R10)
	ADDQ    R8, R10
	PREFETCHT0 (R10)
	PREFETCHT0 60(R10)
	VXORPS  Y0, Y0, Y0
	VXORPS  Y1, Y1, Y1
	VXORPS  Y2, Y2, Y2
	VXORPS  Y3, Y3, Y3
	VXORPS  Y4, Y4, Y4
	VXORPS  Y5, Y5, Y5
	VXORPS  Y6, Y6, Y6
	VXORPS  Y7, Y7, Y7
	VXORPS  Y8, Y8, Y8
	VXORPS  Y9, Y9, Y9
	VXORPS  Y10, Y10, Y10
	VXORPS  Y11, Y11, Y11
	CMPQ    CX, $4
	JLT     tailstrn

	PCALIGN $64
loopstrn:
	VMOVUPS (DI), Y12
	VMOVUPS 32(DI), Y13
	VBROADCASTSS (SI), Y14
	VFMADD231PS Y12, Y14, Y0
	VFMADD231PS Y13, Y14, Y1
	VBROADCASTSS (SI)(R12*1), Y15
	VFMADD231PS Y12, Y15, Y2
	VFMADD231PS Y13, Y15, Y3
	VBROADCASTSS (SI)(R12*2), Y14
	VFMADD231PS Y12, Y14, Y4
	VFMADD231PS Y13, Y14, Y5
	VBROADCASTSS (R13), Y15
	VFMADD231PS Y12, Y15, Y6
	VFMADD231PS Y13, Y15, Y7
	VBROADCASTSS (R13)(R12*1), Y14
	VFMADD231PS Y12, Y14, Y8
	VFMADD231PS Y13, Y14, Y9
	VBROADCASTSS (R13)(R12*2), Y15
	VFMADD231PS Y12, Y15, Y10
	VFMADD231PS Y13, Y15, Y11
	ADDQ    R14, SI
	ADDQ    R14, R13
	VMOVUPS (DI)(BX*1), Y12
	VMOVUPS 32(DI)(BX*1), Y13
	VBROADCASTSS (SI), Y14
	VFMADD231PS Y12, Y14, Y0
	VFMADD231PS Y13, Y14, Y1
	VBROADCASTSS (SI)(R12*1), Y15
	VFMADD231PS Y12, Y15, Y2
	VFMADD231PS Y13, Y15, Y3
	VBROADCASTSS (SI)(R12*2), Y14
	VFMADD231PS Y12, Y14, Y4
	VFMADD231PS Y13, Y14, Y5
	VBROADCASTSS (R13), Y15
	VFMADD231PS Y12, Y15, Y6
	VFMADD231PS Y13, Y15, Y7
	VBROADCASTSS (R13)(R12*1), Y14
	VFMADD231PS Y12, Y14, Y8
	VFMADD231PS Y13, Y14, Y9
	VBROADCASTSS (R13)(R12*2), Y15
	VFMADD231PS Y12, Y15, Y10
	VFMADD231PS Y13, Y15, Y11
	ADDQ    R14, SI
	ADDQ    R14, R13
	VMOVUPS (DI)(BX*2), Y12
	VMOVUPS 32(DI)(BX*2), Y13
	VBROADCASTSS (SI), Y14
	VFMADD231PS Y12, Y14, Y0
	VFMADD231PS Y13, Y14, Y1
	VBROADCASTSS (SI)(R12*1), Y15
	VFMADD231PS Y12, Y15, Y2
	VFMADD231PS Y13, Y15, Y3
	VBROADCASTSS (SI)(R12*2), Y14
	VFMADD231PS Y12, Y14, Y4
	VFMADD231PS Y13, Y14, Y5
	VBROADCASTSS (R13), Y15
	VFMADD231PS Y12, Y15, Y6
	VFMADD231PS Y13, Y15, Y7
	VBROADCASTSS (R13)(R12*1), Y14
	VFMADD231PS Y12, Y14, Y8
	VFMADD231PS Y13, Y14, Y9
	VBROADCASTSS (R13)(R12*2), Y15
	VFMADD231PS Y12, Y15, Y10
	VFMADD231PS Y13, Y15, Y11
	ADDQ    R14, SI
	ADDQ    R14, R13
	VMOVUPS (DI)(R11*1), Y12
	VMOVUPS 32(DI)(R11*1), Y13
	VBROADCASTSS (SI), Y14
	VFMADD231PS Y12, Y14, Y0
	VFMADD231PS Y13, Y14, Y1
	VBROADCASTSS (SI)(R12*1), Y15
	VFMADD231PS Y12, Y15, Y2
	VFMADD231PS Y13, Y15, Y3
	VBROADCASTSS (SI)(R12*2), Y14
	VFMADD231PS Y12, Y14, Y4
	VFMADD231PS Y13, Y14, Y5
	VBROADCASTSS (R13), Y15
	VFMADD231PS Y12, Y15, Y6
	VFMADD231PS Y13, Y15, Y7
	VBROADCASTSS (R13)(R12*1), Y14
	VFMADD231PS Y12, Y14, Y8
	VFMADD231PS Y13, Y14, Y9
	VBROADCASTSS (R13)(R12*2), Y15
	VFMADD231PS Y12, Y15, Y10
	VFMADD231PS Y13, Y15, Y11
	ADDQ    R14, SI
	ADDQ    R14, R13
	LEAQ    (DI)(BX*4), DI
	SUBQ    $4, CX
	CMPQ    CX, $4
	JGE     loopstrn

tailstrn:
	TESTQ   CX, CX
	JEQ     storestrn

onestrn:
	VMOVUPS (DI), Y12
	VMOVUPS 32(DI), Y13
	VBROADCASTSS (SI), Y14
	VFMADD231PS Y12, Y14, Y0
	VFMADD231PS Y13, Y14, Y1
	VBROADCASTSS (SI)(R12*1), Y15
	VFMADD231PS Y12, Y15, Y2
	VFMADD231PS Y13, Y15, Y3
	VBROADCASTSS (SI)(R12*2), Y14
	VFMADD231PS Y12, Y14, Y4
	VFMADD231PS Y13, Y14, Y5
	VBROADCASTSS (R13), Y15
	VFMADD231PS Y12, Y15, Y6
	VFMADD231PS Y13, Y15, Y7
	VBROADCASTSS (R13)(R12*1), Y14
	VFMADD231PS Y12, Y14, Y8
	VFMADD231PS Y13, Y14, Y9
	VBROADCASTSS (R13)(R12*2), Y15
	VFMADD231PS Y12, Y15, Y10
	VFMADD231PS Y13, Y15, Y11
	ADDQ    R14, SI
	ADDQ    R14, R13
	ADDQ    BX, DI
	DECQ    CX
	JNZ     onestrn

storestrn:
	TESTQ   R9, R9
	JEQ     overstrn
	VADDPS  (DX), Y0, Y0
	VADDPS  32(DX), Y1, Y1
	VMOVUPS Y0, (DX)
	VMOVUPS Y1, 32(DX)
	ADDQ    R8, DX
	VADDPS  (DX), Y2, Y2
	VADDPS  32(DX), Y3, Y3
	VMOVUPS Y2, (DX)
	VMOVUPS Y3, 32(DX)
	ADDQ    R8, DX
	VADDPS  (DX), Y4, Y4
	VADDPS  32(DX), Y5, Y5
	VMOVUPS Y4, (DX)
	VMOVUPS Y5, 32(DX)
	ADDQ    R8, DX
	VADDPS  (DX), Y6, Y6
	VADDPS  32(DX), Y7, Y7
	VMOVUPS Y6, (DX)
	VMOVUPS Y7, 32(DX)
	ADDQ    R8, DX
	VADDPS  (DX), Y8, Y8
	VADDPS  32(DX), Y9, Y9
	VMOVUPS Y8, (DX)
	VMOVUPS Y9, 32(DX)
	ADDQ    R8, DX
	VADDPS  (DX), Y10, Y10
	VADDPS  32(DX), Y11, Y11
	VMOVUPS Y10, (DX)
	VMOVUPS Y11, 32(DX)
	JMP     nextstrn

overstrn:
	VMOVUPS Y0, (DX)
	VMOVUPS Y1, 32(DX)
	ADDQ    R8, DX
	VMOVUPS Y2, (DX)
	VMOVUPS Y3, 32(DX)
	ADDQ    R8, DX
	VMOVUPS Y4, (DX)
	VMOVUPS Y5, 32(DX)
	ADDQ    R8, DX
	VMOVUPS Y6, (DX)
	VMOVUPS Y7, 32(DX)
	ADDQ    R8, DX
	VMOVUPS Y8, (DX)
	VMOVUPS Y9, 32(DX)
	ADDQ    R8, DX
	VMOVUPS Y10, (DX)
	VMOVUPS Y11, 32(DX)
	JMP     nextstrn

nextstrn:
	MOVQ    astep+32(FP), AX
	SHLQ    $2, AX
	ADDQ    AX, a+8(FP)
	MOVQ    bstep+56(FP), AX
	SHLQ    $2, AX
	ADDQ    AX, b+40(FP)
	MOVQ    cstep+80(FP), AX
	SHLQ    $2, AX
	ADDQ    AX, c+64(FP)
	DECQ    n+88(FP)
	JNZ     tilestrn
	VZEROUPPER
	RET

DATA attnscan<>+0(SB)/4, $0xefa18f08 // AttentionMaskedBias (−1e29) as a float32
DATA attnscan<>+4(SB)/4, $0x7fffffff // every bit but the sign
GLOBL attnscan<>(SB), RODATA|NOPTR, $8

// func maskedLeadAVX2(x *float32, n int) int
//
// The length of the longest prefix of whole 8-element blocks of x (n a
// multiple of 8) whose elements are all masked: no x[i] > −1e29
// (VCMPPS LT_OQ with −1e29 first: a NaN is masked, as in maskRow).
TEXT ·maskedLeadAVX2(SB), NOSPLIT, $0-24
	MOVQ         x+0(FP), SI
	MOVQ         n+8(FP), CX
	VBROADCASTSS attnscan<>+0(SB), Y1
	XORQ         AX, AX

leadloop:
	CMPQ      AX, CX
	JAE       leaddone
	VCMPPS    $0x11, (SI)(AX*4), Y1, Y0
	VMOVMSKPS Y0, DX
	TESTL     DX, DX
	JNZ       leaddone
	ADDQ      $8, AX
	JMP       leadloop

leaddone:
	MOVQ AX, ret+16(FP)
	VZEROUPPER
	RET

// func maskedTrailAVX2(x *float32, n int) int
//
// maskedLeadAVX2 from the end: the length of the longest suffix of whole
// 8-element blocks of x (n a multiple of 8) whose elements are all
// masked.
TEXT ·maskedTrailAVX2(SB), NOSPLIT, $0-24
	MOVQ         x+0(FP), SI
	MOVQ         n+8(FP), CX
	VBROADCASTSS attnscan<>+0(SB), Y1
	MOVQ         CX, AX

trailloop:
	CMPQ      AX, $8
	JB        traildone
	VCMPPS    $0x11, -32(SI)(AX*4), Y1, Y0
	VMOVMSKPS Y0, DX
	TESTL     DX, DX
	JNZ       traildone
	SUBQ      $8, AX
	JMP       trailloop

traildone:
	SUBQ AX, CX
	MOVQ CX, ret+16(FP)
	VZEROUPPER
	RET

// func nonzeroAVX2(x *float32, n int) bool
//
// Whether some x[i] (n a multiple of 8) is not ±0: the bits other than
// the sign ORed over the blocks, tested after each.
TEXT ·nonzeroAVX2(SB), NOSPLIT, $0-17
	MOVQ         x+0(FP), SI
	MOVQ         n+8(FP), CX
	VBROADCASTSS attnscan<>+4(SB), Y1
	VPXOR        Y0, Y0, Y0

nzloop:
	CMPQ  CX, $8
	JB    nzzero
	VPOR  (SI), Y0, Y0
	VPTEST Y1, Y0
	JNE   nzfound
	ADDQ  $32, SI
	SUBQ  $8, CX
	JMP   nzloop

nzzero:
	MOVB $0, ret+16(FP)
	VZEROUPPER
	RET

nzfound:
	MOVB $1, ret+16(FP)
	VZEROUPPER
	RET

// func attnOutRowsAVX2(dst *float32, ldd int, o *float32, ldo int, mx, l *float32, n, h int)
//
// For each row i < n: dst[i·ldd + f] = o[i·ldo + f]·(1/l[i]) for f < h
// (1/l[i] one IEEE division, each product one IEEE multiplication: the
// float32s of vek32.MulNumber_Into(dst, o, 1/l)), then dst[i·ldd + h] =
// mx[i] and dst[i·ldd + h + 1] = l[i]: the forward's o, m, l rows.
TEXT ·attnOutRowsAVX2(SB), NOSPLIT, $0-64
	MOVQ   dst+0(FP), DI
	MOVQ   ldd+8(FP), R8
	SHLQ   $2, R8
	MOVQ   o+16(FP), SI
	MOVQ   ldo+24(FP), R9
	SHLQ   $2, R9
	MOVQ   mx+32(FP), R10
	MOVQ   l+40(FP), R11
	MOVQ   n+48(FP), BX
	MOVQ   h+56(FP), R12
	TESTQ  BX, BX
	JLE    outdone
	VMOVSS attnc<>+20(SB), X15 // 1

outrow:
	VMOVSS       (R11), X1
	VDIVSS       X1, X15, X0 // 1/l
	VBROADCASTSS X0, Y0
	XORQ         CX, CX
	MOVQ         R12, DX
	CMPQ         DX, $8
	JB           outtail

outvec:
	VMULPS  (SI)(CX*4), Y0, Y2
	VMOVUPS Y2, (DI)(CX*4)
	ADDQ    $8, CX
	SUBQ    $8, DX
	CMPQ    DX, $8
	JAE     outvec

outtail:
	TESTQ DX, DX
	JZ    outml

outone:
	VMULSS (SI)(CX*4), X0, X2
	VMOVSS X2, (DI)(CX*4)
	INCQ   CX
	DECQ   DX
	JNZ    outone

outml:
	MOVL (R10), AX
	MOVL AX, (DI)(CX*4)
	MOVL (R11), AX
	MOVL AX, 4(DI)(CX*4)
	ADDQ R8, DI
	ADDQ R9, SI
	ADDQ $4, R10
	ADDQ $4, R11
	DECQ BX
	JNZ  outrow
	VZEROUPPER

outdone:
	RET

// func attnRowStatsAVX2(d, mx, linv *float32, x *float32, ldx int, f *float32, ldf, n, h int)
//
// For each row i < n, with y = f[i·ldf:] (a forward row: o, m, l):
// d[i] = Σ_j x[i·ldx + j]·y[j] over j < h in vek32.Dot's order (4×8 lanes
// over whole blocks of 32 as FMAs with y's operand in the register, the
// lanes folded as Dot_AVX2_F32 folds them, then the last h mod 32 one
// FMA at a time; the same operations, so the same float32s, NaN payloads
// included), mx[i] = y[h] and linv[i] = 1/y[h + 1].
TEXT ·attnRowStatsAVX2(SB), NOSPLIT, $0-72
	MOVQ   x+24(FP), DI
	MOVQ   ldx+32(FP), R8
	SHLQ   $2, R8
	MOVQ   f+40(FP), SI
	MOVQ   ldf+48(FP), R9
	SHLQ   $2, R9
	MOVQ   d+0(FP), R10
	MOVQ   mx+8(FP), R11
	MOVQ   linv+16(FP), R12
	MOVQ   n+56(FP), BX
	MOVQ   h+64(FP), DX
	TESTQ  BX, BX
	JLE    statsdone
	MOVQ   DX, R13
	ANDQ   $-32, R13 // the whole blocks of 32

statsrow:
	VXORPS X0, X0, X0
	XORQ   AX, AX
	TESTQ  R13, R13
	JZ     statstail
	VXORPS X1, X1, X1
	VXORPS X2, X2, X2
	VXORPS X3, X3, X3

statsblock:
	VMOVUPS     (SI)(AX*4), Y4
	VMOVUPS     32(SI)(AX*4), Y5
	VMOVUPS     64(SI)(AX*4), Y6
	VMOVUPS     96(SI)(AX*4), Y7
	VFMADD231PS (DI)(AX*4), Y4, Y0
	VFMADD231PS 32(DI)(AX*4), Y5, Y1
	VFMADD231PS 64(DI)(AX*4), Y6, Y2
	VFMADD231PS 96(DI)(AX*4), Y7, Y3
	ADDQ        $32, AX
	CMPQ        AX, R13
	JNE         statsblock
	VADDPS      Y0, Y1, Y0
	VADDPS      Y0, Y2, Y0
	VADDPS      Y0, Y3, Y0
	VEXTRACTF128 $1, Y0, X1
	VADDPS      X1, X0, X0
	VPERMILPD   $1, X0, X1
	VADDPS      X1, X0, X0
	VMOVSHDUP   X0, X1
	VADDSS      X1, X0, X0

statstail:
	CMPQ AX, DX
	JE   statsstore

statsone:
	VMOVSS      (SI)(AX*4), X1
	VFMADD231SS (DI)(AX*4), X1, X0
	INCQ        AX
	CMPQ        AX, DX
	JNE         statsone

statsstore:
	VMOVSS X0, (R10)
	MOVL   (SI)(DX*4), AX
	MOVL   AX, (R11)
	VMOVSS attnc<>+20(SB), X1 // 1
	VDIVSS 4(SI)(DX*4), X1, X1
	VMOVSS X1, (R12)
	ADDQ   $4, R10
	ADDQ   $4, R11
	ADDQ   $4, R12
	ADDQ   R8, DI
	ADDQ   R9, SI
	DECQ   BX
	JNZ    statsrow
	VZEROUPPER

statsdone:
	RET
