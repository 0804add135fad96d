/*
 * The register check (tests/arch) for riscv64 (LP64D psABI).
 *
 * unsigned long st_test_regs_call(void (*fn)(void *, const void *), void *a,
 *                            const void *b, unsigned long seed)
 *
 * Loads every callee-saved register with a value derived from `seed`
 * (seed XOR k * 0x0101010101010101, k = bit + 1; FP registers get the same
 * kind of pattern moved in bitwise with fmv.d.x), calls fn(a, b), which
 * switches to other coroutines doing the same with other seeds, and returns
 * a mask of what did not come back:
 *
 *   bits 0-11   s0-s11
 *   bits 12-23  fs0-fs11 (all 64 bits compared)
 *
 * fcsr is not checked: the psABI gives it thread storage duration, it is
 * not preserved across calls. The caller's registers are restored before
 * returning, as the ABI requires; the seed lives in this frame across the
 * call, not in a checked register.
 */
    .text

.macro SETX reg, k
    li      t0, \k * 0x0101010101010101
    xor     \reg, t0, a3
.endm

.macro SETF reg, k
    li      t0, \k * 0x0101010101010101
    xor     t0, t0, a3
    fmv.d.x \reg, t0
.endm

/* Expected value in t0 (seed in t2); set bit k-1 of a0 if \reg differs. */
.macro CHKX reg, k
    li      t0, \k * 0x0101010101010101
    xor     t0, t0, t2
    beq     \reg, t0, 1f
    li      t1, 1
    slli    t1, t1, \k - 1
    or      a0, a0, t1
1:
.endm

.macro CHKF reg, k
    fmv.x.d t3, \reg
    CHKX    t3, \k
.endm

    .globl  st_test_regs_call
    .type   st_test_regs_call, %function
    .p2align 2
st_test_regs_call:
    .cfi_startproc
    /* 0: ra, 8-96: s0-s11, 104-192: fs0-fs11, 200: seed */
    addi    sp, sp, -208
    .cfi_adjust_cfa_offset 208
    sd      ra, 0(sp)
    .cfi_rel_offset ra, 0
    sd      s0, 8(sp)
    sd      s1, 16(sp)
    sd      s2, 24(sp)
    sd      s3, 32(sp)
    sd      s4, 40(sp)
    sd      s5, 48(sp)
    sd      s6, 56(sp)
    sd      s7, 64(sp)
    sd      s8, 72(sp)
    sd      s9, 80(sp)
    sd      s10, 88(sp)
    sd      s11, 96(sp)
    fsd     fs0, 104(sp)
    fsd     fs1, 112(sp)
    fsd     fs2, 120(sp)
    fsd     fs3, 128(sp)
    fsd     fs4, 136(sp)
    fsd     fs5, 144(sp)
    fsd     fs6, 152(sp)
    fsd     fs7, 160(sp)
    fsd     fs8, 168(sp)
    fsd     fs9, 176(sp)
    fsd     fs10, 184(sp)
    fsd     fs11, 192(sp)
    sd      a3, 200(sp)

    SETX    s0, 1
    SETX    s1, 2
    SETX    s2, 3
    SETX    s3, 4
    SETX    s4, 5
    SETX    s5, 6
    SETX    s6, 7
    SETX    s7, 8
    SETX    s8, 9
    SETX    s9, 10
    SETX    s10, 11
    SETX    s11, 12
    SETF    fs0, 13
    SETF    fs1, 14
    SETF    fs2, 15
    SETF    fs3, 16
    SETF    fs4, 17
    SETF    fs5, 18
    SETF    fs6, 19
    SETF    fs7, 20
    SETF    fs8, 21
    SETF    fs9, 22
    SETF    fs10, 23
    SETF    fs11, 24

    mv      t1, a0
    mv      a0, a1
    mv      a1, a2
    jalr    t1

    ld      t2, 200(sp)
    li      a0, 0
    CHKX    s0, 1
    CHKX    s1, 2
    CHKX    s2, 3
    CHKX    s3, 4
    CHKX    s4, 5
    CHKX    s5, 6
    CHKX    s6, 7
    CHKX    s7, 8
    CHKX    s8, 9
    CHKX    s9, 10
    CHKX    s10, 11
    CHKX    s11, 12
    CHKF    fs0, 13
    CHKF    fs1, 14
    CHKF    fs2, 15
    CHKF    fs3, 16
    CHKF    fs4, 17
    CHKF    fs5, 18
    CHKF    fs6, 19
    CHKF    fs7, 20
    CHKF    fs8, 21
    CHKF    fs9, 22
    CHKF    fs10, 23
    CHKF    fs11, 24

    ld      s0, 8(sp)
    ld      s1, 16(sp)
    ld      s2, 24(sp)
    ld      s3, 32(sp)
    ld      s4, 40(sp)
    ld      s5, 48(sp)
    ld      s6, 56(sp)
    ld      s7, 64(sp)
    ld      s8, 72(sp)
    ld      s9, 80(sp)
    ld      s10, 88(sp)
    ld      s11, 96(sp)
    fld     fs0, 104(sp)
    fld     fs1, 112(sp)
    fld     fs2, 120(sp)
    fld     fs3, 128(sp)
    fld     fs4, 136(sp)
    fld     fs5, 144(sp)
    fld     fs6, 152(sp)
    fld     fs7, 160(sp)
    fld     fs8, 168(sp)
    fld     fs9, 176(sp)
    fld     fs10, 184(sp)
    fld     fs11, 192(sp)
    ld      ra, 0(sp)
    .cfi_restore ra
    addi    sp, sp, 208
    .cfi_adjust_cfa_offset -208
    ret
    .cfi_endproc
    .size   st_test_regs_call, .-st_test_regs_call

    .section .note.GNU-stack, "", %progbits
