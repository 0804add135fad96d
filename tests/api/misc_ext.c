/*
 * The rest of State Threads' run-time controls, beyond the cases covered by
 * init_eventsys.c and thread.c: coroutines really running on randomised
 * stacks (st_randomize_stacks), st_set_primordial_stack before and after
 * st_init (in the main pthread and another one) leaving scheduling alone,
 * and st_destroy with a coroutine still waiting on a descriptor, followed
 * by st_init and I/O on the same descriptor numbers, without leaking any.
 */
#include "st_test.h"

#include <pthread.h>
#include <stdalign.h>
#include <stddef.h>

ST_TEST_SUITE(misc_ext);

/* ---- st_randomize_stacks ------------------------------------------------------ */

#define PROBES 64

/*
 * Where a coroutine's frame is. The frame address, not a local's: with
 * AddressSanitizer's detect_stack_use_after_return, address-taken locals
 * live on a "fake stack" in the heap.
 */
struct probe {
    uintptr_t frame;   /* __builtin_frame_address(0) of the coroutine's function */
    uintptr_t aligned; /* address of a max_align_t-aligned local */
    int formatted;     /* snprintf of a double worked (needs an ABI-aligned stack) */
};

static void *record_local(void *arg)
{
    struct probe *p = arg;
    alignas(max_align_t) volatile char local[32];
    char text[32];

    local[0] = 1;
    p->frame = (uintptr_t)__builtin_frame_address(0);
    p->aligned = (uintptr_t)&local[0];
    /* Variadic floating-point formatting uses aligned vector stores on x86_64. */
    (void)snprintf(text, sizeof(text), "%.3f", 2.0 / 3.0);
    p->formatted = strcmp(text, "0.667") == 0;
    return NULL;
}

/* The frame address modulo 16 that the ABI gives this function: the reference. */
static uintptr_t reference_residue(void)
{
    struct probe ref;
    st_thread_t t;
    int was_on = st_randomize_stacks(0);

    /* A size no later probe asks for, so that its stack is not reused by them. */
    t = st_thread_create(record_local, &ref, 1, 20480);
    cr_assert_not_null(t);
    st_test_join(t);
    st_randomize_stacks(was_on);
    return ref.frame % 16;
}

/* Runs PROBES coroutines alive at once (no stack reuse) and records their frames. */
static void probe_stacks(struct probe *probes, int stack_size)
{
    st_thread_t t[PROBES];
    int i;

    memset(probes, 0, sizeof(*probes) * PROBES);
    for (i = 0; i < PROBES; i++) {
        t[i] = st_thread_create(record_local, &probes[i], 1, stack_size);
        cr_assert_not_null(t[i], "st_thread_create: %s", strerror(errno));
    }
    /* All run (and keep their stacks as zombies) before the first join returns. */
    for (i = 0; i < PROBES; i++) {
        st_test_join(t[i]);
    }
    for (i = 0; i < PROBES; i++) {
        cr_assert_neq(probes[i].frame, 0);
        cr_assert_eq(probes[i].aligned % alignof(max_align_t), 0,
                     "coroutine %d: local at %#lx is not %zu-byte aligned", i,
                     (unsigned long)probes[i].aligned, alignof(max_align_t));
        cr_assert(probes[i].formatted, "coroutine %d: snprintf of a double failed", i);
    }
}

/* Every frame sits at the ABI's alignment: the same residue modulo 16 as the reference. */
static void check_residue(const struct probe *probes, uintptr_t residue)
{
    int i;

    for (i = 0; i < PROBES; i++) {
        cr_assert_eq(probes[i].frame % 16, residue,
                     "coroutine %d: frame at %#lx, %lu modulo 16 instead of %lu", i,
                     (unsigned long)probes[i].frame, (unsigned long)(probes[i].frame % 16),
                     (unsigned long)residue);
    }
}

/* Number of distinct offsets of the probed locals inside their page. */
static int distinct_page_offsets(const struct probe *probes)
{
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
    uintptr_t seen[PROBES];
    int nseen = 0;
    int i;

    for (i = 0; i < PROBES; i++) {
        uintptr_t off = probes[i].frame % page;
        int j;

        for (j = 0; j < nseen && seen[j] != off; j++) {
            ;
        }
        if (j == nseen) {
            seen[nseen++] = off;
        }
    }
    return nseen;
}

/*
 * Without randomisation, stack tops take one of 32 cache-line offsets
 * (docs/design.md, "Stacks"), so that coroutines' hot lines do not all
 * compete for the same cache sets.
 */
#define COLOURS 32

Test(misc_ext, fixed_stacks_cycle_locals_through_a_few_page_offsets)
{
    struct probe probes[PROBES];
    uintptr_t residue;
    int n;

    /* The control for the test below: a few fixed offsets, never more. */
    st_test_init();
    residue = reference_residue();
    probe_stacks(probes, 0);
    n = distinct_page_offsets(probes);
    cr_assert(n > 1 && n <= COLOURS, "%d distinct stack offsets among %d coroutines", n, PROBES);
    check_residue(probes, residue);
    probe_stacks(probes, 65536);
    n = distinct_page_offsets(probes);
    cr_assert(n > 1 && n <= COLOURS, "%d distinct stack offsets among %d coroutines", n, PROBES);
    check_residue(probes, residue);
}

Test(misc_ext, randomized_stacks_move_locals_and_keep_alignment)
{
    struct probe probes[PROBES];
    uintptr_t residue;
    int n;

    st_test_init();
    residue = reference_residue();
    cr_assert_eq(st_randomize_stacks(1), 0);
    probe_stacks(probes, 0);
    n = distinct_page_offsets(probes);
    cr_assert_gt(n, COLOURS, "only %d distinct stack offsets among %d coroutines", n, PROBES);
    check_residue(probes, residue);
    probe_stacks(probes, 65536);
    n = distinct_page_offsets(probes);
    cr_assert_gt(n, COLOURS, "only %d distinct stack offsets among %d coroutines", n, PROBES);
    check_residue(probes, residue);
}

/*
 * A server that creates a coroutine per request and joins it reuses one
 * cached stack over and over: each coroutine still gets a random top, as
 * State Threads gives one to every stack it maps, or randomisation would
 * protect nothing there.
 */
Test(misc_ext, randomized_stacks_move_a_reused_stack_too)
{
    struct probe probes[PROBES];
    uintptr_t residue;
    int i;

    st_test_init();
    residue = reference_residue();
    for (i = 0; i < PROBES; i++) {
        /* The same size each time, after the join: the cached stack of the one before. */
        st_test_join(st_thread_create(record_local, &probes[i], 1, 16384));
    }
    cr_assert_eq(distinct_page_offsets(probes), 1, "the control: a reused stack keeps its top");
    cr_assert_eq(st_randomize_stacks(1), 0);
    for (i = 0; i < PROBES; i++) {
        st_test_join(st_thread_create(record_local, &probes[i], 1, 16384));
    }
    cr_assert_gt(distinct_page_offsets(probes), PROBES / 2, "only %d distinct offsets among %d",
                 distinct_page_offsets(probes), PROBES);
    check_residue(probes, residue);
}

Test(misc_ext, randomize_set_before_init_applies_after_it)
{
    struct probe probes[PROBES];

    cr_assert_eq(st_randomize_stacks(1), 0);
    st_test_init();
    cr_assert_eq(st_randomize_stacks(1), 1);
    probe_stacks(probes, 0);
    cr_assert_gt(distinct_page_offsets(probes), COLOURS);
}

struct deep {
    size_t bytes;
    int ok;
};

/* Uses `bytes` of its stack, reading back what it wrote after a switch. */
static void *use_stack(void *arg)
{
    struct deep *d = arg;
    volatile unsigned char *area = alloca(d->bytes);
    size_t i;

    for (i = 0; i < d->bytes; i += 512) {
        area[i] = (unsigned char)(i >> 9);
    }
    st_thread_yield();
    d->ok = 1;
    for (i = 0; i < d->bytes; i += 512) {
        if (area[i] != (unsigned char)(i >> 9)) {
            d->ok = 0;
        }
    }
    return NULL;
}

Test(misc_ext, randomized_stacks_keep_their_usable_size)
{
    static const int sizes[] = {16384, 32768, 131072};
    size_t i;

    st_test_init();
    st_randomize_stacks(1);
    for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        struct deep d[8];
        st_thread_t t[8];
        int k;

        for (k = 0; k < 8; k++) {
            /* All but the last page of the requested size; the rest is the coroutine's frame. */
            d[k].bytes = (size_t)sizes[i] - 4096;
            d[k].ok = 0;
            t[k] = st_thread_create(use_stack, &d[k], 1, sizes[i]);
            cr_assert_not_null(t[k]);
        }
        for (k = 0; k < 8; k++) {
            st_test_join(t[k]);
            cr_assert(d[k].ok, "stack of %d bytes, coroutine %d: data lost", sizes[i], k);
        }
    }
}

/* ---- st_set_primordial_stack ---------------------------------------------------- */

/* The calling pthread's stack, as a user would find it. */
static int own_stack(char **lo, char **hi)
{
    pthread_attr_t attr;
    void *addr = NULL;
    size_t size = 0;

    if (pthread_getattr_np(pthread_self(), &attr) != 0) {
        return -1;
    }
    if (pthread_attr_getstack(&attr, &addr, &size) != 0) {
        (void)pthread_attr_destroy(&attr);
        return -1;
    }
    (void)pthread_attr_destroy(&attr);
    *lo = addr;
    *hi = (char *)addr + size;
    return 0;
}

struct scenario {
    char log[16];
    int n;
};

static void *step_three_times(void *arg)
{
    struct scenario *s = arg;
    /* Each coroutine's letter is fixed by when it first runs: A, B, C. */
    char me = (char)('A' + s->n % 3);
    int i;

    for (i = 0; i < 3; i++) {
        if (s->n < (int)sizeof(s->log) - 1) {
            s->log[s->n++] = me;
        }
        if (i == 0) {
            st_thread_yield();
        } else if (st_usleep(1000) != 0) {
            return NULL;
        }
    }
    return (void *)1;
}

/*
 * FIFO run queue, yields, equal-length sleeps, joins, a socket round trip and
 * a timed sleep, all checked without assertions (usable from any pthread).
 * Returns 0, or the number of the step that went wrong.
 */
static int run_scenario(void)
{
    struct scenario s;
    st_thread_t t[3];
    int sv[2];
    st_netfd_t a = NULL;
    st_netfd_t b = NULL;
    char buf[4] = {0};
    long long start;
    int i;

    memset(&s, 0, sizeof(s));
    for (i = 0; i < 3; i++) {
        t[i] = st_thread_create(step_three_times, &s, 1, 0);
        if (t[i] == NULL) {
            return 1;
        }
    }
    for (i = 0; i < 3; i++) {
        void *ret = NULL;

        if (st_thread_join(t[i], &ret) != 0 || ret != (void *)1) {
            return 2;
        }
    }
    if (strcmp(s.log, "ABCABCABC") != 0) {
        return 3;
    }
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) {
        return 4;
    }
    a = st_netfd_open_socket(sv[0]);
    b = st_netfd_open_socket(sv[1]);
    if (a == NULL || b == NULL || st_write(a, "abc", 3, 1000000) != 3 ||
        st_read(b, buf, sizeof(buf), 1000000) != 3 || strcmp(buf, "abc") != 0) {
        return 5;
    }
    if (st_netfd_close(a) != 0 || st_netfd_close(b) != 0) {
        return 6;
    }
    start = st_test_deadline_base();
    if (st_usleep(5000) != 0 || st_test_now_us() - start < 5000) {
        return 7;
    }
    return 0;
}

Test(misc_ext, primordial_stack_set_before_init)
{
    char *lo = NULL;
    char *hi = NULL;

    cr_assert_eq(own_stack(&lo, &hi), 0);
    cr_assert_lt((uintptr_t)lo, (uintptr_t)__builtin_frame_address(0));
    cr_assert_gt((uintptr_t)hi, (uintptr_t)__builtin_frame_address(0));
    st_set_primordial_stack(hi, lo);
    st_test_init();
    cr_assert_eq(run_scenario(), 0);
    cr_assert_eq(run_scenario(), 0);
}

Test(misc_ext, primordial_stack_set_after_init_in_either_order)
{
    char *lo = NULL;
    char *hi = NULL;

    cr_assert_eq(own_stack(&lo, &hi), 0);
    st_test_init();
    cr_assert_eq(run_scenario(), 0);
    /* Bounds are accepted top first (ST's order) or bottom first. */
    st_set_primordial_stack(hi, lo);
    cr_assert_eq(run_scenario(), 0);
    st_set_primordial_stack(lo, hi);
    cr_assert_eq(run_scenario(), 0);
    /* NULL bounds are ignored. */
    st_set_primordial_stack(NULL, lo);
    st_set_primordial_stack(hi, NULL);
    cr_assert_eq(run_scenario(), 0);
}

struct pthread_result {
    int stack_rc;
    int init_rc;
    int before;
    int after;
};

static void *pthread_with_primordial_stack(void *arg)
{
    struct pthread_result *r = arg;
    char *lo = NULL;
    char *hi = NULL;

    r->stack_rc = own_stack(&lo, &hi);
    if (r->stack_rc != 0) {
        return NULL;
    }
    st_set_primordial_stack(hi, lo);
    r->init_rc = st_test_try_init();
    if (r->init_rc != 0) {
        return NULL;
    }
    r->before = run_scenario();
    st_set_primordial_stack(hi, lo);
    r->after = run_scenario();
    st_destroy();
    return NULL;
}

Test(misc_ext, primordial_stack_of_another_pthread)
{
    struct pthread_result r = {-1, -1, -1, -1};
    pthread_t th;

    /* This pthread's scheduler is untouched by the other one's. */
    st_test_init();
    cr_assert_eq(pthread_create(&th, NULL, pthread_with_primordial_stack, &r), 0);
    cr_assert_eq(pthread_join(th, NULL), 0);
    cr_assert_eq(r.stack_rc, 0);
    cr_assert_eq(r.init_rc, 0);
    cr_assert_eq(r.before, 0, "scenario failed at step %d", r.before);
    cr_assert_eq(r.after, 0, "scenario failed at step %d", r.after);
    cr_assert_eq(run_scenario(), 0);
}

/* ---- st_destroy with a coroutine waiting on a descriptor, then st_init again ---- */

static void *sleep_forever(void *arg)
{
    (void)arg;
    (void)st_usleep(ST_UTIME_NO_TIMEOUT);
    return NULL;
}

Test(misc_ext, destroy_with_a_waiter_then_init_on_the_same_descriptors)
{
    int before;
    int round;

    before = st_test_open_fds();
    for (round = 0; round < 20; round++) {
        struct st_test_blocked p = {.call = st_test_poll_fd, .fd = -1,
                                    .timeout = ST_UTIME_NO_TIMEOUT, .rc = ST_TEST_NOT_RETURNED};
        int sv[2];
        char buf[8] = {0};
        st_netfd_t a;
        st_netfd_t b;

        st_test_init();
        /* The descriptor numbers repeat every round: the new scheduler must not
         * carry any registration over from the destroyed one. */
        cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
        a = st_netfd_open_socket(sv[0]);
        b = st_netfd_open_socket(sv[1]);
        cr_assert_not_null(a);
        cr_assert_not_null(b);
        cr_assert_eq(st_write(a, "ping", 4, 1000000), 4);
        cr_assert_eq(st_read(b, buf, sizeof(buf), 1000000), 4);
        cr_assert_str_eq(buf, "ping");

        /* Leave one coroutine waiting on b's descriptor (st_poll: no netfd object is
         * left behind) and one asleep. */
        p.fd = st_netfd_fileno(b);
        cr_assert_not_null(st_thread_create(st_test_blocked_main, &p, 0, 0));
        cr_assert_not_null(st_thread_create(sleep_forever, NULL, 0, 0));
        cr_assert_eq(st_usleep(500), 0);
        cr_assert_eq(p.rc, ST_TEST_NOT_RETURNED);
        /* The waiter still holds b: it cannot be closed, but it can be freed
         * from under st_poll, which never saw the netfd. */
        st_netfd_free(a);
        st_netfd_free(b);
        st_destroy();
        cr_assert_eq(st_get_eventsys(), -1);
        cr_assert_eq(p.rc, ST_TEST_NOT_RETURNED, "the destroyed waiter ran");
        cr_assert_eq(close(sv[0]), 0);
        cr_assert_eq(close(sv[1]), 0);
    }
    /* The backends' own descriptors (epoll) went with each scheduler. */
    cr_assert_eq(st_test_open_fds(), before);
}

static void *nap(void *arg)
{
    (void)st_usleep(10 * 1000 * 1000);
    return arg;
}

Test(misc_ext, destroy_with_timed_waiters_then_init_again)
{
    int round;

    /* Coroutines with a deadline (a timed sleep, a timed poll) are in the
     * timeout heap when st_destroy() releases them. */
    for (round = 0; round < 3; round++) {
        struct st_test_blocked p = {.call = st_test_poll_fd, .fd = -1, .timeout = 10 * 1000 * 1000,
                                    .rc = ST_TEST_NOT_RETURNED};
        int sv[2];

        st_test_init();
        cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
        p.fd = sv[0];
        cr_assert_not_null(st_thread_create(nap, NULL, 0, 0));
        cr_assert_not_null(st_thread_create(st_test_blocked_main, &p, 1, 0));
        cr_assert_eq(st_usleep(500), 0);
        st_destroy();
        cr_assert_eq(st_get_eventsys(), -1);
        cr_assert_eq(p.rc, ST_TEST_NOT_RETURNED, "the destroyed waiter ran");
        cr_assert_eq(close(sv[0]), 0);
        cr_assert_eq(close(sv[1]), 0);
    }
    st_test_init();
    cr_assert_eq(run_scenario(), 0);
}
