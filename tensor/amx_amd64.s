#include "textflag.h"

// AMX-BF16 (Intel Advanced Matrix Extensions). Go's assembler does not know
// the tile instructions either; they are spelled out as VEX bytes with the
// instruction in the comment. Every use of the tile registers — configure,
// load, multiply, store, release — happens inside one call, so a goroutine
// never carries tile state across a point where it could move to another
// thread.

// func amxBF16Block(cfg *byte, a *uint16, lda int, nqb int, b *uint16, panel int, nrb int, ksteps int, c *float32, ldc int)
//
// For each block of 32 rows of a (nqb blocks, row stride lda elements) and
// each block of 32 packed rows of b (nrb blocks of two 16-row panels of
// panel elements each, see PackBF16), C = A·Bᵀ over ksteps × 32 elements,
// written to c (row stride ldc floats): 4 tiles of 16 × 16 float32
// accumulators (TMM0–3), A in TMM4–5, B in TMM6–7.
TEXT ·amxBF16Block(SB), NOSPLIT, $48-80
	MOVQ cfg+0(FP), AX
	BYTE $0xc4; BYTE $0xe2; BYTE $0x78; BYTE $0x49; BYTE $0x00 // LDTILECFG (AX)
	MOVQ a+8(FP), R8
	MOVQ lda+16(FP), R9
	SHLQ $1, R9
	MOVQ nqb+24(FP), R10
	MOVQ R10, 32(SP)
	MOVQ b+32(FP), R11
	MOVQ panel+40(FP), R12
	SHLQ $1, R12
	MOVQ nrb+48(FP), R13
	MOVQ ksteps+56(FP), R14
	MOVQ c+64(FP), R10
	MOVQ R10, 24(SP)

amxq:
	MOVQ R13, 0(SP)
	MOVQ R11, 8(SP)
	MOVQ 24(SP), R10
	MOVQ R10, 16(SP)

amxr:
	BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x49; BYTE $0xc0 // TILEZERO TMM0
	BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x49; BYTE $0xc8 // TILEZERO TMM1
	BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x49; BYTE $0xd0 // TILEZERO TMM2
	BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x49; BYTE $0xd8 // TILEZERO TMM3
	MOVQ R8, SI
	LEAQ (R8)(R9*8), DI
	LEAQ (DI)(R9*8), DI
	MOVQ R9, DX
	MOVQ 8(SP), BX
	LEAQ (BX)(R12*1), AX
	MOVQ $64, CX
	MOVQ R14, R10

amxk:
	BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x4b; BYTE $0x24; BYTE $0x16 // TILELOADD (SI)(DX*1), TMM4
	BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x4b; BYTE $0x2c; BYTE $0x17 // TILELOADD (DI)(DX*1), TMM5
	BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x4b; BYTE $0x34; BYTE $0x0b // TILELOADD (BX)(CX*1), TMM6
	BYTE $0xc4; BYTE $0xe2; BYTE $0x7b; BYTE $0x4b; BYTE $0x3c; BYTE $0x08 // TILELOADD (AX)(CX*1), TMM7
	BYTE $0xc4; BYTE $0xe2; BYTE $0x4a; BYTE $0x5c; BYTE $0xc4 // TDPBF16PS TMM0 += TMM4·TMM6
	BYTE $0xc4; BYTE $0xe2; BYTE $0x42; BYTE $0x5c; BYTE $0xcc // TDPBF16PS TMM1 += TMM4·TMM7
	BYTE $0xc4; BYTE $0xe2; BYTE $0x4a; BYTE $0x5c; BYTE $0xd5 // TDPBF16PS TMM2 += TMM5·TMM6
	BYTE $0xc4; BYTE $0xe2; BYTE $0x42; BYTE $0x5c; BYTE $0xdd // TDPBF16PS TMM3 += TMM5·TMM7
	ADDQ $64, SI
	ADDQ $64, DI
	ADDQ $1024, BX
	ADDQ $1024, AX
	DECQ R10
	JNZ  amxk

	MOVQ 16(SP), SI
	MOVQ ldc+72(FP), DX
	SHLQ $2, DX
	BYTE $0xc4; BYTE $0xe2; BYTE $0x7a; BYTE $0x4b; BYTE $0x04; BYTE $0x16 // TILESTORED TMM0, (SI)(DX*1)
	LEAQ 64(SI), DI
	BYTE $0xc4; BYTE $0xe2; BYTE $0x7a; BYTE $0x4b; BYTE $0x0c; BYTE $0x17 // TILESTORED TMM1, (DI)(DX*1)
	MOVQ DX, BX
	SHLQ $4, BX
	ADDQ BX, SI
	BYTE $0xc4; BYTE $0xe2; BYTE $0x7a; BYTE $0x4b; BYTE $0x14; BYTE $0x16 // TILESTORED TMM2, (SI)(DX*1)
	LEAQ 64(SI), DI
	BYTE $0xc4; BYTE $0xe2; BYTE $0x7a; BYTE $0x4b; BYTE $0x1c; BYTE $0x17 // TILESTORED TMM3, (DI)(DX*1)
	ADDQ $128, 16(SP)
	MOVQ R12, BX
	SHLQ $1, BX
	ADDQ BX, 8(SP)
	DECQ 0(SP)
	JNZ  amxr

	MOVQ R9, BX
	SHLQ $5, BX
	ADDQ BX, R8
	MOVQ ldc+72(FP), BX
	SHLQ $7, BX
	ADDQ BX, 24(SP)
	DECQ 32(SP)
	JNZ  amxq

	BYTE $0xc4; BYTE $0xe2; BYTE $0x78; BYTE $0x49; BYTE $0xc0 // TILERELEASE
	RET
