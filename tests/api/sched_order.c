/*
 * Scheduling order: st_thread_yield, FIFO run queue, timer ordering and the
 * priority of timed-out coroutines over I/O-ready ones.
 */
#include "st_test.h"
#include "st_test_order.h"

ST_TEST_SUITE(sched_order);

Test(sched_order, yield_alone_returns_at_once)
{
    long long start;
    int i;

    st_test_init();
    start = st_test_now_us();
    for (i = 0; i < 1000; i++) {
        st_thread_yield();
    }
    cr_assert_lt(st_test_now_us() - start, ST_TEST_LATE_US);
}

static void *sleep_long(void *arg)
{
    int *rc = arg;

    *rc = st_usleep(10 * 1000000ULL);
    return NULL;
}

Test(sched_order, yield_with_only_sleepers_returns_at_once)
{
    long long start;
    int rc = 99;
    st_thread_t t;

    st_test_init();
    t = st_test_spawn(sleep_long, &rc);
    st_thread_yield(); /* t starts its long sleep */
    /* A sleeper that is not due does not hold up the yielding primordial. */
    start = st_test_now_us();
    st_thread_yield();
    st_thread_yield();
    cr_assert_lt(st_test_now_us() - start, ST_TEST_LATE_US);
    cr_assert_eq(rc, 99);
    st_thread_interrupt(t);
    st_test_join(t);
    cr_assert_eq(rc, -1);
}

static void *step_twice(void *arg)
{
    const char *letters = arg;

    order_add(letters[0]);
    st_thread_yield();
    order_add(letters[1]);
    return NULL;
}

Test(sched_order, yield_runs_others_first_in_fifo_order)
{
    st_test_init();
    order_reset();
    cr_assert_not_null(st_thread_create(step_twice, "aA", 0, 0));
    cr_assert_not_null(st_thread_create(step_twice, "bB", 0, 0));
    cr_assert_not_null(st_thread_create(step_twice, "cC", 0, 0));
    cr_assert_str_eq(order, "");
    st_thread_yield();
    order_add('P');
    st_thread_yield();
    order_add('P');
    cr_assert_str_eq(order, "abcPABCP");
}

struct timed {
    st_utime_t usecs;
    char letter;
};

static void *sleep_then_log(void *arg)
{
    struct timed *t = arg;

    cr_expect_eq(st_usleep(t->usecs), 0);
    order_add(t->letter);
    return NULL;
}

Test(sched_order, earlier_deadline_wakes_first)
{
    struct timed spec[] = {{9000, 'c'}, {1000, 'a'}, {5000, 'b'}, {13000, 'd'}};
    st_thread_t t[4];
    int i;

    st_test_init();
    order_reset();
    for (i = 0; i < 4; i++) {
        t[i] = st_test_spawn(sleep_then_log, &spec[i]);
    }
    for (i = 0; i < 4; i++) {
        st_test_join(t[i]);
    }
    cr_assert_str_eq(order, "abcd");
}

Test(sched_order, equal_deadlines_wake_in_sleep_order)
{
    static struct timed spec[8];
    st_thread_t t[8];
    int i;

    st_test_init();
    order_reset();
    for (i = 0; i < 8; i++) {
        spec[i].usecs = 3000;
        spec[i].letter = (char)('a' + i);
        t[i] = st_test_spawn(sleep_then_log, &spec[i]);
    }
    for (i = 0; i < 8; i++) {
        st_test_join(t[i]);
    }
    cr_assert_str_eq(order, "abcdefgh");
}

Test(sched_order, many_timers_wake_sorted)
{
    enum { N = 64 };
    static struct timed spec[N];
    st_thread_t t[N];
    int i;

    st_test_init();
    order_reset();
    /* Deadlines in a scrambled order, 0.5 ms apart. */
    for (i = 0; i < N; i++) {
        int rank = (i * 37) % N;

        spec[i].usecs = 1000 + (st_utime_t)rank * 500;
        spec[i].letter = (char)(' ' + rank);
        t[i] = st_test_spawn(sleep_then_log, &spec[i]);
    }
    for (i = 0; i < N; i++) {
        st_test_join(t[i]);
    }
    cr_assert_eq(order_len, N);
    for (i = 0; i < N; i++) {
        cr_assert_eq(order[i], (char)(' ' + i), "position %d woke rank %d", i, order[i] - ' ');
    }
}

static void *read_then_log(void *arg)
{
    st_netfd_t nfd = arg;
    char c;

    cr_expect_eq(st_read(nfd, &c, 1, 1000000), 1);
    order_add('r');
    return NULL;
}

static void *short_sleep_then_log(void *arg)
{
    (void)arg;
    cr_expect_eq(st_usleep(2000), 0);
    order_add('s');
    return NULL;
}

Test(sched_order, timed_out_runs_before_io_ready)
{
    st_thread_t reader;
    st_thread_t sleeper;
    st_netfd_t nfd;
    int raw;

    st_test_init();
    order_reset();
    nfd = st_test_socketpair_raw(&raw);
    reader = st_thread_create(read_then_log, nfd, 1, 0);
    sleeper = st_thread_create(short_sleep_then_log, NULL, 1, 0);
    cr_assert_not_null(reader);
    cr_assert_not_null(sleeper);
    st_thread_yield(); /* reader waits for input, sleeper waits for its timer */
    cr_assert_str_eq(order, "");
    /* Make both ready before the scheduler gets to look again. */
    cr_assert_eq(write(raw, "x", 1), 1);
    st_test_busy_wait_us(10000);
    st_test_join(reader);
    st_test_join(sleeper);
    cr_assert_str_eq(order, "sr");
    close(raw);
    cr_assert_eq(st_netfd_close(nfd), 0);
}

static void *wait_then_log(void *arg)
{
    st_cond_t cv = arg;

    cr_expect_eq(st_cond_wait(cv), 0);
    order_add('w');
    return NULL;
}

Test(sched_order, woken_threads_queue_behind_runnable_ones)
{
    st_cond_t cv;
    st_thread_t w;

    st_test_init();
    order_reset();
    cv = st_cond_new();
    cr_assert_not_null(cv);
    w = st_test_spawn(wait_then_log, cv);
    st_thread_yield();
    cr_assert_not_null(st_thread_create(step_twice, "aA", 0, 0));
    cr_assert_eq(st_cond_signal(cv), 0);
    /* a was queued before the waiter was woken, so it runs first. */
    st_thread_yield();
    order_add('P');
    st_test_join(w);
    st_thread_yield();
    cr_assert_str_eq(order, "awPA");
    cr_assert_eq(st_cond_destroy(cv), 0);
}
