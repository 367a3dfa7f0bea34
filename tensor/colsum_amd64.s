// AVX2 column sums of a row-major float32 matrix (ColSum).

#include "textflag.h"

// func colSumAVX2(dst, src *float32, rows, stride, n int)
//
// dst[c] = ((0 + src[c]) + src[stride + c]) + … over rows rows, for
// c < n (n a positive multiple of 8, rows > 0): 32 columns at a time in
// four YMM accumulators while at least 32 remain, then 8 at a time. Each
// lane adds its column's elements in row order, as the scalar loop does.
TEXT ·colSumAVX2(SB), NOSPLIT, $0-40
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ rows+16(FP), DX
	MOVQ stride+24(FP), R8
	SHLQ $2, R8                  // row stride in bytes
	MOVQ n+32(FP), CX

block32:
	CMPQ   CX, $32
	JLT    block8
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	MOVQ   SI, AX
	MOVQ   DX, BX

loop32:
	VADDPS (AX), Y0, Y0
	VADDPS 32(AX), Y1, Y1
	VADDPS 64(AX), Y2, Y2
	VADDPS 96(AX), Y3, Y3
	ADDQ   R8, AX
	DECQ   BX
	JNZ    loop32

	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	ADDQ    $128, DI
	ADDQ    $128, SI
	SUBQ    $32, CX
	JMP     block32

block8:
	CMPQ   CX, $8
	JLT    done
	VXORPS Y0, Y0, Y0
	MOVQ   SI, AX
	MOVQ   DX, BX

loop8:
	VADDPS (AX), Y0, Y0
	ADDQ   R8, AX
	DECQ   BX
	JNZ    loop8

	VMOVUPS Y0, (DI)
	ADDQ    $32, DI
	ADDQ    $32, SI
	SUBQ    $8, CX
	JMP     block8

done:
	VZEROUPPER
	RET
