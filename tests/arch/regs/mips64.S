/*
 * The register check (tests/arch) for 64-bit MIPS, n64 ABI (mips64 and mips64el).
 *
 * unsigned long st_test_regs_call(void (*fn)(void *, const void *), void *a,
 *                            const void *b, unsigned long seed)
 *
 * Loads every callee-saved register with a value derived from `seed` (and
 * the FCSR rounding mode with seed & 3), calls fn(a, b), which switches to
 * other coroutines doing the same with other seeds, and returns a mask of
 * what did not come back:
 *
 *   bit 0-7   s0-s7 ($16-$23)
 *   bit 8     s8/fp ($30)
 *   bit 9     gp ($28, callee-saved in n64)
 *   bit 10-17 $f24-$f31 (64-bit patterns moved in with dmtc1)
 *   bit 18    FCSR rounding mode (bits 1:0): the mode read back after
 *             setting it to seed & 3 must still be in force after the call
 *             (qemu's default mips64 CPU model, 5KEf, keeps RM fixed at 0;
 *             the cross files select MIPS64R2-generic, which does not)
 *
 * The caller's registers and FCSR are restored before returning, as the ABI
 * requires. The seed lives in this function's frame across the call.
 *
 * Frame (176 bytes, 16-byte aligned):
 *   sp+0    seed
 *   sp+8    caller's FCSR (4 bytes)
 *   sp+16   caller's $f24-$f31
 *   sp+80   caller's s0-s7
 *   sp+144  caller's s8, gp, return address
 *   sp+168  rounding mode in force before the call
 */

#define FRAME 176

/* Load register \reg with \k ^ seed (seed in a3 before the call). */
    .macro  SETI reg, k
    dli     $12, \k
    xor     \reg, $12, $7
    .endm

    .macro  SETF freg, k
    dli     $12, \k
    xor     $12, $12, $7
    dmtc1   $12, \freg
    .endm

/* v0 |= (\reg != \k ^ seed) << \bit, seed in t2 after the call. */
    .macro  CHKI reg, k, bit
    dli     $12, \k
    xor     $12, $12, $14
    xor     $12, $12, \reg
    sltu    $12, $0, $12
    dsll    $12, $12, \bit
    or      $2, $2, $12
    .endm

    .macro  CHKF freg, k, bit
    dmfc1   $13, \freg
    CHKI    $13, \k, \bit
    .endm

    .text
    .globl  st_test_regs_call
    .type   st_test_regs_call, @function
    .p2align 3
st_test_regs_call:
    .cfi_startproc
    daddiu  $sp, $sp, -FRAME
    .cfi_adjust_cfa_offset FRAME
    sd      $31, 160($sp)
    .cfi_rel_offset 31, 160
    sd      $28, 152($sp)
    .cfi_rel_offset 28, 152
    sd      $30, 144($sp)
    .cfi_rel_offset 30, 144
    sd      $16, 80($sp)
    .cfi_rel_offset 16, 80
    sd      $17, 88($sp)
    .cfi_rel_offset 17, 88
    sd      $18, 96($sp)
    .cfi_rel_offset 18, 96
    sd      $19, 104($sp)
    .cfi_rel_offset 19, 104
    sd      $20, 112($sp)
    .cfi_rel_offset 20, 112
    sd      $21, 120($sp)
    .cfi_rel_offset 21, 120
    sd      $22, 128($sp)
    .cfi_rel_offset 22, 128
    sd      $23, 136($sp)
    .cfi_rel_offset 23, 136
    sdc1    $f24, 16($sp)
    sdc1    $f25, 24($sp)
    sdc1    $f26, 32($sp)
    sdc1    $f27, 40($sp)
    sdc1    $f28, 48($sp)
    sdc1    $f29, 56($sp)
    sdc1    $f30, 64($sp)
    sdc1    $f31, 72($sp)
    sd      $7, 0($sp)              /* seed */

    /* Rounding mode from the seed: FCSR bits 1:0. */
    cfc1    $12, $31
    sw      $12, 8($sp)
    li      $13, -4
    and     $12, $12, $13
    andi    $13, $7, 3
    or      $12, $12, $13
    ctc1    $12, $31
    cfc1    $12, $31
    andi    $12, $12, 3
    sd      $12, 168($sp)

    move    $25, $4                 /* t9 = fn, as n64 PIC calls require */
    move    $4, $5                  /* a */
    move    $5, $6                  /* b */

    SETI    $16, 0x1111111111111111
    SETI    $17, 0x2222222222222222
    SETI    $18, 0x3333333333333333
    SETI    $19, 0x4444444444444444
    SETI    $20, 0x5555555555555555
    SETI    $21, 0x6666666666666666
    SETI    $22, 0x7777777777777777
    SETI    $23, 0x8888888888888888
    SETI    $30, 0x9999999999999999
    SETI    $28, 0x1234567887654321
    SETF    $f24, 0xa1a1a1a1a2a2a2a2
    SETF    $f25, 0xb1b1b1b1b2b2b2b2
    SETF    $f26, 0xc1c1c1c1c2c2c2c2
    SETF    $f27, 0xd1d1d1d1d2d2d2d2
    SETF    $f28, 0xe1e1e1e1e2e2e2e2
    SETF    $f29, 0xf1f1f1f1f2f2f2f2
    SETF    $f30, 0x0a0a0a0a0b0b0b0b
    SETF    $f31, 0x1a1a1a1a1b1b1b1b

    jalr    $25

    move    $2, $0
    ld      $14, 0($sp)             /* seed */
    CHKI    $16, 0x1111111111111111, 0
    CHKI    $17, 0x2222222222222222, 1
    CHKI    $18, 0x3333333333333333, 2
    CHKI    $19, 0x4444444444444444, 3
    CHKI    $20, 0x5555555555555555, 4
    CHKI    $21, 0x6666666666666666, 5
    CHKI    $22, 0x7777777777777777, 6
    CHKI    $23, 0x8888888888888888, 7
    CHKI    $30, 0x9999999999999999, 8
    CHKI    $28, 0x1234567887654321, 9
    CHKF    $f24, 0xa1a1a1a1a2a2a2a2, 10
    CHKF    $f25, 0xb1b1b1b1b2b2b2b2, 11
    CHKF    $f26, 0xc1c1c1c1c2c2c2c2, 12
    CHKF    $f27, 0xd1d1d1d1d2d2d2d2, 13
    CHKF    $f28, 0xe1e1e1e1e2e2e2e2, 14
    CHKF    $f29, 0xf1f1f1f1f2f2f2f2, 15
    CHKF    $f30, 0x0a0a0a0a0b0b0b0b, 16
    CHKF    $f31, 0x1a1a1a1a1b1b1b1b, 17
    cfc1    $12, $31
    andi    $12, $12, 3
    ld      $13, 168($sp)
    xor     $12, $12, $13
    sltu    $12, $0, $12
    dsll    $12, $12, 18
    or      $2, $2, $12

    lw      $12, 8($sp)
    ctc1    $12, $31
    ldc1    $f24, 16($sp)
    ldc1    $f25, 24($sp)
    ldc1    $f26, 32($sp)
    ldc1    $f27, 40($sp)
    ldc1    $f28, 48($sp)
    ldc1    $f29, 56($sp)
    ldc1    $f30, 64($sp)
    ldc1    $f31, 72($sp)
    ld      $16, 80($sp)
    ld      $17, 88($sp)
    ld      $18, 96($sp)
    ld      $19, 104($sp)
    ld      $20, 112($sp)
    ld      $21, 120($sp)
    ld      $22, 128($sp)
    ld      $23, 136($sp)
    ld      $30, 144($sp)
    ld      $28, 152($sp)
    ld      $31, 160($sp)
    daddiu  $sp, $sp, FRAME
    .cfi_adjust_cfa_offset -FRAME
    jr      $31
    .cfi_endproc
    .size   st_test_regs_call, .-st_test_regs_call

    .section .note.GNU-stack, "", @progbits
