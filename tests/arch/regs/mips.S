/*
 * The register check (tests/arch) for 32-bit MIPS, o32 ABI (mips and mipsel).
 *
 * unsigned long st_test_regs_call(void (*fn)(void *, const void *), void *a,
 *                            const void *b, unsigned long seed)
 *
 * Loads every callee-saved register with a value derived from `seed` (and
 * the FCSR rounding mode with seed & 3), calls fn(a, b), which switches to
 * other coroutines doing the same with other seeds, and returns a mask of
 * what did not come back. unsigned long has 32 bits here; 16 are used:
 *
 *   bit 0-7   s0-s7 ($16-$23)
 *   bit 8     s8/fp ($30)
 *   bit 9-14  $f20, $f22, $f24, $f26, $f28, $f30, one bit per 64-bit value
 *             loaded with ldc1 (with FR=0 that is the even/odd pair, e.g.
 *             $f20 and $f21, so the odd registers are checked too)
 *   bit 15    FCSR rounding mode (bits 1:0): the mode read back after
 *             setting it to seed & 3 must still be in force after the call
 *             (on a CPU model that keeps RM fixed this bit only
 *             checks that nothing changed it)
 *
 * gp is not checked: it is not callee-saved in o32 (see arch/mips/switch.S).
 * The caller's registers and FCSR are restored before returning, as the ABI
 * requires. The seed lives in this function's frame across the call.
 *
 * Frame (128 bytes, 8-byte aligned):
 *   sp+0    argument save area for fn (16 bytes)
 *   sp+16   seed
 *   sp+20   caller's FCSR
 *   sp+24   scratch doubleword for moving FP bit patterns
 *   sp+32   caller's $f20, $f22, ..., $f30 (48 bytes)
 *   sp+80   caller's s0-s7, s8
 *   sp+116  return address
 *   sp+120  rounding mode in force before the call
 */

#define FRAME 128

/* Load register \reg with \k ^ seed (seed in a3 before the call). */
    .macro  SETI reg, k
    li      $8, \k
    xor     \reg, $8, $7
    .endm

/* Load FP register \freg with the doubleword (\klo ^ seed, \khi ^ seed) as
   laid out in memory. */
    .macro  SETF freg, klo, khi
    li      $8, \klo
    xor     $8, $8, $7
    sw      $8, 24($sp)
    li      $8, \khi
    xor     $8, $8, $7
    sw      $8, 28($sp)
    ldc1    \freg, 24($sp)
    .endm

/* v0 |= (\reg != \k ^ seed) << \bit, seed in t2 after the call. */
    .macro  CHKI reg, k, bit
    li      $8, \k
    xor     $8, $8, $10
    xor     $8, $8, \reg
    sltu    $8, $0, $8
    sll     $8, $8, \bit
    or      $2, $2, $8
    .endm

    .macro  CHKF freg, klo, khi, bit
    sdc1    \freg, 24($sp)
    lw      $11, 24($sp)
    li      $8, \klo
    xor     $8, $8, $10
    xor     $11, $11, $8
    lw      $12, 28($sp)
    li      $8, \khi
    xor     $8, $8, $10
    xor     $12, $12, $8
    or      $11, $11, $12
    sltu    $11, $0, $11
    sll     $11, $11, \bit
    or      $2, $2, $11
    .endm

    .text
    .globl  st_test_regs_call
    .type   st_test_regs_call, @function
    .p2align 2
st_test_regs_call:
    .cfi_startproc
    addiu   $sp, $sp, -FRAME
    .cfi_adjust_cfa_offset FRAME
    sw      $31, 116($sp)
    .cfi_rel_offset 31, 116
    sw      $16, 80($sp)
    .cfi_rel_offset 16, 80
    sw      $17, 84($sp)
    .cfi_rel_offset 17, 84
    sw      $18, 88($sp)
    .cfi_rel_offset 18, 88
    sw      $19, 92($sp)
    .cfi_rel_offset 19, 92
    sw      $20, 96($sp)
    .cfi_rel_offset 20, 96
    sw      $21, 100($sp)
    .cfi_rel_offset 21, 100
    sw      $22, 104($sp)
    .cfi_rel_offset 22, 104
    sw      $23, 108($sp)
    .cfi_rel_offset 23, 108
    sw      $30, 112($sp)
    .cfi_rel_offset 30, 112
    sdc1    $f20, 32($sp)
    sdc1    $f22, 40($sp)
    sdc1    $f24, 48($sp)
    sdc1    $f26, 56($sp)
    sdc1    $f28, 64($sp)
    sdc1    $f30, 72($sp)
    sw      $7, 16($sp)             /* seed */

    /* Rounding mode from the seed: FCSR bits 1:0. */
    cfc1    $8, $31
    sw      $8, 20($sp)
    li      $9, -4
    and     $8, $8, $9
    andi    $9, $7, 3
    or      $8, $8, $9
    ctc1    $8, $31
    cfc1    $8, $31
    andi    $8, $8, 3
    sw      $8, 120($sp)

    move    $25, $4                 /* t9 = fn, as o32 PIC calls require */
    move    $4, $5                  /* a */
    move    $5, $6                  /* b */

    SETI    $16, 0x11111111
    SETI    $17, 0x22222222
    SETI    $18, 0x33333333
    SETI    $19, 0x44444444
    SETI    $20, 0x55555555
    SETI    $21, 0x66666666
    SETI    $22, 0x77777777
    SETI    $23, 0x88888888
    SETI    $30, 0x99999999
    SETF    $f20, 0xa1a1a1a1, 0xa2a2a2a2
    SETF    $f22, 0xb1b1b1b1, 0xb2b2b2b2
    SETF    $f24, 0xc1c1c1c1, 0xc2c2c2c2
    SETF    $f26, 0xd1d1d1d1, 0xd2d2d2d2
    SETF    $f28, 0xe1e1e1e1, 0xe2e2e2e2
    SETF    $f30, 0xf1f1f1f1, 0xf2f2f2f2

    jalr    $25

    move    $2, $0
    lw      $10, 16($sp)            /* seed */
    CHKI    $16, 0x11111111, 0
    CHKI    $17, 0x22222222, 1
    CHKI    $18, 0x33333333, 2
    CHKI    $19, 0x44444444, 3
    CHKI    $20, 0x55555555, 4
    CHKI    $21, 0x66666666, 5
    CHKI    $22, 0x77777777, 6
    CHKI    $23, 0x88888888, 7
    CHKI    $30, 0x99999999, 8
    CHKF    $f20, 0xa1a1a1a1, 0xa2a2a2a2, 9
    CHKF    $f22, 0xb1b1b1b1, 0xb2b2b2b2, 10
    CHKF    $f24, 0xc1c1c1c1, 0xc2c2c2c2, 11
    CHKF    $f26, 0xd1d1d1d1, 0xd2d2d2d2, 12
    CHKF    $f28, 0xe1e1e1e1, 0xe2e2e2e2, 13
    CHKF    $f30, 0xf1f1f1f1, 0xf2f2f2f2, 14
    cfc1    $8, $31
    andi    $8, $8, 3
    lw      $9, 120($sp)
    xor     $8, $8, $9
    sltu    $8, $0, $8
    sll     $8, $8, 15
    or      $2, $2, $8

    lw      $8, 20($sp)
    ctc1    $8, $31
    ldc1    $f20, 32($sp)
    ldc1    $f22, 40($sp)
    ldc1    $f24, 48($sp)
    ldc1    $f26, 56($sp)
    ldc1    $f28, 64($sp)
    ldc1    $f30, 72($sp)
    lw      $16, 80($sp)
    lw      $17, 84($sp)
    lw      $18, 88($sp)
    lw      $19, 92($sp)
    lw      $20, 96($sp)
    lw      $21, 100($sp)
    lw      $22, 104($sp)
    lw      $23, 108($sp)
    lw      $30, 112($sp)
    lw      $31, 116($sp)
    addiu   $sp, $sp, FRAME
    .cfi_adjust_cfa_offset -FRAME
    jr      $31
    .cfi_endproc
    .size   st_test_regs_call, .-st_test_regs_call

    .section .note.GNU-stack, "", @progbits
