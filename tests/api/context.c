/*
 * Context switching keeps every callee-saved register and the stack.
 *
 * Each worker keeps twenty floating-point (or integer) values live across a
 * call that switches to another coroutine, in a serial chain the compiler
 * cannot vectorise. Twenty is more than any supported ABI has callee-saved
 * registers of either kind (ppc64 has the most: eighteen), so the compiler
 * must hold values in every one of them. Several workers with different
 * seeds run interleaved; a register that one switch fails to restore leaks
 * another worker's value and the result differs from the same computation
 * run straight through without switching. tests/arch checks the same from
 * assembly, register by register.
 */
#include "st_test.h"

#include <fenv.h>

ST_TEST_SUITE(context);

/*
 * ABIs whose floating-point control state (the rounding mode among it) is
 * callee-saved, so that every coroutine keeps its own: x86_64 and i386 (MXCSR
 * and x87 control word), AArch64 (FPCR), ARM hard-float (FPSCR).
 */
#if (defined(__x86_64__) || defined(__i386__) || defined(__aarch64__) ||                          \
     (defined(__arm__) && defined(__ARM_PCS_VFP))) &&                                             \
    defined(FE_UPWARD) && defined(FE_DOWNWARD) && defined(FE_TONEAREST)
#define ST_TEST_ABI_KEEPS_FP_CONTROL 1
#endif

enum { WORKERS = 4, ROUNDS = 3000 };

typedef void (*between_fn)(void);

static void no_switch(void)
{
}

static void sleep_zero(void)
{
    (void)st_usleep(0);
}

/* ---- floating point ------------------------------------------------------ */

/* Values stay multiples of 1/4 below 2^20, so every sum is exact. */
static const double FP_MOD = 1048576.0;

static inline double wrap(double v)
{
    if (v >= FP_MOD) {
        v -= FP_MOD;
    }
    if (v >= FP_MOD) {
        v -= FP_MOD;
    }
    return v;
}

static uint64_t fold_fp(uint64_t h, double v)
{
    return h * 1099511628211U + (uint64_t)(v * 4.0);
}

__attribute__((noinline)) static uint64_t compute_fp(unsigned seed, between_fn between)
{
    double d0 = wrap(seed * 1.25);
    double d1 = wrap(seed * 2.5);
    double d2 = wrap(seed * 3.75);
    double d3 = 4.25;
    double d4 = 5.5;
    double d5 = 6.75;
    double d6 = 7.0;
    double d7 = 8.25;
    double d8 = 9.5;
    double d9 = 10.75;
    double d10 = 11.0;
    double d11 = 12.25;
    double d12 = 13.5;
    double d13 = 14.75;
    double d14 = 15.0;
    double d15 = 16.25;
    double d16 = 17.5;
    double d17 = 18.75;
    double d18 = 19.0;
    double d19 = wrap(seed * 0.75);
    uint64_t h = 0;

    for (int r = 0; r < ROUNDS; r++) {
        between();
        d0 = wrap(d0 + d19 + 0.25);
        d1 = wrap(d1 + d0 + 1.5);
        d2 = wrap(d2 + d1 + 2.75);
        d3 = wrap(d3 + d2 + 3.0);
        d4 = wrap(d4 + d3 + 4.25);
        d5 = wrap(d5 + d4 + 5.5);
        d6 = wrap(d6 + d5 + 6.75);
        d7 = wrap(d7 + d6 + 7.0);
        d8 = wrap(d8 + d7 + 8.25);
        d9 = wrap(d9 + d8 + 9.5);
        d10 = wrap(d10 + d9 + 10.75);
        d11 = wrap(d11 + d10 + 11.0);
        d12 = wrap(d12 + d11 + 12.25);
        d13 = wrap(d13 + d12 + 13.5);
        d14 = wrap(d14 + d13 + 14.75);
        d15 = wrap(d15 + d14 + 15.0);
        d16 = wrap(d16 + d15 + 16.25);
        d17 = wrap(d17 + d16 + 17.5);
        d18 = wrap(d18 + d17 + 18.75);
        d19 = wrap(d19 + d18 + 19.0);
    }
    const double all[] = {d0,  d1,  d2,  d3,  d4,  d5,  d6,  d7,  d8,  d9,
                          d10, d11, d12, d13, d14, d15, d16, d17, d18, d19};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        h = fold_fp(h, all[i]);
    }
    return h;
}

/* ---- integers -------------------------------------------------------------- */

__attribute__((noinline)) static unsigned long compute_int(unsigned seed, between_fn between)
{
    unsigned long x0 = seed;
    unsigned long x1 = seed * 3U + 1;
    unsigned long x2 = seed * 5U + 2;
    unsigned long x3 = 3;
    unsigned long x4 = 4;
    unsigned long x5 = 5;
    unsigned long x6 = 6;
    unsigned long x7 = 7;
    unsigned long x8 = 8;
    unsigned long x9 = 9;
    unsigned long x10 = 10;
    unsigned long x11 = 11;
    unsigned long x12 = 12;
    unsigned long x13 = 13;
    unsigned long x14 = 14;
    unsigned long x15 = 15;
    unsigned long x16 = 16;
    unsigned long x17 = 17;
    unsigned long x18 = 18;
    unsigned long x19 = seed ^ 0x5a5aUL;

    for (int r = 0; r < ROUNDS; r++) {
        between();
        x0 = x0 * 2654435761UL + (x19 >> 3) + 1;
        x1 = x1 * 40503UL + (x0 >> 5) + 2;
        x2 = x2 * 2246822519UL + (x1 >> 7) + 3;
        x3 = x3 * 3266489917UL + (x2 >> 3) + 4;
        x4 = x4 * 668265263UL + (x3 >> 5) + 5;
        x5 = x5 * 374761393UL + (x4 >> 7) + 6;
        x6 = x6 * 2654435761UL + (x5 >> 3) + 7;
        x7 = x7 * 40503UL + (x6 >> 5) + 8;
        x8 = x8 * 2246822519UL + (x7 >> 7) + 9;
        x9 = x9 * 3266489917UL + (x8 >> 3) + 10;
        x10 = x10 * 668265263UL + (x9 >> 5) + 11;
        x11 = x11 * 374761393UL + (x10 >> 7) + 12;
        x12 = x12 * 2654435761UL + (x11 >> 3) + 13;
        x13 = x13 * 40503UL + (x12 >> 5) + 14;
        x14 = x14 * 2246822519UL + (x13 >> 7) + 15;
        x15 = x15 * 3266489917UL + (x14 >> 3) + 16;
        x16 = x16 * 668265263UL + (x15 >> 5) + 17;
        x17 = x17 * 374761393UL + (x16 >> 7) + 18;
        x18 = x18 * 2654435761UL + (x17 >> 3) + 19;
        x19 = x19 * 40503UL + (x18 >> 5) + 20;
    }
    return x0 ^ (x1 << 1) ^ (x2 << 2) ^ (x3 << 3) ^ (x4 << 4) ^ (x5 << 5) ^ (x6 << 6) ^
           (x7 << 7) ^ (x8 << 8) ^ (x9 << 9) ^ (x10 << 10) ^ (x11 << 11) ^ (x12 << 12) ^
           (x13 << 13) ^ (x14 << 14) ^ (x15 << 15) ^ (x16 << 16) ^ (x17 << 17) ^ (x18 << 18) ^
           (x19 << 19);
}

/* ---- running workers interleaved ------------------------------------------ */

struct worker {
    uint64_t result;
    between_fn between;
    unsigned seed;
    int fp;
};

static uint64_t compute(const struct worker *w, between_fn between)
{
    return w->fp ? compute_fp(w->seed, between) : (uint64_t)compute_int(w->seed, between);
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;

    w->result = compute(w, w->between);
    return NULL;
}

static void run_workers(int fp)
{
    struct worker workers[WORKERS];
    st_thread_t threads[WORKERS] = {NULL};

    st_test_init();
    for (int i = 0; i < WORKERS; i++) {
        workers[i].result = 0;
        workers[i].between = (i % 2 == 0) ? st_thread_yield : sleep_zero;
        workers[i].seed = 1000U + 77U * (unsigned)i;
        workers[i].fp = fp;
        threads[i] = st_thread_create(worker_main, &workers[i], 1, 0);
        cr_assert_not_null(threads[i], "st_thread_create: %s", strerror(errno));
    }
    for (int i = 0; i < WORKERS; i++) {
        st_test_join(threads[i]);
    }
    for (int i = 0; i < WORKERS; i++) {
        uint64_t expected = compute(&workers[i], no_switch);
        cr_expect_eq(workers[i].result, expected,
                     "%s worker %d: result %#llx after switching, %#llx straight",
                     fp ? "floating-point" : "integer", i,
                     (unsigned long long)workers[i].result, (unsigned long long)expected);
    }
}

Test(context, floating_point_registers_survive_switches)
{
    run_workers(1);
}

Test(context, integer_registers_survive_switches)
{
    run_workers(0);
}

/* The primordial coroutine runs on the process stack: switch it too. */
Test(context, primordial_registers_survive_switches)
{
    st_test_init();
    for (int fp = 1; fp >= 0; fp--) {
        struct worker w = {0, st_thread_yield, 4242U, fp};
        struct worker other = {0, st_thread_yield, 99U, fp};
        st_thread_t t = st_thread_create(worker_main, &other, 1, 0);

        cr_assert_not_null(t);
        w.result = compute(&w, st_thread_yield);
        st_test_join(t);
        cr_expect_eq(w.result, compute(&w, no_switch), "primordial, fp %d", fp);
        cr_expect_eq(other.result, compute(&other, no_switch), "coroutine, fp %d", fp);
    }
}

/* ---- floating-point control state ------------------------------------------ */

#ifdef ST_TEST_ABI_KEEPS_FP_CONTROL

struct rounding {
    int mode;
    between_fn between;
    int changed_after; /* switches after which the mode was wrong, 0 if never */
};

static void *keep_rounding(void *arg)
{
    enum { SWITCHES = 50 };
    struct rounding *r = arg;

    cr_expect_eq(fesetround(r->mode), 0);
    for (int i = 0; i < SWITCHES; i++) {
        r->between();
        if (fegetround() != r->mode) {
            r->changed_after = i + 1;
            break;
        }
    }
    return NULL;
}

/* On ABIs where it is callee-saved, every coroutine keeps its own rounding mode. */
Test(context, each_coroutine_keeps_its_rounding_mode)
{
    struct rounding modes[] = {{FE_UPWARD, st_thread_yield, 0},
                               {FE_DOWNWARD, st_thread_yield, 0},
                               {FE_UPWARD, sleep_zero, 0}};
    enum { N = sizeof(modes) / sizeof(modes[0]) };
    st_thread_t t[N] = {NULL};

    st_test_init();
    cr_assert_eq(fegetround(), FE_TONEAREST);
    for (int i = 0; i < N; i++) {
        t[i] = st_test_spawn(keep_rounding, &modes[i]);
    }
    for (int i = 0; i < N; i++) {
        st_test_join(t[i]);
        cr_expect_eq(modes[i].changed_after, 0,
                     "coroutine %d: rounding mode %#x lost after %d switches", i,
                     (unsigned)modes[i].mode, modes[i].changed_after);
    }
    cr_assert_eq(fegetround(), FE_TONEAREST);
}

#endif

/* ---- deep recursion on small stacks ---------------------------------------- */

enum { FRAME_BYTES = 256, YIELD_EVERY = 16 };

struct deep {
    uintptr_t base;   /* address of a local at coroutine entry */
    size_t target;    /* how many bytes of stack to use */
    size_t reached;
    int depth;
    int corrupt;
    unsigned sum;
};

static unsigned char frame_byte(int depth, int i)
{
    return (unsigned char)((depth * 7 + i) & 0xff);
}

__attribute__((noinline)) static unsigned recurse(struct deep *d, int depth)
{
    volatile unsigned char frame[FRAME_BYTES];
    /*
     * The frame address, not a local's: with AddressSanitizer's
     * use-after-return detection locals live on a heap "fake stack".
     */
    uintptr_t here = (uintptr_t)__builtin_frame_address(0);
    size_t used = d->base > here ? d->base - here : here - d->base;
    unsigned sum = 0;

    for (int i = 0; i < FRAME_BYTES; i++) {
        frame[i] = frame_byte(depth, i);
    }
    if (depth % YIELD_EVERY == 0) {
        st_thread_yield();
    }
    if (used + FRAME_BYTES < d->target) {
        sum = recurse(d, depth + 1);
    } else {
        d->reached = used;
        d->depth = depth;
        st_thread_yield();
    }
    for (int i = 0; i < FRAME_BYTES; i++) {
        if (frame[i] != frame_byte(depth, i)) {
            d->corrupt++;
        }
    }
    return sum + frame[depth % FRAME_BYTES] + 1U;
}

static void *deep_main(void *arg)
{
    struct deep *d = arg;
    d->base = (uintptr_t)__builtin_frame_address(0);
    d->sum = recurse(d, 0);
    return NULL;
}

static unsigned expected_sum(int depth)
{
    unsigned sum = 0;
    for (int i = 0; i <= depth; i++) {
        sum += frame_byte(i, i % FRAME_BYTES) + 1U;
    }
    return sum;
}

/* Most of a small stack can be used by deep recursion that yields on the way. */
Test(context, deep_recursion_with_yields_on_small_stacks)
{
    static const int sizes[] = {64 * 1024, 16 * 1024};
    enum { N = sizeof(sizes) / sizeof(sizes[0]) };
    struct deep deeps[N];
    st_thread_t t[N] = {NULL};

    st_test_init();
    for (int i = 0; i < N; i++) {
        memset(&deeps[i], 0, sizeof(deeps[i]));
        deeps[i].target = (size_t)sizes[i] * 11 / 16; /* about 70% of the stack */
        t[i] = st_thread_create(deep_main, &deeps[i], 1, sizes[i]);
        cr_assert_not_null(t[i]);
    }
    for (int i = 0; i < N; i++) {
        st_test_join(t[i]);
        cr_expect_geq(deeps[i].reached + FRAME_BYTES, deeps[i].target, "stack %d", sizes[i]);
        cr_expect_gt(deeps[i].depth, 10, "stack %d", sizes[i]);
        cr_expect_eq(deeps[i].corrupt, 0, "stack %d: corrupted frame bytes", sizes[i]);
        cr_expect_eq(deeps[i].sum, expected_sum(deeps[i].depth), "stack %d", sizes[i]);
    }
}
