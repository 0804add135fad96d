/*
 * Context switch for riscv64, LP64D psABI (Linux).
 *
 * Callee-saved state per the psABI: sp, s0-s11 (x8, x9, x18-x27; s0 is the
 * frame pointer) and fs0-fs11 (f8, f9, f18-f27), saved as full 64-bit
 * values. The return address (ra) is saved too, since the switch returns
 * through it.
 *
 * Not saved: fcsr (frm rounding mode and fflags). The psABI does not make it
 * callee-saved; it gives fcsr thread storage duration (C11 7.6), so it is
 * neither preserved across calls nor part of a context, and coroutines on a
 * thread share it like any function calls on that thread do.
 *
 * A suspended coroutine keeps them on its own stack, in this order from its
 * saved stack pointer upwards (208 bytes, keeping sp 16-byte aligned):
 *
 *   sp+0    ra
 *   sp+8    s0        sp+56   s6
 *   sp+16   s1        sp+64   s7
 *   sp+24   s2        sp+72   s8
 *   sp+32   s3        sp+80   s9
 *   sp+40   s4        sp+88   s10
 *   sp+48   s5        sp+96   s11
 *   sp+104  fs0 ... sp+192 fs11 (8 bytes each, in order)
 *   sp+200  padding
 *
 * struct st__ctx is just the saved stack pointer.
 */

    .text

/* void st__ctx_switch(struct st__ctx *from, const struct st__ctx *to) */
    .globl  st__ctx_switch
    .hidden st__ctx_switch
    .type   st__ctx_switch, %function
    .p2align 2
st__ctx_switch:
    .cfi_startproc
    addi    sp, sp, -208
    .cfi_adjust_cfa_offset 208
    sd      ra, 0(sp)
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
    .cfi_rel_offset ra, 0
    .cfi_rel_offset s0, 8
    .cfi_rel_offset s1, 16
    .cfi_rel_offset s2, 24
    .cfi_rel_offset s3, 32
    .cfi_rel_offset s4, 40
    .cfi_rel_offset s5, 48
    .cfi_rel_offset s6, 56
    .cfi_rel_offset s7, 64
    .cfi_rel_offset s8, 72
    .cfi_rel_offset s9, 80
    .cfi_rel_offset s10, 88
    .cfi_rel_offset s11, 96
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
    .cfi_rel_offset fs0, 104
    .cfi_rel_offset fs1, 112
    .cfi_rel_offset fs2, 120
    .cfi_rel_offset fs3, 128
    .cfi_rel_offset fs4, 136
    .cfi_rel_offset fs5, 144
    .cfi_rel_offset fs6, 152
    .cfi_rel_offset fs7, 160
    .cfi_rel_offset fs8, 168
    .cfi_rel_offset fs9, 176
    .cfi_rel_offset fs10, 184
    .cfi_rel_offset fs11, 192
    sd      sp, 0(a0)

    /* From here on the frame is the resumed context's, same layout. */
    ld      sp, 0(a1)
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
    ld      ra, 0(sp)
    addi    sp, sp, 208
    .cfi_adjust_cfa_offset -208
    ret
    .cfi_endproc
    .size   st__ctx_switch, .-st__ctx_switch

/*
 * void st__ctx_make(struct st__ctx *ctx, void *stack_top,
 *                   void (*entry)(void *), void *arg)
 *
 * Builds a frame that st__ctx_switch pops into st__ctx_entry with s1 =
 * entry and s2 = arg; every other saved register is 0 (s0, the frame
 * pointer, included). After the switch's `ret`, sp = stack_top rounded
 * down to 16, the alignment the psABI requires at a call. RISC-V reserves
 * no area above the callee's sp, so nothing else is needed.
 */
    .globl  st__ctx_make
    .hidden st__ctx_make
    .type   st__ctx_make, %function
    .p2align 2
st__ctx_make:
    .cfi_startproc
    andi    a1, a1, -16
    addi    t0, a1, -208
    lla     t1, st__ctx_entry
    sd      t1, 0(t0)
    sd      zero, 8(t0)
    sd      a2, 16(t0)
    sd      a3, 24(t0)
    addi    t1, t0, 32
1:  sd      zero, 0(t1)             /* s3-s11, fs0-fs11, padding */
    addi    t1, t1, 8
    bne     t1, a1, 1b
    sd      t0, 0(a0)
    ret
    .cfi_endproc
    .size   st__ctx_make, .-st__ctx_make

/*
 * First frame of every coroutine. The return address is undefined here, so
 * debuggers and unwinders stop cleanly at this frame; s0 (fp) is 0, which
 * ends frame-pointer chains too.
 */
    .type   st__ctx_entry, %function
    .p2align 2
st__ctx_entry:
    .cfi_startproc
    .cfi_undefined ra
    mv      a0, s2
    jalr    s1
    unimp
    .cfi_endproc
    .size   st__ctx_entry, .-st__ctx_entry

    .section .note.GNU-stack, "", %progbits
