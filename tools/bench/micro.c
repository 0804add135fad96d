/*
 * Micro-benchmarks of the scheduler: the raw context switch (the floor),
 * a condition-variable ping-pong, st_thread_yield, create+join with cached
 * and with freed stacks, and the timeout-heap test.
 *
 * Each figure is the median of scale->reps timed runs after one untimed
 * warm-up run. Everything runs on one pinned CPU and is timed in thread
 * CPU time (bench_cpu_now), which leaves out preemption by other work.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "context.h"
#include "scheduler.h"
#include "st.h"

enum { MAX_REPS = 64, RAW_STACK = 64 * 1024 };

/* One timed run of `iters` iterations: elapsed seconds, or < 0 on failure. */
typedef double (*timed_fn)(long iters);

/*
 * Median nanoseconds per operation, where one iteration is `ops` operations.
 * With scale->exact, one run of exactly that many iterations (for callgrind).
 */
static double measure(const struct bench_scale *scale, timed_fn fn, long iters, double ops)
{
    double samples[MAX_REPS];
    int reps = scale->reps < MAX_REPS ? scale->reps : MAX_REPS;
    if (scale->exact > 0) {
        double t = fn(scale->exact);
        return t < 0 ? -1.0 : t * 1e9 / ((double)scale->exact * ops);
    }
    if (fn(iters / 4 > 0 ? iters / 4 : 1) < 0) { /* warm-up: caches, stacks, branch predictors */
        return -1.0;
    }
    for (int r = 0; r < reps; r++) {
        double t = fn(iters);
        if (t < 0) {
            return -1.0;
        }
        samples[r] = t * 1e9 / ((double)iters * ops);
    }
    return bench_median(samples, reps);
}

/* ---- 1. raw context switch: st__ctx_switch alone ------------------------------------ */

static struct st__ctx raw_main;
static struct st__ctx raw_peer;

static void raw_peer_main(void *arg)
{
    (void)arg;
    for (;;) {
        st__ctx_switch(&raw_peer, &raw_main);
    }
}

static double raw_run(long iters)
{
    double t0 = bench_cpu_now();
    for (long i = 0; i < iters; i++) {
        st__ctx_switch(&raw_main, &raw_peer); /* there and back: two switches */
    }
    return bench_cpu_now() - t0;
}

/*
 * References only (x86_64): the least a switch can do, six callee-saved
 * registers and the stack pointer, without st's MXCSR and x87 control word;
 * once returning with `ret` (which the return-stack predictor gets wrong on
 * every switch, since it returns into the other stack) and once popping the
 * return address and leaving with an indirect jump.
 */
#if defined(__x86_64__)
__attribute__((visibility("hidden"))) void bench_min_ret(void **from_sp, void *const *to_sp);
__attribute__((visibility("hidden"))) void bench_min_jmp(void **from_sp, void *const *to_sp);
__attribute__((visibility("hidden"))) void bench_min_entry(void);
#define BENCH_SAVE "  pushq %rbp\n  pushq %rbx\n  pushq %r12\n  pushq %r13\n  pushq %r14\n  pushq %r15\n"
#define BENCH_SWAP "  movq %rsp, (%rdi)\n  movq (%rsi), %rsp\n"
#define BENCH_LOAD "  popq %r15\n  popq %r14\n  popq %r13\n  popq %r12\n  popq %rbx\n  popq %rbp\n"
__asm__(".pushsection .text\n"
        ".p2align 4\n"
        ".globl bench_min_ret\n.hidden bench_min_ret\n.type bench_min_ret, @function\n"
        "bench_min_ret:\n" BENCH_SAVE BENCH_SWAP BENCH_LOAD "  ret\n"
        ".size bench_min_ret, .-bench_min_ret\n"
        ".p2align 4\n"
        ".globl bench_min_jmp\n.hidden bench_min_jmp\n.type bench_min_jmp, @function\n"
        "bench_min_jmp:\n" BENCH_SAVE BENCH_SWAP BENCH_LOAD "  popq %rcx\n  jmpq *%rcx\n"
        ".size bench_min_jmp, .-bench_min_jmp\n"
        ".globl bench_min_entry\n.hidden bench_min_entry\n.type bench_min_entry, @function\n"
        "bench_min_entry:\n"
        "  movq %r13, %rdi\n  callq *%r12\n  ud2\n"
        ".size bench_min_entry, .-bench_min_entry\n"
        ".popsection\n");

static void *min_main_sp;
static void *min_peer_sp;

static void min_ret_peer(void *arg)
{
    (void)arg;
    for (;;) {
        bench_min_ret(&min_peer_sp, &min_main_sp);
    }
}

static void min_jmp_peer(void *arg)
{
    (void)arg;
    for (;;) {
        bench_min_jmp(&min_peer_sp, &min_main_sp);
    }
}

static double min_ret_run(long iters)
{
    double t0 = bench_cpu_now();
    for (long i = 0; i < iters; i++) {
        bench_min_ret(&min_main_sp, &min_peer_sp);
    }
    return bench_cpu_now() - t0;
}

static double min_jmp_run(long iters)
{
    double t0 = bench_cpu_now();
    for (long i = 0; i < iters; i++) {
        bench_min_jmp(&min_main_sp, &min_peer_sp);
    }
    return bench_cpu_now() - t0;
}

/* The frame the switches pop: r15 r14 r13 r12 rbx rbp, return address. */
static void min_make(void *stack_top, void (*peer)(void *))
{
    /* stack_top is 16-byte aligned; rsp = stack_top - 16 at the entry, as the ABI wants. */
    void **frame = (void **)stack_top - 9;
    frame[0] = NULL;
    frame[1] = NULL;
    frame[2] = NULL;                       /* r13: argument */
    frame[3] = (void *)(uintptr_t)peer;    /* r12: function */
    frame[4] = NULL;
    frame[5] = NULL;
    frame[6] = (void *)(uintptr_t)bench_min_entry;
    min_peer_sp = frame;
}
#endif

/* ---- 2. cond ping-pong ----------------------------------------------------------------- */

static st_cond_t cond_to_main;
static st_cond_t cond_to_peer;
static volatile int peer_stop;

static void *cond_peer(void *arg)
{
    (void)arg;
    for (;;) {
        (void)st_cond_signal(cond_to_main);
        (void)st_cond_wait(cond_to_peer);
        if (peer_stop) {
            return NULL;
        }
    }
}

static double cond_run(long iters)
{
    peer_stop = 0;
    st_thread_t peer = st_thread_create(cond_peer, NULL, 1, 0);
    if (peer == NULL) {
        return -1.0;
    }
    (void)st_cond_wait(cond_to_main); /* the peer starts and waits on cond_to_peer */
    double t0 = bench_cpu_now();
    for (long i = 0; i < iters; i++) {
        (void)st_cond_signal(cond_to_peer);
        (void)st_cond_wait(cond_to_main);
    }
    double t = bench_cpu_now() - t0;
    peer_stop = 1;
    (void)st_cond_signal(cond_to_peer);
    (void)st_thread_join(peer, NULL);
    return t;
}

/* ---- 3. st_thread_yield ---------------------------------------------------------------- */

static void *yield_peer(void *arg)
{
    (void)arg;
    while (!peer_stop) {
        st_thread_yield();
    }
    return NULL;
}

static double yield_run(long iters)
{
    peer_stop = 0;
    st_thread_t peer = st_thread_create(yield_peer, NULL, 1, 0);
    if (peer == NULL) {
        return -1.0;
    }
    st_thread_yield(); /* the peer starts */
    double t0 = bench_cpu_now();
    for (long i = 0; i < iters; i++) {
        st_thread_yield();
    }
    double t = bench_cpu_now() - t0;
    peer_stop = 1;
    (void)st_thread_join(peer, NULL);
    return t;
}

/* ---- 3b. a burst of signals ------------------------------------------------------------- */

/*
 * Many coroutines wait on one cond and are signalled one after the other
 * before any of them runs, as when a producer hands out a batch of work. The
 * signals are timed; the woken coroutines then run and wait again untimed.
 * Each signal should cost the same however many woken waiters have not run.
 */
enum { BURST_WAITERS = 10000 };

static st_cond_t burst_cond;
static int burst_stop;
static int burst_waiters = BURST_WAITERS; /* fewer for --smoke */

static void *burst_waiter(void *arg)
{
    (void)arg;
    while (!burst_stop) {
        (void)st_cond_wait(burst_cond);
    }
    return NULL;
}

static double burst_run(long rounds)
{
    static st_thread_t waiters[BURST_WAITERS];
    burst_stop = 0;
    burst_cond = st_cond_new();
    if (burst_cond == NULL) {
        return -1.0;
    }
    int n = 0;
    for (; n < burst_waiters; n++) {
        waiters[n] = st_thread_create(burst_waiter, NULL, 1, 0);
        if (waiters[n] == NULL) {
            break;
        }
    }
    double t = -1.0;
    if (n == burst_waiters) {
        t = 0;
        (void)st_usleep(0); /* every waiter runs and waits */
        for (long r = 0; r < rounds; r++) {
            double t0 = bench_cpu_now();
            for (int i = 0; i < burst_waiters; i++) {
                (void)st_cond_signal(burst_cond);
            }
            t += bench_cpu_now() - t0;
            (void)st_usleep(0);
        }
    }
    burst_stop = 1;
    (void)st_cond_broadcast(burst_cond);
    for (int i = 0; i < n; i++) {
        (void)st_thread_join(waiters[i], NULL);
    }
    (void)st_cond_destroy(burst_cond);
    return t;
}

/* ---- 4. create + join ------------------------------------------------------------------ */

static void *noop(void *arg)
{
    return arg;
}

static double create_join_run(long iters)
{
    double t0 = bench_cpu_now();
    for (long i = 0; i < iters; i++) {
        st_thread_t t = st_thread_create(noop, NULL, 1, 0);
        if (t == NULL || st_thread_join(t, NULL) != 0) {
            perror("bench: create+join");
            return -1.0;
        }
    }
    double t = bench_cpu_now() - t0;
    st_thread_yield(); /* let the last one finish exiting */
    return t;
}

static int report(const char *key, double ns, const char *unit, const char *base, const char *what)
{
    if (ns < 0) {
        fprintf(stderr, "bench: %s failed\n", key);
        return -1;
    }
    bench_result(key, ns, unit, base, "%s", what);
    return 0;
}

static bool wanted(const struct bench_scale *scale, const char *name)
{
    return scale->only == NULL || strcmp(scale->only, name) == 0;
}

/* The figures that need no scheduler: the raw switch and the reference switch. */
static int bench_switches(const struct bench_scale *scale, long div)
{
    static char stack[RAW_STACK] __attribute__((aligned(64))); /* its top is aligned too */
    int rc = 0;
    if (wanted(scale, "raw")) {
        st__ctx_make(&raw_peer, stack + RAW_STACK, raw_peer_main, NULL);
        rc |= report("switch_raw", measure(scale, raw_run, 5000000 / div, 2), "ns", "-",
                     "raw switch, st__ctx_switch (the floor)");
    }
#if defined(__x86_64__)
    if (wanted(scale, "min")) {
        min_make(stack + RAW_STACK, min_ret_peer);
        rc |= report("switch_min_ret", measure(scale, min_ret_run, 5000000 / div, 2), "ns",
                     "switch_raw", "ref: minimal switch returning by ret");
        min_make(stack + RAW_STACK, min_jmp_peer);
        rc |= report("switch_min_jmp", measure(scale, min_jmp_run, 5000000 / div, 2), "ns",
                     "switch_raw", "ref: minimal switch returning by jmp");
    }
#endif
    /* A peer never finishes: it stays suspended on the stack until the process exits. */
    return rc;
}

int bench_micro(const struct bench_scale *scale)
{
    long div = scale->smoke ? 1000 : 1;
    struct bench_other other;

    bench_pin(bench_cpu(0));
    bench_other_start(&other);
    int rc = bench_switches(scale, div);
    (void)st_set_eventsys(ST_EVENTSYS_ALT);
    if (st_init() != 0) {
        perror("bench: st_init");
        return -1;
    }
    cond_to_main = st_cond_new();
    cond_to_peer = st_cond_new();
    if (cond_to_main == NULL || cond_to_peer == NULL) {
        return -1;
    }
    if (wanted(scale, "cond")) {
        rc |= report("switch_cond", measure(scale, cond_run, 2000000 / div, 2), "ns",
                     "switch_raw", "cond ping-pong, per switch");
    }
    if (wanted(scale, "yield")) {
        rc |= report("yield", measure(scale, yield_run, 2000000 / div, 2), "ns", "switch_raw",
                     "st_thread_yield, per yield");
    }
    if (wanted(scale, "burst")) {
        burst_waiters = scale->smoke ? 100 : BURST_WAITERS;
        rc |= report("cond_signal_burst", measure(scale, burst_run, 20 / div > 0 ? 20 / div : 1,
                                                  burst_waiters),
                     "ns", "switch_raw", "st_cond_signal, 10 000 waiters signalled in a row");
    }
    if (wanted(scale, "cache")) {
        rc |= report("create_join_cache", measure(scale, create_join_run, 1000000 / div, 1),
                     "ns", "switch_raw", "create+join, cached stack");
    }
    if (wanted(scale, "free")) {
        /*
         * Benchmark-only poke: the pool mode is a build option; switching it
         * at run time lets one binary measure both. Released stacks are
         * unmapped from here on (the few still cached go in the warm-up).
         */
        struct st__sched *sched = st__sched_peek();
        enum st__stack_mode saved = sched->stacks.mode;
        sched->stacks.mode = ST__STACK_FREE;
        rc |= report("create_join_free", measure(scale, create_join_run, 20000 / div, 1), "ns",
                     "switch_raw", "create+join, stack_mode=free");
        sched->stacks.mode = saved;
    }
    if (scale->exact == 0) {
        bench_other_note(&other, "micro");
    }
    return rc;
}

/* ---- 5. the timeout-heap test ------------------------------------------------------------ */

static void *heap_sleeper(void *arg)
{
    int rc = st_usleep((st_utime_t)(uintptr_t)arg);
    /* Interrupted before the deadline is the expected outcome. */
    return (void *)(uintptr_t)(rc == -1 && errno == EINTR);
}

struct heap_test {
    st_thread_t *threads;
    long sleepers;
    unsigned long long rng;
    long created;    /* in the round that failed, if one did */
    int create_errno;
};

/* One round: create the sleepers, let them all sleep, interrupt and join them all. */
static int heap_round(struct heap_test *h)
{
    long interrupted = 0;
    long n = 0;
    for (; n < h->sleepers; n++) {
        st_utime_t delay = 1000000 + bench_random(&h->rng) % 9000001; /* 1..10 s */
        h->threads[n] = st_thread_create(heap_sleeper, (void *)(uintptr_t)delay, 1, 0);
        if (h->threads[n] == NULL) {
            h->create_errno = errno;
            break;
        }
    }
    st_thread_yield(); /* every sleeper runs and goes to sleep */
    for (long i = 0; i < n; i++) {
        st_thread_interrupt(h->threads[i]);
    }
    for (long i = 0; i < n; i++) {
        void *ok = NULL;
        (void)st_thread_join(h->threads[i], &ok);
        interrupted += ok != NULL;
    }
    st_thread_yield(); /* the joined ones finish exiting */
    h->created = n;
    if (interrupted != n) {
        fprintf(stderr, "bench: %ld of %ld sleepers were not interrupted\n", n - interrupted, n);
    }
    return n == h->sleepers && interrupted == n ? 0 : -1;
}

static double heap_run(struct heap_test *h, long rounds)
{
    double t0 = bench_cpu_now();
    for (long r = 0; r < rounds; r++) {
        if (heap_round(h) != 0) {
            return -1.0;
        }
    }
    return bench_cpu_now() - t0;
}

int bench_heap(const struct bench_scale *scale, long sleepers, long rounds)
{
    double samples[MAX_REPS];
    int reps = scale->reps < 5 ? scale->reps : 5;
    struct heap_test h = {.sleepers = sleepers, .rng = 0x9E3779B97F4A7C15ULL};
    char key[64];

    struct bench_other other;
    bench_pin(bench_cpu(0));
    bench_other_start(&other);
    /* An array of coroutine handles, which are pointers. */
    h.threads = calloc((size_t)sleepers, sizeof(st_thread_t)); // NOLINT(bugprone-sizeof-expression)
    (void)st_set_eventsys(ST_EVENTSYS_ALT);
    if (h.threads == NULL || st_init() != 0) {
        perror("bench: heap set-up");
        free((void *)h.threads);
        return -1;
    }
    /* Warm-up: one tenth of the rounds, at least one (maps the stacks). */
    int rc = 0;
    if (heap_run(&h, rounds / 10 > 0 ? rounds / 10 : 1) < 0) {
        long maps = bench_map_count();
        bench_note("heap test with %ld sleepers (%s): st_thread_create failed after %ld "
                   "coroutines: %s; %ld mappings, vm.max_map_count %ld",
                   sleepers, bench_guard_pages() ? "guard pages" : "no guard pages", h.created,
                   h.create_errno != 0 ? strerror(h.create_errno) : "?", maps,
                   bench_proc_long("/proc/sys/vm/max_map_count"));
        rc = -1;
    }
    for (int r = 0; rc == 0 && r < reps; r++) {
        samples[r] = heap_run(&h, rounds);
        rc = samples[r] < 0 ? -1 : 0;
    }
    if (rc == 0) {
        double total = bench_median(samples, reps);
        double ops = (double)sleepers * (double)rounds;
        (void)snprintf(key, sizeof key, "heap_%ld", sleepers);
        bench_result(key, total, "s", "-", "heap test, %ld sleepers x %ld rounds", sleepers,
                     rounds);
        (void)snprintf(key, sizeof key, "heap_%ld_op", sleepers);
        bench_result(key, total * 1e9 / ops, "ns", "switch_raw", "  per sleeper (create..join)");
        (void)snprintf(key, sizeof key, "heap %ld", sleepers);
        bench_other_note(&other, key);
    }
    free((void *)h.threads);
    return rc;
}
