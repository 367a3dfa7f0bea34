#include "textflag.h"

// func indexGEAVX512(x *float32, n int, thr float32) int
//
// Returns the smallest j < n with x[j] ≥ thr (an ordered comparison: NaN
// never qualifies), or n; n is a multiple of 16. 64 values a step.
TEXT ·indexGEAVX512(SB), NOSPLIT, $0-32
	MOVQ         x+0(FP), SI
	MOVQ         n+8(FP), CX
	VBROADCASTSS thr+16(FP), Z31
	XORQ         AX, AX

loop64:
	MOVQ    CX, DX
	SUBQ    AX, DX
	CMPQ    DX, $64
	JLT     loop16
	VMOVUPS (SI)(AX*4), Z0
	VMOVUPS 64(SI)(AX*4), Z1
	VMOVUPS 128(SI)(AX*4), Z2
	VMOVUPS 192(SI)(AX*4), Z3
	VCMPPS  $0x1d, Z31, Z0, K1
	VCMPPS  $0x1d, Z31, Z1, K2
	VCMPPS  $0x1d, Z31, Z2, K3
	VCMPPS  $0x1d, Z31, Z3, K4
	KORW    K1, K2, K5
	KORW    K3, K4, K6
	KORTESTW K5, K6
	JNZ     found64
	ADDQ    $64, AX
	JMP     loop64

found64:
	KMOVW  K1, DX
	TESTL  DX, DX
	JNZ    hit
	ADDQ   $16, AX
	KMOVW  K2, DX
	TESTL  DX, DX
	JNZ    hit
	ADDQ   $16, AX
	KMOVW  K3, DX
	TESTL  DX, DX
	JNZ    hit
	ADDQ   $16, AX
	KMOVW  K4, DX
	JMP    hit

loop16:
	CMPQ    AX, CX
	JGE     done
	VMOVUPS (SI)(AX*4), Z0
	VCMPPS  $0x1d, Z31, Z0, K1
	KMOVW   K1, DX
	TESTL   DX, DX
	JNZ     hit
	ADDQ    $16, AX
	JMP     loop16

hit:
	TZCNTL DX, DX
	ADDQ   DX, AX

done:
	VZEROUPPER
	MOVQ AX, ret+24(FP)
	RET
