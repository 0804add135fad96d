/*
 * Context switch for 64-bit PowerPC, ELFv2 ABI (ppc64le, Linux).
 *
 * Nonvolatile state per ELFv2: r1 (sp), r2 (TOC), r14-r31, f14-f31,
 * v20-v31, VRSAVE, the CR fields cr2-cr4, and the return address in lr.
 *
 * Control state: ELFv2 makes the FPSCR bits VE, OE, UE, ZE, XE, NI, RN and
 * DRN, and the VSCR bit NJ, "limited-access": a function must leave them as
 * it found them, except functions whose purpose is to change them
 * (fesetround() and friends). They are therefore preserved across calls and
 * belong to a context, like x86_64's MXCSR control bits. The switch saves
 * the whole FPSCR (mffs) and VSCR (mfvscr) and restores them whole
 * (mtfsf with L=1, mtvscr): the volatile status bits that come along are
 * simply the resumed coroutine's own.
 *
 * A suspended coroutine keeps them on its own stack in a regular ELFv2 frame
 * (back chain at 0, 16-byte aligned), from its saved stack pointer upwards:
 *
 *   sp+0    back chain (the caller's r1)
 *   sp+8    CR (32-bit word; cr2-cr4 are restored from it)
 *   sp+16   lr (return address)
 *   sp+24   r2 (TOC)
 *   sp+32   VRSAVE (32-bit word), 4 bytes padding
 *   sp+40   FPSCR (as stored by stfd after mffs)
 *   sp+48   VSCR (16 bytes, as stored by stvx after mfvscr)
 *   sp+64   r14 ... sp+200 r31 (8 bytes each)
 *   sp+208  f14 ... sp+344 f31 (8 bytes each)
 *   sp+352  v20 ... sp+528 v31 (16 bytes each, 16-byte aligned)
 *   sp+544  end of frame: the caller's frame
 *
 * struct st__ctx is just the saved stack pointer.
 */
#if !defined(_CALL_ELF) || _CALL_ELF != 2
#error "arch/ppc64/switch.S implements the ELFv2 ABI (ppc64le) only"
#endif

#define FRAME 544

    .abiversion 2
    .text

/* void st__ctx_switch(struct st__ctx *from, const struct st__ctx *to) */
    .globl  st__ctx_switch
    .hidden st__ctx_switch
    .type   st__ctx_switch, @function
    .p2align 4
st__ctx_switch:
    .cfi_startproc
    mflr    %r0
    mfcr    %r12
    stdu    %r1, -FRAME(%r1)
    .cfi_adjust_cfa_offset FRAME
    std     %r0, 16(%r1)
    .cfi_rel_offset 65, 16
    stw     %r12, 8(%r1)
    .cfi_rel_offset 70, 8
    .cfi_rel_offset 71, 8
    .cfi_rel_offset 72, 8
    std     %r2, 24(%r1)
    .cfi_rel_offset 2, 24
    mfvrsave %r11
    stw     %r11, 32(%r1)
    mffs    %f0
    stfd    %f0, 40(%r1)
    mfvscr  %v0
    li      %r9, 48
    stvx    %v0, %r1, %r9

    std     %r14, 64(%r1)
    std     %r15, 72(%r1)
    std     %r16, 80(%r1)
    std     %r17, 88(%r1)
    std     %r18, 96(%r1)
    std     %r19, 104(%r1)
    std     %r20, 112(%r1)
    std     %r21, 120(%r1)
    std     %r22, 128(%r1)
    std     %r23, 136(%r1)
    std     %r24, 144(%r1)
    std     %r25, 152(%r1)
    std     %r26, 160(%r1)
    std     %r27, 168(%r1)
    std     %r28, 176(%r1)
    std     %r29, 184(%r1)
    std     %r30, 192(%r1)
    std     %r31, 200(%r1)
    .cfi_rel_offset 14, 64
    .cfi_rel_offset 15, 72
    .cfi_rel_offset 16, 80
    .cfi_rel_offset 17, 88
    .cfi_rel_offset 18, 96
    .cfi_rel_offset 19, 104
    .cfi_rel_offset 20, 112
    .cfi_rel_offset 21, 120
    .cfi_rel_offset 22, 128
    .cfi_rel_offset 23, 136
    .cfi_rel_offset 24, 144
    .cfi_rel_offset 25, 152
    .cfi_rel_offset 26, 160
    .cfi_rel_offset 27, 168
    .cfi_rel_offset 28, 176
    .cfi_rel_offset 29, 184
    .cfi_rel_offset 30, 192
    .cfi_rel_offset 31, 200

    stfd    %f14, 208(%r1)
    stfd    %f15, 216(%r1)
    stfd    %f16, 224(%r1)
    stfd    %f17, 232(%r1)
    stfd    %f18, 240(%r1)
    stfd    %f19, 248(%r1)
    stfd    %f20, 256(%r1)
    stfd    %f21, 264(%r1)
    stfd    %f22, 272(%r1)
    stfd    %f23, 280(%r1)
    stfd    %f24, 288(%r1)
    stfd    %f25, 296(%r1)
    stfd    %f26, 304(%r1)
    stfd    %f27, 312(%r1)
    stfd    %f28, 320(%r1)
    stfd    %f29, 328(%r1)
    stfd    %f30, 336(%r1)
    stfd    %f31, 344(%r1)
    .cfi_rel_offset 46, 208
    .cfi_rel_offset 47, 216
    .cfi_rel_offset 48, 224
    .cfi_rel_offset 49, 232
    .cfi_rel_offset 50, 240
    .cfi_rel_offset 51, 248
    .cfi_rel_offset 52, 256
    .cfi_rel_offset 53, 264
    .cfi_rel_offset 54, 272
    .cfi_rel_offset 55, 280
    .cfi_rel_offset 56, 288
    .cfi_rel_offset 57, 296
    .cfi_rel_offset 58, 304
    .cfi_rel_offset 59, 312
    .cfi_rel_offset 60, 320
    .cfi_rel_offset 61, 328
    .cfi_rel_offset 62, 336
    .cfi_rel_offset 63, 344

    li      %r9, 352
    stvx    %v20, %r1, %r9
    li      %r9, 368
    stvx    %v21, %r1, %r9
    li      %r9, 384
    stvx    %v22, %r1, %r9
    li      %r9, 400
    stvx    %v23, %r1, %r9
    li      %r9, 416
    stvx    %v24, %r1, %r9
    li      %r9, 432
    stvx    %v25, %r1, %r9
    li      %r9, 448
    stvx    %v26, %r1, %r9
    li      %r9, 464
    stvx    %v27, %r1, %r9
    li      %r9, 480
    stvx    %v28, %r1, %r9
    li      %r9, 496
    stvx    %v29, %r1, %r9
    li      %r9, 512
    stvx    %v30, %r1, %r9
    li      %r9, 528
    stvx    %v31, %r1, %r9
    .cfi_rel_offset 97, 352
    .cfi_rel_offset 98, 368
    .cfi_rel_offset 99, 384
    .cfi_rel_offset 100, 400
    .cfi_rel_offset 101, 416
    .cfi_rel_offset 102, 432
    .cfi_rel_offset 103, 448
    .cfi_rel_offset 104, 464
    .cfi_rel_offset 105, 480
    .cfi_rel_offset 106, 496
    .cfi_rel_offset 107, 512
    .cfi_rel_offset 108, 528

    std     %r1, 0(%r3)

    /* From here on the frame is the resumed context's, same layout. */
    ld      %r1, 0(%r4)

    li      %r9, 352
    lvx     %v20, %r1, %r9
    li      %r9, 368
    lvx     %v21, %r1, %r9
    li      %r9, 384
    lvx     %v22, %r1, %r9
    li      %r9, 400
    lvx     %v23, %r1, %r9
    li      %r9, 416
    lvx     %v24, %r1, %r9
    li      %r9, 432
    lvx     %v25, %r1, %r9
    li      %r9, 448
    lvx     %v26, %r1, %r9
    li      %r9, 464
    lvx     %v27, %r1, %r9
    li      %r9, 480
    lvx     %v28, %r1, %r9
    li      %r9, 496
    lvx     %v29, %r1, %r9
    li      %r9, 512
    lvx     %v30, %r1, %r9
    li      %r9, 528
    lvx     %v31, %r1, %r9

    lfd     %f14, 208(%r1)
    lfd     %f15, 216(%r1)
    lfd     %f16, 224(%r1)
    lfd     %f17, 232(%r1)
    lfd     %f18, 240(%r1)
    lfd     %f19, 248(%r1)
    lfd     %f20, 256(%r1)
    lfd     %f21, 264(%r1)
    lfd     %f22, 272(%r1)
    lfd     %f23, 280(%r1)
    lfd     %f24, 288(%r1)
    lfd     %f25, 296(%r1)
    lfd     %f26, 304(%r1)
    lfd     %f27, 312(%r1)
    lfd     %f28, 320(%r1)
    lfd     %f29, 328(%r1)
    lfd     %f30, 336(%r1)
    lfd     %f31, 344(%r1)

    ld      %r14, 64(%r1)
    ld      %r15, 72(%r1)
    ld      %r16, 80(%r1)
    ld      %r17, 88(%r1)
    ld      %r18, 96(%r1)
    ld      %r19, 104(%r1)
    ld      %r20, 112(%r1)
    ld      %r21, 120(%r1)
    ld      %r22, 128(%r1)
    ld      %r23, 136(%r1)
    ld      %r24, 144(%r1)
    ld      %r25, 152(%r1)
    ld      %r26, 160(%r1)
    ld      %r27, 168(%r1)
    ld      %r28, 176(%r1)
    ld      %r29, 184(%r1)
    ld      %r30, 192(%r1)
    ld      %r31, 200(%r1)

    lfd     %f0, 40(%r1)
    mtfsf   0xff, %f0, 1, 0
    li      %r9, 48
    lvx     %v0, %r1, %r9
    mtvscr  %v0
    lwz     %r11, 32(%r1)
    mtvrsave %r11
    lwz     %r12, 8(%r1)
    mtcrf   0x38, %r12              /* cr2, cr3, cr4 */
    ld      %r0, 16(%r1)
    mtlr    %r0
    ld      %r2, 24(%r1)
    addi    %r1, %r1, FRAME
    .cfi_adjust_cfa_offset -FRAME
    blr
    .cfi_endproc
    .size   st__ctx_switch, .-st__ctx_switch

/*
 * void st__ctx_make(struct st__ctx *ctx, void *stack_top,
 *                   void (*entry)(void *), void *arg)
 *
 * Below stack_top (rounded down to 16) it reserves a 96-byte frame for the
 * trampoline (32-byte ELFv2 header with back chain 0, plus a parameter save
 * area of 8 doublewords in case entry wants one), and below that a switch
 * frame that pops into st__ctx_entry with r14 = entry, r15 = arg. r2 is the
 * creator's TOC, the FPSCR, VSCR and VRSAVE the creator's current ones;
 * every other saved register is 0.
 */
    .globl  st__ctx_make
    .hidden st__ctx_make
    .type   st__ctx_make, @function
    .p2align 4
st__ctx_make:
    .cfi_startproc
    clrrdi  %r4, %r4, 4             /* stack_top & -16 */
    addi    %r7, %r4, -96           /* trampoline frame */
    addi    %r8, %r7, -FRAME        /* switch frame */

    addi    %r9, %r8, 56            /* zero sp+64 up to the top, which */
    addi    %r11, %r4, -8           /* includes the trampoline's back chain */
    li      %r10, 0
1:  stdu    %r10, 8(%r9)
    cmpld   %r9, %r11
    bne     1b

    std     %r7, 0(%r8)             /* back chain to the trampoline frame */
    stw     %r10, 8(%r8)            /* CR */

    mflr    %r0                     /* address of st__ctx_entry, PC-relative */
    bcl     20, 31, 2f
2:  mflr    %r9
    mtlr    %r0
    addi    %r9, %r9, st__ctx_entry - 2b
    std     %r9, 16(%r8)
    std     %r2, 24(%r8)
    mfvrsave %r9
    stw     %r9, 32(%r8)
    stw     %r10, 36(%r8)
    mffs    %f0
    stfd    %f0, 40(%r8)
    mfvscr  %v0
    li      %r9, 48
    stvx    %v0, %r8, %r9
    std     %r5, 64(%r8)            /* r14 = entry */
    std     %r6, 72(%r8)            /* r15 = arg */
    std     %r8, 0(%r3)
    blr
    .cfi_endproc
    .size   st__ctx_make, .-st__ctx_make

/*
 * First frame of every coroutine. The return address is undefined here, so
 * debuggers and unwinders stop cleanly at this frame; the back chain at
 * 0(r1) is 0, which ends back-chain walks too. ELFv2 wants r12 = the
 * callee's address at its global entry point, from which it derives r2.
 */
    .type   st__ctx_entry, @function
    .p2align 4
st__ctx_entry:
    .cfi_startproc
    .cfi_undefined 65
    mr      %r3, %r15
    mr      %r12, %r14
    mtctr   %r12
    bctrl
    trap
    .cfi_endproc
    .size   st__ctx_entry, .-st__ctx_entry

    .section .note.GNU-stack, "", @progbits
