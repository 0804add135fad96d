/*
 * The register check (tests/arch) for x86 (i386), System V i386 ABI (cdecl).
 *
 * unsigned long st_test_regs_call(void (*fn)(void *, const void *), void *a,
 *                            const void *b, unsigned long seed)
 *
 * Loads every callee-saved register with a value derived from `seed` (and
 * the MXCSR / x87 rounding modes with seed-dependent values), calls fn(a, b),
 * which switches to other coroutines doing the same with other seeds, and
 * returns a mask of what did not come back:
 *
 *   bit 0 ebx, 1 esi, 2 edi, 3 ebp, 4 MXCSR rounding, 5 x87 rounding.
 *
 * The rounding modes come from r = seed ^ (seed >> 16): MXCSR RC (bits
 * 13-14) = r & 3, x87 RC (bits 10-11) = (r >> 2) & 3, so that contexts whose
 * seeds differ only in the upper half still differ here. The caller's
 * registers and control words are restored before returning.
 */
    .text
    .globl  st_test_regs_call
    .type   st_test_regs_call, @function
    .p2align 4
st_test_regs_call:
    .cfi_startproc
    pushl   %ebp
    .cfi_adjust_cfa_offset 4
    .cfi_rel_offset ebp, 0
    pushl   %ebx
    .cfi_adjust_cfa_offset 4
    .cfi_rel_offset ebx, 0
    pushl   %esi
    .cfi_adjust_cfa_offset 4
    .cfi_rel_offset esi, 0
    pushl   %edi
    .cfi_adjust_cfa_offset 4
    .cfi_rel_offset edi, 0
    /*
     * Locals (esp is 16-byte aligned below them, as for any call):
     *   0: a (outgoing arg 1)   4: b (outgoing arg 2)   8: seed
     *  12: caller MXCSR        16: caller x87 CW       20: scratch  24: fn
     * The incoming arguments are at 48 (fn), 52 (a), 56 (b), 60 (seed).
     */
    subl    $28, %esp
    .cfi_adjust_cfa_offset 28
    movl    48(%esp), %eax
    movl    %eax, 24(%esp)
    movl    52(%esp), %eax
    movl    %eax, 0(%esp)
    movl    56(%esp), %eax
    movl    %eax, 4(%esp)
    movl    60(%esp), %edx
    movl    %edx, 8(%esp)
    stmxcsr 12(%esp)
    fnstcw  16(%esp)

    movl    %edx, %ecx              /* r = seed ^ (seed >> 16) in ecx */
    shrl    $16, %ecx
    xorl    %edx, %ecx

    movl    12(%esp), %eax
    andl    $~0x6000, %eax
    movl    %ecx, %ebx
    andl    $3, %ebx
    shll    $13, %ebx
    orl     %ebx, %eax
    movl    %eax, 20(%esp)
    ldmxcsr 20(%esp)
    movzwl  16(%esp), %eax
    andl    $~0x0c00, %eax
    movl    %ecx, %ebx
    shrl    $2, %ebx
    andl    $3, %ebx
    shll    $10, %ebx
    orl     %ebx, %eax
    movw    %ax, 20(%esp)
    fldcw   20(%esp)

    movl    $0x11111111, %ebx
    xorl    %edx, %ebx
    movl    $0x22222222, %esi
    xorl    %edx, %esi
    movl    $0x44444444, %edi
    xorl    %edx, %edi
    movl    $0x88888888, %ebp
    xorl    %edx, %ebp

    call    *24(%esp)

    xorl    %eax, %eax
    movl    8(%esp), %ecx           /* seed */
    movl    $0x11111111, %edx
    xorl    %ecx, %edx
    cmpl    %edx, %ebx
    je      1f
    orl     $1, %eax
1:  movl    $0x22222222, %edx
    xorl    %ecx, %edx
    cmpl    %edx, %esi
    je      1f
    orl     $2, %eax
1:  movl    $0x44444444, %edx
    xorl    %ecx, %edx
    cmpl    %edx, %edi
    je      1f
    orl     $4, %eax
1:  movl    $0x88888888, %edx
    xorl    %ecx, %edx
    cmpl    %edx, %ebp
    je      1f
    orl     $8, %eax
1:  movl    %ecx, %edx              /* r = seed ^ (seed >> 16) in ecx */
    shrl    $16, %edx
    xorl    %edx, %ecx
    stmxcsr 20(%esp)
    movl    20(%esp), %edx
    shrl    $13, %edx
    xorl    %ecx, %edx
    testl   $3, %edx
    je      1f
    orl     $16, %eax
1:  fnstcw  20(%esp)
    movzwl  20(%esp), %edx
    shrl    $8, %edx                /* RC now at bits 2-3, like r's */
    xorl    %ecx, %edx
    testl   $0x0c, %edx
    je      1f
    orl     $32, %eax
1:
    ldmxcsr 12(%esp)
    fldcw   16(%esp)
    addl    $28, %esp
    .cfi_adjust_cfa_offset -28
    popl    %edi
    .cfi_adjust_cfa_offset -4
    .cfi_restore edi
    popl    %esi
    .cfi_adjust_cfa_offset -4
    .cfi_restore esi
    popl    %ebx
    .cfi_adjust_cfa_offset -4
    .cfi_restore ebx
    popl    %ebp
    .cfi_adjust_cfa_offset -4
    .cfi_restore ebp
    ret
    .cfi_endproc
    .size   st_test_regs_call, .-st_test_regs_call

    .section .note.GNU-stack, "", @progbits
