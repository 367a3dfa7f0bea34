// Streaming matrix-vector kernels of gemv.go (batch-1 decoding): one
// activation row x against 8 weight rows at once, each weight read once,
// with software prefetch of the rows the next call reads. See gemv_amd64.go
// for the Go signatures; the contracts are in the comment above each
// function. The unrolled bodies were written out by a small script; edit
// them as plain assembly.

#include "textflag.h"
#include "avx2_amd64.h"

// GEMV_REDUCE4 folds the 16-lane accumulators z0..z3 (whose low parts are
// y0..y3 and x0..x3) into one XMM holding their four sums, stored at off(DX):
// the same folding order as gemm_amd64.s's REDUCE4, so that sums equal the
// GEMM's dot kernels bit for bit.
#define GEMV_REDUCE4(z0, z1, z2, z3, y0, y1, y2, y3, x0, x1, x2, x3, off) \
	VEXTRACTF64X4 $1, z0, Y16; \
	VADDPS        Y16, y0, y0; \
	VEXTRACTF64X4 $1, z1, Y17; \
	VADDPS        Y17, y1, y1; \
	VEXTRACTF64X4 $1, z2, Y18; \
	VADDPS        Y18, y2, y2; \
	VEXTRACTF64X4 $1, z3, Y19; \
	VADDPS        Y19, y3, y3; \
	VHADDPS       y1, y0, y0; \
	VHADDPS       y3, y2, y2; \
	VHADDPS       y2, y0, y0; \
	VEXTRACTF128  $1, y0, X1; \
	VADDPS        X1, x0, x0; \
	VMOVUPS       x0, off(DX)
// func sgemv8AVX512(k int, x, w *float32, ldw, pf int, out *float32)
//
// out[j] = Σ_{p<k} x[p] · w[j*ldw+p] for j < 8 (ldw in elements), each
// lane l of row j's accumulator summing the terms p ≡ l (mod 16) in order;
// k is a positive multiple of 16. While it runs it prefetches, for every
// row, the line pf bytes past the one it reads (pf: where the next call's
// rows lie).
TEXT ·sgemv8AVX512(SB), NOSPLIT, $0-48
	MOVQ    k+0(FP), CX
	SHLQ    $2, CX
	MOVQ    x+8(FP), SI
	MOVQ    w+16(FP), DI
	MOVQ    ldw+24(FP), BX
	SHLQ    $2, BX
	MOVQ    pf+32(FP), DX
	LEAQ    (DI)(BX*1), R8
	LEAQ    (R8)(BX*1), R9
	LEAQ    (R9)(BX*1), R10
	LEAQ    (R10)(BX*1), R11
	LEAQ    (R11)(BX*1), R12
	LEAQ    (R12)(BX*1), R13
	LEAQ    (R13)(BX*1), R14
	VPXORD  Z0, Z0, Z0
	VPXORD  Z1, Z1, Z1
	VPXORD  Z2, Z2, Z2
	VPXORD  Z3, Z3, Z3
	VPXORD  Z4, Z4, Z4
	VPXORD  Z5, Z5, Z5
	VPXORD  Z6, Z6, Z6
	VPXORD  Z7, Z7, Z7
	XORQ    AX, AX

loopsgemv8AVX512:
	VMOVUPS (SI)(AX*1), Z8
	PREFETCHT0 (DI)(DX*1)
	VFMADD231PS (DI)(AX*1), Z8, Z0
	PREFETCHT0 (R8)(DX*1)
	VFMADD231PS (R8)(AX*1), Z8, Z1
	PREFETCHT0 (R9)(DX*1)
	VFMADD231PS (R9)(AX*1), Z8, Z2
	PREFETCHT0 (R10)(DX*1)
	VFMADD231PS (R10)(AX*1), Z8, Z3
	PREFETCHT0 (R11)(DX*1)
	VFMADD231PS (R11)(AX*1), Z8, Z4
	PREFETCHT0 (R12)(DX*1)
	VFMADD231PS (R12)(AX*1), Z8, Z5
	PREFETCHT0 (R13)(DX*1)
	VFMADD231PS (R13)(AX*1), Z8, Z6
	PREFETCHT0 (R14)(DX*1)
	VFMADD231PS (R14)(AX*1), Z8, Z7
	ADDQ    $64, AX
	ADDQ    $64, DX
	CMPQ    AX, CX
	JLT     loopsgemv8AVX512

	MOVQ    out+40(FP), DX
	GEMV_REDUCE4(Z0, Z1, Z2, Z3, Y0, Y1, Y2, Y3, X0, X1, X2, X3, 0)
	GEMV_REDUCE4(Z4, Z5, Z6, Z7, Y4, Y5, Y6, Y7, X4, X5, X6, X7, 16)
	VZEROUPPER
	RET

// func bgemv8AVX512(k int, x *float32, w *uint16, ldw, pf int, out *float32)
//
// sgemv8AVX512 with bfloat16 weights: out[j] = Σ_{p<k} x[p] · f32(w[j*ldw+p])
// for j < 8, each 16 weights widened to float32 in a register (exact: a
// bfloat16 is the high half of a float32), so the same float32 FMAs in the
// same order as sgemv8AVX512 over the converted rows; half the bytes read.
// k is a positive multiple of 16; pf as in sgemv8AVX512.
TEXT ·bgemv8AVX512(SB), NOSPLIT, $0-48
	MOVQ    k+0(FP), CX
	SHLQ    $1, CX
	MOVQ    x+8(FP), SI
	MOVQ    w+16(FP), DI
	MOVQ    ldw+24(FP), BX
	SHLQ    $1, BX
	MOVQ    pf+32(FP), DX
	LEAQ    (DI)(BX*1), R8
	LEAQ    (R8)(BX*1), R9
	LEAQ    (R9)(BX*1), R10
	LEAQ    (R10)(BX*1), R11
	LEAQ    (R11)(BX*1), R12
	LEAQ    (R12)(BX*1), R13
	LEAQ    (R13)(BX*1), R14
	VPXORD  Z0, Z0, Z0
	VPXORD  Z1, Z1, Z1
	VPXORD  Z2, Z2, Z2
	VPXORD  Z3, Z3, Z3
	VPXORD  Z4, Z4, Z4
	VPXORD  Z5, Z5, Z5
	VPXORD  Z6, Z6, Z6
	VPXORD  Z7, Z7, Z7
	XORQ    AX, AX

loopbgemv8AVX512:
	VMOVUPS (SI), Z8
	PREFETCHT0 (DI)(DX*1)
	VPMOVZXWD (DI)(AX*1), Z9
	VPSLLD  $16, Z9, Z9
	VFMADD231PS Z9, Z8, Z0
	PREFETCHT0 (R8)(DX*1)
	VPMOVZXWD (R8)(AX*1), Z10
	VPSLLD  $16, Z10, Z10
	VFMADD231PS Z10, Z8, Z1
	PREFETCHT0 (R9)(DX*1)
	VPMOVZXWD (R9)(AX*1), Z11
	VPSLLD  $16, Z11, Z11
	VFMADD231PS Z11, Z8, Z2
	PREFETCHT0 (R10)(DX*1)
	VPMOVZXWD (R10)(AX*1), Z12
	VPSLLD  $16, Z12, Z12
	VFMADD231PS Z12, Z8, Z3
	PREFETCHT0 (R11)(DX*1)
	VPMOVZXWD (R11)(AX*1), Z9
	VPSLLD  $16, Z9, Z9
	VFMADD231PS Z9, Z8, Z4
	PREFETCHT0 (R12)(DX*1)
	VPMOVZXWD (R12)(AX*1), Z10
	VPSLLD  $16, Z10, Z10
	VFMADD231PS Z10, Z8, Z5
	PREFETCHT0 (R13)(DX*1)
	VPMOVZXWD (R13)(AX*1), Z11
	VPSLLD  $16, Z11, Z11
	VFMADD231PS Z11, Z8, Z6
	PREFETCHT0 (R14)(DX*1)
	VPMOVZXWD (R14)(AX*1), Z12
	VPSLLD  $16, Z12, Z12
	VFMADD231PS Z12, Z8, Z7
	ADDQ    $64, SI
	ADDQ    $32, AX
	ADDQ    $32, DX
	CMPQ    AX, CX
	JLT     loopbgemv8AVX512

	MOVQ    out+40(FP), DX
	GEMV_REDUCE4(Z0, Z1, Z2, Z3, Y0, Y1, Y2, Y3, X0, X1, X2, X3, 0)
	GEMV_REDUCE4(Z4, Z5, Z6, Z7, Y4, Y5, Y6, Y7, X4, X5, X6, X7, 16)
	VZEROUPPER
	RET

// func sgemv8AVX2(k int, x, w *float32, ldw, pf int, out *float32)
//
// The AVX2 twin of sgemv8AVX512 with 8-lane accumulators: out[j] =
// Σ_{p<k} x[p] · w[j*ldw+p] for j < 8, lane l of row j's accumulator
// summing the terms p ≡ l (mod 8) in order, folded by HSUM: the order of
// dot1x4AVX2 and dot3x4AVX2 (the AVX2 GEMM dot path), so that sums equal
// theirs bit for bit. k is a positive multiple of 8; pf as in
// sgemv8AVX512 (one prefetch per row and 64-byte line).
TEXT ·sgemv8AVX2(SB), NOSPLIT, $0-48
	MOVQ    k+0(FP), CX
	SHLQ    $2, CX
	MOVQ    x+8(FP), SI
	MOVQ    w+16(FP), DI
	MOVQ    ldw+24(FP), BX
	SHLQ    $2, BX
	MOVQ    pf+32(FP), DX
	LEAQ    (DI)(BX*1), R8
	LEAQ    (R8)(BX*1), R9
	LEAQ    (R9)(BX*1), R10
	LEAQ    (R10)(BX*1), R11
	LEAQ    (R11)(BX*1), R12
	LEAQ    (R12)(BX*1), R13
	LEAQ    (R13)(BX*1), R14
	VXORPS  Y0, Y0, Y0
	VXORPS  Y1, Y1, Y1
	VXORPS  Y2, Y2, Y2
	VXORPS  Y3, Y3, Y3
	VXORPS  Y4, Y4, Y4
	VXORPS  Y5, Y5, Y5
	VXORPS  Y6, Y6, Y6
	VXORPS  Y7, Y7, Y7
	XORQ    AX, AX
	MOVQ    CX, BX
	ANDQ    $-64, BX
	JEQ     tailsgemv8AVX2

loopsgemv8AVX2:
	VMOVUPS (SI)(AX*1), Y8
	VMOVUPS 32(SI)(AX*1), Y9
	PREFETCHT0 (DI)(DX*1)
	VFMADD231PS (DI)(AX*1), Y8, Y0
	VFMADD231PS 32(DI)(AX*1), Y9, Y0
	PREFETCHT0 (R8)(DX*1)
	VFMADD231PS (R8)(AX*1), Y8, Y1
	VFMADD231PS 32(R8)(AX*1), Y9, Y1
	PREFETCHT0 (R9)(DX*1)
	VFMADD231PS (R9)(AX*1), Y8, Y2
	VFMADD231PS 32(R9)(AX*1), Y9, Y2
	PREFETCHT0 (R10)(DX*1)
	VFMADD231PS (R10)(AX*1), Y8, Y3
	VFMADD231PS 32(R10)(AX*1), Y9, Y3
	PREFETCHT0 (R11)(DX*1)
	VFMADD231PS (R11)(AX*1), Y8, Y4
	VFMADD231PS 32(R11)(AX*1), Y9, Y4
	PREFETCHT0 (R12)(DX*1)
	VFMADD231PS (R12)(AX*1), Y8, Y5
	VFMADD231PS 32(R12)(AX*1), Y9, Y5
	PREFETCHT0 (R13)(DX*1)
	VFMADD231PS (R13)(AX*1), Y8, Y6
	VFMADD231PS 32(R13)(AX*1), Y9, Y6
	PREFETCHT0 (R14)(DX*1)
	VFMADD231PS (R14)(AX*1), Y8, Y7
	VFMADD231PS 32(R14)(AX*1), Y9, Y7
	ADDQ    $64, AX
	ADDQ    $64, DX
	CMPQ    AX, BX
	JLT     loopsgemv8AVX2

tailsgemv8AVX2:
	CMPQ    AX, CX
	JGE     donesgemv8AVX2
	VMOVUPS (SI)(AX*1), Y8
	VFMADD231PS (DI)(AX*1), Y8, Y0
	VFMADD231PS (R8)(AX*1), Y8, Y1
	VFMADD231PS (R9)(AX*1), Y8, Y2
	VFMADD231PS (R10)(AX*1), Y8, Y3
	VFMADD231PS (R11)(AX*1), Y8, Y4
	VFMADD231PS (R12)(AX*1), Y8, Y5
	VFMADD231PS (R13)(AX*1), Y8, Y6
	VFMADD231PS (R14)(AX*1), Y8, Y7

donesgemv8AVX2:
	MOVQ    out+40(FP), DX
	HSUM(Y0, X0, X15)
	VMOVSS  X0, 0(DX)
	HSUM(Y1, X1, X15)
	VMOVSS  X1, 4(DX)
	HSUM(Y2, X2, X15)
	VMOVSS  X2, 8(DX)
	HSUM(Y3, X3, X15)
	VMOVSS  X3, 12(DX)
	HSUM(Y4, X4, X15)
	VMOVSS  X4, 16(DX)
	HSUM(Y5, X5, X15)
	VMOVSS  X5, 20(DX)
	HSUM(Y6, X6, X15)
	VMOVSS  X6, 24(DX)
	HSUM(Y7, X7, X15)
	VMOVSS  X7, 28(DX)
	VZEROUPPER
	RET

// func bgemv8AVX2(k int, x *float32, w *uint16, ldw, pf int, out *float32)
//
// sgemv8AVX2 with bfloat16 weights: each 8 weights widened to float32 in a
// register (exact), so the same float32 FMAs in the same order as
// sgemv8AVX2 over the converted rows, from half the bytes. k is a positive
// multiple of 8; pf as in sgemv8AVX512 (in bytes of the bfloat16 rows).
TEXT ·bgemv8AVX2(SB), NOSPLIT, $0-48
	MOVQ    k+0(FP), CX
	SHLQ    $1, CX
	MOVQ    x+8(FP), SI
	MOVQ    w+16(FP), DI
	MOVQ    ldw+24(FP), BX
	SHLQ    $1, BX
	MOVQ    pf+32(FP), DX
	LEAQ    (DI)(BX*1), R8
	LEAQ    (R8)(BX*1), R9
	LEAQ    (R9)(BX*1), R10
	LEAQ    (R10)(BX*1), R11
	LEAQ    (R11)(BX*1), R12
	LEAQ    (R12)(BX*1), R13
	LEAQ    (R13)(BX*1), R14
	VXORPS  Y0, Y0, Y0
	VXORPS  Y1, Y1, Y1
	VXORPS  Y2, Y2, Y2
	VXORPS  Y3, Y3, Y3
	VXORPS  Y4, Y4, Y4
	VXORPS  Y5, Y5, Y5
	VXORPS  Y6, Y6, Y6
	VXORPS  Y7, Y7, Y7
	XORQ    AX, AX
	MOVQ    CX, BX
	ANDQ    $-64, BX
	JEQ     tailbgemv8AVX2

loopbgemv8AVX2:
	VMOVUPS (SI)(AX*2), Y8
	VMOVUPS 32(SI)(AX*2), Y9
	VMOVUPS 64(SI)(AX*2), Y10
	VMOVUPS 96(SI)(AX*2), Y11
	PREFETCHT0 (DI)(DX*1)
	VPMOVZXWD (DI)(AX*1), Y12
	VPMOVZXWD 16(DI)(AX*1), Y13
	VPMOVZXWD 32(DI)(AX*1), Y14
	VPMOVZXWD 48(DI)(AX*1), Y15
	VPSLLD  $16, Y12, Y12
	VPSLLD  $16, Y13, Y13
	VPSLLD  $16, Y14, Y14
	VPSLLD  $16, Y15, Y15
	VFMADD231PS Y12, Y8, Y0
	VFMADD231PS Y13, Y9, Y0
	VFMADD231PS Y14, Y10, Y0
	VFMADD231PS Y15, Y11, Y0
	PREFETCHT0 (R8)(DX*1)
	VPMOVZXWD (R8)(AX*1), Y12
	VPMOVZXWD 16(R8)(AX*1), Y13
	VPMOVZXWD 32(R8)(AX*1), Y14
	VPMOVZXWD 48(R8)(AX*1), Y15
	VPSLLD  $16, Y12, Y12
	VPSLLD  $16, Y13, Y13
	VPSLLD  $16, Y14, Y14
	VPSLLD  $16, Y15, Y15
	VFMADD231PS Y12, Y8, Y1
	VFMADD231PS Y13, Y9, Y1
	VFMADD231PS Y14, Y10, Y1
	VFMADD231PS Y15, Y11, Y1
	PREFETCHT0 (R9)(DX*1)
	VPMOVZXWD (R9)(AX*1), Y12
	VPMOVZXWD 16(R9)(AX*1), Y13
	VPMOVZXWD 32(R9)(AX*1), Y14
	VPMOVZXWD 48(R9)(AX*1), Y15
	VPSLLD  $16, Y12, Y12
	VPSLLD  $16, Y13, Y13
	VPSLLD  $16, Y14, Y14
	VPSLLD  $16, Y15, Y15
	VFMADD231PS Y12, Y8, Y2
	VFMADD231PS Y13, Y9, Y2
	VFMADD231PS Y14, Y10, Y2
	VFMADD231PS Y15, Y11, Y2
	PREFETCHT0 (R10)(DX*1)
	VPMOVZXWD (R10)(AX*1), Y12
	VPMOVZXWD 16(R10)(AX*1), Y13
	VPMOVZXWD 32(R10)(AX*1), Y14
	VPMOVZXWD 48(R10)(AX*1), Y15
	VPSLLD  $16, Y12, Y12
	VPSLLD  $16, Y13, Y13
	VPSLLD  $16, Y14, Y14
	VPSLLD  $16, Y15, Y15
	VFMADD231PS Y12, Y8, Y3
	VFMADD231PS Y13, Y9, Y3
	VFMADD231PS Y14, Y10, Y3
	VFMADD231PS Y15, Y11, Y3
	PREFETCHT0 (R11)(DX*1)
	VPMOVZXWD (R11)(AX*1), Y12
	VPMOVZXWD 16(R11)(AX*1), Y13
	VPMOVZXWD 32(R11)(AX*1), Y14
	VPMOVZXWD 48(R11)(AX*1), Y15
	VPSLLD  $16, Y12, Y12
	VPSLLD  $16, Y13, Y13
	VPSLLD  $16, Y14, Y14
	VPSLLD  $16, Y15, Y15
	VFMADD231PS Y12, Y8, Y4
	VFMADD231PS Y13, Y9, Y4
	VFMADD231PS Y14, Y10, Y4
	VFMADD231PS Y15, Y11, Y4
	PREFETCHT0 (R12)(DX*1)
	VPMOVZXWD (R12)(AX*1), Y12
	VPMOVZXWD 16(R12)(AX*1), Y13
	VPMOVZXWD 32(R12)(AX*1), Y14
	VPMOVZXWD 48(R12)(AX*1), Y15
	VPSLLD  $16, Y12, Y12
	VPSLLD  $16, Y13, Y13
	VPSLLD  $16, Y14, Y14
	VPSLLD  $16, Y15, Y15
	VFMADD231PS Y12, Y8, Y5
	VFMADD231PS Y13, Y9, Y5
	VFMADD231PS Y14, Y10, Y5
	VFMADD231PS Y15, Y11, Y5
	PREFETCHT0 (R13)(DX*1)
	VPMOVZXWD (R13)(AX*1), Y12
	VPMOVZXWD 16(R13)(AX*1), Y13
	VPMOVZXWD 32(R13)(AX*1), Y14
	VPMOVZXWD 48(R13)(AX*1), Y15
	VPSLLD  $16, Y12, Y12
	VPSLLD  $16, Y13, Y13
	VPSLLD  $16, Y14, Y14
	VPSLLD  $16, Y15, Y15
	VFMADD231PS Y12, Y8, Y6
	VFMADD231PS Y13, Y9, Y6
	VFMADD231PS Y14, Y10, Y6
	VFMADD231PS Y15, Y11, Y6
	PREFETCHT0 (R14)(DX*1)
	VPMOVZXWD (R14)(AX*1), Y12
	VPMOVZXWD 16(R14)(AX*1), Y13
	VPMOVZXWD 32(R14)(AX*1), Y14
	VPMOVZXWD 48(R14)(AX*1), Y15
	VPSLLD  $16, Y12, Y12
	VPSLLD  $16, Y13, Y13
	VPSLLD  $16, Y14, Y14
	VPSLLD  $16, Y15, Y15
	VFMADD231PS Y12, Y8, Y7
	VFMADD231PS Y13, Y9, Y7
	VFMADD231PS Y14, Y10, Y7
	VFMADD231PS Y15, Y11, Y7
	ADDQ    $64, AX
	ADDQ    $64, DX
	CMPQ    AX, BX
	JLT     loopbgemv8AVX2

tailbgemv8AVX2:
	CMPQ    AX, CX
	JGE     donebgemv8AVX2
	VMOVUPS (SI)(AX*2), Y8
	VPMOVZXWD (DI)(AX*1), Y12
	VPSLLD  $16, Y12, Y12
	VFMADD231PS Y12, Y8, Y0
	VPMOVZXWD (R8)(AX*1), Y12
	VPSLLD  $16, Y12, Y12
	VFMADD231PS Y12, Y8, Y1
	VPMOVZXWD (R9)(AX*1), Y12
	VPSLLD  $16, Y12, Y12
	VFMADD231PS Y12, Y8, Y2
	VPMOVZXWD (R10)(AX*1), Y12
	VPSLLD  $16, Y12, Y12
	VFMADD231PS Y12, Y8, Y3
	VPMOVZXWD (R11)(AX*1), Y12
	VPSLLD  $16, Y12, Y12
	VFMADD231PS Y12, Y8, Y4
	VPMOVZXWD (R12)(AX*1), Y12
	VPSLLD  $16, Y12, Y12
	VFMADD231PS Y12, Y8, Y5
	VPMOVZXWD (R13)(AX*1), Y12
	VPSLLD  $16, Y12, Y12
	VFMADD231PS Y12, Y8, Y6
	VPMOVZXWD (R14)(AX*1), Y12
	VPSLLD  $16, Y12, Y12
	VFMADD231PS Y12, Y8, Y7
	ADDQ    $16, AX
	JMP     tailbgemv8AVX2

donebgemv8AVX2:
	MOVQ    out+40(FP), DX
	HSUM(Y0, X0, X15)
	VMOVSS  X0, 0(DX)
	HSUM(Y1, X1, X15)
	VMOVSS  X1, 4(DX)
	HSUM(Y2, X2, X15)
	VMOVSS  X2, 8(DX)
	HSUM(Y3, X3, X15)
	VMOVSS  X3, 12(DX)
	HSUM(Y4, X4, X15)
	VMOVSS  X4, 16(DX)
	HSUM(Y5, X5, X15)
	VMOVSS  X5, 20(DX)
	HSUM(Y6, X6, X15)
	VMOVSS  X6, 24(DX)
	HSUM(Y7, X7, X15)
	VMOVSS  X7, 28(DX)
	VZEROUPPER
	RET
