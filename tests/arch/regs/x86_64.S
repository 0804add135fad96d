/*
 * The register check (tests/arch) for x86_64 (System V ABI).
 *
 * unsigned long st_test_regs_call(void (*fn)(void *, const void *), void *a,
 *                            const void *b, unsigned long seed)
 *
 * Loads every callee-saved register with a value derived from `seed` (and
 * the MXCSR / x87 rounding modes with seed-dependent values), calls fn(a, b),
 * which switches to other coroutines doing the same with other seeds, and
 * returns a mask of what did not come back: bit 0 rbx, 1 rbp, 2 r12, 3 r13,
 * 4 r14, 5 r15, 6 MXCSR rounding, 7 x87 rounding. The caller's registers
 * are restored before returning, as the ABI requires.
 */
/* push/pop one register, telling the unwinder how far the CFA moved. */
    .macro  push_cfi reg
    pushq   \reg
    .cfi_adjust_cfa_offset 8
    .endm
    .macro  pop_cfi reg
    popq    \reg
    .cfi_adjust_cfa_offset -8
    .endm

/* reg = pattern ^ seed (in %rdx). */
    .macro  seed_reg pattern, reg
    movabsq $\pattern, \reg
    xorq    %rdx, \reg
    .endm

/* Sets bit in %eax unless reg still holds pattern ^ seed (seed in %rsi). */
    .macro  check_reg pattern, reg, bit
    movabsq $\pattern, %rdx
    xorq    %rsi, %rdx
    cmpq    %rdx, \reg
    je      1f
    orl     $\bit, %eax
1:
    .endm

    .text
    .globl  st_test_regs_call
    .type   st_test_regs_call, @function
    .p2align 4
st_test_regs_call:
    .cfi_startproc
    push_cfi %rbp
    push_cfi %rbx
    push_cfi %r12
    push_cfi %r13
    push_cfi %r14
    push_cfi %r15
    subq    $24, %rsp               /* 0: seed, 8: caller MXCSR, 12: caller x87 CW, 16: scratch */
    .cfi_adjust_cfa_offset 24
    movq    %rcx, (%rsp)
    movq    %rdi, %rax              /* fn */
    movq    %rsi, %rdi              /* a */
    movq    %rdx, %rsi              /* b */
    movq    %rcx, %rdx              /* seed, until the call */
    movq    %rax, %r8
    stmxcsr 8(%rsp)
    fnstcw  12(%rsp)

    /* Rounding modes from the seed: MXCSR bits 13-14, x87 CW bits 10-11. */
    movl    8(%rsp), %eax
    andl    $~0x6000, %eax
    movl    %edx, %ecx
    andl    $3, %ecx
    shll    $13, %ecx
    orl     %ecx, %eax
    movl    %eax, 16(%rsp)
    ldmxcsr 16(%rsp)
    movzwl  12(%rsp), %eax
    andl    $~0x0c00, %eax
    movl    %edx, %ecx
    shrl    $2, %ecx
    andl    $3, %ecx
    shll    $10, %ecx
    orl     %ecx, %eax
    movw    %ax, 16(%rsp)
    fldcw   16(%rsp)

    seed_reg 0x1111111111111111, %rbx
    seed_reg 0x2222222222222222, %rbp
    seed_reg 0x3333333333333333, %r12
    seed_reg 0x4444444444444444, %r13
    seed_reg 0x5555555555555555, %r14
    seed_reg 0x6666666666666666, %r15

    callq   *%r8

    xorl    %eax, %eax
    movq    (%rsp), %rsi
    check_reg 0x1111111111111111, %rbx, 1
    check_reg 0x2222222222222222, %rbp, 2
    check_reg 0x3333333333333333, %r12, 4
    check_reg 0x4444444444444444, %r13, 8
    check_reg 0x5555555555555555, %r14, 16
    check_reg 0x6666666666666666, %r15, 32
    stmxcsr 16(%rsp)
    movl    16(%rsp), %edx
    shrl    $13, %edx
    andl    $3, %edx
    movl    %esi, %ecx
    andl    $3, %ecx
    cmpl    %ecx, %edx
    je      1f
    orl     $64, %eax
1:  fnstcw  16(%rsp)
    movzwl  16(%rsp), %edx
    shrl    $10, %edx
    andl    $3, %edx
    movl    %esi, %ecx
    shrl    $2, %ecx
    andl    $3, %ecx
    cmpl    %ecx, %edx
    je      1f
    orl     $128, %eax
1:
    ldmxcsr 8(%rsp)
    fldcw   12(%rsp)
    addq    $24, %rsp
    .cfi_adjust_cfa_offset -24
    pop_cfi %r15
    pop_cfi %r14
    pop_cfi %r13
    pop_cfi %r12
    pop_cfi %rbx
    pop_cfi %rbp
    ret
    .cfi_endproc
    .size   st_test_regs_call, .-st_test_regs_call

    .section .note.GNU-stack, "", @progbits
