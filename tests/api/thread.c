/*
 * Coroutine lifecycle: st_thread_create, st_thread_self, st_thread_exit,
 * st_thread_join, st_randomize_stacks, and the primordial exiting first.
 */
#include "st_test.h"

#include <sys/wait.h>

ST_TEST_SUITE(thread);

static int ran;

static void *mark_ran(void *arg)
{
    (void)arg;
    ran++;
    return NULL;
}

/* After st_test_init(): a detached mark_ran coroutine, not yet run. */
static st_thread_t start_detached_marker(void)
{
    st_thread_t t;

    st_test_init();
    ran = 0;
    t = st_thread_create(mark_ran, NULL, 0, 0);
    cr_assert_not_null(t);
    return t;
}

Test(thread, self_is_set_after_init)
{
    cr_assert_null(st_thread_self());
    st_test_init();
    cr_assert_not_null(st_thread_self());
}

Test(thread, create_does_not_run_inline)
{
    start_detached_marker();
    cr_assert_eq(ran, 0, "start function ran inside st_thread_create");
    st_thread_yield();
    cr_assert_eq(ran, 1);
}

static st_thread_t seen_self;

static void *record_self(void *arg)
{
    (void)arg;
    seen_self = st_thread_self();
    return NULL;
}

Test(thread, self_inside_coroutine_is_its_handle)
{
    st_thread_t t;
    st_thread_t me;

    st_test_init();
    me = st_thread_self();
    t = st_test_spawn(record_self, NULL);
    cr_assert_neq(t, me);
    st_test_join(t);
    cr_assert_eq(seen_self, t);
    cr_assert_eq(st_thread_self(), me);
}

static char order[64];
static int order_len;

static void order_add(char c)
{
    if (order_len < (int)sizeof(order) - 1) {
        order[order_len++] = c;
    }
    order[order_len] = '\0';
}

static void *log_letter(void *arg)
{
    order_add(*(const char *)arg);
    return NULL;
}

Test(thread, run_queue_is_fifo)
{
    static const char letters[] = "ABCDE";
    int i;

    st_test_init();
    order_len = 0;
    for (i = 0; i < 5; i++) {
        cr_assert_not_null(st_thread_create(log_letter, (void *)&letters[i], 0, 0));
    }
    cr_assert_eq(st_usleep(1000), 0);
    cr_assert_str_eq(order, "ABCDE");
}

/* Returns the distance between one of its locals and the address it got. */
static void *distance_from(void *arg)
{
    volatile char local = 1;
    uintptr_t here = (uintptr_t)&local;
    uintptr_t there = (uintptr_t)arg;

    return (void *)(here > there ? here - there : there - here);
}

Test(thread, coroutine_runs_on_its_own_stack)
{
    volatile char local = 0;
    void *distance = NULL;
    st_thread_t t;

    st_test_init();
    t = st_test_spawn(distance_from, (void *)(uintptr_t)&local);
    cr_assert_eq(st_thread_join(t, &distance), 0);
    cr_assert_gt((uintptr_t)distance, 16384,
                 "a coroutine local is only %zu bytes from the primordial's",
                 (size_t)(uintptr_t)distance);
}

/* Each counting coroutine takes this many steps, yielding at every one. */
#define COUNT_STEPS 20

struct counter_arg {
    int id;
    long sum;
};

static void *count_with_yields(void *arg)
{
    struct counter_arg *ca = arg;
    long local_sum = 0;
    int local_id = ca->id;
    int i;

    for (i = 0; i < COUNT_STEPS; i++) {
        local_sum += local_id * 1000 + i;
        st_thread_yield();
        if (i % 3 == 0) {
            st_usleep(100);
        }
    }
    ca->sum = local_sum;
    return (void *)(intptr_t)local_id;
}

Test(thread, locals_survive_yields)
{
    struct counter_arg args[4];
    st_thread_t t[4];
    int i;

    st_test_init();
    for (i = 0; i < 4; i++) {
        args[i].id = i + 1;
        args[i].sum = -1;
        t[i] = st_test_spawn(count_with_yields, &args[i]);
    }
    for (i = 0; i < 4; i++) {
        void *ret = NULL;
        long expect = 0;
        int k;

        cr_assert_eq(st_thread_join(t[i], &ret), 0);
        cr_assert_eq((intptr_t)ret, i + 1);
        for (k = 0; k < COUNT_STEPS; k++) {
            expect += (i + 1) * 1000 + k;
        }
        cr_assert_eq(args[i].sum, expect);
    }
}

Test(thread, create_rejects_bad_arguments)
{
    st_test_init();
    ST_ASSERT_FAILS_NULL(st_thread_create(mark_ran, NULL, 0, -1), EINVAL);
    ST_ASSERT_FAILS_NULL(st_thread_create(mark_ran, NULL, 1, -4096), EINVAL);
    ST_ASSERT_FAILS_NULL(st_thread_create(NULL, NULL, 0, 0), EINVAL);
    ST_ASSERT_FAILS_NULL(st_thread_create(NULL, NULL, 1, 65536), EINVAL);
    /* Nothing was queued by the failed calls. */
    ran = 0;
    st_thread_yield();
    cr_assert_eq(ran, 0);
}

static void *use_some_stack(void *arg)
{
    volatile char buf[512];
    size_t i;

    for (i = 0; i < sizeof(buf); i++) {
        buf[i] = (char)i;
    }
    st_thread_yield();
    for (i = 0; i < sizeof(buf); i++) {
        if (buf[i] != (char)i) {
            return NULL;
        }
    }
    return arg;
}

Test(thread, small_and_odd_stack_sizes_work)
{
    static const int sizes[] = {1, 100, 4095, 4096, 4097, 16384, 0, 65536, 200000};
    st_thread_t t[sizeof(sizes) / sizeof(sizes[0])];
    size_t i;

    st_test_init();
    for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        t[i] = st_thread_create(use_some_stack, (void *)(uintptr_t)(i + 1), 1, sizes[i]);
        cr_assert_not_null(t[i], "stack size %d: %s", sizes[i], strerror(errno));
    }
    for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
        void *ret = NULL;

        cr_assert_eq(st_thread_join(t[i], &ret), 0);
        cr_assert_eq(ret, (void *)(uintptr_t)(i + 1), "stack size %d", sizes[i]);
    }
}

static void *deep_recursion_helper(int depth)
{
    volatile char pad[1024];

    pad[0] = (char)depth;
    if (depth == 0) {
        return (void *)(uintptr_t)pad[0];
    }
    return (char *)deep_recursion_helper(depth - 1) + (pad[0] == (char)depth);
}

static void *use_default_stack(void *arg)
{
    (void)arg;
    /* Roughly 100 KiB of frames: fits the 128 KiB default. */
    return deep_recursion_helper(96);
}

Test(thread, default_stack_holds_about_128k)
{
    void *ret = NULL;
    st_thread_t t;

    st_test_init();
    t = st_test_spawn(use_default_stack, NULL);
    cr_assert_eq(st_thread_join(t, &ret), 0);
    cr_assert_eq((uintptr_t)ret, 96);
}

static void *return_arg(void *arg)
{
    st_usleep(100);
    return arg;
}

Test(thread, join_returns_start_value)
{
    int token;

    st_test_init();
    st_test_join_returns(st_test_spawn(return_arg, &token), &token);
}

Test(thread, join_with_null_retvalp)
{

    st_test_init();
    ran = 0;
    st_test_run(mark_ran, NULL);
    cr_assert_eq(ran, 1);
}

Test(thread, join_drives_a_thread_that_has_not_run)
{
    void *ret = NULL;
    st_thread_t t;

    st_test_init();
    ran = 0;
    t = st_test_spawn(mark_ran, NULL);
    cr_assert_eq(ran, 0);
    cr_assert_eq(st_thread_join(t, &ret), 0);
    cr_assert_eq(ran, 1);
    cr_assert_null(ret);
}

Test(thread, join_a_finished_thread)
{
    void *ret = NULL;
    int token;
    st_thread_t t;

    st_test_init();
    t = st_test_spawn(log_letter, "Z");
    order_len = 0;
    cr_assert_eq(st_usleep(1000), 0);
    cr_assert_str_eq(order, "Z");
    /* The thread is finished and waits as a zombie for its joiner. */
    cr_assert_eq(st_thread_join(t, &ret), 0);
    cr_assert_null(ret);

    t = st_test_spawn(return_arg, &token);
    cr_assert_eq(st_usleep(5000), 0);
    cr_assert_eq(st_thread_join(t, &ret), 0);
    cr_assert_eq(ret, &token);
}

static int after_exit;

static void exit_from_nested(int depth)
{
    if (depth > 0) {
        exit_from_nested(depth - 1);
    } else {
        st_thread_exit((void *)(intptr_t)4242);
    }
    after_exit = 1;
}

static void *calls_exit(void *arg)
{
    (void)arg;
    exit_from_nested(5);
    after_exit = 1;
    return NULL;
}

Test(thread, exit_from_nested_call_delivers_retval)
{
    void *ret = NULL;
    st_thread_t t;

    st_test_init();
    after_exit = 0;
    t = st_test_spawn(calls_exit, NULL);
    cr_assert_eq(st_thread_join(t, &ret), 0);
    cr_assert_eq((intptr_t)ret, 4242);
    cr_assert_eq(after_exit, 0, "code after st_thread_exit ran");
}

Test(thread, non_joinable_cannot_be_joined)
{
    st_thread_t t = start_detached_marker();

    ST_ASSERT_FAILS(st_thread_join(t, NULL), EINVAL);
    /* The failed join did not block or run the thread. */
    cr_assert_eq(ran, 0);
    st_thread_yield();
    cr_assert_eq(ran, 1);
}

Test(thread, join_null_is_einval)
{
    void *ret = NULL;

    st_test_init();
    ST_ASSERT_FAILS(st_thread_join(NULL, &ret), EINVAL);
    ST_ASSERT_FAILS(st_thread_join(NULL, NULL), EINVAL);
}

Test(thread, primordial_is_not_joinable)
{
    st_test_init();
    /* The primordial is not joinable, so joining it is refused. */
    errno = 0;
    cr_assert_eq(st_thread_join(st_thread_self(), NULL), -1);
    cr_assert(errno == EINVAL || errno == EDEADLK, "errno %d", errno);
}

static int self_join_errno;
static int self_join_rc;

static void *join_self(void *arg)
{
    (void)arg;
    errno = 0;
    self_join_rc = st_thread_join(st_thread_self(), NULL);
    self_join_errno = errno;
    return NULL;
}

Test(thread, join_self_is_edeadlk)
{

    st_test_init();
    st_test_run(join_self, NULL);
    cr_assert_eq(self_join_rc, -1);
    cr_assert_eq(self_join_errno, EDEADLK);
}

static void *sleep_then_return(void *arg)
{
    cr_expect_eq(st_usleep(5000), 0);
    return arg;
}

static long long join_arg(struct st_test_blocked *b)
{
    return st_thread_join(b->arg, &b->result);
}

/* A target asleep for a while (returning token) and a coroutine ja that joins it. */
static st_thread_t start_joiner(struct st_test_blocked *ja, int *token, st_thread_t *joiner)
{
    st_thread_t target = st_test_spawn(sleep_then_return, token);

    *ja = (struct st_test_blocked){.call = join_arg, .arg = target};
    *joiner = st_test_block(ja);
    return target;
}

Test(thread, second_joiner_is_einval)
{
    struct st_test_blocked ja;
    int token;
    st_thread_t target;
    st_thread_t joiner;

    st_test_init();
    target = start_joiner(&ja, &token, &joiner);
    st_thread_yield(); /* target starts sleeping, joiner waits on it */
    cr_assert_eq(ja.rc, ST_TEST_NOT_RETURNED);
    ST_ASSERT_FAILS(st_thread_join(target, NULL), EINVAL);
    st_test_join(joiner);
    cr_assert_eq(ja.rc, 0);
    cr_assert_eq(ja.result, &token);
}

/* A joiner that was woken (here by an interrupt) is still the joiner until it has run. */
Test(thread, second_joiner_is_einval_while_the_first_has_not_run_yet)
{
    struct st_test_blocked ja;
    int token;
    st_thread_t target;
    st_thread_t joiner;

    st_test_init();
    target = start_joiner(&ja, &token, &joiner);
    st_thread_yield();
    st_thread_interrupt(joiner);
    ST_ASSERT_FAILS(st_thread_join(target, NULL), EINVAL);
    st_test_join(joiner);
    cr_assert_eq(ja.rc, -1);
    cr_assert_eq(ja.err, EINTR);
    /* Once it has run and given up, another coroutine may join. */
    st_test_join(target);
}

Test(thread, interrupted_joiner_gets_eintr)
{
    struct st_test_blocked ja;
    int token;
    void *ret = NULL;
    st_thread_t target;
    st_thread_t joiner;

    st_test_init();
    target = start_joiner(&ja, &token, &joiner);
    st_thread_yield();
    cr_assert_eq(ja.rc, ST_TEST_NOT_RETURNED);
    st_thread_interrupt(joiner);
    st_test_join(joiner);
    cr_assert_eq(ja.rc, -1);
    cr_assert_eq(ja.err, EINTR);
    /* The target can still be joined by someone else afterwards. */
    cr_assert_eq(st_thread_join(target, &ret), 0);
    cr_assert_eq(ret, &token);
}

Test(thread, many_coroutines)
{
    enum { N = 300 };
    static st_thread_t t[N];
    int i;

    st_test_init();
    for (i = 0; i < N; i++) {
        t[i] = st_thread_create(return_arg, (void *)(intptr_t)(i + 1), 1, 16384);
        cr_assert_not_null(t[i], "thread %d: %s", i, strerror(errno));
    }
    for (i = 0; i < N; i++) {
        void *ret = NULL;

        cr_assert_eq(st_thread_join(t[i], &ret), 0);
        cr_assert_eq((intptr_t)ret, i + 1);
    }
}

Test(thread, stacks_are_reused_across_generations)
{
    int gen;

    st_test_init();
    for (gen = 0; gen < 20; gen++) {
        st_thread_t t[10];
        int i;

        for (i = 0; i < 10; i++) {
            t[i] = st_thread_create(use_some_stack, (void *)(intptr_t)(gen * 10 + i + 1), 1,
                                    i % 2 ? 0 : 32768);
            cr_assert_not_null(t[i]);
        }
        for (i = 0; i < 10; i++) {
            void *ret = NULL;

            cr_assert_eq(st_thread_join(t[i], &ret), 0);
            cr_assert_eq((intptr_t)ret, gen * 10 + i + 1);
        }
    }
}

static void *spawn_children(void *arg)
{
    int depth = (int)(intptr_t)arg;
    void *ret = NULL;
    st_thread_t child;

    if (depth == 0) {
        return (void *)1;
    }
    child = st_thread_create(spawn_children, (void *)(intptr_t)(depth - 1), 1, 0);
    if (child == NULL || st_thread_join(child, &ret) != 0) {
        return NULL;
    }
    return (void *)((intptr_t)ret + 1);
}

Test(thread, coroutines_create_and_join_coroutines)
{
    void *ret = NULL;
    st_thread_t t;

    st_test_init();
    t = st_test_spawn(spawn_children, (void *)(intptr_t)10);
    cr_assert_eq(st_thread_join(t, &ret), 0);
    cr_assert_eq((intptr_t)ret, 11);
}

Test(thread, randomize_stacks_returns_previous_setting)
{
    int i;
    st_thread_t t[8];

    st_test_init();
    cr_assert_eq(st_randomize_stacks(1), 0);
    cr_assert_eq(st_randomize_stacks(1), 1);
    for (i = 0; i < 8; i++) {
        t[i] = st_thread_create(use_some_stack, (void *)(intptr_t)(i + 1), 1, i * 8192);
        cr_assert_not_null(t[i]);
    }
    for (i = 0; i < 8; i++) {
        void *ret = NULL;

        cr_assert_eq(st_thread_join(t[i], &ret), 0);
        cr_assert_eq((intptr_t)ret, i + 1);
    }
    cr_assert_eq(st_randomize_stacks(0), 1);
    cr_assert_eq(st_randomize_stacks(0), 0);
    st_test_run(use_some_stack, (void *)(intptr_t)9);
}

/*
 * The primordial leaving with st_thread_exit() must not end the process
 * while coroutines remain; the process exits with status 0 afterwards.
 * Run in a child process so that the exit status and output can be checked.
 */
static int report_fd;

static void *report_after_sleep(void *arg)
{
    char c = *(const char *)arg;

    st_usleep(2000);
    if (write(report_fd, &c, 1) != 1) {
        _exit(5);
    }
    st_usleep(1000);
    if (write(report_fd, &c, 1) != 1) {
        _exit(5);
    }
    return NULL;
}

static pid_t spawn_primordial_exit_child(int pfd[2], int joinable)
{
    pid_t pid;

    cr_assert_eq(pipe(pfd), 0);
    pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        close(pfd[0]);
        st_test_allow_exit();
        report_fd = pfd[1];
        if (st_test_try_init() != 0) {
            _exit(3);
        }
        if (!st_thread_create(report_after_sleep, "a", joinable, 0) ||
            !st_thread_create(report_after_sleep, "b", 0, 0) ||
            !st_thread_create(report_after_sleep, "c", joinable, 0)) {
            _exit(4);
        }
        st_thread_exit(NULL);
        /* Not reached. */
        if (write(report_fd, "X", 1) != 1) {
            _exit(6);
        }
        _exit(7);
    }
    close(pfd[1]);
    return pid;
}

static void check_primordial_exit_child(int pfd[2], pid_t pid)
{
    char buf[16];
    size_t total = 0;
    ssize_t n;
    int status = 0;

    while ((n = read(pfd[0], buf + total, sizeof(buf) - 1 - total)) > 0) {
        total += (size_t)n;
    }
    close(pfd[0]);
    buf[total] = '\0';
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status), "child did not exit normally (status 0x%x)", status);
    cr_assert_eq(WEXITSTATUS(status), 0, "child exit status %d", WEXITSTATUS(status));
    cr_assert_str_eq(buf, "abcabc");
}

Test(thread, primordial_exit_lets_others_finish)
{
    int pfd[2];
    pid_t pid = spawn_primordial_exit_child(pfd, 0);

    check_primordial_exit_child(pfd, pid);
}

Test(thread, primordial_exit_with_unjoined_joinable_threads)
{
    int pfd[2];
    pid_t pid = spawn_primordial_exit_child(pfd, 1);

    check_primordial_exit_child(pfd, pid);
}

struct stack_use {
    size_t bytes;
    unsigned sum;
};

static void *fill_stack_across_a_yield(void *arg)
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

/* A coroutine can use most of the stack size it asked for, across switches. */
Test(thread, a_requested_stack_is_usable_to_three_quarters)
{
    static const struct {
        int stack_size;
        size_t bytes;
    } cases[] = {{1024 * 1024, 768 * 1024}, {256 * 1024, 192 * 1024}};

    st_test_init();
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct stack_use use = {cases[i].bytes, 0};
        st_thread_t t = st_thread_create(fill_stack_across_a_yield, &use, 1, cases[i].stack_size);

        cr_assert_not_null(t, "stack size %d: %s", cases[i].stack_size, strerror(errno));
        st_test_join(t);
        cr_assert_eq(use.sum, 0x5aU * (unsigned)((cases[i].bytes + 511) / 512), "stack size %d",
                     cases[i].stack_size);
    }
}
