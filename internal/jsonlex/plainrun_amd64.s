//go:build !purego

#include "textflag.h"

// FLAGS sets each byte of flags to 0xff or 0x00, or at least its high bit,
// where the same byte of block (which it spoils) is a quote, a backslash
// or at most 0x1f, or has its high bit set and X10 keeps it. tmp is
// scratch. X1-X4 and X10 hold the constants set up below.
#define FLAGS(block, flags, tmp) \
	MOVOU block, flags \
	PCMPEQB X1, flags  \
	MOVOU block, tmp   \
	PCMPEQB X2, tmp    \
	POR tmp, flags     \
	MOVOU block, tmp   \
	PSUBUSB X3, tmp    \
	PCMPEQB X4, tmp    \
	POR tmp, flags     \
	PAND X10, block    \
	POR block, flags

// func stopBlocks(b []byte, high uint64) int
//
// Each 16-byte block is tested at once: a byte is flagged when it equals
// '"' or '\\' (PCMPEQB), when it is at most 0x1f (a saturating subtraction
// of 0x1f leaves zero), and, when high asks for it, when its high bit is
// set (not ASCII). PMOVMSKB gathers the flags' high bits; the lowest set
// bit is the first hit. Two blocks go per iteration, their masks joined
// into one word.
TEXT ·stopBlocks(SB), NOSPLIT, $0-40
	MOVQ b_base+0(FP), SI
	MOVQ b_len+8(FP), CX
	ANDQ $~15, CX
	XORQ AX, AX

	MOVQ $0x2222222222222222, DX
	MOVQ DX, X1
	PUNPCKLQDQ X1, X1 // '"' in every byte
	MOVQ $0x5c5c5c5c5c5c5c5c, DX
	MOVQ DX, X2
	PUNPCKLQDQ X2, X2 // '\\'
	MOVQ $0x1f1f1f1f1f1f1f1f, DX
	MOVQ DX, X3
	PUNPCKLQDQ X3, X3 // 0x1f
	PXOR X4, X4       // zero
	MOVQ high+24(FP), DX
	MOVQ DX, X10
	PUNPCKLQDQ X10, X10 // the high bits that count

pair:
	LEAQ 32(AX), DI
	CMPQ DI, CX
	JA   single

	MOVOU (SI)(AX*1), X0
	FLAGS(X0, X5, X6)

	MOVOU 16(SI)(AX*1), X7
	FLAGS(X7, X8, X9)

	PMOVMSKB X5, DX
	PMOVMSKB X8, BX
	SHLQ $16, BX
	ORQ  BX, DX
	JNZ  found
	MOVQ DI, AX
	JMP  pair

single:
	CMPQ AX, CX
	JAE  none
	MOVOU (SI)(AX*1), X0
	FLAGS(X0, X5, X6)
	PMOVMSKB X5, DX
	TESTQ DX, DX
	JNZ  found
	ADDQ $16, AX
	JMP  single

found:
	BSFQ DX, DX
	ADDQ DX, AX

none:
	MOVQ AX, ret+32(FP)
	RET
