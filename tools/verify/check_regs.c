/*
 * verify: every callee-saved register of the ABI survives a switch.
 *
 * The C checks in check_context.c depend on which registers the compiler
 * happens to use. These do not: vf_regs_call(), written in assembly for each
 * CPU (regs/<cpu_family>.S), loads every callee-saved register (integer,
 * floating-point, vector and preserved control state) with values derived
 * from a seed, calls a function that switches to another context doing the
 * same with another seed, and returns a mask of the registers that did not
 * come back.
 *
 * The raw check calls the library's context switch directly from that
 * assembly, with no C frame in between whose own register saves could hide
 * a register the switch forgets. The scheduler checks go through
 * st_thread_yield() and st_usleep(), as programs do.
 */
#include "verify.h"

#include <stdlib.h>

enum { COROUTINES = 3, ROUNDS = 50, RAW_STACK = 64 * 1024 };

/* Implemented per CPU in tools/verify/regs/<cpu_family>.S. */
unsigned long vf_regs_call(void (*fn)(void *, const void *), void *a, const void *b,
                           unsigned long seed);

/*
 * st's internal context interface (src/context.h): a context is one saved
 * stack pointer. verify links the static library, where these are visible.
 */
struct vf_ctx {
    void *sp;
};
void st__ctx_make(struct vf_ctx *ctx, void *stack_top, void (*entry)(void *arg), void *arg);
void st__ctx_switch(void *from, const void *to);

/* ---- raw switch between two contexts ------------------------------------ */

static struct vf_ctx raw_main;
static struct vf_ctx raw_other;
static unsigned long raw_other_bad;

static void raw_entry(void *arg)
{
    (void)arg;
    for (unsigned long round = 0;; round++) {
        raw_other_bad |= vf_regs_call(st__ctx_switch, &raw_other, &raw_main, 0x7a7a0000UL + round);
    }
}

static int check_abi_registers_raw(void)
{
    char *stack = malloc(RAW_STACK);
    VF_CHECK(stack != NULL);
    raw_other_bad = 0;
    st__ctx_make(&raw_other, stack + RAW_STACK, raw_entry, NULL);
    unsigned long bad = 0;
    for (unsigned long round = 0; round < ROUNDS; round++) {
        bad |= vf_regs_call(st__ctx_switch, &raw_main, &raw_other, 0x3c3c0000UL + round);
    }
    free(stack); /* the other context stays suspended for good */
    if (bad != 0 || raw_other_bad != 0) {
        return vf_fail("registers not restored by the switch, mask %#lx / %#lx", bad, raw_other_bad);
    }
    return 0;
}

/* ---- through the scheduler ---------------------------------------------- */

static void yield_fn(void *a, const void *b)
{
    (void)a;
    (void)b;
    st_thread_yield();
}

static void sleep_fn(void *a, const void *b)
{
    (void)a;
    (void)b;
    (void)st_usleep(0);
}

struct regs_job {
    unsigned long seed;
    void (*fn)(void *, const void *);
    unsigned long bad;
};

static void *regs_main(void *arg)
{
    struct regs_job *job = arg;
    for (unsigned long round = 0; round < ROUNDS && job->bad == 0; round++) {
        job->bad = vf_regs_call(job->fn, NULL, NULL, job->seed + round * 0x1001UL);
    }
    return NULL;
}

static int run_jobs(void (*fn)(void *, const void *))
{
    struct regs_job jobs[COROUTINES];
    st_thread_t threads[COROUTINES];
    for (int i = 0; i < COROUTINES; i++) {
        jobs[i].seed = 0x5a5a5a5aUL * (unsigned long)(i + 1) + (unsigned long)i;
        jobs[i].fn = fn;
        jobs[i].bad = 0;
        threads[i] = vf_spawn(regs_main, &jobs[i]);
        VF_CHECK(threads[i] != NULL);
    }
    /* The primordial coroutine takes part too: its stack is the process's. */
    unsigned long own = vf_regs_call(fn, NULL, NULL, 0xc3c3c3c3UL);
    for (int i = 0; i < COROUTINES; i++) {
        VF_CHECK(vf_join_ok(threads[i]) == 0);
        if (jobs[i].bad != 0) {
            return vf_fail("coroutine %d: registers not restored, mask %#lx", i, jobs[i].bad);
        }
    }
    if (own != 0) {
        return vf_fail("primordial: registers not restored, mask %#lx", own);
    }
    return 0;
}

static int check_abi_registers_yield(void)
{
    return run_jobs(yield_fn);
}

static int check_abi_registers_sleep(void)
{
    return run_jobs(sleep_fn);
}

const struct vf_check vf_checks_regs[] = {
    {"abi_registers_raw", check_abi_registers_raw, VF_AFTER_INIT},
    {"abi_registers_yield", check_abi_registers_yield, VF_AFTER_INIT},
    {"abi_registers_sleep", check_abi_registers_sleep, VF_AFTER_INIT},
    {NULL, NULL, VF_AFTER_INIT},
};
