#include "textflag.h"

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

// func rdpid() uint32
TEXT ·rdpid(SB), NOSPLIT, $0-4
	// RDPID RAX (F3 0F C7 /7)
	BYTE $0xF3; BYTE $0x0F; BYTE $0xC7; BYTE $0xF8
	MOVL AX, ret+0(FP)
	RET

// func rdtscpAux() uint32
TEXT ·rdtscpAux(SB), NOSPLIT, $0-4
	// RDTSCP (0F 01 F9): EDX:EAX = TSC, ECX = TSC_AUX
	BYTE $0x0F; BYTE $0x01; BYTE $0xF9
	MOVL CX, ret+0(FP)
	RET

// func rdfsbase() uint64
TEXT ·rdfsbase(SB), NOSPLIT, $0-8
	// RDFSBASE RAX (F3 REX.W 0F AE /0)
	BYTE $0xF3; BYTE $0x48; BYTE $0x0F; BYTE $0xAE; BYTE $0xC0
	MOVQ AX, ret+0(FP)
	RET
