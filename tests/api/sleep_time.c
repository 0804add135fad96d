/*
 * Sleeping and time: st_usleep, st_sleep, st_utime, st_utime_last_clock,
 * st_set_utime_function, st_timecache_set, st_time.
 */
#include "st_test.h"

#include <sys/time.h>

ST_TEST_SUITE(sleep_time);

static void check_usleep(st_utime_t usecs)
{
    long long start;
    long long elapsed;

    start = st_test_deadline_base();
    cr_assert_eq(st_usleep(usecs), 0);
    elapsed = st_test_now_us() - start;
    cr_assert_geq(elapsed, (long long)usecs, "st_usleep(%llu) took %lld us", usecs, elapsed);
    cr_assert_lt(elapsed, (long long)usecs + ST_TEST_LATE_US);
}

Test(sleep_time, usleep_waits_at_least_the_duration)
{
    st_test_init();
    check_usleep(20000);
    check_usleep(5000);
    check_usleep(1500); /* below one millisecond of slack for ms-based backends */
}

Test(sleep_time, usleep_zero_returns_promptly)
{
    long long start;

    st_test_init();
    start = st_test_now_us();
    cr_assert_eq(st_usleep(0), 0);
    cr_assert_eq(st_usleep(ST_UTIME_NO_WAIT), 0);
    cr_assert_lt(st_test_now_us() - start, ST_TEST_LATE_US);
}

Test(sleep_time, st_sleep_zero_returns_promptly)
{
    long long start;

    st_test_init();
    start = st_test_now_us();
    cr_assert_eq(st_sleep(0), 0);
    cr_assert_lt(st_test_now_us() - start, ST_TEST_LATE_US);
}

struct sleeper {
    st_utime_t usecs;
    int rc;
    long long slept; /* from the deadline's base to the wake-up */
    int woke_as;     /* 1 for the first sleeper to wake, 2 for the next... */
};

static int sleepers_woken;

static void *sleeper_main(void *arg)
{
    struct sleeper *s = arg;
    long long start = st_test_deadline_base();

    s->rc = st_usleep(s->usecs);
    s->slept = st_test_now_us() - start;
    s->woke_as = ++sleepers_woken;
    return NULL;
}

Test(sleep_time, sleepers_do_not_block_each_other)
{
    struct sleeper s[3] = {{15000, -1, 0, 0}, {5000, -1, 0, 0}, {10000, -1, 0, 0}};
    st_thread_t t[3];
    int i;

    st_test_init();
    sleepers_woken = 0;
    for (i = 0; i < 3; i++) {
        t[i] = st_test_spawn(sleeper_main, &s[i]);
    }
    for (i = 0; i < 3; i++) {
        st_test_join(t[i]);
    }
    for (i = 0; i < 3; i++) {
        cr_assert_eq(s[i].rc, 0);
        cr_assert_geq(s[i].slept, (long long)s[i].usecs);
    }
    /*
     * The three slept at once: they woke shortest first, not in the order
     * they started, as sleeps one after another would.
     */
    cr_assert_eq(s[1].woke_as, 1);
    cr_assert_eq(s[2].woke_as, 2);
    cr_assert_eq(s[0].woke_as, 3);
}

Test(sleep_time, sleep_forever_until_interrupted)
{
    struct sleeper s = {ST_UTIME_NO_TIMEOUT, 99, 0, 0};
    st_thread_t t;

    st_test_init();
    t = st_test_spawn(sleeper_main, &s);
    cr_assert_eq(st_usleep(10000), 0);
    cr_assert_eq(s.rc, 99, "a sleep without timeout returned by itself");
    st_thread_interrupt(t);
    st_test_join(t);
    cr_assert_eq(s.rc, -1);
}

Test(sleep_time, utime_is_microseconds_and_increases)
{
    st_utime_t a;
    st_utime_t b;
    st_utime_t c;
    st_utime_t base;
    struct timeval tv;
    long long start;

    a = st_utime();
    cr_assert_gt(a, 0);
    st_test_init();
    b = st_utime();
    cr_assert_geq(b, a);
    start = st_test_now_us();
    base = st_utime_last_clock(); /* where the sleep's deadline counts from */
    cr_assert_eq(st_usleep(10000), 0);
    c = st_utime();
    cr_assert_gt(c, b);
    /* Microseconds: 10 ms of sleep is at least 10000 units, not 10, and not 10^7. */
    cr_assert_geq((long long)(c - base), 10000);
    cr_assert_lt((long long)(c - b), st_test_now_us() - start + 100000);
    /* The default clock is the monotonic one, not the wall clock (far from it: boot time). */
    {
        long long diff = st_test_now_us() - (long long)st_utime();

        cr_assert_lt(diff < 0 ? -diff : diff, 1000000);
    }
    gettimeofday(&tv, NULL);
    cr_assert_gt((long long)tv.tv_sec * 1000000LL + tv.tv_usec - (long long)st_utime(), 1000000LL,
                 "st_utime() reads the wall clock");
}

Test(sleep_time, last_clock_is_not_ahead_of_now)
{
    st_utime_t before;

    st_test_init();
    cr_assert_leq(st_utime_last_clock(), st_utime());
    before = st_utime_last_clock();
    cr_assert_gt(before, 0);
    cr_assert_eq(st_usleep(3000), 0);
    /* A trip through the scheduler advanced the clock. */
    cr_assert_gt(st_utime_last_clock(), before);
    cr_assert_leq(st_utime_last_clock(), st_utime());
}

static unsigned long long fake_calls;

/* A clock with its own epoch (boot time), far from the wall clock's. */
static st_utime_t monotonic_clock(void)
{
    fake_calls++;
    return (st_utime_t)st_test_now_us();
}

static long long absdiff(long long a, long long b)
{
    return a > b ? a - b : b - a;
}

Test(sleep_time, custom_utime_function_before_init)
{
    st_utime_t t0;
    unsigned long long calls;

    cr_assert_eq(st_set_utime_function(monotonic_clock), 0);
    t0 = st_utime();
    cr_assert_gt(fake_calls, 0);
    cr_assert_lt(absdiff((long long)t0, st_test_now_us()), 1000000);
    st_test_init();
    cr_assert_lt(absdiff((long long)st_utime_last_clock(), st_test_now_us()), 1000000);
    calls = fake_calls;
    check_usleep(5000);
    cr_assert_gt(fake_calls, calls, "the scheduler does not read the custom clock");
    cr_assert_geq(st_utime(), t0 + 5000);
    cr_assert_lt(absdiff((long long)st_utime(), st_test_now_us()), 1000000);
}

Test(sleep_time, utime_function_after_init_is_einval)
{
    st_test_init();
    ST_ASSERT_FAILS(st_set_utime_function(monotonic_clock), EINVAL);
    ST_ASSERT_FAILS(st_set_utime_function(NULL), EINVAL);
    /* The clock in use did not change. */
    cr_assert_lt(absdiff((long long)st_utime(), st_test_now_us()), 1000000);
    cr_assert_eq(st_usleep(1000), 0);
    cr_assert_eq(fake_calls, 0);
}

/*
 * With nobody sleeping, a deadline counts from a fresh clock: a long
 * computation since the last scheduler cycle does not make it due at once.
 */
static void *sleep_1ms(void *arg)
{
    (void)arg;
    st_usleep(1000);
    return NULL;
}

Test(sleep_time, first_deadline_after_a_long_computation_counts_from_now)
{
    long long start;

    st_test_init();
    st_test_busy_wait_us(200000);
    /* A shorter sleeper makes the scheduler check the clock before our deadline. */
    cr_assert_not_null(st_thread_create(sleep_1ms, NULL, 0, 0));
    start = st_test_now_us();
    cr_assert_eq(st_usleep(100000), 0);
    /* Not from the last cycle's clock, before the computation: from a fresh one. */
    cr_assert_geq(st_test_now_us() - start, 100000, "slept %lld us of 100000",
                  st_test_now_us() - start);
}

static st_utime_t fake_now;

/* A clock that moves only when the test says so. */
static st_utime_t manual_clock(void)
{
    return fake_now;
}

Test(sleep_time, null_before_init_goes_back_to_the_monotonic_clock)
{
    fake_now = 42;
    cr_assert_eq(st_set_utime_function(manual_clock), 0);
    cr_assert_eq(st_utime(), 42);
    cr_assert_eq(st_set_utime_function(NULL), 0);
    cr_assert_lt(absdiff((long long)st_utime(), st_test_now_us()), 1000000);
    st_test_init();
    cr_assert_lt(absdiff((long long)st_utime_last_clock(), st_test_now_us()), 1000000);
    /* Set once st runs, it is refused and the clock stays. */
    ST_ASSERT_FAILS(st_set_utime_function(manual_clock), EINVAL);
    cr_assert_lt(absdiff((long long)st_utime(), st_test_now_us()), 1000000);
}

static void *sleep_2s(void *arg)
{
    (void)arg;
    st_usleep(2000000);
    return NULL;
}

/* Every yield brings st_utime_last_clock() up to date, sleepers or not. */
Test(sleep_time, yield_keeps_last_clock_current)
{
    st_thread_t t;

    fake_now = 1000;
    cr_assert_eq(st_set_utime_function(manual_clock), 0);
    st_test_init();
    cr_assert_eq(st_utime_last_clock(), 1000);
    fake_now = 5000;
    st_thread_yield(); /* nobody sleeps and nobody else is runnable */
    cr_assert_eq(st_utime_last_clock(), 5000);

    t = st_thread_create(sleep_2s, NULL, 0, 0);
    cr_assert_not_null(t);
    cr_assert_eq(st_usleep(0), 0); /* t runs and sleeps */
    fake_now = 20000;
    st_thread_yield();
    cr_assert_eq(st_utime_last_clock(), 20000);
    st_thread_interrupt(t);
    st_thread_yield();
}

/*
 * A yield with nobody asleep puts its clock reading off, but the last clock
 * is still never later than an st_utime() taken after the yield, as in State
 * Threads, whose yield reads the clock.
 */
Test(sleep_time, last_clock_is_not_later_than_a_reading_after_the_yield)
{
    fake_now = 1000;
    cr_assert_eq(st_set_utime_function(manual_clock), 0);
    st_test_init();
    fake_now = 5000;
    st_thread_yield(); /* nobody sleeps: the reading is put off */
    cr_assert_eq(st_utime(), 5000);
    fake_now = 9000; /* time passes without a trip through the scheduler */
    cr_assert_eq(st_utime_last_clock(), 5000);
    cr_assert_eq(st_utime(), 9000);
    cr_assert_eq(st_utime_last_clock(), 5000);
}

Test(sleep_time, timecache_returns_previous_setting)
{
    st_test_init();
    cr_assert_eq(st_timecache_set(1), 0);
    cr_assert_eq(st_timecache_set(1), 1);
    cr_assert_eq(st_timecache_set(0), 1);
    cr_assert_eq(st_timecache_set(0), 0);
}

static void check_time_close(void)
{
    time_t now = time(NULL);
    time_t st_now = st_time();
    long long diff = (long long)st_now - (long long)now;

    cr_assert_lt(diff < 0 ? -diff : diff, 3, "st_time %lld vs time %lld", (long long)st_now,
                 (long long)now);
}

Test(sleep_time, st_time_with_and_without_cache)
{
    st_test_init();
    check_time_close();
    cr_assert_eq(st_timecache_set(1), 0);
    check_time_close();
    cr_assert_eq(st_usleep(2000), 0);
    check_time_close();
    cr_assert_eq(st_timecache_set(0), 1);
    check_time_close();
}

struct huge_waiter {
    int kind;
    st_netfd_t nfd;
    st_cond_t cv;
    int rc;
    int err;
};

static void *huge_timeout_wait(void *arg)
{
    struct huge_waiter *h = arg;
    const st_utime_t huge = ST_UTIME_NO_TIMEOUT - 10;
    char c;

    errno = 0;
    switch (h->kind) {
    case 0:
        h->rc = st_usleep(huge);
        break;
    case 1:
        h->rc = st_cond_timedwait(h->cv, huge);
        break;
    default:
        h->rc = (int)st_read(h->nfd, &c, 1, huge);
        break;
    }
    h->err = errno;
    return NULL;
}

/* Timeouts close to the maximum must not wrap around into the past. */
Test(sleep_time, huge_timeouts_do_not_wrap)
{
    struct huge_waiter h[3];
    st_thread_t t[3];
    int raw;
    int i;

    st_test_init();
    memset(h, 0, sizeof(h));
    h[1].cv = st_cond_new();
    cr_assert_not_null(h[1].cv);
    h[2].nfd = st_test_socketpair_raw(&raw);
    for (i = 0; i < 3; i++) {
        h[i].kind = i;
        h[i].rc = 99;
        t[i] = st_test_spawn(huge_timeout_wait, &h[i]);
    }
    cr_assert_eq(st_usleep(5000), 0);
    for (i = 0; i < 3; i++) {
        cr_assert_eq(h[i].rc, 99, "wait %d returned early (errno %d)", i, h[i].err);
    }
    for (i = 0; i < 3; i++) {
        st_thread_interrupt(t[i]);
        st_test_join(t[i]);
        cr_assert_eq(h[i].rc, -1);
        cr_assert_eq(h[i].err, EINTR);
    }
    cr_assert_eq(st_cond_destroy(h[1].cv), 0);
    cr_assert_eq(st_netfd_close(h[2].nfd), 0);
    close(raw);
}

static long long clock_jump;

static st_utime_t jumping_clock(void)
{
    struct timeval tv;

    gettimeofday(&tv, NULL);
    return (st_utime_t)((long long)tv.tv_sec * 1000000LL + tv.tv_usec + clock_jump);
}

Test(sleep_time, time_cache_follows_the_clock)
{
    cr_assert_eq(st_set_utime_function(jumping_clock), 0);
    st_test_init();
    cr_assert_eq(st_timecache_set(1), 0);
    check_time_close();
    /* Once a second of library time has passed, the cache is refreshed. */
    clock_jump += 5000000;
    cr_assert_eq(st_usleep(1000), 0);
    check_time_close();
    clock_jump += 5000000;
    cr_assert_eq(st_usleep(1000), 0);
    check_time_close();
    cr_assert_eq(st_timecache_set(0), 1);
    check_time_close();
}

/* st_sleep(n) sleeps whole seconds. */
Test(sleep_time, st_sleep_one_waits_a_second)
{
    long long start;

    st_test_init();
    start = st_test_deadline_base();
    cr_assert_eq(st_sleep(1), 0);
    cr_assert_geq(st_test_now_us() - start, 1000000LL);
    cr_assert_lt(st_test_now_us() - start, 1000000LL + ST_TEST_LATE_US);
}
