#include "textflag.h"

// func sum4StreamsAVX512(a, b, c, d *float32, n int) float32
//
// Returns the float32 sum of a[0:n], b[0:n], c[0:n] and d[0:n], read as
// four sequential streams 32 values (two cache lines) a step each; n is a
// positive multiple of 32. Eight independent accumulators keep the adds
// off the critical path, so memory is the limit: the streaming-read bound
// of a scan.
TEXT ·sum4StreamsAVX512(SB), NOSPLIT, $0-44
	MOVQ   a+0(FP), AX
	MOVQ   b+8(FP), BX
	MOVQ   c+16(FP), CX
	MOVQ   d+24(FP), DX
	MOVQ   n+32(FP), SI
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	XORQ   DI, DI

sum4loop:
	VADDPS (AX)(DI*4), Z0, Z0
	VADDPS 64(AX)(DI*4), Z1, Z1
	VADDPS (BX)(DI*4), Z2, Z2
	VADDPS 64(BX)(DI*4), Z3, Z3
	VADDPS (CX)(DI*4), Z4, Z4
	VADDPS 64(CX)(DI*4), Z5, Z5
	VADDPS (DX)(DI*4), Z6, Z6
	VADDPS 64(DX)(DI*4), Z7, Z7
	ADDQ   $32, DI
	CMPQ   DI, SI
	JLT    sum4loop

	VADDPS        Z1, Z0, Z0
	VADDPS        Z3, Z2, Z2
	VADDPS        Z5, Z4, Z4
	VADDPS        Z7, Z6, Z6
	VADDPS        Z2, Z0, Z0
	VADDPS        Z6, Z4, Z4
	VADDPS        Z4, Z0, Z0
	VEXTRACTF64X4 $1, Z0, Y1
	VADDPS        Y1, Y0, Y0
	VEXTRACTF128  $1, Y0, X1
	VADDPS        X1, X0, X0
	VHADDPS       X0, X0, X0
	VHADDPS       X0, X0, X0
	VZEROUPPER
	MOVSS         X0, ret+40(FP)
	RET
