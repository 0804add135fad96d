/*
 * Condition variables: st_cond_new, st_cond_destroy, st_cond_wait,
 * st_cond_timedwait, st_cond_signal, st_cond_broadcast.
 */
#include "st_test.h"
#include "st_test_order.h"

ST_TEST_SUITE(cond);

struct waiter {
    st_cond_t cv;
    st_utime_t timeout; /* ST_UTIME_NO_TIMEOUT: use st_cond_wait */
    char letter;
    int rc;
    int err;
    int done;
    long long elapsed;
};

static void *waiter_main(void *arg)
{
    struct waiter *w = arg;
    long long start = st_test_deadline_base();

    errno = 0;
    if (w->timeout == ST_UTIME_NO_TIMEOUT) {
        w->rc = st_cond_wait(w->cv);
    } else {
        w->rc = st_cond_timedwait(w->cv, w->timeout);
    }
    w->err = errno;
    w->elapsed = st_test_now_us() - start;
    w->done = 1;
    order_add(w->letter);
    return NULL;
}

static st_thread_t start_waiter(struct waiter *w, st_cond_t cv, st_utime_t timeout, char letter)
{
    st_thread_t t;

    memset(w, 0, sizeof(*w));
    w->cv = cv;
    w->timeout = timeout;
    w->letter = letter;
    w->rc = 99;
    t = st_test_spawn(waiter_main, w);
    return t;
}

Test(cond, new_and_destroy)
{
    st_cond_t cv;

    st_test_init();
    cv = st_cond_new();
    cr_assert_not_null(cv);
    cr_assert_eq(st_cond_destroy(cv), 0);
}

Test(cond, signal_and_broadcast_without_waiters)
{
    st_cond_t cv;

    st_test_init();
    cv = st_cond_new();
    cr_assert_not_null(cv);
    cr_assert_eq(st_cond_signal(cv), 0);
    cr_assert_eq(st_cond_broadcast(cv), 0);
    /* Signals are not remembered: a later wait still times out. */
    ST_ASSERT_FAILS(st_cond_timedwait(cv, 2000), ETIME);
    cr_assert_eq(st_cond_destroy(cv), 0);
}

Test(cond, signal_wakes_exactly_one_in_fifo_order)
{
    struct waiter w[3];
    st_thread_t t[3];
    st_cond_t cv;
    int i;

    st_test_init();
    order_reset();
    cv = st_cond_new();
    cr_assert_not_null(cv);
    for (i = 0; i < 3; i++) {
        t[i] = start_waiter(&w[i], cv, ST_UTIME_NO_TIMEOUT, (char)('a' + i));
    }
    cr_assert_eq(st_usleep(1000), 0);
    cr_assert_str_eq(order, "");

    cr_assert_eq(st_cond_signal(cv), 0);
    /* The signaller keeps running; the waiter runs at the next switch. */
    cr_assert_eq(w[0].done, 0);
    cr_assert_eq(st_usleep(1000), 0);
    cr_assert_str_eq(order, "a");

    cr_assert_eq(st_cond_signal(cv), 0);
    cr_assert_eq(st_usleep(1000), 0);
    cr_assert_str_eq(order, "ab");

    cr_assert_eq(st_cond_signal(cv), 0);
    cr_assert_eq(st_usleep(1000), 0);
    cr_assert_str_eq(order, "abc");
    for (i = 0; i < 3; i++) {
        st_test_join(t[i]);
        cr_assert_eq(w[i].rc, 0);
    }
    cr_assert_eq(st_cond_destroy(cv), 0);
}

Test(cond, broadcast_wakes_all)
{
    struct waiter w[5];
    st_thread_t t[5];
    st_cond_t cv;
    int i;

    st_test_init();
    order_reset();
    cv = st_cond_new();
    cr_assert_not_null(cv);
    for (i = 0; i < 5; i++) {
        t[i] = start_waiter(&w[i], cv, i % 2 ? 1000000 : ST_UTIME_NO_TIMEOUT, (char)('a' + i));
    }
    cr_assert_eq(st_usleep(1000), 0);
    cr_assert_str_eq(order, "");
    cr_assert_eq(st_cond_broadcast(cv), 0);
    cr_assert_eq(st_usleep(1000), 0);
    cr_assert_str_eq(order, "abcde");
    for (i = 0; i < 5; i++) {
        st_test_join(t[i]);
        cr_assert_eq(w[i].rc, 0, "waiter %d", i);
        cr_assert_lt(w[i].elapsed, 500000);
    }
    cr_assert_eq(st_cond_destroy(cv), 0);
}

Test(cond, timedwait_times_out_with_etime)
{
    struct waiter w;
    st_thread_t t;
    st_cond_t cv;

    st_test_init();
    cv = st_cond_new();
    cr_assert_not_null(cv);
    cr_assert_eq(st_usleep(1000), 0);
    t = start_waiter(&w, cv, 20000, 'a');
    st_test_join(t);
    cr_assert_eq(w.rc, -1);
    cr_assert_eq(w.err, ETIME);
    cr_assert_geq(w.elapsed, 20000);
    cr_assert_lt(w.elapsed, ST_TEST_LATE_US);
    /* A timed-out waiter left the queue: destroy succeeds. */
    cr_assert_eq(st_cond_destroy(cv), 0);
}

Test(cond, timedwait_in_primordial)
{
    st_cond_t cv;
    long long start;

    st_test_init();
    cv = st_cond_new();
    cr_assert_not_null(cv);
    start = st_test_deadline_base();
    ST_ASSERT_FAILS(st_cond_timedwait(cv, 10000), ETIME);
    cr_assert_geq(st_test_now_us() - start, 10000);
    cr_assert_eq(st_cond_destroy(cv), 0);
}

Test(cond, no_wait_times_out_at_next_cycle)
{
    st_cond_t cv;
    long long start;

    st_test_init();
    cv = st_cond_new();
    cr_assert_not_null(cv);
    start = st_test_now_us();
    ST_ASSERT_FAILS(st_cond_timedwait(cv, ST_UTIME_NO_WAIT), ETIME);
    cr_assert_lt(st_test_now_us() - start, ST_TEST_LATE_US);
    cr_assert_eq(st_cond_destroy(cv), 0);
}

static void *signal_after_sleep(void *arg)
{
    cr_expect_eq(st_usleep(3000), 0);
    cr_expect_eq(st_cond_signal((st_cond_t)arg), 0);
    return NULL;
}

Test(cond, timedwait_signalled_before_timeout)
{
    st_cond_t cv;
    st_thread_t t;
    long long start;

    st_test_init();
    cv = st_cond_new();
    cr_assert_not_null(cv);
    t = st_test_spawn(signal_after_sleep, cv);
    start = st_test_now_us();
    cr_assert_eq(st_cond_timedwait(cv, 5000000), 0);
    cr_assert_lt(st_test_now_us() - start, ST_TEST_LATE_US);
    st_test_join(t);
    /* The cancelled timeout does not fire later. */
    cr_assert_eq(st_usleep(2000), 0);
    cr_assert_eq(st_cond_destroy(cv), 0);
}

Test(cond, wait_in_primordial_woken_by_coroutine)
{
    st_cond_t cv;
    st_thread_t t;

    st_test_init();
    cv = st_cond_new();
    cr_assert_not_null(cv);
    t = st_test_spawn(signal_after_sleep, cv);
    cr_assert_eq(st_cond_wait(cv), 0);
    st_test_join(t);
    cr_assert_eq(st_cond_destroy(cv), 0);
}

Test(cond, destroy_with_waiters_is_ebusy)
{
    struct waiter w;
    st_thread_t t;
    st_cond_t cv;

    st_test_init();
    cv = st_cond_new();
    cr_assert_not_null(cv);
    t = start_waiter(&w, cv, ST_UTIME_NO_TIMEOUT, 'a');
    st_thread_yield();
    ST_ASSERT_FAILS(st_cond_destroy(cv), EBUSY);
    /* The cond is intact and still wakes its waiter. */
    cr_assert_eq(st_cond_signal(cv), 0);
    st_test_join(t);
    cr_assert_eq(w.rc, 0);
    cr_assert_eq(st_cond_destroy(cv), 0);
}

/* A signalled waiter that has not run yet still uses the cond. */
Test(cond, destroy_is_ebusy_until_a_woken_waiter_has_run)
{
    struct waiter w;
    st_thread_t t;
    st_cond_t cv;

    st_test_init();
    cv = st_cond_new();
    cr_assert_not_null(cv);
    t = start_waiter(&w, cv, ST_UTIME_NO_TIMEOUT, 'a');
    st_thread_yield();
    cr_assert_eq(st_cond_signal(cv), 0);
    ST_ASSERT_FAILS(st_cond_destroy(cv), EBUSY);
    st_test_join(t);
    cr_assert_eq(w.rc, 0);
    cr_assert_eq(st_cond_destroy(cv), 0);
}

Test(cond, interrupt_wakes_waiter_with_eintr)
{
    struct waiter w[2];
    st_thread_t t[2];
    st_cond_t cv;

    st_test_init();
    cv = st_cond_new();
    cr_assert_not_null(cv);
    t[0] = start_waiter(&w[0], cv, ST_UTIME_NO_TIMEOUT, 'a');
    t[1] = start_waiter(&w[1], cv, 5000000, 'b');
    cr_assert_eq(st_usleep(1000), 0);
    st_thread_interrupt(t[0]);
    st_thread_interrupt(t[1]);
    st_test_join(t[0]);
    st_test_join(t[1]);
    cr_assert_eq(w[0].rc, -1);
    cr_assert_eq(w[0].err, EINTR);
    cr_assert_eq(w[1].rc, -1);
    cr_assert_eq(w[1].err, EINTR);
    cr_assert_lt(w[1].elapsed, ST_TEST_LATE_US);
    /* Both left the wait queue. */
    cr_assert_eq(st_cond_signal(cv), 0);
    cr_assert_eq(st_cond_destroy(cv), 0);
}

Test(cond, interrupted_waiter_does_not_take_a_signal)
{
    struct waiter w[2];
    st_thread_t t[2];
    st_cond_t cv;

    st_test_init();
    order_reset();
    cv = st_cond_new();
    cr_assert_not_null(cv);
    t[0] = start_waiter(&w[0], cv, ST_UTIME_NO_TIMEOUT, 'a');
    t[1] = start_waiter(&w[1], cv, ST_UTIME_NO_TIMEOUT, 'b');
    cr_assert_eq(st_usleep(1000), 0);
    st_thread_interrupt(t[0]);
    st_test_join(t[0]);
    /* The only waiter left is b, so one signal must wake it. */
    cr_assert_eq(st_cond_signal(cv), 0);
    st_test_join(t[1]);
    cr_assert_eq(w[1].rc, 0);
    cr_assert_str_eq(order, "ab");
    cr_assert_eq(st_cond_destroy(cv), 0);
}

static void *pending_interrupt_wait(void *arg)
{
    struct waiter *w = arg;

    st_thread_interrupt(st_thread_self());
    errno = 0;
    w->rc = st_cond_wait(w->cv);
    w->err = errno;
    /* The flag was consumed: the next wait times out normally. */
    errno = 0;
    w->done = st_cond_timedwait(w->cv, 1000);
    w->elapsed = errno;
    return NULL;
}

Test(cond, pending_interrupt_fails_wait_once)
{
    struct waiter w = {0};

    st_test_init();
    w.cv = st_cond_new();
    cr_assert_not_null(w.cv);
    st_test_run(pending_interrupt_wait, &w);
    cr_assert_eq(w.rc, -1);
    cr_assert_eq(w.err, EINTR);
    cr_assert_eq(w.done, -1);
    cr_assert_eq(w.elapsed, ETIME);
    cr_assert_eq(st_cond_destroy(w.cv), 0);
}

Test(cond, pending_interrupt_fails_timedwait)
{
    st_cond_t cv;

    st_test_init();
    cv = st_cond_new();
    cr_assert_not_null(cv);
    st_thread_interrupt(st_thread_self());
    ST_ASSERT_FAILS(st_cond_timedwait(cv, 1000000), EINTR);
    ST_ASSERT_FAILS(st_cond_timedwait(cv, 1000), ETIME);
    cr_assert_eq(st_cond_destroy(cv), 0);
}

Test(cond, null_cond_is_einval)
{
    st_test_init();
    ST_ASSERT_FAILS(st_cond_destroy(NULL), EINVAL);
    ST_ASSERT_FAILS(st_cond_wait(NULL), EINVAL);
    ST_ASSERT_FAILS(st_cond_timedwait(NULL, 1000), EINVAL);
    ST_ASSERT_FAILS(st_cond_timedwait(NULL, ST_UTIME_NO_WAIT), EINVAL);
    ST_ASSERT_FAILS(st_cond_signal(NULL), EINVAL);
    ST_ASSERT_FAILS(st_cond_broadcast(NULL), EINVAL);
}

struct pc {
    st_cond_t cv;
    int items;
    int consumed;
    int produced;
};

static void *consumer(void *arg)
{
    struct pc *pc = arg;

    while (pc->consumed < 100) {
        while (pc->items == 0) {
            if (st_cond_wait(pc->cv) != 0) {
                return NULL;
            }
        }
        pc->items--;
        pc->consumed++;
    }
    return (void *)1;
}

static void *producer(void *arg)
{
    struct pc *pc = arg;
    int i;

    for (i = 0; i < 100; i++) {
        pc->items++;
        pc->produced++;
        st_cond_signal(pc->cv);
        if (i % 10 == 0) {
            st_usleep(100);
        } else {
            st_thread_yield();
        }
    }
    return (void *)1;
}

Test(cond, producer_consumer)
{
    struct pc pc = {0};
    st_thread_t c;
    st_thread_t p;
    void *rc = NULL;
    void *rp = NULL;

    st_test_init();
    pc.cv = st_cond_new();
    cr_assert_not_null(pc.cv);
    c = st_thread_create(consumer, &pc, 1, 0);
    p = st_thread_create(producer, &pc, 1, 0);
    cr_assert_not_null(c);
    cr_assert_not_null(p);
    cr_assert_eq(st_thread_join(p, &rp), 0);
    cr_assert_eq(st_thread_join(c, &rc), 0);
    cr_assert_eq(rp, (void *)1);
    cr_assert_eq(rc, (void *)1);
    cr_assert_eq(pc.consumed, 100);
    cr_assert_eq(pc.items, 0);
    cr_assert_eq(st_cond_destroy(pc.cv), 0);
}

Test(cond, consecutive_signals_wake_distinct_waiters)
{
    struct waiter w[3];
    st_thread_t t[3];
    st_cond_t cv;
    int i;

    st_test_init();
    order_reset();
    cv = st_cond_new();
    cr_assert_not_null(cv);
    for (i = 0; i < 3; i++) {
        t[i] = start_waiter(&w[i], cv, ST_UTIME_NO_TIMEOUT, (char)('a' + i));
    }
    cr_assert_eq(st_usleep(1000), 0);
    /* Two signals before anyone runs: the first waiter is already woken,
     * so the second signal goes to the next one. */
    cr_assert_eq(st_cond_signal(cv), 0);
    cr_assert_eq(st_cond_signal(cv), 0);
    cr_assert_eq(st_usleep(1000), 0);
    cr_assert_str_eq(order, "ab");
    cr_assert_eq(w[2].done, 0);
    /* A broadcast after a signal wakes the rest exactly once. */
    cr_assert_eq(st_cond_broadcast(cv), 0);
    for (i = 0; i < 3; i++) {
        st_test_join(t[i]);
        cr_assert_eq(w[i].rc, 0);
    }
    cr_assert_str_eq(order, "abc");
    cr_assert_eq(st_cond_destroy(cv), 0);
}

/*
 * A timed wait ended by a signal leaves no timer behind: the next timed
 * wait on the same condition lasts its whole timeout.
 */
Test(cond, a_signalled_timedwait_does_not_cut_the_next_one_short)
{
    st_cond_t cv;
    st_thread_t t;
    long long start;

    st_test_init();
    cv = st_cond_new();
    cr_assert_not_null(cv);
    t = st_test_spawn(signal_after_sleep, cv);
    cr_assert_eq(st_cond_timedwait(cv, 200000), 0);
    st_test_join(t);
    start = st_test_deadline_base();
    ST_ASSERT_FAILS(st_cond_timedwait(cv, 300000), ETIME);
    cr_assert_geq(st_test_now_us() - start, 300000LL);
    cr_assert_eq(st_cond_destroy(cv), 0);
}
