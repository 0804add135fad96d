/*
 * Context switch for x86 (i386), System V i386 ABI (Linux, cdecl).
 *
 * Callee-saved state per the ABI: ebx, esi, edi, ebp, esp, plus the control
 * bits of the x87 control word and of MXCSR. Arguments arrive on the stack;
 * eax, ecx and edx are scratch. gcc assumes esp is 16-byte aligned at every
 * call instruction (so esp % 16 == 12 on entry to a function).
 *
 * A suspended coroutine keeps its state on its own stack, in this order from
 * its saved stack pointer upwards:
 *
 *   sp+0   MXCSR (4 bytes)
 *   sp+4   x87 control word (2 bytes), padding
 *   sp+8   edi
 *   sp+12  esi
 *   sp+16  ebx
 *   sp+20  ebp
 *   sp+24  return address
 *
 * struct st__ctx is just the saved stack pointer.
 *
 * stmxcsr/ldmxcsr need SSE; the switch uses them unconditionally, as the
 * ABI's rule for MXCSR presumes (a CPU without SSE would fault with SIGILL
 * at the first switch rather than run with a wrong rounding mode).
 */

    .text

/* void st__ctx_switch(struct st__ctx *from, const struct st__ctx *to) */
    .globl  st__ctx_switch
    .hidden st__ctx_switch
    .type   st__ctx_switch, @function
    .p2align 4
st__ctx_switch:
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
    subl    $8, %esp
    .cfi_adjust_cfa_offset 8
    stmxcsr (%esp)
    fnstcw  4(%esp)
    movl    28(%esp), %eax          /* from */
    movl    32(%esp), %ecx          /* to */
    movl    %esp, (%eax)

    movl    (%ecx), %esp
    ldmxcsr (%esp)
    fldcw   4(%esp)
    addl    $8, %esp
    .cfi_adjust_cfa_offset -8
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
    .size   st__ctx_switch, .-st__ctx_switch

/*
 * void st__ctx_make(struct st__ctx *ctx, void *stack_top,
 *                   void (*entry)(void *), void *arg)
 *
 * Builds a frame that st__ctx_switch pops into st__ctx_entry with edi =
 * entry and esi = arg; ebx and ebp are 0, the control registers start as the
 * creator's. With top = stack_top rounded down to 16, the frame starts at
 * top - 40, so after the final `ret` esp = top - 12 and the trampoline's
 * single push of arg leaves esp 16-byte aligned at its call.
 */
    .globl  st__ctx_make
    .hidden st__ctx_make
    .type   st__ctx_make, @function
    .p2align 4
st__ctx_make:
    .cfi_startproc
    movl    8(%esp), %eax           /* stack_top */
    andl    $-16, %eax
    subl    $40, %eax
    stmxcsr (%eax)
    fnstcw  4(%eax)
    movw    $0, 6(%eax)
    movl    12(%esp), %ecx          /* entry -> edi */
    movl    %ecx, 8(%eax)
    movl    16(%esp), %ecx          /* arg -> esi */
    movl    %ecx, 12(%eax)
    movl    $0, 16(%eax)            /* ebx */
    movl    $0, 20(%eax)            /* ebp */
    call    1f                      /* position-independent trampoline address */
1:  .cfi_adjust_cfa_offset 4
    popl    %ecx
    .cfi_adjust_cfa_offset -4
    leal    (st__ctx_entry - 1b)(%ecx), %ecx
    movl    %ecx, 24(%eax)
    movl    $0, 28(%eax)
    movl    $0, 32(%eax)
    movl    $0, 36(%eax)
    movl    4(%esp), %ecx           /* ctx */
    movl    %eax, (%ecx)
    ret
    .cfi_endproc
    .size   st__ctx_make, .-st__ctx_make

/*
 * First frame of every coroutine. The return address is undefined here, so
 * debuggers and unwinders stop cleanly at this frame; ebp is 0, which ends
 * frame-pointer chains too.
 */
    .type   st__ctx_entry, @function
    .p2align 4
st__ctx_entry:
    .cfi_startproc
    .cfi_undefined eip
    pushl   %esi
    call    *%edi
    ud2
    .cfi_endproc
    .size   st__ctx_entry, .-st__ctx_entry

    .section .note.GNU-stack, "", @progbits
