/*
 * The register check (tests/arch) for 64-bit IBM Z, s390x ELF ABI.
 *
 * unsigned long st_test_regs_call(void (*fn)(void *, const void *), void *a,
 *                            const void *b, unsigned long seed)
 *
 * Loads every call-saved register with a value derived from `seed`
 * (seed XOR k * 0x0101010101010101, k = bit + 1; FP registers get such a
 * pattern bitwise with ldgr), sets the FPC rounding modes from the seed,
 * calls fn(a, b), which switches to other coroutines doing the same with
 * other seeds, and returns a mask of what did not come back:
 *
 *   bits 0-7    r6-r13
 *   bits 8-15   f8-f15 (all 64 bits)
 *   bit  16     FPC BFP rounding mode (= f & 3)
 *   bit  17     FPC DFP rounding mode (= (f >> 2) & 7)
 *
 * where f = seed ^ (seed >> 16), so that seeds differing only in their
 * upper half still differ there.
 *
 * r15 (sp) must come back for this function to find its frame; r14 is the
 * return address, volatile across the call. The caller's registers and FPC
 * are restored before returning; the seed lives in this frame across the
 * call, not in a checked register.
 */

/* Frame: 0-159 register save area for fn (back chain at 0), 160-216
 * f8-f15, 224 seed, 232 caller's FPC. The caller's r6-r15 go to its own
 * register save area above, at FRAME+48. */
#define FRAME   240
#define FPRS    160
#define SEED    224
#define FPC     232

    .text

/* r = seed (in r5) XOR k * 0x0101010101010101 */
.macro PATTERN r, k
    llihf   \r, (\k) * 0x01010101
    iilf    \r, (\k) * 0x01010101
    xgr     \r, %r5
.endm

.macro FAIL bit
    oilf    %r2, 1 << (\bit)
.endm

.macro CHKR n, k
    PATTERN %r0, \k
    cgr     %r\n, %r0
    je      1f
    FAIL    (\k) - 1
1:
.endm

.macro CHKF n, k
    lgdr    %r4, %f\n
    PATTERN %r0, \k
    cgr     %r4, %r0
    je      1f
    FAIL    (\k) - 1
1:
.endm

    .globl  st_test_regs_call
    .type   st_test_regs_call, @function
    .p2align 3
st_test_regs_call:
    .cfi_startproc
    stmg    %r6, %r15, 48(%r15)
    .cfi_offset %r6, -112
    .cfi_offset %r7, -104
    .cfi_offset %r8, -96
    .cfi_offset %r9, -88
    .cfi_offset %r10, -80
    .cfi_offset %r11, -72
    .cfi_offset %r12, -64
    .cfi_offset %r13, -56
    .cfi_offset %r14, -48
    .cfi_offset %r15, -40
    lgr     %r1, %r15
    aghi    %r15, -FRAME
    .cfi_adjust_cfa_offset FRAME
    stg     %r1, 0(%r15)
    .irp n, 8,9,10,11,12,13,14,15
    std     %f\n, FPRS+8*(\n-8)(%r15)
    .endr
    /* DWARF numbers the FPRs f0 f2 f4 f6 f1 f3 f5 f7 f8 f10 f12 f14 f9 ... */
    .cfi_rel_offset 24, FPRS+0
    .cfi_rel_offset 28, FPRS+8
    .cfi_rel_offset 25, FPRS+16
    .cfi_rel_offset 29, FPRS+24
    .cfi_rel_offset 26, FPRS+32
    .cfi_rel_offset 30, FPRS+40
    .cfi_rel_offset 27, FPRS+48
    .cfi_rel_offset 31, FPRS+56
    stg     %r5, SEED(%r15)
    stfpc   FPC(%r15)

    lgr     %r1, %r2                /* fn */
    lgr     %r2, %r3                /* a */
    lgr     %r3, %r4                /* b */

    .irp n, 8,9,10,11,12,13,14,15
    PATTERN %r0, \n+1
    ldgr    %f\n, %r0
    .endr

    /* FPC bits 29-31 (BFP rounding) = f & 3, bits 25-27 (DFP) = (f >> 2) & 7 */
    srlg    %r6, %r5, 16            /* f, in r6 until it gets its pattern */
    xgr     %r6, %r5
    efpc    %r0
    nilf    %r0, 0xffffff88
    lr      %r4, %r6
    nilf    %r4, 3
    or      %r0, %r4
    srlg    %r4, %r6, 2
    nilf    %r4, 7
    sll     %r4, 4
    or      %r0, %r4
    sfpc    %r0

    .irp n, 6,7,8,9,10,11,12,13
    PATTERN %r\n, \n-5
    .endr

    basr    %r14, %r1

    lg      %r5, SEED(%r15)
    lghi    %r2, 0
    .irp n, 6,7,8,9,10,11,12,13
    CHKR    \n, \n-5
    .endr
    .irp n, 8,9,10,11,12,13,14,15
    CHKF    \n, \n+1
    .endr
    srlg    %r1, %r5, 16            /* f */
    xgr     %r1, %r5
    efpc    %r0
    lr      %r4, %r1
    xr      %r4, %r0
    nilf    %r4, 3
    jz      1f
    FAIL    16
1:  srl     %r0, 4
    srlg    %r4, %r1, 2
    xr      %r4, %r0
    nilf    %r4, 7
    jz      1f
    FAIL    17
1:
    lfpc    FPC(%r15)
    .irp n, 8,9,10,11,12,13,14,15
    ld      %f\n, FPRS+8*(\n-8)(%r15)
    .endr
    lmg     %r6, %r15, FRAME+48(%r15)
    .cfi_def_cfa_offset 160
    br      %r14
    .cfi_endproc
    .size   st_test_regs_call, .-st_test_regs_call

    .section .note.GNU-stack, "", @progbits
