/*
 * The register check (tests/arch) for 64-bit PowerPC, ELFv2 ABI (ppc64le).
 *
 * unsigned long st_test_regs_call(void (*fn)(void *, const void *), void *a,
 *                            const void *b, unsigned long seed)
 *
 * Loads every nonvolatile register with a value derived from `seed`
 * (seed XOR k * 0x0101010101010101, k = bit + 1; FP registers get such a
 * pattern bitwise through memory, vector registers that pattern and its
 * complement), sets the limited-access control bits from the seed, calls
 * fn(a, b), which switches to other coroutines doing the same with other
 * seeds, and returns a mask of what did not come back:
 *
 *   bits 0-17   r14-r31
 *   bits 18-35  f14-f31 (all 64 bits)
 *   bits 36-47  v20-v31 (all 128 bits)
 *   bit  48     VRSAVE
 *   bits 49-51  cr2, cr3, cr4
 *   bit  52     FPSCR RN (binary rounding mode)
 *   bit  53     FPSCR DRN (decimal rounding mode)
 *   bit  54     VSCR NJ (non-Java mode)
 *
 * The control bits come from f = seed ^ (seed >> 16): RN = f & 3,
 * DRN = (f >> 2) & 7, NJ = (f >> 6) & 1, so that seeds differing only in
 * their upper half still differ there.
 *
 * r2 (TOC) is not checked: after an indirect call the caller reloads it from
 * its TOC save slot, as ELFv2 prescribes. The caller's registers and control
 * bits are restored before returning; the seed lives in this frame across
 * the call, not in a checked register.
 */
#if !defined(_CALL_ELF) || _CALL_ELF != 2
#error "tests/arch/regs/ppc64.S implements the ELFv2 ABI (ppc64le) only"
#endif

/* Frame: 0 back chain, 8 CR, 16 LR, 24 TOC save (for our callee),
 * 32-95 parameter save area, 96 seed, 104 caller VRSAVE, 112 caller FPSCR,
 * 128 caller VSCR (16), 144 scratch (16), 160-296 r14-r31,
 * 304-440 f14-f31, 448-624 v20-v31. */
#define FRAME   640
#define SEED    96
#define VRSAVE  104
#define FPSCR   112
#define VSCR    128
#define SCR     144
#define GPRS    160
#define FPRS    304
#define VRS     448

/* VSCR sits in the last word of the vector register; stvx puts it at the
 * start of memory on a little-endian CPU. NJ is its bit 0x00010000. */
#ifdef __LITTLE_ENDIAN__
#define VSCR_WORD 0
#else
#define VSCR_WORD 12
#endif

    .abiversion 2
    .text

/* rd = 64-bit constant v */
.macro LI64 rd, v
    lis     \rd, ((\v) >> 48) & 0xffff
    ori     \rd, \rd, ((\v) >> 32) & 0xffff
    sldi    \rd, \rd, 32
    oris    \rd, \rd, ((\v) >> 16) & 0xffff
    ori     \rd, \rd, (\v) & 0xffff
.endm

/* r0 = seed (in r6) XOR k * 0x0101010101010101 */
.macro PATTERN k
    LI64    %r0, (\k) * 0x0101010101010101
    xor     %r0, %r0, %r6
.endm

.macro SETR n, k
    PATTERN \k
    mr      %r\n, %r0
.endm

.macro SETF n, k
    PATTERN \k
    std     %r0, SCR(%r1)
    lfd     %f\n, SCR(%r1)
.endm

.macro SETV n, k
    PATTERN \k
    std     %r0, SCR(%r1)
    not     %r0, %r0
    std     %r0, SCR+8(%r1)
    li      %r9, SCR
    lvx     %v\n, %r1, %r9
.endm

/* r7 |= 1 << bit */
.macro FAIL bit
    li      %r9, 1
    sldi    %r9, %r9, \bit
    or      %r7, %r7, %r9
.endm

.macro CHKR n, k
    PATTERN \k
    cmpd    %r\n, %r0
    beq     1f
    FAIL    (\k) - 1
1:
.endm

.macro CHKF n, k
    stfd    %f\n, SCR(%r1)
    ld      %r8, SCR(%r1)
    PATTERN \k
    cmpd    %r8, %r0
    beq     1f
    FAIL    (\k) - 1
1:
.endm

.macro CHKV n, k
    li      %r9, SCR
    stvx    %v\n, %r1, %r9
    ld      %r8, SCR(%r1)
    ld      %r10, SCR+8(%r1)
    PATTERN \k
    cmpd    %r8, %r0
    bne     2f
    not     %r0, %r0
    cmpd    %r10, %r0
    beq     1f
2:  FAIL    (\k) - 1
1:
.endm

    .globl  st_test_regs_call
    .type   st_test_regs_call, @function
    .p2align 4
st_test_regs_call:
    .cfi_startproc
    mflr    %r0
    std     %r0, 16(%r1)
    .cfi_offset 65, 16
    mfcr    %r12
    stw     %r12, 8(%r1)
    .cfi_offset 70, 8
    .cfi_offset 71, 8
    .cfi_offset 72, 8
    stdu    %r1, -FRAME(%r1)
    .cfi_adjust_cfa_offset FRAME

    .irp n, 14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31
    std     %r\n, GPRS+8*(\n-14)(%r1)
    .cfi_rel_offset \n, GPRS+8*(\n-14)
    stfd    %f\n, FPRS+8*(\n-14)(%r1)
    .endr
    .irp n, 20,21,22,23,24,25,26,27,28,29,30,31
    li      %r9, VRS+16*(\n-20)
    stvx    %v\n, %r1, %r9
    .endr
    mfvrsave %r9
    stw     %r9, VRSAVE(%r1)
    mffs    %f0
    stfd    %f0, FPSCR(%r1)
    mfvscr  %v0
    li      %r9, VSCR
    stvx    %v0, %r1, %r9

    std     %r6, SEED(%r1)
    mr      %r12, %r3               /* fn, as ELFv2 wants it at the call */
    mr      %r3, %r4                /* a */
    mr      %r4, %r5                /* b */

    /* Bits 0-47: the registers. */
    .irp n, 14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31
    SETR    \n, \n-13
    .endr
    .irp n, 14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31
    SETF    \n, \n+5
    .endr
    .irp n, 20,21,22,23,24,25,26,27,28,29,30,31
    SETV    \n, \n+17
    .endr

    /* Bit 48: VRSAVE gets the low word of pattern 49. */
    PATTERN 49
    mtvrsave %r0

    /* Bits 49-51: cr2-cr4 are bits 20-23, 16-19, 12-15 of seed ^ seed << 12. */
    sldi    %r0, %r6, 12
    xor     %r0, %r0, %r6
    mtcrf   0x38, %r0

    /* Bits 52-53: RN = f & 3, DRN = (f >> 2) & 7, f in r10. */
    srdi    %r10, %r6, 16
    xor     %r10, %r10, %r6
    mffs    %f0
    stfd    %f0, SCR(%r1)
    ld      %r8, SCR(%r1)
    li      %r9, 7
    sldi    %r9, %r9, 32
    ori     %r9, %r9, 3
    andc    %r8, %r8, %r9
    clrldi  %r0, %r10, 62
    or      %r8, %r8, %r0
    rldicl  %r0, %r10, 62, 61       /* (f >> 2) & 7 */
    sldi    %r0, %r0, 32
    or      %r8, %r8, %r0
    std     %r8, SCR(%r1)
    lfd     %f0, SCR(%r1)
    mtfsf   0xff, %f0, 1, 0

    /* Bit 54: NJ = (f >> 6) & 1. */
    mfvscr  %v0
    li      %r9, SCR
    stvx    %v0, %r1, %r9
    lwz     %r8, SCR+VSCR_WORD(%r1)
    rlwinm  %r8, %r8, 0, 16, 14     /* clear NJ (0x00010000) */
    rldicl  %r0, %r10, 58, 63       /* (f >> 6) & 1 */
    sldi    %r0, %r0, 16
    or      %r8, %r8, %r0
    stw     %r8, SCR+VSCR_WORD(%r1)
    lvx     %v0, %r1, %r9
    mtvscr  %v0

    std     %r2, 24(%r1)
    mtctr   %r12
    bctrl
    ld      %r2, 24(%r1)

    ld      %r6, SEED(%r1)
    li      %r7, 0
    .irp n, 14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31
    CHKR    \n, \n-13
    .endr
    .irp n, 14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31
    CHKF    \n, \n+5
    .endr
    .irp n, 20,21,22,23,24,25,26,27,28,29,30,31
    CHKV    \n, \n+17
    .endr

    PATTERN 49
    clrldi  %r0, %r0, 32
    mfvrsave %r8
    clrldi  %r8, %r8, 32
    cmpd    %r8, %r0
    beq     1f
    FAIL    48
1:
    sldi    %r0, %r6, 12
    xor     %r0, %r0, %r6
    mfcr    %r8
    xor     %r8, %r8, %r0
    andis.  %r0, %r8, 0x00f0        /* cr2: bits 20-23 */
    beq     1f
    FAIL    49
1:  andis.  %r0, %r8, 0x000f        /* cr3: bits 16-19 */
    beq     1f
    FAIL    50
1:  andi.   %r0, %r8, 0xf000        /* cr4: bits 12-15 */
    beq     1f
    FAIL    51
1:
    srdi    %r10, %r6, 16           /* f */
    xor     %r10, %r10, %r6
    mffs    %f0
    stfd    %f0, SCR(%r1)
    ld      %r8, SCR(%r1)
    xor     %r11, %r8, %r10
    andi.   %r0, %r11, 3
    beq     1f
    FAIL    52
1:  rldicl  %r11, %r8, 32, 61       /* DRN: (fpscr >> 32) & 7 */
    rldicl  %r0, %r10, 62, 61       /* (f >> 2) & 7 */
    cmpd    %r11, %r0
    beq     1f
    FAIL    53
1:
    mfvscr  %v0
    li      %r9, SCR
    stvx    %v0, %r1, %r9
    lwz     %r8, SCR+VSCR_WORD(%r1)
    rlwinm  %r8, %r8, 16, 31, 31    /* NJ */
    rldicl  %r0, %r10, 58, 63
    cmpd    %r8, %r0
    beq     1f
    FAIL    54
1:
    /* Restore the caller's state. */
    lfd     %f0, FPSCR(%r1)
    mtfsf   0xff, %f0, 1, 0
    li      %r9, VSCR
    lvx     %v0, %r1, %r9
    mtvscr  %v0
    lwz     %r9, VRSAVE(%r1)
    mtvrsave %r9
    .irp n, 20,21,22,23,24,25,26,27,28,29,30,31
    li      %r9, VRS+16*(\n-20)
    lvx     %v\n, %r1, %r9
    .endr
    .irp n, 14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31
    ld      %r\n, GPRS+8*(\n-14)(%r1)
    lfd     %f\n, FPRS+8*(\n-14)(%r1)
    .endr
    addi    %r1, %r1, FRAME
    .cfi_adjust_cfa_offset -FRAME
    ld      %r0, 16(%r1)
    mtlr    %r0
    lwz     %r12, 8(%r1)
    mtcrf   0x38, %r12
    mr      %r3, %r7
    blr
    .cfi_endproc
    .size   st_test_regs_call, .-st_test_regs_call

    .section .note.GNU-stack, "", @progbits
