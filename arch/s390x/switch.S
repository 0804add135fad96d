/*
 * Context switch for 64-bit IBM Z, s390x ELF ABI (Linux).
 *
 * Call-saved state per the ABI: r6-r13 and r15 (the stack pointer), and
 * f8-f15 (64 bits each; the rest of the vector registers they overlap is
 * volatile). r14 holds the return address: the switch saves it too, since
 * it returns through it. Access registers a0/a1 (thread pointer) belong to
 * the thread, not to a context.
 *
 * FPC: under the s390x ELF ABI the floating-point control register is not
 * a scratch register: code relies on its control part (IEEE exception
 * masks, BFP and DFP rounding modes) staying as it was set across calls,
 * and only functions meant to change it (fesetround() and friends) do. It
 * is therefore part of a context, like x86_64's MXCSR control bits: the
 * switch saves it with stfpc and restores it whole with lfpc (the flags and
 * DXC that come along are the resumed coroutine's own).
 *
 * Every caller provides a 160-byte register save area at 0(%r15) for its
 * callee (back chain at 0, r6-r15 slots at 48-127); the switch stores
 * r6-r14 there, as any s390x function does, and keeps the rest in an
 * 80-byte frame of its own. From a suspended coroutine's saved stack
 * pointer upwards:
 *
 *   sp+0    back chain (the caller's r15)
 *   sp+8    FPC (4 bytes), 4 bytes padding
 *   sp+16   f8 ... sp+72 f15 (8 bytes each)
 *   sp+80   the caller's 160-byte register save area, in which:
 *   sp+128  r6 ... sp+192 r14 (8 bytes each; r14 = return address)
 *
 * struct st__ctx is just the saved stack pointer.
 */

#define FRAME 80

    .text

/* void st__ctx_switch(struct st__ctx *from, const struct st__ctx *to) */
    .globl  st__ctx_switch
    .hidden st__ctx_switch
    .type   st__ctx_switch, @function
    .p2align 3
st__ctx_switch:
    .cfi_startproc
    stmg    %r6, %r14, 48(%r15)
    .cfi_offset %r6, -112
    .cfi_offset %r7, -104
    .cfi_offset %r8, -96
    .cfi_offset %r9, -88
    .cfi_offset %r10, -80
    .cfi_offset %r11, -72
    .cfi_offset %r12, -64
    .cfi_offset %r13, -56
    .cfi_offset %r14, -48
    lgr     %r1, %r15
    aghi    %r15, -FRAME
    .cfi_adjust_cfa_offset FRAME
    stg     %r1, 0(%r15)
    stfpc   8(%r15)
    std     %f8, 16(%r15)
    std     %f9, 24(%r15)
    std     %f10, 32(%r15)
    std     %f11, 40(%r15)
    std     %f12, 48(%r15)
    std     %f13, 56(%r15)
    std     %f14, 64(%r15)
    std     %f15, 72(%r15)
    /* DWARF numbers the FPRs f0 f2 f4 f6 f1 f3 f5 f7 f8 f10 f12 f14 f9 ... */
    .cfi_rel_offset 24, 16          /* f8 */
    .cfi_rel_offset 28, 24          /* f9 */
    .cfi_rel_offset 25, 32          /* f10 */
    .cfi_rel_offset 29, 40          /* f11 */
    .cfi_rel_offset 26, 48          /* f12 */
    .cfi_rel_offset 30, 56          /* f13 */
    .cfi_rel_offset 27, 64          /* f14 */
    .cfi_rel_offset 31, 72          /* f15 */
    stg     %r15, 0(%r2)

    /* From here on the frame is the resumed context's, same layout. */
    lg      %r15, 0(%r3)
    ld      %f8, 16(%r15)
    ld      %f9, 24(%r15)
    ld      %f10, 32(%r15)
    ld      %f11, 40(%r15)
    ld      %f12, 48(%r15)
    ld      %f13, 56(%r15)
    ld      %f14, 64(%r15)
    ld      %f15, 72(%r15)
    lfpc    8(%r15)
    aghi    %r15, FRAME
    .cfi_adjust_cfa_offset -FRAME
    lmg     %r6, %r14, 48(%r15)
    br      %r14
    .cfi_endproc
    .size   st__ctx_switch, .-st__ctx_switch

/*
 * void st__ctx_make(struct st__ctx *ctx, void *stack_top,
 *                   void (*entry)(void *), void *arg)
 *
 * Below stack_top (rounded down to 8, the ABI's stack alignment) it
 * reserves the 160-byte register save area the trampoline's stack pointer
 * must have above it (back chain 0), which is also where the switch finds
 * r6-r14: r7 = entry, r8 = arg, r14 = st__ctx_entry, the others (r11, the
 * frame pointer, included) 0. Below that, the switch's own 80-byte frame
 * with f8-f15 = 0 and the creator's current FPC.
 */
    .globl  st__ctx_make
    .hidden st__ctx_make
    .type   st__ctx_make, @function
    .p2align 3
st__ctx_make:
    .cfi_startproc
    nill    %r3, 0xfff8             /* stack_top & -8 */
    aghi    %r3, -160               /* the trampoline's stack pointer */
    lay     %r1, -FRAME(%r3)        /* the switch frame */
    xc      0(FRAME+160, %r1), 0(%r1)
    stg     %r3, 0(%r1)             /* back chain */
    stfpc   8(%r1)
    stg     %r4, 56(%r3)            /* r7 = entry */
    stg     %r5, 64(%r3)            /* r8 = arg */
    larl    %r0, st__ctx_entry
    stg     %r0, 112(%r3)           /* r14 = return address */
    stg     %r1, 0(%r2)
    br      %r14
    .cfi_endproc
    .size   st__ctx_make, .-st__ctx_make

/*
 * First frame of every coroutine. The return address (r14) is undefined
 * here, so debuggers and unwinders stop cleanly at this frame; the back
 * chain at 0(%r15) and r11 are 0, which ends back-chain and frame-pointer
 * walks too.
 */
    .type   st__ctx_entry, @function
    .p2align 3
st__ctx_entry:
    .cfi_startproc
    .cfi_undefined %r14
    lgr     %r2, %r8
    basr    %r14, %r7
    .short  0x0000                  /* illegal operation: entry never returns */
    .cfi_endproc
    .size   st__ctx_entry, .-st__ctx_entry

    .section .note.GNU-stack, "", @progbits
