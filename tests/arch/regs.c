/*
 * Every callee-saved register of the CPU's ABI survives a context switch.
 *
 * The C tests in tests/api/context.c depend on which registers the compiler
 * happens to use. These do not: st_test_regs_call(), written in assembly for
 * each CPU (regs/<cpu_family>.S), loads every callee-saved register
 * (integer, floating-point, vector and preserved control state) with values
 * derived from a seed, calls a function that switches to another context
 * doing the same with another seed, and returns a mask of the registers that
 * did not come back.
 *
 * The raw test calls the library's context switch directly from that
 * assembly, with no C frame in between whose own register saves could hide
 * a register the switch forgets. The others go through st_thread_yield()
 * and st_usleep(), as programs do.
 */
#include "st_test.h"

enum { COROUTINES = 3, ROUNDS = 50, RAW_STACK = 64 * 1024 };

/* Implemented per CPU in tests/arch/regs/<cpu_family>.S. */
unsigned long st_test_regs_call(void (*fn)(void *, const void *), void *a, const void *b,
                                unsigned long seed);

/*
 * st's internal context interface (src/context.h): a context is one saved
 * stack pointer. The test links the static library, where these are visible.
 */
struct raw_ctx {
    void *sp;
};
void st__ctx_make(struct raw_ctx *ctx, void *stack_top, void (*entry)(void *arg), void *arg);
void st__ctx_switch(void *from, const void *to);

ST_TEST_SUITE(arch);

/* ---- raw switch between two contexts --------------------------------------- */

static struct raw_ctx raw_main;
static struct raw_ctx raw_other;
static unsigned long raw_other_bad;

static void raw_entry(void *arg)
{
    (void)arg;
    for (unsigned long round = 0;; round++) {
        raw_other_bad |=
            st_test_regs_call(st__ctx_switch, &raw_other, &raw_main, 0x7a7a0000UL + round);
    }
}

Test(arch, the_raw_context_switch_keeps_callee_saved_registers)
{
    char *stack = malloc(RAW_STACK);
    unsigned long bad = 0;

    st_test_init();
    cr_assert_not_null(stack);
    raw_other_bad = 0;
    st__ctx_make(&raw_other, stack + RAW_STACK, raw_entry, NULL);
    for (unsigned long round = 0; round < ROUNDS; round++) {
        bad |= st_test_regs_call(st__ctx_switch, &raw_main, &raw_other, 0x3c3c0000UL + round);
    }
    free(stack); /* the other context stays suspended for good */
    cr_assert_eq(bad, 0, "registers not restored in the main context, mask %#lx", bad);
    cr_assert_eq(raw_other_bad, 0, "registers not restored in the other context, mask %#lx",
                 raw_other_bad);
}

/* ---- through the scheduler -------------------------------------------------- */

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
        job->bad = st_test_regs_call(job->fn, NULL, NULL, job->seed + round * 0x1001UL);
    }
    return NULL;
}

static void run_jobs(void (*fn)(void *, const void *))
{
    struct regs_job jobs[COROUTINES];
    st_thread_t threads[COROUTINES];

    st_test_init();
    for (int i = 0; i < COROUTINES; i++) {
        jobs[i].seed = 0x5a5a5a5aUL * (unsigned long)(i + 1) + (unsigned long)i;
        jobs[i].fn = fn;
        jobs[i].bad = 0;
        threads[i] = st_thread_create(regs_main, &jobs[i], 1, 0);
        cr_assert_not_null(threads[i]);
    }
    /* The primordial coroutine takes part too: its stack is the process's. */
    unsigned long own = st_test_regs_call(fn, NULL, NULL, 0xc3c3c3c3UL);
    for (int i = 0; i < COROUTINES; i++) {
        cr_assert_eq(st_thread_join(threads[i], NULL), 0);
        cr_expect_eq(jobs[i].bad, 0, "coroutine %d: registers not restored, mask %#lx", i,
                     jobs[i].bad);
    }
    cr_expect_eq(own, 0, "primordial: registers not restored, mask %#lx", own);
}

Test(arch, st_thread_yield_keeps_callee_saved_registers)
{
    run_jobs(yield_fn);
}

Test(arch, st_usleep_keeps_callee_saved_registers)
{
    run_jobs(sleep_fn);
}
