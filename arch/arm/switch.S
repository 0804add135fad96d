/*
 * Context switch for 32-bit ARM (ARMv7-A, hard-float), AAPCS with the VFP
 * variant (Linux armhf).
 *
 * Callee-saved state per the AAPCS: r4-r11, sp, lr (the return address),
 * d8-d15 (s16-s31), and the control bits of FPSCR (rounding mode, flush-to-
 * zero, default NaN, exception enables: the AAPCS lets only functions that
 * deliberately change global FP state modify them, so every other call
 * preserves them). sp is 8-byte aligned at every public interface.
 *
 * The code is assembled in ARM state on purpose (.arm). Callers compiled as
 * Thumb-2, the Debian default, reach it by BLX (the linker rewrites BL for
 * %function symbols), and every return is `bx lr`, so both states work.
 *
 * A suspended coroutine keeps its state on its own stack, in this order from
 * its saved stack pointer upwards (104 bytes, a multiple of 8):
 *
 *   sp+0    d8 ... d15 (8 bytes each)
 *   sp+64   FPSCR
 *   sp+68   r4, r5, r6, r7, r8, r9, r10, r11 (4 bytes each)
 *   sp+100  lr (the return address)
 *
 * struct st__ctx is just the saved stack pointer.
 */

    .syntax unified
    .arch   armv7-a
    .fpu    vfpv3-d16
    .arm
    /* As the compiler does on ARM: CFI for debuggers in .debug_frame, the
     * run-time unwinder reads the EHABI tables (.fnstart/.fnend). */
    .cfi_sections .debug_frame
    .text

/* void st__ctx_switch(struct st__ctx *from, const struct st__ctx *to) */
    .globl  st__ctx_switch
    .hidden st__ctx_switch
    .type   st__ctx_switch, %function
    .p2align 2
st__ctx_switch:
    .fnstart
    .cfi_startproc
    vmrs    r2, fpscr
    push    {r2, r4-r11, lr}
    .save   {r2, r4-r11, lr}
    .cfi_adjust_cfa_offset 40
    .cfi_rel_offset r4, 4
    .cfi_rel_offset r5, 8
    .cfi_rel_offset r6, 12
    .cfi_rel_offset r7, 16
    .cfi_rel_offset r8, 20
    .cfi_rel_offset r9, 24
    .cfi_rel_offset r10, 28
    .cfi_rel_offset r11, 32
    .cfi_rel_offset lr, 36
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
    str     sp, [r0]

    ldr     sp, [r1]
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
    pop     {r2, r4-r11, lr}
    .cfi_adjust_cfa_offset -40
    .cfi_restore r4
    .cfi_restore r5
    .cfi_restore r6
    .cfi_restore r7
    .cfi_restore r8
    .cfi_restore r9
    .cfi_restore r10
    .cfi_restore r11
    .cfi_restore lr
    vmsr    fpscr, r2
    bx      lr
    .cfi_endproc
    .fnend
    .size   st__ctx_switch, .-st__ctx_switch

/*
 * void st__ctx_make(struct st__ctx *ctx, void *stack_top,
 *                   void (*entry)(void *), void *arg)
 *
 * Builds a frame that st__ctx_switch pops into st__ctx_entry with r4 =
 * entry and r5 = arg. The other registers are 0 (so are both frame pointers,
 * r7 for Thumb code and r11 for ARM code), FPSCR starts as the creator's.
 * With top = stack_top rounded down to 16, the frame is at top - 104 and the
 * trampoline starts with sp = top, 8-byte aligned as the AAPCS wants.
 */
    .globl  st__ctx_make
    .hidden st__ctx_make
    .type   st__ctx_make, %function
    .p2align 2
st__ctx_make:
    .fnstart
    .cfi_startproc
    bic     r1, r1, #15
    sub     r1, r1, #104
    str     r1, [r0]                /* ctx->sp */
    vmrs    ip, fpscr
    str     ip, [r1, #64]           /* FPSCR */
    str     r2, [r1, #68]           /* r4 = entry */
    str     r3, [r1, #72]           /* r5 = arg */
    adr     ip, st__ctx_entry       /* ARM state: bit 0 clear */
    str     ip, [r1, #100]          /* lr */
    mov     r0, #0
    mov     r2, #0
    mov     r3, #0
    mov     ip, #0
    stm     r1!, {r0, r2, r3, ip}   /* d8 ... d15 = 0 */
    stm     r1!, {r0, r2, r3, ip}
    stm     r1!, {r0, r2, r3, ip}
    stm     r1!, {r0, r2, r3, ip}
    add     r1, r1, #12             /* frame + 76 */
    stm     r1, {r0, r2, r3, ip}    /* r6 ... r9 = 0 */
    str     r0, [r1, #16]           /* r10 = 0 */
    str     r0, [r1, #20]           /* r11 = 0 */
    bx      lr
    .cfi_endproc
    .fnend
    .size   st__ctx_make, .-st__ctx_make

/*
 * First frame of every coroutine. The return address (lr) is undefined here
 * and the EHABI table says it cannot be unwound, so debuggers and unwinders
 * stop cleanly at this frame; r7 and r11 are 0, which ends frame-pointer
 * chains too.
 */
    .type   st__ctx_entry, %function
    .p2align 2
st__ctx_entry:
    .fnstart
    .cantunwind
    .cfi_startproc
    .cfi_undefined lr
    mov     r0, r5
    blx     r4
    udf     #0
    .cfi_endproc
    .fnend
    .size   st__ctx_entry, .-st__ctx_entry

    .section .note.GNU-stack, "", %progbits
