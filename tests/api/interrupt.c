/*
 * st_thread_interrupt: waking sleepers and the sticky interrupt flag seen by
 * the next blocking call. (Interrupting I/O waits is covered in io.c and
 * poll.c, cond and mutex waits in cond.c and mutex.c.)
 */
#include "st_test.h"

ST_TEST_SUITE(interrupt);

struct sleeper {
    st_utime_t usecs;
    int use_st_sleep;
    int secs;
    int rc;
    int err;
    int done;
    long long elapsed;
};

static void *sleeper_main(void *arg)
{
    struct sleeper *s = arg;
    long long start = st_test_deadline_base();

    errno = 0;
    if (s->use_st_sleep) {
        s->rc = st_sleep(s->secs);
    } else {
        s->rc = st_usleep(s->usecs);
    }
    s->err = errno;
    s->elapsed = st_test_now_us() - start;
    s->done = 1;
    return NULL;
}

static void interrupt_sleeper(struct sleeper *s)
{
    st_thread_t t;

    st_test_init();
    t = st_test_spawn(sleeper_main, s);
    cr_assert_eq(st_usleep(2000), 0);
    cr_assert_eq(s->done, 0, "sleeper returned before being interrupted (rc %d)", s->rc);
    st_thread_interrupt(t);
    st_test_join(t);
    cr_assert_eq(s->done, 1);
    cr_assert_eq(s->rc, -1);
    cr_assert_eq(s->err, EINTR);
    cr_assert_lt(s->elapsed, ST_TEST_LATE_US);
}

Test(interrupt, wakes_usleep_forever)
{
    struct sleeper s = {.usecs = ST_UTIME_NO_TIMEOUT};

    interrupt_sleeper(&s);
}

Test(interrupt, wakes_st_sleep_forever)
{
    struct sleeper s = {.use_st_sleep = 1, .secs = -1};

    interrupt_sleeper(&s);
}

Test(interrupt, wakes_long_usleep_early)
{
    struct sleeper s = {.usecs = 30 * 1000000ULL};

    interrupt_sleeper(&s);
}

Test(interrupt, wakes_long_st_sleep_early)
{
    struct sleeper s = {.use_st_sleep = 1, .secs = 30};

    interrupt_sleeper(&s);
}

Test(interrupt, interrupted_sleeper_leaves_the_timer_queue)
{
    struct sleeper a = {.usecs = 20000};
    struct sleeper b = {.usecs = 4000};
    st_thread_t ta;
    st_thread_t tb;

    st_test_init();
    ta = st_thread_create(sleeper_main, &a, 1, 0);
    tb = st_thread_create(sleeper_main, &b, 1, 0);
    cr_assert_not_null(ta);
    cr_assert_not_null(tb);
    st_thread_yield();
    st_thread_interrupt(ta);
    st_test_join(ta);
    cr_assert_eq(a.rc, -1);
    cr_assert_eq(a.err, EINTR);
    /* The other sleeper is unaffected and still sleeps its full time. */
    cr_assert_eq(b.done, 0);
    st_test_join(tb);
    cr_assert_eq(b.rc, 0);
    cr_assert_geq(b.elapsed, 4000);
    /* And the scheduler keeps timing correctly afterwards. */
    cr_assert_eq(st_usleep(3000), 0);
}

struct sticky {
    int first_rc, first_err;
    int second_rc;
};

/* Runs fn, whose first call fails on its own pending interrupt and whose second does not. */
static void check_sticky(void *(*fn)(void *))
{
    struct sticky s = {.first_rc = 99, .second_rc = 99};

    st_test_init();
    st_test_run(fn, &s);
    cr_assert_eq(s.first_rc, -1);
    cr_assert_eq(s.first_err, EINTR);
    cr_assert_eq(s.second_rc, 0);
}

static void *self_interrupt_usleep(void *arg)
{
    struct sticky *s = arg;

    st_thread_interrupt(st_thread_self());
    errno = 0;
    s->first_rc = st_usleep(1000);
    s->first_err = errno;
    s->second_rc = st_usleep(1000);
    return NULL;
}

Test(interrupt, flag_is_sticky_and_consumed_once)
{
    check_sticky(self_interrupt_usleep);
}

Test(interrupt, primordial_can_interrupt_itself)
{
    st_test_init();
    st_thread_interrupt(st_thread_self());
    ST_ASSERT_FAILS(st_usleep(1000), EINTR);
    cr_assert_eq(st_usleep(1000), 0);
    st_thread_interrupt(st_thread_self());
    ST_ASSERT_FAILS(st_sleep(0), EINTR);
    cr_assert_eq(st_sleep(0), 0);
}

Test(interrupt, runnable_thread_sees_flag_at_first_block)
{
    struct sleeper s = {.usecs = 1000000};
    st_thread_t t;

    st_test_init();
    t = st_test_spawn(sleeper_main, &s);
    /* Interrupted before it ever ran. */
    st_thread_interrupt(t);
    st_test_join(t);
    cr_assert_eq(s.rc, -1);
    cr_assert_eq(s.err, EINTR);
    cr_assert_lt(s.elapsed, 500000);
}

static void *self_interrupt_join(void *arg)
{
    struct sticky *s = arg;
    st_thread_t child = st_thread_create(sleeper_main, &(struct sleeper){.usecs = 1000}, 1, 0);

    if (child == NULL) {
        return NULL;
    }
    st_thread_interrupt(st_thread_self());
    errno = 0;
    s->first_rc = st_thread_join(child, NULL);
    s->first_err = errno;
    s->second_rc = st_thread_join(child, NULL);
    return NULL;
}

Test(interrupt, pending_flag_fails_join)
{
    check_sticky(self_interrupt_join);
}

Test(interrupt, zombie_is_unaffected)
{
    int token;
    st_thread_t t;

    st_test_init();
    t = st_test_zombie(&token); /* t finishes and waits for its joiner */
    st_thread_interrupt(t);
    cr_assert_eq(st_usleep(1000), 0);
    st_test_join_returns(t, &token);
    cr_assert_eq(st_usleep(1000), 0);
}

Test(interrupt, null_is_a_no_op)
{
    st_test_init();
    st_thread_interrupt(NULL);
    cr_assert_eq(st_usleep(1000), 0);
}

static void *sleep_forever(void *arg)
{
    int *count = arg;

    if (st_usleep(ST_UTIME_NO_TIMEOUT) == -1 && errno == EINTR) {
        (*count)++;
    }
    return NULL;
}

Test(interrupt, many_sleepers)
{
    enum { N = 50 };
    st_thread_t t[N];
    int count = 0;
    int i;

    st_test_init();
    for (i = 0; i < N; i++) {
        t[i] = st_test_spawn(sleep_forever, &count);
    }
    cr_assert_eq(st_usleep(1000), 0);
    cr_assert_eq(count, 0);
    for (i = N - 1; i >= 0; i -= 2) {
        st_thread_interrupt(t[i]);
    }
    cr_assert_eq(st_usleep(1000), 0);
    cr_assert_eq(count, N / 2);
    for (i = N - 2; i >= 0; i -= 2) {
        st_thread_interrupt(t[i]);
    }
    for (i = 0; i < N; i++) {
        st_test_join(t[i]);
    }
    cr_assert_eq(count, N);
}
