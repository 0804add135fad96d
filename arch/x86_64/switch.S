/*
 * Context switch for x86_64, System V ABI (Linux).
 *
 * Callee-saved state per the ABI: rbx, rbp, r12-r15, rsp, plus the control
 * bits of MXCSR and the x87 control word. A suspended coroutine keeps them
 * on its own stack, in this order from its saved stack pointer upwards:
 *
 *   sp+0   MXCSR (4 bytes), x87 control word (2 bytes), padding
 *   sp+8   r15
 *   sp+16  r14
 *   sp+24  r13
 *   sp+32  r12
 *   sp+40  rbx
 *   sp+48  rbp
 *   sp+56  return address
 *
 * struct st__ctx is just the saved stack pointer.
 */

    .text

/* void st__ctx_switch(struct st__ctx *from, const struct st__ctx *to) */
    .globl  st__ctx_switch
    .hidden st__ctx_switch
    .type   st__ctx_switch, @function
    .p2align 4
st__ctx_switch:
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
    subq    $8, %rsp
    .cfi_adjust_cfa_offset 8
    stmxcsr (%rsp)
    fnstcw  4(%rsp)
    movq    %rsp, (%rdi)

    movq    (%rsi), %rsp
    ldmxcsr (%rsp)
    fldcw   4(%rsp)
    addq    $8, %rsp
    .cfi_adjust_cfa_offset -8
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
    .size   st__ctx_switch, .-st__ctx_switch

/*
 * void st__ctx_make(struct st__ctx *ctx, void *stack_top,
 *                   void (*entry)(void *), void *arg)
 *
 * Builds a frame that st__ctx_switch pops into st__ctx_entry with r12 =
 * entry and r13 = arg. The control registers start as the creator's.
 * After the final `ret`, rsp = top - 16, 16-byte aligned, as the ABI wants
 * before the trampoline's call.
 */
    .globl  st__ctx_make
    .hidden st__ctx_make
    .type   st__ctx_make, @function
    .p2align 4
st__ctx_make:
    .cfi_startproc
    andq    $-16, %rsi
    leaq    -80(%rsi), %rax
    stmxcsr (%rax)
    fnstcw  4(%rax)
    movq    $0, 8(%rax)
    movq    $0, 16(%rax)
    movq    %rcx, 24(%rax)
    movq    %rdx, 32(%rax)
    movq    $0, 40(%rax)
    movq    $0, 48(%rax)
    leaq    st__ctx_entry(%rip), %rdx
    movq    %rdx, 56(%rax)
    movq    $0, 64(%rax)
    movq    %rax, (%rdi)
    ret
    .cfi_endproc
    .size   st__ctx_make, .-st__ctx_make

/*
 * First frame of every coroutine. The return address is undefined here, so
 * debuggers and unwinders stop cleanly at this frame; rbp is 0, which ends
 * frame-pointer chains too.
 */
    .type   st__ctx_entry, @function
    .p2align 4
st__ctx_entry:
    .cfi_startproc
    .cfi_undefined rip
    movq    %r13, %rdi
    callq   *%r12
    ud2
    .cfi_endproc
    .size   st__ctx_entry, .-st__ctx_entry

    .section .note.GNU-stack, "", @progbits
