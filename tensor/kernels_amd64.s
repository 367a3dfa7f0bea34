// AVX2 + FMA + F16C kernels for the dot products of the vector index.
//
// Every dot-product kernel accumulates one (query, row) pair in one 8-lane
// YMM register, chunk by chunk in increasing order, and reduces the lanes with
// HSUM (avx2_amd64.h). The 1x1, 1x4 and 3x4 shapes therefore return bit-identical
// values for the same pair, which keeps serial, parallel, single-query and
// batched searches equal. Lengths n are multiples of 8; the Go wrappers add
// the scalar tail.

#include "textflag.h"
#include "avx2_amd64.h"

// func cpuid(eaxArg, ecxArg uint32) (eax, ebx, ecx, edx uint32)
TEXT ·cpuid(SB), NOSPLIT, $0-24
	MOVL eaxArg+0(FP), AX
	MOVL ecxArg+4(FP), CX
	CPUID
	MOVL AX, eax+8(FP)
	MOVL BX, ebx+12(FP)
	MOVL CX, ecx+16(FP)
	MOVL DX, edx+20(FP)
	RET

// func dot1x1AVX2(q, x *float32, n int) float32
TEXT ·dot1x1AVX2(SB), NOSPLIT, $0-28
	MOVQ   q+0(FP), SI
	MOVQ   x+8(FP), DI
	MOVQ   n+16(FP), CX
	SHLQ   $2, CX
	VXORPS Y0, Y0, Y0
	XORQ   AX, AX
	TESTQ  CX, CX
	JEQ    done1x1

loop1x1:
	VMOVUPS     (SI)(AX*1), Y4
	VFMADD231PS (DI)(AX*1), Y4, Y0
	ADDQ        $32, AX
	CMPQ        AX, CX
	JLT         loop1x1

done1x1:
	HSUM(Y0, X0, X5)
	VMOVSS X0, ret+24(FP)
	VZEROUPPER
	RET

// func dot1x4AVX2(q, x *float32, ldx, n int, out *float32)
TEXT ·dot1x4AVX2(SB), NOSPLIT, $0-40
	MOVQ   q+0(FP), SI
	MOVQ   x+8(FP), DI
	MOVQ   ldx+16(FP), BX
	MOVQ   n+24(FP), CX
	MOVQ   out+32(FP), DX
	SHLQ   $2, BX
	SHLQ   $2, CX
	LEAQ   (DI)(BX*1), R8
	LEAQ   (R8)(BX*1), R9
	LEAQ   (R9)(BX*1), R10
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	XORQ   AX, AX
	TESTQ  CX, CX
	JEQ    done1x4

loop1x4:
	VMOVUPS     (SI)(AX*1), Y4
	VFMADD231PS (DI)(AX*1), Y4, Y0
	VFMADD231PS (R8)(AX*1), Y4, Y1
	VFMADD231PS (R9)(AX*1), Y4, Y2
	VFMADD231PS (R10)(AX*1), Y4, Y3
	ADDQ        $32, AX
	CMPQ        AX, CX
	JLT         loop1x4

done1x4:
	HSUM(Y0, X0, X5)
	VMOVSS X0, 0(DX)
	HSUM(Y1, X1, X5)
	VMOVSS X1, 4(DX)
	HSUM(Y2, X2, X5)
	VMOVSS X2, 8(DX)
	HSUM(Y3, X3, X5)
	VMOVSS X3, 12(DX)
	VZEROUPPER
	RET

// func dot3x4AVX2(q *float32, ldq int, x *float32, ldx, n int, out *float32)
// out[i*4+j] = <q_i, x_j> for i < 3, j < 4.
TEXT ·dot3x4AVX2(SB), NOSPLIT, $0-48
	MOVQ   q+0(FP), SI
	MOVQ   ldq+8(FP), R11
	MOVQ   x+16(FP), DI
	MOVQ   ldx+24(FP), BX
	MOVQ   n+32(FP), CX
	MOVQ   out+40(FP), DX
	SHLQ   $2, R11
	SHLQ   $2, BX
	SHLQ   $2, CX
	LEAQ   (SI)(R11*1), R12
	LEAQ   (R12)(R11*1), R11
	LEAQ   (DI)(BX*1), R8
	LEAQ   (R8)(BX*1), R9
	LEAQ   (R9)(BX*1), R10
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8
	VXORPS Y9, Y9, Y9
	VXORPS Y10, Y10, Y10
	VXORPS Y11, Y11, Y11
	XORQ   AX, AX
	TESTQ  CX, CX
	JEQ    done3x4

loop3x4:
	VMOVUPS     (SI)(AX*1), Y12
	VMOVUPS     (R12)(AX*1), Y13
	VMOVUPS     (R11)(AX*1), Y14
	VMOVUPS     (DI)(AX*1), Y15
	VFMADD231PS Y15, Y12, Y0
	VFMADD231PS Y15, Y13, Y4
	VFMADD231PS Y15, Y14, Y8
	VMOVUPS     (R8)(AX*1), Y15
	VFMADD231PS Y15, Y12, Y1
	VFMADD231PS Y15, Y13, Y5
	VFMADD231PS Y15, Y14, Y9
	VMOVUPS     (R9)(AX*1), Y15
	VFMADD231PS Y15, Y12, Y2
	VFMADD231PS Y15, Y13, Y6
	VFMADD231PS Y15, Y14, Y10
	VMOVUPS     (R10)(AX*1), Y15
	VFMADD231PS Y15, Y12, Y3
	VFMADD231PS Y15, Y13, Y7
	VFMADD231PS Y15, Y14, Y11
	ADDQ        $32, AX
	CMPQ        AX, CX
	JLT         loop3x4

done3x4:
	HSUM(Y0, X0, X12)
	VMOVSS X0, 0(DX)
	HSUM(Y1, X1, X12)
	VMOVSS X1, 4(DX)
	HSUM(Y2, X2, X12)
	VMOVSS X2, 8(DX)
	HSUM(Y3, X3, X12)
	VMOVSS X3, 12(DX)
	HSUM(Y4, X4, X12)
	VMOVSS X4, 16(DX)
	HSUM(Y5, X5, X12)
	VMOVSS X5, 20(DX)
	HSUM(Y6, X6, X12)
	VMOVSS X6, 24(DX)
	HSUM(Y7, X7, X12)
	VMOVSS X7, 28(DX)
	HSUM(Y8, X8, X12)
	VMOVSS X8, 32(DX)
	HSUM(Y9, X9, X12)
	VMOVSS X9, 36(DX)
	HSUM(Y10, X10, X12)
	VMOVSS X10, 40(DX)
	HSUM(Y11, X11, X12)
	VMOVSS X11, 44(DX)
	VZEROUPPER
	RET

// func dotF16x1AVX2(q *float32, x *uint16, n int) float32
TEXT ·dotF16x1AVX2(SB), NOSPLIT, $0-28
	MOVQ   q+0(FP), SI
	MOVQ   x+8(FP), DI
	MOVQ   n+16(FP), CX
	SHLQ   $2, CX
	VXORPS Y0, Y0, Y0
	XORQ   AX, AX
	XORQ   R11, R11
	TESTQ  CX, CX
	JEQ    doneF16x1

loopF16x1:
	VMOVUPS     (SI)(AX*1), Y4
	VCVTPH2PS   (DI)(R11*1), Y5
	VFMADD231PS Y5, Y4, Y0
	ADDQ        $32, AX
	ADDQ        $16, R11
	CMPQ        AX, CX
	JLT         loopF16x1

doneF16x1:
	HSUM(Y0, X0, X5)
	VMOVSS X0, ret+24(FP)
	VZEROUPPER
	RET

// func dotF16x4AVX2(q *float32, x *uint16, ldx, n int, out *float32)
TEXT ·dotF16x4AVX2(SB), NOSPLIT, $0-40
	MOVQ   q+0(FP), SI
	MOVQ   x+8(FP), DI
	MOVQ   ldx+16(FP), BX
	MOVQ   n+24(FP), CX
	MOVQ   out+32(FP), DX
	SHLQ   $1, BX
	SHLQ   $2, CX
	LEAQ   (DI)(BX*1), R8
	LEAQ   (R8)(BX*1), R9
	LEAQ   (R9)(BX*1), R10
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	XORQ   AX, AX
	XORQ   R11, R11
	TESTQ  CX, CX
	JEQ    doneF16x4

loopF16x4:
	VMOVUPS     (SI)(AX*1), Y4
	VCVTPH2PS   (DI)(R11*1), Y5
	VCVTPH2PS   (R8)(R11*1), Y6
	VCVTPH2PS   (R9)(R11*1), Y7
	VCVTPH2PS   (R10)(R11*1), Y8
	VFMADD231PS Y5, Y4, Y0
	VFMADD231PS Y6, Y4, Y1
	VFMADD231PS Y7, Y4, Y2
	VFMADD231PS Y8, Y4, Y3
	ADDQ        $32, AX
	ADDQ        $16, R11
	CMPQ        AX, CX
	JLT         loopF16x4

doneF16x4:
	HSUM(Y0, X0, X5)
	VMOVSS X0, 0(DX)
	HSUM(Y1, X1, X5)
	VMOVSS X1, 4(DX)
	HSUM(Y2, X2, X5)
	VMOVSS X2, 8(DX)
	HSUM(Y3, X3, X5)
	VMOVSS X3, 12(DX)
	VZEROUPPER
	RET

// func dotU8x1AVX2(q *float32, x *uint8, n int) float32
TEXT ·dotU8x1AVX2(SB), NOSPLIT, $0-28
	MOVQ   q+0(FP), SI
	MOVQ   x+8(FP), DI
	MOVQ   n+16(FP), CX
	SHLQ   $2, CX
	VXORPS Y0, Y0, Y0
	XORQ   AX, AX
	XORQ   R11, R11
	TESTQ  CX, CX
	JEQ    doneU8x1

loopU8x1:
	VMOVUPS     (SI)(AX*1), Y4
	VPMOVZXBD   (DI)(R11*1), Y5
	VCVTDQ2PS   Y5, Y5
	VFMADD231PS Y5, Y4, Y0
	ADDQ        $32, AX
	ADDQ        $8, R11
	CMPQ        AX, CX
	JLT         loopU8x1

doneU8x1:
	HSUM(Y0, X0, X5)
	VMOVSS X0, ret+24(FP)
	VZEROUPPER
	RET

// func dotU8x4AVX2(q *float32, x *uint8, ldx, n int, out *float32)
TEXT ·dotU8x4AVX2(SB), NOSPLIT, $0-40
	MOVQ   q+0(FP), SI
	MOVQ   x+8(FP), DI
	MOVQ   ldx+16(FP), BX
	MOVQ   n+24(FP), CX
	MOVQ   out+32(FP), DX
	SHLQ   $2, CX
	LEAQ   (DI)(BX*1), R8
	LEAQ   (R8)(BX*1), R9
	LEAQ   (R9)(BX*1), R10
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	XORQ   AX, AX
	XORQ   R11, R11
	TESTQ  CX, CX
	JEQ    doneU8x4

loopU8x4:
	VMOVUPS     (SI)(AX*1), Y4
	VPMOVZXBD   (DI)(R11*1), Y5
	VPMOVZXBD   (R8)(R11*1), Y6
	VPMOVZXBD   (R9)(R11*1), Y7
	VPMOVZXBD   (R10)(R11*1), Y8
	VCVTDQ2PS   Y5, Y5
	VCVTDQ2PS   Y6, Y6
	VCVTDQ2PS   Y7, Y7
	VCVTDQ2PS   Y8, Y8
	VFMADD231PS Y5, Y4, Y0
	VFMADD231PS Y6, Y4, Y1
	VFMADD231PS Y7, Y4, Y2
	VFMADD231PS Y8, Y4, Y3
	ADDQ        $32, AX
	ADDQ        $8, R11
	CMPQ        AX, CX
	JLT         loopU8x4

doneU8x4:
	HSUM(Y0, X0, X5)
	VMOVSS X0, 0(DX)
	HSUM(Y1, X1, X5)
	VMOVSS X1, 4(DX)
	HSUM(Y2, X2, X5)
	VMOVSS X2, 8(DX)
	HSUM(Y3, X3, X5)
	VMOVSS X3, 12(DX)
	VZEROUPPER
	RET

// func f16ToF32AVX2(dst *float32, src *uint16, n int)
TEXT ·f16ToF32AVX2(SB), NOSPLIT, $0-24
	MOVQ  dst+0(FP), DI
	MOVQ  src+8(FP), SI
	MOVQ  n+16(FP), CX
	SHLQ  $2, CX
	XORQ  AX, AX
	XORQ  R11, R11
	TESTQ CX, CX
	JEQ   doneF16ToF32

loopF16ToF32:
	VCVTPH2PS (SI)(R11*1), Y0
	VMOVUPS   Y0, (DI)(AX*1)
	ADDQ      $32, AX
	ADDQ      $16, R11
	CMPQ      AX, CX
	JLT       loopF16ToF32

doneF16ToF32:
	VZEROUPPER
	RET

// func f32ToF16AVX2(dst *uint16, src *float32, n int)
// Rounds to nearest, ties to even (VCVTPS2PH imm8 = 0).
TEXT ·f32ToF16AVX2(SB), NOSPLIT, $0-24
	MOVQ  dst+0(FP), DI
	MOVQ  src+8(FP), SI
	MOVQ  n+16(FP), CX
	SHLQ  $2, CX
	XORQ  AX, AX
	XORQ  R11, R11
	TESTQ CX, CX
	JEQ   doneF32ToF16

loopF32ToF16:
	VMOVUPS   (SI)(AX*1), Y0
	VCVTPS2PH $0, Y0, X1
	VMOVDQU   X1, (DI)(R11*1)
	ADDQ      $32, AX
	ADDQ      $16, R11
	CMPQ      AX, CX
	JLT       loopF32ToF16

doneF32ToF16:
	VZEROUPPER
	RET

// func u8ToF32AVX2(dst *float32, src *uint8, n int)
TEXT ·u8ToF32AVX2(SB), NOSPLIT, $0-24
	MOVQ  dst+0(FP), DI
	MOVQ  src+8(FP), SI
	MOVQ  n+16(FP), CX
	SHLQ  $2, CX
	XORQ  AX, AX
	XORQ  R11, R11
	TESTQ CX, CX
	JEQ   doneU8ToF32

loopU8ToF32:
	VPMOVZXBD (SI)(R11*1), Y0
	VCVTDQ2PS Y0, Y0
	VMOVUPS   Y0, (DI)(AX*1)
	ADDQ      $32, AX
	ADDQ      $8, R11
	CMPQ      AX, CX
	JLT       loopU8ToF32

doneU8ToF32:
	VZEROUPPER
	RET

// func bf16ToF32AVX2(dst *float32, src *uint16, n int)
TEXT ·bf16ToF32AVX2(SB), NOSPLIT, $0-24
	MOVQ  dst+0(FP), DI
	MOVQ  src+8(FP), SI
	MOVQ  n+16(FP), CX
	SHLQ  $2, CX
	XORQ  AX, AX
	XORQ  R11, R11
	TESTQ CX, CX
	JEQ   doneBF16ToF32

loopBF16ToF32:
	VPMOVZXWD (SI)(R11*1), Y0
	VPSLLD    $16, Y0, Y0
	VMOVDQU   Y0, (DI)(AX*1)
	ADDQ      $32, AX
	ADDQ      $16, R11
	CMPQ      AX, CX
	JLT       loopBF16ToF32

doneBF16ToF32:
	VZEROUPPER
	RET
