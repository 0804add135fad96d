/*
 * The one interface between the scheduler and the per-CPU assembly in
 * arch/<cpu_family>/switch.S.
 *
 * A context is the saved stack pointer of a suspended coroutine: the switch
 * pushes the ABI's callee-saved registers (and preserved control registers)
 * onto the suspended coroutine's own stack, so the context itself is one word.
 */
#ifndef ST__CONTEXT_H
#define ST__CONTEXT_H

struct st__ctx {
    void *sp;
};

/*
 * Prepare `ctx` so that the first st__ctx_switch() into it calls
 * entry(arg) on the stack that ends (exclusive) at `stack_top`. The frame
 * below `entry` is an assembly trampoline that marks the outermost frame for
 * unwinders; `entry` must never return.
 */
void st__ctx_make(struct st__ctx *ctx, void *stack_top, void (*entry)(void *arg), void *arg);

/* Save the running coroutine's registers into `from` and resume `to`. */
void st__ctx_switch(struct st__ctx *from, const struct st__ctx *to);

#endif /* ST__CONTEXT_H */
