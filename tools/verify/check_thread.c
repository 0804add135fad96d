/* verify: coroutine lifecycle: create, run order, yield, exit, join. */
#include "verify.h"

#include <errno.h>
#include <stdint.h>
#include <string.h>

/* The default stack size st was configured with (from the build system). */
#ifndef VF_DEFAULT_STACK
#define VF_DEFAULT_STACK (128 * 1024)
#endif

/* ---- creation never runs the coroutine inline ----------------------------- */

static void *set_flag(void *arg)
{
    *(int *)arg = 1;
    return (void *)(intptr_t)0x1234;
}

static int check_create_not_inline(void)
{
    int ran = 0;
    void *retval = NULL;
    st_thread_t thread = vf_spawn(set_flag, &ran);
    VF_CHECK(thread != NULL);
    VF_CHECK(ran == 0);
    st_thread_yield();
    VF_CHECK(ran == 1);
    VF_CHECK(st_thread_join(thread, &retval) == 0);
    VF_CHECK(retval == (void *)(intptr_t)0x1234);
    return 0;
}

/* Joining a coroutine that has not run yet makes it run. */
static int check_join_runs_first(void)
{
    int ran = 0;
    void *retval = NULL;
    st_thread_t thread = vf_spawn(set_flag, &ran);
    VF_CHECK(thread != NULL);
    VF_CHECK(st_thread_join(thread, &retval) == 0);
    VF_CHECK(ran == 1);
    VF_CHECK(retval == (void *)(intptr_t)0x1234);
    return 0;
}

/* ---- st_thread_exit from a nested call ------------------------------------ */

static int after_exit;

__attribute__((noinline)) static void leave_from_depth(int depth)
{
    if (depth > 0) {
        leave_from_depth(depth - 1);
        after_exit = 1; /* must not run */
        return;
    }
    st_thread_exit((void *)(intptr_t)0x5678);
    after_exit = 1; /* must not run */
}

static void *exit_nested(void *arg)
{
    (void)arg;
    leave_from_depth(4);
    after_exit = 1;
    return NULL;
}

static int check_exit_retval(void)
{
    void *retval = NULL;
    st_thread_t thread = vf_spawn(exit_nested, NULL);
    VF_CHECK(thread != NULL);
    VF_CHECK(st_thread_join(thread, &retval) == 0);
    VF_CHECK(retval == (void *)(intptr_t)0x5678);
    VF_CHECK(after_exit == 0);
    thread = vf_spawn(set_flag, &after_exit);
    VF_CHECK(thread != NULL);
    VF_CHECK(st_thread_join(thread, NULL) == 0); /* retvalp is optional */
    return 0;
}

/* ---- join errors ------------------------------------------------------------ */

static void *join_self(void *arg)
{
    (void)arg;
    errno = 0;
    VF_CO_CHECK(st_thread_join(st_thread_self(), NULL) == -1 && errno == EDEADLK);
    return NULL;
}

static void *sleep_a_little(void *arg)
{
    (void)arg;
    (void)st_usleep(VF_SHORT_US);
    return NULL;
}

static void *join_arg(void *arg)
{
    VF_CO_CHECK(st_thread_join((st_thread_t)arg, NULL) == 0);
    return NULL;
}

static int check_join_errors(void)
{
    int ran = 0;
    st_thread_t detached = st_thread_create(set_flag, &ran, 0, 0);
    st_thread_t target = NULL;
    st_thread_t joiner = NULL;

    VF_CHECK(detached != NULL);
    errno = 0;
    VF_CHECK(st_thread_join(detached, NULL) == -1 && errno == EINVAL);
    vf_settle();
    VF_CHECK(ran == 1);

    VF_CHECK(vf_join_ok(vf_spawn(join_self, NULL)) == 0);

    target = vf_spawn(sleep_a_little, NULL);
    joiner = vf_spawn(join_arg, target);
    VF_CHECK(target != NULL && joiner != NULL);
    vf_settle(); /* joiner now waits on target */
    errno = 0;
    VF_CHECK(st_thread_join(target, NULL) == -1 && errno == EINVAL);
    VF_CHECK(vf_join_ok(joiner) == 0);
    return 0;
}

/* ---- FIFO run order and yield ---------------------------------------------- */

enum { ORDER_N = 10, ORDER_ROUNDS = 3 };

struct order_log {
    int seen[ORDER_N * ORDER_ROUNDS];
    int count;
};

struct order_arg {
    struct order_log *log;
    int id;
};

static void *log_and_yield(void *arg)
{
    struct order_arg *me = arg;
    for (int round = 0; round < ORDER_ROUNDS; round++) {
        me->log->seen[me->log->count++] = me->id;
        st_thread_yield();
    }
    return NULL;
}

static int check_fifo_order(void)
{
    struct order_log log;
    struct order_arg args[ORDER_N];
    st_thread_t threads[ORDER_N] = {NULL};

    memset(&log, 0, sizeof log);
    for (int i = 0; i < ORDER_N; i++) {
        args[i].log = &log;
        args[i].id = i;
        threads[i] = vf_spawn(log_and_yield, &args[i]);
        VF_CHECK(threads[i] != NULL);
    }
    for (int i = 0; i < ORDER_N; i++) {
        VF_CHECK(vf_join_ok(threads[i]) == 0);
    }
    VF_CHECK(log.count == ORDER_N * ORDER_ROUNDS);
    for (int i = 0; i < log.count; i++) {
        if (log.seen[i] != i % ORDER_N) {
            return vf_fail("run order: position %d ran coroutine %d, expected %d", i, log.seen[i],
                           i % ORDER_N);
        }
    }
    return 0;
}

struct pingpong {
    char trace[32];
    int len;
};

struct pingpong_arg {
    struct pingpong *pp;
    char mark;
};

static void *mark_and_yield(void *arg)
{
    struct pingpong_arg *me = arg;
    for (int i = 0; i < 4; i++) {
        me->pp->trace[me->pp->len++] = me->mark;
        st_thread_yield();
    }
    return NULL;
}

static int check_yield(void)
{
    struct pingpong pp;
    struct pingpong_arg a = {&pp, 'a'};
    struct pingpong_arg b = {&pp, 'b'};
    st_thread_t ta = NULL;
    st_thread_t tb = NULL;

    memset(&pp, 0, sizeof pp);
    st_thread_yield(); /* nothing else to run: returns at once */
    ta = vf_spawn(mark_and_yield, &a);
    tb = vf_spawn(mark_and_yield, &b);
    VF_CHECK(ta != NULL && tb != NULL);
    st_thread_yield();
    pp.trace[pp.len++] = 'P';
    VF_CHECK(vf_join_ok(ta) == 0 && vf_join_ok(tb) == 0);
    if (strcmp(pp.trace, "abPababab") != 0) {
        return vf_fail("yield interleaving was \"%s\", expected \"abPababab\"", pp.trace);
    }
    return 0;
}

/* ---- thread identity ---------------------------------------------------------- */

static void *report_self(void *arg)
{
    *(st_thread_t *)arg = st_thread_self();
    return NULL;
}

static int check_thread_self(void)
{
    st_thread_t seen = NULL;
    st_thread_t primordial = st_thread_self();
    st_thread_t thread = vf_spawn(report_self, &seen);
    VF_CHECK(primordial != NULL && thread != NULL);
    VF_CHECK(vf_join_ok(thread) == 0);
    VF_CHECK(seen == thread);
    VF_CHECK(st_thread_self() == primordial);
    return 0;
}

/* ---- many coroutines -------------------------------------------------------------- */

enum { MANY_N = 5000, MANY_STACK = 32 * 1024 };

static int many_running;

static void *many_body(void *arg)
{
    many_running++;
    st_thread_yield();
    many_running--;
    return arg;
}

static int check_many_coroutines(void)
{
    static st_thread_t threads[MANY_N];
    for (intptr_t i = 0; i < MANY_N; i++) {
        threads[i] = st_thread_create(many_body, (void *)i, 1, MANY_STACK);
        if (threads[i] == NULL) {
            return vf_fail("st_thread_create #%ld of %d failed: %s", (long)i, MANY_N,
                           strerror(errno));
        }
    }
    st_thread_yield();
    VF_CHECK(many_running == MANY_N); /* all ran once and are now runnable again */
    for (intptr_t i = 0; i < MANY_N; i++) {
        void *retval = NULL;
        VF_CHECK(st_thread_join(threads[i], &retval) == 0);
        VF_CHECK(retval == (void *)i);
    }
    VF_CHECK(many_running == 0);
    return 0;
}

/* ---- stack sizes --------------------------------------------------------------- */

struct stack_use {
    size_t bytes;
    unsigned sum;
};

static void *use_stack(void *arg)
{
    struct stack_use *use = arg;
    char *buf = __builtin_alloca(use->bytes);
    memset(buf, 0x5a, use->bytes);
    st_thread_yield();
    for (size_t i = 0; i < use->bytes; i += 512) {
        use->sum += (unsigned char)buf[i];
    }
    return NULL;
}

static int run_with_stack(int stack_size, size_t bytes)
{
    struct stack_use use = {bytes, 0};
    st_thread_t thread = st_thread_create(use_stack, &use, 1, stack_size);
    VF_CHECK(thread != NULL);
    VF_CHECK(vf_join_ok(thread) == 0);
    VF_CHECK(use.sum == 0x5aU * (unsigned)((bytes + 511) / 512));
    return 0;
}

static int check_stack_sizes(void)
{
    VF_CHECK(run_with_stack(0, VF_DEFAULT_STACK / 2) == 0);
    VF_CHECK(run_with_stack(8 * 1024 + 1, 4 * 1024) == 0); /* rounded up to pages */
    VF_CHECK(run_with_stack(1024 * 1024, 768 * 1024) == 0);
    errno = 0;
    VF_CHECK(st_thread_create(set_flag, NULL, 1, -4096) == NULL && errno != 0);
    return 0;
}

const struct vf_check vf_checks_thread[] = {
    {"create_not_inline", check_create_not_inline, VF_AFTER_INIT},
    {"join_runs_first", check_join_runs_first, VF_AFTER_INIT},
    {"exit_retval", check_exit_retval, VF_AFTER_INIT},
    {"join_errors", check_join_errors, VF_AFTER_INIT},
    {"fifo_order", check_fifo_order, VF_AFTER_INIT},
    {"yield", check_yield, VF_AFTER_INIT},
    {"thread_self", check_thread_self, VF_AFTER_INIT},
    {"many_coroutines", check_many_coroutines, VF_AFTER_INIT},
    {"stack_sizes", check_stack_sizes, VF_AFTER_INIT},
    {NULL, NULL, VF_AFTER_INIT},
};
