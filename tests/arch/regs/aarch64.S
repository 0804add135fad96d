/*
 * The register check (tests/arch) for aarch64 (AAPCS64).
 *
 * unsigned long st_test_regs_call(void (*fn)(void *, const void *), void *a,
 *                            const void *b, unsigned long seed)
 *
 * Loads every callee-saved register with a value derived from `seed`, and
 * the preserved FPCR control bits with seed-dependent values, calls
 * fn(a, b), which switches to other coroutines doing the same with other
 * seeds, and returns a mask of what did not come back:
 *
 *   bits 0-10   x19, x20, ..., x28, x29
 *   bits 11-18  d8, d9, ..., d15 (the low 64 bits of v8-v15)
 *   bit  19     FPCR control: RMode (22-23), FZ (24), DN (25)
 *
 * xN holds seed ^ KN and dN holds seed ^ LN, moved in bitwise (fmov). x30
 * is the link register: the call itself overwrites it, so it is saved and
 * restored here but cannot be compared. The FPCR bits 22-25 are
 * (seed ^ (seed >> 16)) & 15, so contexts whose seeds differ only in their
 * upper bits still differ there. The seed itself lives in this function's
 * frame across the call. The caller's registers and FPCR are restored before
 * returning.
 */

/* xreg = seed ^ k, seed in x3, x9 scratch */
.macro  LOADX reg, k
    ldr     x9, =\k
    eor     \reg, x9, x3
.endm

/* dreg = seed ^ k (bitwise), seed in x3, x9 scratch */
.macro  LOADD reg, k
    ldr     x9, =\k
    eor     x9, x9, x3
    fmov    \reg, x9
.endm

/* if xreg != seed ^ k: mask (x10) |= bit; seed in x3, x9 scratch */
.macro  CHECKX reg, k, bit
    ldr     x9, =\k
    eor     x9, x9, x3
    cmp     \reg, x9
    b.eq    1f
    orr     x10, x10, #(1 << \bit)
1:
.endm

/* the same for dreg, x11 scratch */
.macro  CHECKD reg, k, bit
    fmov    x11, \reg
    CHECKX  x11, \k, \bit
.endm

    .text
    .globl  st_test_regs_call
    .type   st_test_regs_call, %function
    .p2align 4
st_test_regs_call:
    .cfi_startproc
    /* Frame: 0 seed, 8 caller FPCR, 16-79 d8-d15, 80-175 x19-x30. */
    sub     sp, sp, #176
    .cfi_adjust_cfa_offset 176
    stp     x29, x30, [sp, #160]
    .cfi_rel_offset x29, 160
    .cfi_rel_offset x30, 168
    stp     x27, x28, [sp, #144]
    .cfi_rel_offset x27, 144
    .cfi_rel_offset x28, 152
    stp     x25, x26, [sp, #128]
    .cfi_rel_offset x25, 128
    .cfi_rel_offset x26, 136
    stp     x23, x24, [sp, #112]
    .cfi_rel_offset x23, 112
    .cfi_rel_offset x24, 120
    stp     x21, x22, [sp, #96]
    .cfi_rel_offset x21, 96
    .cfi_rel_offset x22, 104
    stp     x19, x20, [sp, #80]
    .cfi_rel_offset x19, 80
    .cfi_rel_offset x20, 88
    stp     d14, d15, [sp, #64]
    .cfi_rel_offset d14, 64
    .cfi_rel_offset d15, 72
    stp     d12, d13, [sp, #48]
    .cfi_rel_offset d12, 48
    .cfi_rel_offset d13, 56
    stp     d10, d11, [sp, #32]
    .cfi_rel_offset d10, 32
    .cfi_rel_offset d11, 40
    stp     d8, d9, [sp, #16]
    .cfi_rel_offset d8, 16
    .cfi_rel_offset d9, 24
    mov     x12, x0                 /* fn, until the call */
    mrs     x9, fpcr
    stp     x3, x9, [sp, #0]

    /* FPCR bits 22-25 = (seed ^ (seed >> 16)) & 15 */
    eor     x10, x3, x3, lsr #16
    and     x10, x10, #15
    and     x9, x9, #~(15 << 22)
    orr     x9, x9, x10, lsl #22
    msr     fpcr, x9

    LOADD   d8,  0x0808d8d80808d8d8
    LOADD   d9,  0x0909d9d90909d9d9
    LOADD   d10, 0x0a0adadaa0a0adad
    LOADD   d11, 0x0b0bdbdbb0b0bdbd
    LOADD   d12, 0x0c0cdcdcc0c0cdcd
    LOADD   d13, 0x0d0ddddd0d0ddddd
    LOADD   d14, 0x0e0edede0e0edede
    LOADD   d15, 0x0f0fdfdf0f0fdfdf
    LOADX   x19, 0x1919191919191919
    LOADX   x20, 0x2020202020202020
    LOADX   x21, 0x2121212121212121
    LOADX   x22, 0x2222222222222222
    LOADX   x23, 0x2323232323232323
    LOADX   x24, 0x2424242424242424
    LOADX   x25, 0x2525252525252525
    LOADX   x26, 0x2626262626262626
    LOADX   x27, 0x2727272727272727
    LOADX   x28, 0x2828282828282828
    LOADX   x29, 0x2929292929292929

    mov     x0, x1                  /* a */
    mov     x1, x2                  /* b */
    blr     x12

    mov     x10, #0                 /* mask */
    ldr     x3, [sp, #0]            /* seed */
    CHECKX  x19, 0x1919191919191919, 0
    CHECKX  x20, 0x2020202020202020, 1
    CHECKX  x21, 0x2121212121212121, 2
    CHECKX  x22, 0x2222222222222222, 3
    CHECKX  x23, 0x2323232323232323, 4
    CHECKX  x24, 0x2424242424242424, 5
    CHECKX  x25, 0x2525252525252525, 6
    CHECKX  x26, 0x2626262626262626, 7
    CHECKX  x27, 0x2727272727272727, 8
    CHECKX  x28, 0x2828282828282828, 9
    CHECKX  x29, 0x2929292929292929, 10
    CHECKD  d8,  0x0808d8d80808d8d8, 11
    CHECKD  d9,  0x0909d9d90909d9d9, 12
    CHECKD  d10, 0x0a0adadaa0a0adad, 13
    CHECKD  d11, 0x0b0bdbdbb0b0bdbd, 14
    CHECKD  d12, 0x0c0cdcdcc0c0cdcd, 15
    CHECKD  d13, 0x0d0ddddd0d0ddddd, 16
    CHECKD  d14, 0x0e0edede0e0edede, 17
    CHECKD  d15, 0x0f0fdfdf0f0fdfdf, 18
    mrs     x9, fpcr
    eor     x11, x3, x3, lsr #16
    eor     x9, x11, x9, lsr #22
    tst     x9, #15
    b.eq    1f
    orr     x10, x10, #(1 << 19)
1:
    ldr     x9, [sp, #8]
    msr     fpcr, x9
    mov     x0, x10
    ldp     d8, d9, [sp, #16]
    ldp     d10, d11, [sp, #32]
    ldp     d12, d13, [sp, #48]
    ldp     d14, d15, [sp, #64]
    ldp     x19, x20, [sp, #80]
    ldp     x21, x22, [sp, #96]
    ldp     x23, x24, [sp, #112]
    ldp     x25, x26, [sp, #128]
    ldp     x27, x28, [sp, #144]
    ldp     x29, x30, [sp, #160]
    add     sp, sp, #176
    .cfi_adjust_cfa_offset -176
    .cfi_restore x19
    .cfi_restore x20
    .cfi_restore x21
    .cfi_restore x22
    .cfi_restore x23
    .cfi_restore x24
    .cfi_restore x25
    .cfi_restore x26
    .cfi_restore x27
    .cfi_restore x28
    .cfi_restore x29
    .cfi_restore x30
    .cfi_restore d8
    .cfi_restore d9
    .cfi_restore d10
    .cfi_restore d11
    .cfi_restore d12
    .cfi_restore d13
    .cfi_restore d14
    .cfi_restore d15
    ret
    .cfi_endproc
    .ltorg
    .size   st_test_regs_call, .-st_test_regs_call

    .section .note.GNU-stack, "", %progbits
