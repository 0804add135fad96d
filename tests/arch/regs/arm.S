/*
 * The register check (tests/arch) for 32-bit ARM (ARMv7-A hard-float, AAPCS-VFP).
 *
 * unsigned long st_test_regs_call(void (*fn)(void *, const void *), void *a,
 *                            const void *b, unsigned long seed)
 *
 * Loads every callee-saved register with a value derived from `seed`, and
 * the preserved FPSCR control bits with seed-dependent values, calls
 * fn(a, b), which switches to other coroutines doing the same with other
 * seeds, and returns a mask of what did not come back:
 *
 *   bits 0-7   r4, r5, r6, r7, r8, r9, r10, r11
 *   bits 8-15  d8, d9, d10, d11, d12, d13, d14, d15 (all 64 bits)
 *   bit  16    FPSCR control: RMode (22-23), FZ (24), DN (25)
 *
 * Integer register rN holds seed ^ KN; dN holds (seed ^ LN) in its low word
 * and (seed ^ HN) in its high word, moved in bitwise. The FPSCR bits 22-25
 * are (seed ^ (seed >> 16)) & 15, so contexts whose seeds differ only in
 * their upper half still differ there. The seed itself lives in this
 * function's frame across the call. The caller's registers and FPSCR are
 * restored before returning. Assembled in ARM state; callable from Thumb.
 */
    .syntax unified
    .arch   armv7-a
    .fpu    vfpv3-d16
    .arm
    .cfi_sections .debug_frame

/* reg = 32-bit constant k */
.macro  LOADK reg, k
    movw    \reg, #:lower16:\k
    movt    \reg, #:upper16:\k
.endm

/* dN = (seed ^ lo) | (seed ^ hi) << 32, seed in r3, r0/r1 scratch */
.macro  LOADD dreg, lo, hi
    LOADK   r0, \lo
    eor     r0, r0, r3
    LOADK   r1, \hi
    eor     r1, r1, r3
    vmov    \dreg, r0, r1
.endm

/* reg = seed ^ k, seed in r3 */
.macro  LOADR reg, k
    LOADK   \reg, \k
    eor     \reg, \reg, r3
.endm

/* if reg != seed ^ k: mask (r2) |= bit; seed in r3, ip scratch */
.macro  CHECKR reg, k, bit
    LOADK   ip, \k
    eor     ip, ip, r3
    cmp     \reg, ip
    orrne   r2, r2, #\bit
.endm

/* if dN != its pattern: mask (r2) |= bit; r0/r1/ip scratch */
.macro  CHECKD dreg, lo, hi, bit
    vmov    r0, r1, \dreg
    CHECKR  r0, \lo, \bit
    CHECKR  r1, \hi, \bit
.endm

    .text
    .globl  st_test_regs_call
    .type   st_test_regs_call, %function
    .p2align 2
st_test_regs_call:
    .fnstart
    .cfi_startproc
    push    {r4-r11, lr}
    .save   {r4-r11, lr}
    .cfi_adjust_cfa_offset 36
    .cfi_rel_offset r4, 0
    .cfi_rel_offset r5, 4
    .cfi_rel_offset r6, 8
    .cfi_rel_offset r7, 12
    .cfi_rel_offset r8, 16
    .cfi_rel_offset r9, 20
    .cfi_rel_offset r10, 24
    .cfi_rel_offset r11, 28
    .cfi_rel_offset lr, 32
    vpush   {d8-d15}
    .vsave  {d8-d15}
    .cfi_adjust_cfa_offset 64
    .cfi_rel_offset d8, 0
    .cfi_rel_offset d9, 8
    .cfi_rel_offset d10, 16
    .cfi_rel_offset d11, 24
    .cfi_rel_offset d12, 32
    .cfi_rel_offset d13, 40
    .cfi_rel_offset d14, 48
    .cfi_rel_offset d15, 56
    /* Locals: 0 seed, 4 caller FPSCR, 8 fn, 12 a, 16 b. 36 + 64 + 20 keeps
     * sp 8-byte aligned for the call. */
    sub     sp, sp, #20
    .pad    #20
    .cfi_adjust_cfa_offset 20
    str     r3, [sp, #0]
    str     r0, [sp, #8]
    str     r1, [sp, #12]
    str     r2, [sp, #16]
    vmrs    r0, fpscr
    str     r0, [sp, #4]

    /* FPSCR bits 22-25 = (seed ^ (seed >> 16)) & 15 */
    eor     r1, r3, r3, lsr #16
    and     r1, r1, #15
    bic     r0, r0, #(15 << 22)
    orr     r0, r0, r1, lsl #22
    vmsr    fpscr, r0

    LOADD   d8,  0x0d080d08, 0x80d080d0
    LOADD   d9,  0x0d090d09, 0x90d090d0
    LOADD   d10, 0x0d0a0d0a, 0xa0d0a0d0
    LOADD   d11, 0x0d0b0d0b, 0xb0d0b0d0
    LOADD   d12, 0x0d0c0d0c, 0xc0d0c0d0
    LOADD   d13, 0x0d0d0d0d, 0xd0d0d0d0
    LOADD   d14, 0x0d0e0d0e, 0xe0d0e0d0
    LOADD   d15, 0x0d0f0d0f, 0xf0d0f0d0
    LOADR   r4,  0x44444444
    LOADR   r5,  0x55555555
    LOADR   r6,  0x66666666
    LOADR   r7,  0x77777777
    LOADR   r8,  0x88888888
    LOADR   r9,  0x99999999
    LOADR   r10, 0xaaaaaaaa
    LOADR   r11, 0xbbbbbbbb

    ldr     r0, [sp, #12]           /* a */
    ldr     r1, [sp, #16]           /* b */
    ldr     ip, [sp, #8]            /* fn */
    blx     ip

    mov     r2, #0                  /* mask */
    ldr     r3, [sp, #0]            /* seed */
    CHECKR  r4,  0x44444444, 1 << 0
    CHECKR  r5,  0x55555555, 1 << 1
    CHECKR  r6,  0x66666666, 1 << 2
    CHECKR  r7,  0x77777777, 1 << 3
    CHECKR  r8,  0x88888888, 1 << 4
    CHECKR  r9,  0x99999999, 1 << 5
    CHECKR  r10, 0xaaaaaaaa, 1 << 6
    CHECKR  r11, 0xbbbbbbbb, 1 << 7
    CHECKD  d8,  0x0d080d08, 0x80d080d0, 1 << 8
    CHECKD  d9,  0x0d090d09, 0x90d090d0, 1 << 9
    CHECKD  d10, 0x0d0a0d0a, 0xa0d0a0d0, 1 << 10
    CHECKD  d11, 0x0d0b0d0b, 0xb0d0b0d0, 1 << 11
    CHECKD  d12, 0x0d0c0d0c, 0xc0d0c0d0, 1 << 12
    CHECKD  d13, 0x0d0d0d0d, 0xd0d0d0d0, 1 << 13
    CHECKD  d14, 0x0d0e0d0e, 0xe0d0e0d0, 1 << 14
    CHECKD  d15, 0x0d0f0d0f, 0xf0d0f0d0, 1 << 15
    vmrs    r0, fpscr
    eor     r1, r3, r3, lsr #16
    eor     r0, r1, r0, lsr #22
    tst     r0, #15
    orrne   r2, r2, #(1 << 16)

    ldr     r0, [sp, #4]
    vmsr    fpscr, r0
    mov     r0, r2
    add     sp, sp, #20
    .cfi_adjust_cfa_offset -20
    vpop    {d8-d15}
    .cfi_adjust_cfa_offset -64
    .cfi_restore d8
    .cfi_restore d9
    .cfi_restore d10
    .cfi_restore d11
    .cfi_restore d12
    .cfi_restore d13
    .cfi_restore d14
    .cfi_restore d15
    pop     {r4-r11, lr}
    .cfi_adjust_cfa_offset -36
    .cfi_restore r4
    .cfi_restore r5
    .cfi_restore r6
    .cfi_restore r7
    .cfi_restore r8
    .cfi_restore r9
    .cfi_restore r10
    .cfi_restore r11
    .cfi_restore lr
    bx      lr
    .cfi_endproc
    .fnend
    .size   st_test_regs_call, .-st_test_regs_call

    .section .note.GNU-stack, "", %progbits
