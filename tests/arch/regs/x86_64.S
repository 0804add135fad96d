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
    .text
    .globl  st_test_regs_call
    .type   st_test_regs_call, @function
    .p2align 4
st_test_regs_call:
    .cfi_startproc
    pushq   %rbp
    .cfi_adjust_cfa_offset 8
    pushq   %rbx
    .cfi_adjust_cfa_offset 8
    pushq   %r12
    .cfi_adjust_cfa_offset 8
    pushq   %r13
    .cfi_adjust_cfa_offset 8
    pushq   %r14
    .cfi_adjust_cfa_offset 8
    pushq   %r15
    .cfi_adjust_cfa_offset 8
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

    movabsq $0x1111111111111111, %rbx
    xorq    %rdx, %rbx
    movabsq $0x2222222222222222, %rbp
    xorq    %rdx, %rbp
    movabsq $0x3333333333333333, %r12
    xorq    %rdx, %r12
    movabsq $0x4444444444444444, %r13
    xorq    %rdx, %r13
    movabsq $0x5555555555555555, %r14
    xorq    %rdx, %r14
    movabsq $0x6666666666666666, %r15
    xorq    %rdx, %r15

    callq   *%r8

    xorl    %eax, %eax
    movq    (%rsp), %rsi
    movabsq $0x1111111111111111, %rdx
    xorq    %rsi, %rdx
    cmpq    %rdx, %rbx
    je      1f
    orl     $1, %eax
1:  movabsq $0x2222222222222222, %rdx
    xorq    %rsi, %rdx
    cmpq    %rdx, %rbp
    je      1f
    orl     $2, %eax
1:  movabsq $0x3333333333333333, %rdx
    xorq    %rsi, %rdx
    cmpq    %rdx, %r12
    je      1f
    orl     $4, %eax
1:  movabsq $0x4444444444444444, %rdx
    xorq    %rsi, %rdx
    cmpq    %rdx, %r13
    je      1f
    orl     $8, %eax
1:  movabsq $0x5555555555555555, %rdx
    xorq    %rsi, %rdx
    cmpq    %rdx, %r14
    je      1f
    orl     $16, %eax
1:  movabsq $0x6666666666666666, %rdx
    xorq    %rsi, %rdx
    cmpq    %rdx, %r15
    je      1f
    orl     $32, %eax
1:  stmxcsr 16(%rsp)
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
    popq    %r15
    .cfi_adjust_cfa_offset -8
    popq    %r14
    .cfi_adjust_cfa_offset -8
    popq    %r13
    .cfi_adjust_cfa_offset -8
    popq    %r12
    .cfi_adjust_cfa_offset -8
    popq    %rbx
    .cfi_adjust_cfa_offset -8
    popq    %rbp
    .cfi_adjust_cfa_offset -8
    ret
    .cfi_endproc
    .size   st_test_regs_call, .-st_test_regs_call

    .section .note.GNU-stack, "", @progbits
