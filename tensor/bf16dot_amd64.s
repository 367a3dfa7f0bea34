#include "textflag.h"

// bfloat16 dot-product kernels (AVX512-BF16). Go's assembler does not know
// VDPBF16PS (EVEX.512.F3.0F38.W0 52 /r), so each is spelled out as bytes;
// the comment gives it in Go's operand order (sources, then the
// accumulator). VDPBF16PS Zb, Za, Zacc adds, in each of the 16 float32
// lanes, a[2l]·b[2l] + a[2l+1]·b[2l+1] of the 32 bfloat16 pairs to acc.

// BF16REDUCE4 folds the 16-lane accumulators z0..z3 (whose low parts are
// y0..y3 and x0..x3) into one XMM holding their four sums, stored at off(DX).
#define BF16REDUCE4(z0, z1, z2, z3, y0, y1, y2, y3, x0, x1, x2, x3, off) \
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

// func bdot4x4AVX512BF16(k int, a *uint16, lda int, w *uint16, ldw int, out *float32)
//
// out[i*4+j] = Σ_{p<k} a[i*lda+p] · w[j*ldw+p] for i, j < 4 (bfloat16
// operands, float32 sums); k is a positive multiple of 32.
TEXT ·bdot4x4AVX512BF16(SB), NOSPLIT, $0-48
	MOVQ    k+0(FP), CX
	SHLQ    $1, CX
	MOVQ    a+8(FP), SI
	MOVQ    lda+16(FP), BX
	SHLQ    $1, BX
	MOVQ    w+24(FP), DI
	MOVQ    ldw+32(FP), R8
	SHLQ    $1, R8
	MOVQ    out+40(FP), DX
	LEAQ    (SI)(BX*1), R9
	LEAQ    (R9)(BX*1), R10
	LEAQ    (R10)(BX*1), R11
	LEAQ    (DI)(R8*1), R12
	LEAQ    (R12)(R8*1), R13
	LEAQ    (R13)(R8*1), R14
	VPXORD  Z0, Z0, Z0
	VPXORD  Z1, Z1, Z1
	VPXORD  Z2, Z2, Z2
	VPXORD  Z3, Z3, Z3
	VPXORD  Z4, Z4, Z4
	VPXORD  Z5, Z5, Z5
	VPXORD  Z6, Z6, Z6
	VPXORD  Z7, Z7, Z7
	VPXORD  Z8, Z8, Z8
	VPXORD  Z9, Z9, Z9
	VPXORD  Z10, Z10, Z10
	VPXORD  Z11, Z11, Z11
	VPXORD  Z12, Z12, Z12
	VPXORD  Z13, Z13, Z13
	VPXORD  Z14, Z14, Z14
	VPXORD  Z15, Z15, Z15
	XORQ    AX, AX

bloop4x4:
	VMOVDQU16 (SI)(AX*1), Z16
	VMOVDQU16 (R9)(AX*1), Z17
	VMOVDQU16 (R10)(AX*1), Z18
	VMOVDQU16 (R11)(AX*1), Z19
	VMOVDQU16 (DI)(AX*1), Z20
	VMOVDQU16 (R12)(AX*1), Z21
	VMOVDQU16 (R13)(AX*1), Z22
	VMOVDQU16 (R14)(AX*1), Z23
	BYTE $0x62; BYTE $0xb2; BYTE $0x7e; BYTE $0x40; BYTE $0x52; BYTE $0xc4 // VDPBF16PS Z20, Z16, Z0
	BYTE $0x62; BYTE $0xb2; BYTE $0x7e; BYTE $0x40; BYTE $0x52; BYTE $0xcd // VDPBF16PS Z21, Z16, Z1
	BYTE $0x62; BYTE $0xb2; BYTE $0x7e; BYTE $0x40; BYTE $0x52; BYTE $0xd6 // VDPBF16PS Z22, Z16, Z2
	BYTE $0x62; BYTE $0xb2; BYTE $0x7e; BYTE $0x40; BYTE $0x52; BYTE $0xdf // VDPBF16PS Z23, Z16, Z3
	BYTE $0x62; BYTE $0xb2; BYTE $0x76; BYTE $0x40; BYTE $0x52; BYTE $0xe4 // VDPBF16PS Z20, Z17, Z4
	BYTE $0x62; BYTE $0xb2; BYTE $0x76; BYTE $0x40; BYTE $0x52; BYTE $0xed // VDPBF16PS Z21, Z17, Z5
	BYTE $0x62; BYTE $0xb2; BYTE $0x76; BYTE $0x40; BYTE $0x52; BYTE $0xf6 // VDPBF16PS Z22, Z17, Z6
	BYTE $0x62; BYTE $0xb2; BYTE $0x76; BYTE $0x40; BYTE $0x52; BYTE $0xff // VDPBF16PS Z23, Z17, Z7
	BYTE $0x62; BYTE $0x32; BYTE $0x6e; BYTE $0x40; BYTE $0x52; BYTE $0xc4 // VDPBF16PS Z20, Z18, Z8
	BYTE $0x62; BYTE $0x32; BYTE $0x6e; BYTE $0x40; BYTE $0x52; BYTE $0xcd // VDPBF16PS Z21, Z18, Z9
	BYTE $0x62; BYTE $0x32; BYTE $0x6e; BYTE $0x40; BYTE $0x52; BYTE $0xd6 // VDPBF16PS Z22, Z18, Z10
	BYTE $0x62; BYTE $0x32; BYTE $0x6e; BYTE $0x40; BYTE $0x52; BYTE $0xdf // VDPBF16PS Z23, Z18, Z11
	BYTE $0x62; BYTE $0x32; BYTE $0x66; BYTE $0x40; BYTE $0x52; BYTE $0xe4 // VDPBF16PS Z20, Z19, Z12
	BYTE $0x62; BYTE $0x32; BYTE $0x66; BYTE $0x40; BYTE $0x52; BYTE $0xed // VDPBF16PS Z21, Z19, Z13
	BYTE $0x62; BYTE $0x32; BYTE $0x66; BYTE $0x40; BYTE $0x52; BYTE $0xf6 // VDPBF16PS Z22, Z19, Z14
	BYTE $0x62; BYTE $0x32; BYTE $0x66; BYTE $0x40; BYTE $0x52; BYTE $0xff // VDPBF16PS Z23, Z19, Z15
	ADDQ    $64, AX
	CMPQ    AX, CX
	JLT     bloop4x4

	BF16REDUCE4(Z0, Z1, Z2, Z3, Y0, Y1, Y2, Y3, X0, X1, X2, X3, 0)
	BF16REDUCE4(Z4, Z5, Z6, Z7, Y4, Y5, Y6, Y7, X4, X5, X6, X7, 16)
	BF16REDUCE4(Z8, Z9, Z10, Z11, Y8, Y9, Y10, Y11, X8, X9, X10, X11, 32)
	BF16REDUCE4(Z12, Z13, Z14, Z15, Y12, Y13, Y14, Y15, X12, X13, X14, X15, 48)
	VZEROUPPER
	RET

// func bdot1x4AVX512BF16(k int, a *uint16, w *uint16, ldw int, out *float32)
//
// out[j] = Σ_{p<k} a[p] · w[j*ldw+p] for j < 4; k is a positive multiple
// of 32.
TEXT ·bdot1x4AVX512BF16(SB), NOSPLIT, $0-40
	MOVQ    k+0(FP), CX
	SHLQ    $1, CX
	MOVQ    a+8(FP), SI
	MOVQ    w+16(FP), DI
	MOVQ    ldw+24(FP), R8
	SHLQ    $1, R8
	MOVQ    out+32(FP), DX
	LEAQ    (DI)(R8*1), R12
	LEAQ    (R12)(R8*1), R13
	LEAQ    (R13)(R8*1), R14
	VPXORD  Z0, Z0, Z0
	VPXORD  Z1, Z1, Z1
	VPXORD  Z2, Z2, Z2
	VPXORD  Z3, Z3, Z3
	XORQ    AX, AX

bloop1x4:
	VMOVDQU16 (SI)(AX*1), Z16
	VMOVDQU16 (DI)(AX*1), Z20
	VMOVDQU16 (R12)(AX*1), Z21
	VMOVDQU16 (R13)(AX*1), Z22
	VMOVDQU16 (R14)(AX*1), Z23
	BYTE $0x62; BYTE $0xb2; BYTE $0x7e; BYTE $0x40; BYTE $0x52; BYTE $0xc4 // VDPBF16PS Z20, Z16, Z0
	BYTE $0x62; BYTE $0xb2; BYTE $0x7e; BYTE $0x40; BYTE $0x52; BYTE $0xcd // VDPBF16PS Z21, Z16, Z1
	BYTE $0x62; BYTE $0xb2; BYTE $0x7e; BYTE $0x40; BYTE $0x52; BYTE $0xd6 // VDPBF16PS Z22, Z16, Z2
	BYTE $0x62; BYTE $0xb2; BYTE $0x7e; BYTE $0x40; BYTE $0x52; BYTE $0xdf // VDPBF16PS Z23, Z16, Z3
	ADDQ    $64, AX
	CMPQ    AX, CX
	JLT     bloop1x4

	BF16REDUCE4(Z0, Z1, Z2, Z3, Y0, Y1, Y2, Y3, X0, X1, X2, X3, 0)
	VZEROUPPER
	RET

// func bdotPeakAVX512BF16(n int)
//
// Runs n rounds of 24 independent VDPBF16PS held in registers (24·16·2·2 =
// 1,536 flops a round, a bfloat16 pair product counting as two
// multiply-adds): the core's bfloat16 dot-product peak, for comparison with
// fmaPeakAVX512's F32 FMA peak.
TEXT ·bdotPeakAVX512BF16(SB), NOSPLIT, $0-8
	MOVQ n+0(FP), CX
	VPXORD Z24, Z24, Z24
	VPXORD Z25, Z25, Z25
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	VPXORD Z8, Z8, Z8
	VPXORD Z9, Z9, Z9
	VPXORD Z10, Z10, Z10
	VPXORD Z11, Z11, Z11
	VPXORD Z12, Z12, Z12
	VPXORD Z13, Z13, Z13
	VPXORD Z14, Z14, Z14
	VPXORD Z15, Z15, Z15
	VPXORD Z16, Z16, Z16
	VPXORD Z17, Z17, Z17
	VPXORD Z18, Z18, Z18
	VPXORD Z19, Z19, Z19
	VPXORD Z20, Z20, Z20
	VPXORD Z21, Z21, Z21
	VPXORD Z22, Z22, Z22
	VPXORD Z23, Z23, Z23

bpeak:
	BYTE $0x62; BYTE $0x92; BYTE $0x3e; BYTE $0x40; BYTE $0x52; BYTE $0xc1 // VDPBF16PS Z25, Z24, Z0
	BYTE $0x62; BYTE $0x92; BYTE $0x3e; BYTE $0x40; BYTE $0x52; BYTE $0xc9 // VDPBF16PS Z25, Z24, Z1
	BYTE $0x62; BYTE $0x92; BYTE $0x3e; BYTE $0x40; BYTE $0x52; BYTE $0xd1 // VDPBF16PS Z25, Z24, Z2
	BYTE $0x62; BYTE $0x92; BYTE $0x3e; BYTE $0x40; BYTE $0x52; BYTE $0xd9 // VDPBF16PS Z25, Z24, Z3
	BYTE $0x62; BYTE $0x92; BYTE $0x3e; BYTE $0x40; BYTE $0x52; BYTE $0xe1 // VDPBF16PS Z25, Z24, Z4
	BYTE $0x62; BYTE $0x92; BYTE $0x3e; BYTE $0x40; BYTE $0x52; BYTE $0xe9 // VDPBF16PS Z25, Z24, Z5
	BYTE $0x62; BYTE $0x92; BYTE $0x3e; BYTE $0x40; BYTE $0x52; BYTE $0xf1 // VDPBF16PS Z25, Z24, Z6
	BYTE $0x62; BYTE $0x92; BYTE $0x3e; BYTE $0x40; BYTE $0x52; BYTE $0xf9 // VDPBF16PS Z25, Z24, Z7
	BYTE $0x62; BYTE $0x12; BYTE $0x3e; BYTE $0x40; BYTE $0x52; BYTE $0xc1 // VDPBF16PS Z25, Z24, Z8
	BYTE $0x62; BYTE $0x12; BYTE $0x3e; BYTE $0x40; BYTE $0x52; BYTE $0xc9 // VDPBF16PS Z25, Z24, Z9
	BYTE $0x62; BYTE $0x12; BYTE $0x3e; BYTE $0x40; BYTE $0x52; BYTE $0xd1 // VDPBF16PS Z25, Z24, Z10
	BYTE $0x62; BYTE $0x12; BYTE $0x3e; BYTE $0x40; BYTE $0x52; BYTE $0xd9 // VDPBF16PS Z25, Z24, Z11
	BYTE $0x62; BYTE $0x12; BYTE $0x3e; BYTE $0x40; BYTE $0x52; BYTE $0xe1 // VDPBF16PS Z25, Z24, Z12
	BYTE $0x62; BYTE $0x12; BYTE $0x3e; BYTE $0x40; BYTE $0x52; BYTE $0xe9 // VDPBF16PS Z25, Z24, Z13
	BYTE $0x62; BYTE $0x12; BYTE $0x3e; BYTE $0x40; BYTE $0x52; BYTE $0xf1 // VDPBF16PS Z25, Z24, Z14
	BYTE $0x62; BYTE $0x12; BYTE $0x3e; BYTE $0x40; BYTE $0x52; BYTE $0xf9 // VDPBF16PS Z25, Z24, Z15
	BYTE $0x62; BYTE $0x82; BYTE $0x3e; BYTE $0x40; BYTE $0x52; BYTE $0xc1 // VDPBF16PS Z25, Z24, Z16
	BYTE $0x62; BYTE $0x82; BYTE $0x3e; BYTE $0x40; BYTE $0x52; BYTE $0xc9 // VDPBF16PS Z25, Z24, Z17
	BYTE $0x62; BYTE $0x82; BYTE $0x3e; BYTE $0x40; BYTE $0x52; BYTE $0xd1 // VDPBF16PS Z25, Z24, Z18
	BYTE $0x62; BYTE $0x82; BYTE $0x3e; BYTE $0x40; BYTE $0x52; BYTE $0xd9 // VDPBF16PS Z25, Z24, Z19
	BYTE $0x62; BYTE $0x82; BYTE $0x3e; BYTE $0x40; BYTE $0x52; BYTE $0xe1 // VDPBF16PS Z25, Z24, Z20
	BYTE $0x62; BYTE $0x82; BYTE $0x3e; BYTE $0x40; BYTE $0x52; BYTE $0xe9 // VDPBF16PS Z25, Z24, Z21
	BYTE $0x62; BYTE $0x82; BYTE $0x3e; BYTE $0x40; BYTE $0x52; BYTE $0xf1 // VDPBF16PS Z25, Z24, Z22
	BYTE $0x62; BYTE $0x82; BYTE $0x3e; BYTE $0x40; BYTE $0x52; BYTE $0xf9 // VDPBF16PS Z25, Z24, Z23
	DECQ CX
	JNZ  bpeak
	VZEROUPPER
	RET

// func f16ToBF16AVX512(dst, src *uint16, n int)
//
// dst[i] = F32ToBF16(float32 of the binary16 src[i]) for i < n, a positive
// multiple of 16: VCVTPH2PS (exact), then F32ToBF16's integer rounding
// (add 0x7fff plus the kept lowest bit, keep the high half; a NaN keeps
// its high half with the quiet bit set), then VPMOVDW.
TEXT ·f16ToBF16AVX512(SB), NOSPLIT, $0-24
	MOVQ         dst+0(FP), DI
	MOVQ         src+8(FP), SI
	MOVQ         n+16(FP), CX
	MOVL         $0x7fff, AX
	VPBROADCASTD AX, Z28
	MOVL         $1, AX
	VPBROADCASTD AX, Z29
	MOVL         $0x7fffffff, AX
	VPBROADCASTD AX, Z30
	MOVL         $0x7f800000, AX
	VPBROADCASTD AX, Z31
	MOVL         $0x40, AX
	VPBROADCASTD AX, Z27

f16bf16loop:
	VCVTPH2PS (SI), Z0
	VPSRLD    $16, Z0, Z1
	VPANDD    Z29, Z1, Z2
	VPADDD    Z28, Z0, Z3
	VPADDD    Z2, Z3, Z3
	VPSRLD    $16, Z3, Z3
	VPANDD    Z30, Z0, Z4
	VPCMPUD   $6, Z31, Z4, K1
	VPORD     Z27, Z1, K1, Z3
	VPMOVDW   Z3, (DI)
	ADDQ      $32, SI
	ADDQ      $32, DI
	SUBQ      $16, CX
	JNZ       f16bf16loop
	VZEROUPPER
	RET
