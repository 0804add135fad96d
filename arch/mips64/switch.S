/*
 * Context switch for 64-bit MIPS, n64 ABI (Linux), big and little endian.
 * Only whole registers are stored and loaded, so the same code serves
 * mips64 and mips64el.
 *
 * Callee-saved state per the n64 ABI: s0-s7 ($16-$23), s8/fp ($30), gp
 * ($28: callee-saved in n64, unlike o32), sp ($29), and the floating-point
 * registers $f24-$f31 (n64 runs with FR=1: 32 64-bit registers). The FCSR
 * (rounding mode, flush-to-zero, enables, flags) is kept per coroutine as
 * glibc's setjmp/longjmp do on MIPS.
 *
 * A suspended coroutine keeps its registers on its own stack, from its saved
 * stack pointer upwards (160 bytes, keeping the 16-byte alignment):
 *
 *   sp+0   $f24 ... sp+56 $f31
 *   sp+64  s0 ... sp+120 s7
 *   sp+128 s8/fp
 *   sp+136 gp
 *   sp+144 ra (where the switch returns to)
 *   sp+152 FCSR (4 bytes), padding
 *
 * struct st__ctx is just the saved stack pointer.
 */

#define FRAME 160

    .text
    .set    noreorder
    .set    nomacro

/* void st__ctx_switch(struct st__ctx *from, const struct st__ctx *to) */
    .globl  st__ctx_switch
    .hidden st__ctx_switch
    .type   st__ctx_switch, @function
    .p2align 3
st__ctx_switch:
    .cfi_startproc
    daddiu  $sp, $sp, -FRAME
    .cfi_adjust_cfa_offset FRAME
    sd      $16, 64($sp)
    .cfi_rel_offset 16, 64
    sd      $17, 72($sp)
    .cfi_rel_offset 17, 72
    sd      $18, 80($sp)
    .cfi_rel_offset 18, 80
    sd      $19, 88($sp)
    .cfi_rel_offset 19, 88
    sd      $20, 96($sp)
    .cfi_rel_offset 20, 96
    sd      $21, 104($sp)
    .cfi_rel_offset 21, 104
    sd      $22, 112($sp)
    .cfi_rel_offset 22, 112
    sd      $23, 120($sp)
    .cfi_rel_offset 23, 120
    sd      $30, 128($sp)
    .cfi_rel_offset 30, 128
    sd      $28, 136($sp)
    .cfi_rel_offset 28, 136
    sd      $31, 144($sp)
    .cfi_rel_offset 31, 144
#ifdef __mips_hard_float
    cfc1    $12, $31
    sw      $12, 152($sp)
    sdc1    $f24, 0($sp)
    .cfi_rel_offset 56, 0
    sdc1    $f25, 8($sp)
    .cfi_rel_offset 57, 8
    sdc1    $f26, 16($sp)
    .cfi_rel_offset 58, 16
    sdc1    $f27, 24($sp)
    .cfi_rel_offset 59, 24
    sdc1    $f28, 32($sp)
    .cfi_rel_offset 60, 32
    sdc1    $f29, 40($sp)
    .cfi_rel_offset 61, 40
    sdc1    $f30, 48($sp)
    .cfi_rel_offset 62, 48
    sdc1    $f31, 56($sp)
    .cfi_rel_offset 63, 56
#endif
    sd      $sp, 0($4)

    /* The frame at to->sp has the same layout: the CFI above stays valid. */
    ld      $sp, 0($5)
#ifdef __mips_hard_float
    lw      $12, 152($sp)
    ldc1    $f24, 0($sp)
    ldc1    $f25, 8($sp)
    ldc1    $f26, 16($sp)
    ldc1    $f27, 24($sp)
    ldc1    $f28, 32($sp)
    ldc1    $f29, 40($sp)
    ldc1    $f30, 48($sp)
    ldc1    $f31, 56($sp)
    ctc1    $12, $31
#endif
    ld      $16, 64($sp)
    ld      $17, 72($sp)
    ld      $18, 80($sp)
    ld      $19, 88($sp)
    ld      $20, 96($sp)
    ld      $21, 104($sp)
    ld      $22, 112($sp)
    ld      $23, 120($sp)
    ld      $30, 128($sp)
    ld      $28, 136($sp)
    ld      $31, 144($sp)
    jr      $31
    daddiu  $sp, $sp, FRAME         /* delay slot */
    .cfi_endproc
    .size   st__ctx_switch, .-st__ctx_switch

/*
 * void st__ctx_make(struct st__ctx *ctx, void *stack_top,
 *                   void (*entry)(void *), void *arg)
 *
 * Builds a frame that st__ctx_switch pops into st__ctx_entry with s0 =
 * entry and s1 = arg. The other integer and FP registers are 0 (fp = 0 ends
 * frame-pointer chains), except gp, which is the creator's: PIC code derives
 * its own gp from t9 anyway, and code built without abicalls expects the
 * one process-wide value there. The FCSR starts as the creator's. stack_top
 * is aligned down to 16 and the frame placed right below it, so the
 * trampoline starts with sp = top, 16-byte aligned (n64 reserves no
 * argument area for the callee).
 *
 * The trampoline's address is taken pc-relative (bal), so this works in PIC
 * and non-PIC code alike without gp or t9 being set up on entry.
 */
    .globl  st__ctx_make
    .hidden st__ctx_make
    .type   st__ctx_make, @function
    .p2align 3
st__ctx_make:
    .cfi_startproc
    daddiu  $12, $0, -16
    and     $5, $5, $12
    daddiu  $2, $5, -FRAME          /* v0 = frame */
    sd      $0, 0($2)               /* $f24-$f31 */
    sd      $0, 8($2)
    sd      $0, 16($2)
    sd      $0, 24($2)
    sd      $0, 32($2)
    sd      $0, 40($2)
    sd      $0, 48($2)
    sd      $0, 56($2)
    sd      $6, 64($2)              /* s0 = entry */
    sd      $7, 72($2)              /* s1 = arg */
    sd      $0, 80($2)              /* s2-s7 */
    sd      $0, 88($2)
    sd      $0, 96($2)
    sd      $0, 104($2)
    sd      $0, 112($2)
    sd      $0, 120($2)
    sd      $0, 128($2)             /* fp */
    sd      $28, 136($2)            /* gp: the creator's */
    sd      $0, 152($2)
#ifdef __mips_hard_float
    cfc1    $12, $31
    sw      $12, 152($2)            /* FCSR */
#endif

    move    $13, $31
    .cfi_register 31, 13
    bal     1f
    nop                             /* delay slot */
1:  daddiu  $14, $31, st__ctx_entry - 1b
    move    $31, $13
    .cfi_restore 31
    sd      $14, 144($2)            /* ra = st__ctx_entry */
    jr      $31
    sd      $2, 0($4)               /* delay slot: ctx->sp = frame */
    .cfi_endproc
    .size   st__ctx_make, .-st__ctx_make

/*
 * First frame of every coroutine: entry(arg), called through t9 as n64 PIC
 * requires. The return address is undefined here, so debuggers and
 * unwinders stop cleanly at this frame; fp is 0, which ends frame-pointer
 * chains too. entry never returns.
 */
    .type   st__ctx_entry, @function
    .p2align 3
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
