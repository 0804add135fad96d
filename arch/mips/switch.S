/*
 * Context switch for 32-bit MIPS, o32 ABI (Linux), big and little endian.
 * Only whole registers are stored and loaded, so the same code serves mips
 * and mipsel.
 *
 * Callee-saved state per the o32 ABI: s0-s7 ($16-$23), s8/fp ($30), sp
 * ($29), and the floating-point registers $f20-$f31. Debian's o32 is
 * hard-float FPXX: the code must run with FR=0 and FR=1. sdc1/ldc1 on the
 * even registers $f20, $f22, ..., $f30 move 64 bits each: with FR=0 that is
 * the even/odd pair ($f20+$f21, ...), so all of $f20-$f31 are kept; with
 * FR=1 it is the whole even register, and the odd ones are not callee-saved
 * in that mode. The FCSR (rounding mode, flush-to-zero, enables, flags) is
 * kept per coroutine as glibc's setjmp/longjmp do on MIPS.
 *
 * gp ($28) is not saved: in o32 PIC code it is not callee-saved (every
 * function that needs it derives it from t9 on entry and the caller reloads
 * it from its .cprestore slot after each call), and in non-PIC code it is
 * the same constant (_gp) in every coroutine.
 *
 * A suspended coroutine keeps its registers on its own stack, from its saved
 * stack pointer upwards (96 bytes, 8-byte aligned as sdc1 requires):
 *
 *   sp+0   $f20 (FR=0: $f20/$f21)
 *   sp+8   $f22
 *   sp+16  $f24
 *   sp+24  $f26
 *   sp+32  $f28
 *   sp+40  $f30
 *   sp+48  s0 ... sp+76 s7
 *   sp+80  s8/fp
 *   sp+84  ra (where the switch returns to)
 *   sp+88  FCSR
 *   sp+92  padding
 *
 * struct st__ctx is just the saved stack pointer.
 */

#define FRAME 96

    .text
    .set    noreorder
    .set    nomacro

/* void st__ctx_switch(struct st__ctx *from, const struct st__ctx *to) */
    .globl  st__ctx_switch
    .hidden st__ctx_switch
    .type   st__ctx_switch, @function
    .p2align 2
st__ctx_switch:
    .cfi_startproc
    addiu   $sp, $sp, -FRAME
    .cfi_adjust_cfa_offset FRAME
    sw      $16, 48($sp)
    .cfi_rel_offset 16, 48
    sw      $17, 52($sp)
    .cfi_rel_offset 17, 52
    sw      $18, 56($sp)
    .cfi_rel_offset 18, 56
    sw      $19, 60($sp)
    .cfi_rel_offset 19, 60
    sw      $20, 64($sp)
    .cfi_rel_offset 20, 64
    sw      $21, 68($sp)
    .cfi_rel_offset 21, 68
    sw      $22, 72($sp)
    .cfi_rel_offset 22, 72
    sw      $23, 76($sp)
    .cfi_rel_offset 23, 76
    sw      $30, 80($sp)
    .cfi_rel_offset 30, 80
    sw      $31, 84($sp)
    .cfi_rel_offset 31, 84
#ifdef __mips_hard_float
    cfc1    $8, $31
    sw      $8, 88($sp)
    sdc1    $f20, 0($sp)
    sdc1    $f22, 8($sp)
    sdc1    $f24, 16($sp)
    sdc1    $f26, 24($sp)
    sdc1    $f28, 32($sp)
    sdc1    $f30, 40($sp)
#endif
    sw      $sp, 0($4)

    /* The frame at to->sp has the same layout: the CFI above stays valid. */
    lw      $sp, 0($5)
#ifdef __mips_hard_float
    lw      $8, 88($sp)
    ldc1    $f20, 0($sp)
    ldc1    $f22, 8($sp)
    ldc1    $f24, 16($sp)
    ldc1    $f26, 24($sp)
    ldc1    $f28, 32($sp)
    ldc1    $f30, 40($sp)
    ctc1    $8, $31
#endif
    lw      $16, 48($sp)
    lw      $17, 52($sp)
    lw      $18, 56($sp)
    lw      $19, 60($sp)
    lw      $20, 64($sp)
    lw      $21, 68($sp)
    lw      $22, 72($sp)
    lw      $23, 76($sp)
    lw      $30, 80($sp)
    lw      $31, 84($sp)
    jr      $31
    addiu   $sp, $sp, FRAME         /* delay slot */
    .cfi_endproc
    .size   st__ctx_switch, .-st__ctx_switch

/*
 * void st__ctx_make(struct st__ctx *ctx, void *stack_top,
 *                   void (*entry)(void *), void *arg)
 *
 * Builds a frame that st__ctx_switch pops into st__ctx_entry with s0 =
 * entry and s1 = arg; every other register is 0 (fp = 0 ends frame-pointer
 * chains) and the FCSR starts as the creator's. stack_top is aligned down to
 * 16 (o32 needs 8). The frame sits 16 bytes below it, so the trampoline
 * starts with sp = top - 16: aligned, with the 16-byte argument save area
 * that an o32 caller reserves above the callee's sp already in place.
 *
 * The trampoline's address is taken pc-relative (bal), so this works in PIC
 * and non-PIC code alike without gp or t9 being set up on entry.
 */
    .globl  st__ctx_make
    .hidden st__ctx_make
    .type   st__ctx_make, @function
    .p2align 2
st__ctx_make:
    .cfi_startproc
    addiu   $8, $0, -16
    and     $5, $5, $8
    addiu   $2, $5, -(FRAME + 16)   /* v0 = frame */
    sw      $0, 0($2)               /* $f20-$f30 */
    sw      $0, 4($2)
    sw      $0, 8($2)
    sw      $0, 12($2)
    sw      $0, 16($2)
    sw      $0, 20($2)
    sw      $0, 24($2)
    sw      $0, 28($2)
    sw      $0, 32($2)
    sw      $0, 36($2)
    sw      $0, 40($2)
    sw      $0, 44($2)
    sw      $6, 48($2)              /* s0 = entry */
    sw      $7, 52($2)              /* s1 = arg */
    sw      $0, 56($2)              /* s2-s7 */
    sw      $0, 60($2)
    sw      $0, 64($2)
    sw      $0, 68($2)
    sw      $0, 72($2)
    sw      $0, 76($2)
    sw      $0, 80($2)              /* fp */
#ifdef __mips_hard_float
    cfc1    $8, $31
#else
    move    $8, $0
#endif
    sw      $8, 88($2)              /* FCSR */
    sw      $0, 92($2)
    sw      $0, 96($2)              /* the trampoline's argument save area */
    sw      $0, 100($2)
    sw      $0, 104($2)
    sw      $0, 108($2)

    move    $9, $31
    .cfi_register 31, 9
    bal     1f
    nop                             /* delay slot */
1:  addiu   $10, $31, st__ctx_entry - 1b
    move    $31, $9
    .cfi_restore 31
    sw      $10, 84($2)             /* ra = st__ctx_entry */
    jr      $31
    sw      $2, 0($4)               /* delay slot: ctx->sp = frame */
    .cfi_endproc
    .size   st__ctx_make, .-st__ctx_make

/*
 * First frame of every coroutine: entry(arg), called through t9 as o32 PIC
 * requires. The return address is undefined here, so debuggers and
 * unwinders stop cleanly at this frame; fp is 0, which ends frame-pointer
 * chains too. entry never returns.
 */
    .type   st__ctx_entry, @function
    .p2align 2
st__ctx_entry:
    .cfi_startproc
    .cfi_undefined 31
    move    $4, $17                 /* a0 = arg */
    move    $25, $16                /* t9 = entry */
    jalr    $25
    nop                             /* delay slot */
    break
    .cfi_endproc
    .size   st__ctx_entry, .-st__ctx_entry

    .set    macro
    .set    reorder

    .section .note.GNU-stack, "", @progbits
