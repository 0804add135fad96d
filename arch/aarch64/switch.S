/*
 * Context switch for aarch64, AAPCS64 (Linux).
 *
 * Callee-saved state per the AAPCS64: x19-x28, x29 (frame pointer), x30
 * (link register, the return address), sp, the low 64 bits of v8-v15
 * (d8-d15), and the control bits of FPCR (rounding mode, flush-to-zero,
 * default NaN, alternative half-precision: the AAPCS64 lets only functions
 * that deliberately change global FP state modify them, so every other call
 * preserves them). sp is 16-byte aligned at all times.
 *
 * A suspended coroutine keeps its state on its own stack, in this order from
 * its saved stack pointer upwards (176 bytes):
 *
 *   sp+0    FPCR (8 bytes), padding (8 bytes)
 *   sp+16   d8, d9
 *   sp+32   d10, d11
 *   sp+48   d12, d13
 *   sp+64   d14, d15
 *   sp+80   x19, x20
 *   sp+96   x21, x22
 *   sp+112  x23, x24
 *   sp+128  x25, x26
 *   sp+144  x27, x28
 *   sp+160  x29, x30 (x30 is the return address)
 *
 * struct st__ctx is just the saved stack pointer.
 */

    .text

/* void st__ctx_switch(struct st__ctx *from, const struct st__ctx *to) */
    .globl  st__ctx_switch
    .hidden st__ctx_switch
    .type   st__ctx_switch, %function
    .p2align 4
st__ctx_switch:
    .cfi_startproc
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
    mrs     x9, fpcr
    str     x9, [sp, #0]
    mov     x9, sp
    str     x9, [x0]

    ldr     x9, [x1]
    mov     sp, x9
    ldr     x9, [sp, #0]
    mrs     x10, fpcr
    cmp     x9, x10
    b.eq    1f                      /* writing FPCR can be slow: only if it differs */
    msr     fpcr, x9
1:
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
    .size   st__ctx_switch, .-st__ctx_switch

/*
 * void st__ctx_make(struct st__ctx *ctx, void *stack_top,
 *                   void (*entry)(void *), void *arg)
 *
 * Builds a frame that st__ctx_switch pops into st__ctx_entry (x30) with
 * x19 = entry and x20 = arg. The other registers, x29 included, are 0; FPCR
 * starts as the creator's. With top = stack_top rounded down to 16, the
 * frame is at top - 176 and the trampoline starts with sp = top.
 */
    .globl  st__ctx_make
    .hidden st__ctx_make
    .type   st__ctx_make, %function
    .p2align 4
st__ctx_make:
    .cfi_startproc
    and     x1, x1, #-16
    sub     x1, x1, #176
    mrs     x9, fpcr
    stp     x9, xzr, [x1, #0]
    stp     xzr, xzr, [x1, #16]     /* d8 ... d15 */
    stp     xzr, xzr, [x1, #32]
    stp     xzr, xzr, [x1, #48]
    stp     xzr, xzr, [x1, #64]
    stp     x2, x3, [x1, #80]       /* x19 = entry, x20 = arg */
    stp     xzr, xzr, [x1, #96]     /* x21 ... x28 */
    stp     xzr, xzr, [x1, #112]
    stp     xzr, xzr, [x1, #128]
    stp     xzr, xzr, [x1, #144]
    adr     x9, st__ctx_entry
    stp     xzr, x9, [x1, #160]     /* x29 = 0, x30 = trampoline */
    str     x1, [x0]
    ret
    .cfi_endproc
    .size   st__ctx_make, .-st__ctx_make

/*
 * First frame of every coroutine. The return address (x30) is undefined
 * here, so debuggers and unwinders stop cleanly at this frame; x29 is 0,
 * which ends frame-record chains too.
 */
    .type   st__ctx_entry, %function
    .p2align 4
st__ctx_entry:
    .cfi_startproc
    .cfi_undefined x30
    mov     x0, x20
    blr     x19
    brk     #0
    .cfi_endproc
    .size   st__ctx_entry, .-st__ctx_entry

    .section .note.GNU-stack, "", %progbits
