/*
 * The debug_stats counters: State Threads' DEBUG_STATS variables, read the
 * way SRS reads them (extern __thread declarations of its own), from a
 * library built with -DST__DEBUG_STATS=1 (tests/api/meson.build).
 *
 * Every expectation here is exact except where timing decides, and there
 * only the direction a loaded machine cannot change is asserted: a gap of at
 * least N ms lands in a bucket of at least N ms, a wait of at least one
 * cycle counts at least once.
 */
#include "st_test.h"

#include <pthread.h>
#include <stdarg.h>
#include <sys/uio.h>

/* As SRS declares them (srs_app_st.cpp): the library's own names and types. */
extern __thread unsigned long long _st_stat_recvfrom;
extern __thread unsigned long long _st_stat_recvfrom_eagain;
extern __thread unsigned long long _st_stat_sendto;
extern __thread unsigned long long _st_stat_sendto_eagain;
extern __thread unsigned long long _st_stat_read;
extern __thread unsigned long long _st_stat_read_eagain;
extern __thread unsigned long long _st_stat_readv;
extern __thread unsigned long long _st_stat_readv_eagain;
extern __thread unsigned long long _st_stat_writev;
extern __thread unsigned long long _st_stat_writev_eagain;
extern __thread unsigned long long _st_stat_recvmsg;
extern __thread unsigned long long _st_stat_recvmsg_eagain;
extern __thread unsigned long long _st_stat_sendmsg;
extern __thread unsigned long long _st_stat_sendmsg_eagain;
extern __thread unsigned long long _st_stat_epoll;
extern __thread unsigned long long _st_stat_epoll_zero;
extern __thread unsigned long long _st_stat_epoll_shake;
extern __thread unsigned long long _st_stat_epoll_spin;
extern __thread unsigned long long _st_stat_sched_15ms;
extern __thread unsigned long long _st_stat_sched_20ms;
extern __thread unsigned long long _st_stat_sched_25ms;
extern __thread unsigned long long _st_stat_sched_30ms;
extern __thread unsigned long long _st_stat_sched_35ms;
extern __thread unsigned long long _st_stat_sched_40ms;
extern __thread unsigned long long _st_stat_sched_80ms;
extern __thread unsigned long long _st_stat_sched_160ms;
extern __thread unsigned long long _st_stat_sched_s;
extern __thread unsigned long long _st_stat_thread_run;
extern __thread unsigned long long _st_stat_thread_idle;
extern __thread unsigned long long _st_stat_thread_yield;
extern __thread unsigned long long _st_stat_thread_yield2;
extern __thread int _st_active_count;
extern __thread int _st_num_free_stacks;

ST_TEST_SUITE(stats);

/* The counters in groups: the I/O ones, the epoll ones, the clock buckets, the scheduler's. */
#define IO_COUNTERS(X)                                                                             \
    X(recvfrom) X(recvfrom_eagain) X(sendto) X(sendto_eagain) X(read) X(read_eagain) X(readv)      \
    X(readv_eagain) X(writev) X(writev_eagain) X(recvmsg) X(recvmsg_eagain) X(sendmsg)             \
    X(sendmsg_eagain)
#define EPOLL_COUNTERS(X) X(epoll) X(epoll_zero) X(epoll_shake) X(epoll_spin)
#define CLOCK_COUNTERS(X)                                                                          \
    X(sched_15ms) X(sched_20ms) X(sched_25ms) X(sched_30ms) X(sched_35ms) X(sched_40ms)            \
    X(sched_80ms) X(sched_160ms) X(sched_s)
#define SCHED_COUNTERS(X) X(thread_run) X(thread_idle) X(thread_yield) X(thread_yield2)

#define ALL_COUNTERS(X) IO_COUNTERS(X) EPOLL_COUNTERS(X) CLOCK_COUNTERS(X) SCHED_COUNTERS(X)

#define AS_INDEX(name) C_##name,
enum counter { ALL_COUNTERS(AS_INDEX) C_COUNT };

#define AS_NAME(name) #name,
static const char *const counter_names[C_COUNT] = {ALL_COUNTERS(AS_NAME)};

/* Where each group starts and ends in enum counter. */
#define FIRST_IO C_recvfrom
#define END_IO C_epoll
#define FIRST_EPOLL C_epoll
#define END_EPOLL C_sched_15ms
#define FIRST_CLOCK C_sched_15ms
#define END_CLOCK C_thread_run
#define FIRST_SCHED C_thread_run

struct snap {
    unsigned long long v[C_COUNT];
};

static struct snap take(void)
{
    struct snap s;
    size_t i = 0;

#define AS_READ(name) s.v[i++] = _st_stat_##name;
    ALL_COUNTERS(AS_READ)
#undef AS_READ
    return s;
}

static unsigned long long delta(const struct snap *before, enum counter c)
{
    return take().v[c] - before->v[c];
}

/*
 * Every counter of [first, end) moved by what the (counter, amount) pairs
 * after it say, -1-terminated, and the others of the range not at all.
 */
static void expect_range(const struct snap *before, enum counter first, enum counter end, ...)
{
    unsigned long long want[C_COUNT] = {0};
    struct snap now = take();
    va_list ap;
    int c;

    va_start(ap, end);
    while ((c = va_arg(ap, int)) >= 0) {
        want[c] = (unsigned long long)va_arg(ap, int);
    }
    va_end(ap);
    for (c = (int)first; c < (int)end; c++) {
        cr_expect_eq(now.v[c] - before->v[c], want[c], "_st_stat_%s moved by %llu, not %llu",
                     counter_names[c], now.v[c] - before->v[c], want[c]);
    }
}

#define EXPECT_IO(before, ...) expect_range((before), FIRST_IO, END_IO, __VA_ARGS__, -1)
#define EXPECT_EPOLL(before, ...) expect_range((before), FIRST_EPOLL, END_EPOLL, __VA_ARGS__, -1)

/* How many clock checks were filed into the buckets since `before`. */
static unsigned long long clock_checks(const struct snap *before)
{
    unsigned long long sum = 0;

    for (int c = FIRST_CLOCK; c < END_CLOCK; c++) {
        sum += delta(before, (enum counter)c);
    }
    return sum;
}

/* The one bucket that moved since `before` (exactly one must have, by one). */
static enum counter bucket_moved(const struct snap *before)
{
    int moved = -1;

    cr_assert_eq(clock_checks(before), 1, "%llu clock checks, not 1", clock_checks(before));
    for (int c = FIRST_CLOCK; c < END_CLOCK; c++) {
        if (delta(before, (enum counter)c) != 0) {
            moved = c;
        }
    }
    return (enum counter)moved;
}

static void init_epoll(void)
{
#ifdef ST_TEST_HAVE_EPOLL
    cr_assert_eq(st_set_eventsys(ST_EVENTSYS_ALT), 0, "st_set_eventsys: %s", strerror(errno));
    cr_assert_eq(st_init(), 0, "st_init: %s", strerror(errno));
#else
    st_test_body_finished = 1;
    cr_skip_test("built without the epoll backend");
#endif
}

/* ---- I/O: each function counts its calls, and its waits for readiness ---- */

#define T_LATE ((st_utime_t)ST_TEST_LATE_US)

struct io_op {
    int writes;               /* sends on the netfd (else receives) */
    enum counter calls, waits; /* the two counters it moves */
    ssize_t (*call)(st_netfd_t nfd);
};

static ssize_t call_read(st_netfd_t nfd)
{
    char buf[64];

    return st_read(nfd, buf, sizeof(buf), T_LATE);
}

static ssize_t call_readv(st_netfd_t nfd)
{
    char a[4];
    char b[60];
    struct iovec iov[2] = {{a, sizeof(a)}, {b, sizeof(b)}};

    return st_readv(nfd, iov, 2, T_LATE);
}

static ssize_t call_recvfrom(st_netfd_t nfd)
{
    char buf[64];

    return st_recvfrom(nfd, buf, (int)sizeof(buf), NULL, NULL, T_LATE);
}

static ssize_t call_recvmsg(st_netfd_t nfd)
{
    char buf[64];
    struct iovec iov = {buf, sizeof(buf)};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};

    return st_recvmsg(nfd, &msg, 0, T_LATE);
}

static ssize_t call_sendto(st_netfd_t nfd)
{
    return st_sendto(nfd, "x", 1, NULL, 0, T_LATE);
}

static ssize_t call_sendmsg(st_netfd_t nfd)
{
    char byte = 'x';
    struct iovec iov = {&byte, 1};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};

    return st_sendmsg(nfd, &msg, 0, T_LATE);
}

static ssize_t call_write(st_netfd_t nfd)
{
    return st_write(nfd, "x", 1, T_LATE);
}

static ssize_t call_writev(st_netfd_t nfd)
{
    char a = 'x';
    char b = 'y';
    struct iovec iov[2] = {{&a, 1}, {&b, 1}};

    return st_writev(nfd, iov, 2, T_LATE);
}

/* The raw peer of a netfd: gets data (for a receive), or room (for a send), once it runs. */
struct peer {
    int raw;
    int writes;
};

static void *peer_main(void *arg)
{
    const struct peer *p = arg;
    char buf[4096];

    if (p->writes) {
        cr_assert_eq(write(p->raw, "data", 4), 4);
    } else {
        while (recv(p->raw, buf, sizeof(buf), MSG_DONTWAIT) > 0) {
            ;
        }
    }
    return NULL;
}

/* Fill the send buffer of nfd until the kernel takes no more, without st. */
static void fill(st_netfd_t nfd)
{
    int osfd = st_netfd_fileno(nfd);
    int size = 4096;
    char chunk[1024] = {0};

    cr_assert_eq(setsockopt(osfd, SOL_SOCKET, SO_SNDBUF, &size, sizeof(size)), 0);
    while (send(osfd, chunk, sizeof(chunk), MSG_DONTWAIT) > 0) {
        ;
    }
    cr_assert(errno == EAGAIN || errno == EWOULDBLOCK, "send: %s", strerror(errno));
}

/* The call on a ready descriptor: one call, no wait. */
static void check_ready(const struct io_op *op)
{
    st_netfd_t nfd;
    int raw;
    struct snap before;

    st_test_init();
    nfd = st_test_socketpair_raw(&raw);
    if (!op->writes) {
        cr_assert_eq(write(raw, "data", 4), 4);
    }
    before = take();
    cr_assert_gt(op->call(nfd), 0, "the call failed: %s", strerror(errno));
    EXPECT_IO(&before, op->calls, 1);
    close(raw);
}

/* The call finds the descriptor not ready, waits once, then completes. */
static void check_waits(const struct io_op *op)
{
    st_netfd_t nfd;
    struct peer peer = {0};
    struct snap before;
    st_thread_t t;

    st_test_init();
    nfd = st_test_socketpair_raw(&peer.raw);
    peer.writes = !op->writes;
    if (op->writes) {
        fill(nfd);
    }
    t = st_test_spawn(peer_main, &peer); /* runs once the call waits */
    before = take();
    cr_assert_gt(op->call(nfd), 0, "the call failed: %s", strerror(errno));
    EXPECT_IO(&before, op->calls, 1, op->waits, 1);
    st_test_join(t);
    close(peer.raw);
}

#define IO_TESTS(fn, calls_counter, waits_counter, sends)                                          \
    static const struct io_op op_##fn = {sends, C_##calls_counter, C_##waits_counter, call_##fn};  \
    Test(stats, fn##_ready)                                                                        \
    {                                                                                              \
        check_ready(&op_##fn);                                                                     \
    }                                                                                              \
    Test(stats, fn##_waits)                                                                        \
    {                                                                                              \
        check_waits(&op_##fn);                                                                     \
    }

IO_TESTS(read, read, read_eagain, 0)
IO_TESTS(readv, readv, readv_eagain, 0)
IO_TESTS(recvfrom, recvfrom, recvfrom_eagain, 0)
IO_TESTS(recvmsg, recvmsg, recvmsg_eagain, 0)
IO_TESTS(sendto, sendto, sendto_eagain, 1)
IO_TESTS(sendmsg, sendmsg, sendmsg_eagain, 1)
/* As in State Threads, st_write is st_writev_resid underneath: it counts as writev. */
IO_TESTS(write, writev, writev_eagain, 1)
IO_TESTS(writev, writev, writev_eagain, 1)

Test(stats, writev_family_counts_as_state_threads_does)
{
    st_netfd_t nfd;
    int raw;
    char a = 'a';
    char b = 'b';
    struct iovec two[2] = {{&a, 1}, {&b, 1}};
    struct iovec one = {&a, 1};
    struct iovec *cursor;
    int count;
    size_t resid;
    struct snap before;

    st_test_init();
    nfd = st_test_socketpair_raw(&raw);

    before = take();
    resid = 1;
    cr_assert_eq(st_write_resid(nfd, "x", &resid, T_LATE), 0);
    EXPECT_IO(&before, C_writev, 1);

    before = take();
    cursor = two;
    count = 2;
    cr_assert_eq(st_writev_resid(nfd, &cursor, &count, T_LATE), 0);
    EXPECT_IO(&before, C_writev, 1);

    /* State Threads' st_writev hands a single vector to st_write, which counts it again. */
    before = take();
    cr_assert_eq(st_writev(nfd, &one, 1, T_LATE), 1);
    EXPECT_IO(&before, C_writev, 2);

    before = take();
    cr_assert_eq(st_writev(nfd, two, 0, T_LATE), 0);
    EXPECT_IO(&before, C_writev, 1);

    before = take();
    cr_assert_eq(st_write(nfd, "", 0, T_LATE), 0);
    EXPECT_IO(&before, C_writev, 1);

    close(raw);
    before = take();
    cr_assert_eq(st_write(nfd, "x", 1, T_LATE), -1);
    cr_assert_eq(errno, EPIPE, "st_write: %s", strerror(errno));
    EXPECT_IO(&before, C_writev, 1);
}

Test(stats, read_resid_family_counts_nothing)
{
    st_netfd_t nfd;
    int raw;
    char buf[8];
    struct iovec iov = {buf, 2};
    struct iovec *cursor = &iov;
    int count = 1;
    size_t resid = 2;
    struct snap before;

    st_test_init();
    nfd = st_test_socketpair_raw(&raw);
    cr_assert_eq(write(raw, "abcdef", 6), 6);
    before = take();
    cr_assert_eq(st_read_fully(nfd, buf, 2, T_LATE), 2);
    cr_assert_eq(st_read_resid(nfd, buf, &resid, T_LATE), 0);
    cr_assert_eq(st_readv_resid(nfd, &cursor, &count, T_LATE), 0);
    EXPECT_IO(&before, C_read, 0);
    close(raw);
}

/* The reader of the other end, for a writev that needs many rounds. */
struct drain {
    st_netfd_t nfd;
    size_t want;
};

static void *drain_main(void *arg)
{
    const struct drain *d = arg;
    char *buf = malloc(d->want);

    cr_assert_not_null(buf);
    cr_assert_eq(st_read_fully(d->nfd, buf, d->want, T_LATE), (ssize_t)d->want);
    free(buf);
    return NULL;
}

Test(stats, writev_left_with_one_vector_counts_again)
{
    enum { BIG = 256 * 1024 };
    st_netfd_t a;
    st_netfd_t b;
    char head[10] = {0};
    char *big = calloc(1, BIG);
    struct iovec iov[2] = {{head, sizeof(head)}, {big, BIG}};
    struct drain d;
    int size = 4096;
    struct snap before;
    st_thread_t t;

    cr_assert_not_null(big);
    st_test_init();
    st_test_socketpair(&a, &b);
    cr_assert_eq(setsockopt(st_netfd_fileno(a), SOL_SOCKET, SO_SNDBUF, &size, sizeof(size)), 0);
    d.nfd = b;
    d.want = sizeof(head) + BIG;
    t = st_test_spawn(drain_main, &d);
    before = take();
    /* The first writev(2) cannot take it all: the second vector is left, alone. */
    cr_assert_eq(st_writev(a, iov, 2, T_LATE), (ssize_t)d.want);
    cr_expect_eq(delta(&before, C_writev), 2);
    cr_expect_geq(delta(&before, C_writev_eagain), 1);
    st_test_join(t);
    free(big);
}

/* ---- the scheduler: picks, yields, live coroutines, cached stacks ---- */

static void *nothing(void *arg)
{
    return arg;
}

Test(stats, yield_alone_and_with_others)
{
    struct snap before;

    st_test_init();
    before = take();
    st_thread_yield();
    expect_range(&before, FIRST_SCHED, C_COUNT, C_thread_yield, 1, -1);

    cr_assert_not_null(st_thread_create(nothing, NULL, 0, 0));
    before = take();
    st_thread_yield(); /* runs the coroutine, which exits, then this one again */
    expect_range(&before, FIRST_SCHED, C_COUNT, C_thread_yield, 1, C_thread_yield2, 1,
                 C_thread_run, 2, -1);
}

Test(stats, idle_pick)
{
    struct snap before;

    init_epoll();
    before = take();
    /*
     * Nothing else to run: the idle coroutine (once), which waits out the
     * deadline (a wait never ends early) and then picks this one.
     */
    cr_assert_eq(st_usleep(2000), 0);
    expect_range(&before, FIRST_SCHED, C_COUNT, C_thread_idle, 1, C_thread_run, 1, -1);
}

Test(stats, active_count_follows_live_coroutines)
{
    st_thread_t t;

    cr_assert_eq(_st_active_count, 0);
    st_test_init();
    cr_assert_eq(_st_active_count, 1, "the primordial only, not the idle coroutine");
    t = st_test_spawn(nothing, NULL);
    cr_assert_eq(_st_active_count, 2);
    cr_assert_not_null(st_thread_create(nothing, NULL, 0, 0));
    cr_assert_eq(_st_active_count, 3);
    st_thread_yield(); /* both run and exit; the joinable one is a zombie */
    cr_assert_eq(_st_active_count, 1);
    st_test_join(t);
    cr_assert_eq(_st_active_count, 1);
    st_destroy();
    cr_assert_eq(_st_active_count, 0);
}

Test(stats, free_stacks_follow_the_cache)
{
#ifndef ST_TEST_STACK_CACHE
    st_test_body_finished = 1;
    cr_skip_test("built with stack_mode=free");
#else
    st_thread_t t[3];

    cr_assert_eq(_st_num_free_stacks, 0);
    st_test_init();
    cr_assert_eq(_st_num_free_stacks, 0, "the idle coroutine's stack is in use");
    for (int i = 0; i < 3; i++) {
        t[i] = st_test_spawn(nothing, NULL);
    }
    cr_assert_eq(_st_num_free_stacks, 0);
    for (int i = 0; i < 3; i++) {
        st_test_join(t[i]); /* a joined coroutine's stack goes back to the cache */
        cr_assert_eq(_st_num_free_stacks, i + 1);
    }
    t[0] = st_test_spawn(nothing, NULL); /* takes one from the cache */
    cr_assert_eq(_st_num_free_stacks, 2);
    cr_assert_not_null(st_thread_create(nothing, NULL, 0, 0));
    cr_assert_eq(_st_num_free_stacks, 1);
    st_thread_yield(); /* the non-joinable one gives its stack back as it exits */
    cr_assert_eq(_st_num_free_stacks, 2);
    st_test_join(t[0]);
    cr_assert_eq(_st_num_free_stacks, 3);
    st_destroy();
    cr_assert_eq(_st_num_free_stacks, 0);
#endif
}

/* ---- epoll: dispatches, 0 ms waits, 1 ms waits instead, waits without events ---- */

Test(stats, epoll_wait_that_times_out)
{
    struct snap before;

    init_epoll();
    before = take();
    cr_assert_eq(st_usleep(2000), 0);
    EXPECT_EPOLL(&before, C_epoll, 1, C_epoll_spin, 1);
}

Test(stats, epoll_timer_due_in_under_a_millisecond)
{
    struct snap before;

    init_epoll();
    before = take();
    /* A 0 ms wait in State Threads' arithmetic, made 1 ms (shake): a wait never ends early. */
    cr_assert_eq(st_usleep(500), 0);
    EXPECT_EPOLL(&before, C_epoll, 1, C_epoll_zero, 1, C_epoll_shake, 1, C_epoll_spin, 1);
}

Test(stats, epoll_timer_already_due)
{
    struct snap before;

    init_epoll();
    before = take();
    cr_assert_eq(st_usleep(0), 0);
    EXPECT_EPOLL(&before, C_epoll, 1, C_epoll_zero, 1, C_epoll_spin, 1);
}

Test(stats, epoll_wait_with_an_event)
{
    struct peer peer = {.writes = 1};
    st_netfd_t nfd;
    struct snap before;
    char buf[8];

    init_epoll();
    nfd = st_test_socketpair_raw(&peer.raw);
    st_test_spawn(peer_main, &peer); /* writes once the read below waits, and exits */
    before = take();
    cr_assert_eq(st_read(nfd, buf, sizeof(buf), ST_UTIME_NO_TIMEOUT), 4);
    EXPECT_EPOLL(&before, C_epoll, 1);
    close(peer.raw);
}

Test(stats, other_backends_count_no_epoll)
{
    struct snap before;

    cr_assert_eq(st_set_eventsys(ST_EVENTSYS_SELECT), 0);
    cr_assert_eq(st_init(), 0);
    before = take();
    cr_assert_eq(st_usleep(500), 0);
    EXPECT_EPOLL(&before, C_epoll, 0);
    cr_assert_geq(delta(&before, C_thread_idle), 1);
}

/* ---- the clock buckets ---- */

Test(stats, one_bucket_per_clock_check)
{
    struct snap before;

    init_epoll();
    before = take();
    cr_assert_eq(st_usleep(2000), 0); /* one idle cycle, one clock check */
    cr_assert_eq(clock_checks(&before), 1);

    /* Every yield checks the clock, as in State Threads: with nobody asleep too. */
    before = take();
    st_thread_yield();
    cr_assert_eq(clock_checks(&before), 1);

    cr_assert_eq(st_timecache_set(1), 0);
    before = take();
    st_thread_yield();
    cr_assert_eq(clock_checks(&before), 1);
}

/* State Threads' buckets: each one's upper bound in microseconds (_st_stat_sched_s has none). */
static const struct {
    st_utime_t upper;
    enum counter bucket;
} bucket_bounds[] = {
    {10000, C_sched_15ms}, {21000, C_sched_20ms}, {25000, C_sched_25ms},
    {30000, C_sched_30ms}, {35000, C_sched_35ms}, {40000, C_sched_40ms},
    {80000, C_sched_80ms}, {160000, C_sched_160ms},
};

#define N_BOUNDS (sizeof(bucket_bounds) / sizeof(bucket_bounds[0]))

Test(stats, gaps_land_past_the_bound_they_exceed)
{
    struct snap before;

    st_test_init();
    cr_assert_eq(st_timecache_set(1), 0); /* every yield checks the clock */
    for (size_t i = 0; i < N_BOUNDS; i++) {
        long long gap = (long long)bucket_bounds[i].upper + 2000;
        enum counter moved;

        st_thread_yield();
        before = take();
        st_test_busy_wait_us(gap);
        st_thread_yield();
        moved = bucket_moved(&before);
        cr_expect_gt(moved, bucket_bounds[i].bucket, "a %lld us gap went to _st_stat_%s", gap,
                     counter_names[moved]);
    }
}

/* A clock the test moves by hand (st_set_utime_function). */
static st_utime_t fake_now = 1000000000;

static st_utime_t fake_clock(void)
{
    return fake_now;
}

/* The bucket a clock check files a gap of exactly `gap` microseconds into. */
static enum counter bucket_of_gap(st_utime_t gap)
{
    struct snap before;

    st_thread_yield(); /* a check at fake_now */
    fake_now += gap;
    before = take();
    st_thread_yield();
    return bucket_moved(&before);
}

Test(stats, bucket_bounds_are_state_threads)
{
    struct snap before;

    cr_assert_eq(st_set_utime_function(fake_clock), 0);
    st_test_init();
    cr_assert_eq(st_timecache_set(1), 0); /* every yield checks the clock */
    cr_expect_eq(bucket_of_gap(0), C_sched_15ms);
    for (size_t i = 0; i < N_BOUNDS; i++) {
        st_utime_t upper = bucket_bounds[i].upper;

        cr_expect_eq(bucket_of_gap(upper), bucket_bounds[i].bucket, "a gap of %llu us",
                     (unsigned long long)upper);
        cr_expect_eq(bucket_of_gap(upper + 1), bucket_bounds[i].bucket + 1, "a gap of %llu us",
                     (unsigned long long)upper + 1);
    }
    /* A clock that steps back files the check as no time at all. */
    st_thread_yield();
    fake_now -= 500000;
    before = take();
    st_thread_yield();
    cr_expect_eq(bucket_moved(&before), C_sched_15ms);
}

Test(stats, long_sleep_is_filed_in_seconds)
{
    struct snap before;

    init_epoll();
    before = take();
    cr_assert_eq(st_usleep(200000), 0);
    cr_assert_eq(bucket_moved(&before), C_sched_s);
}

/* ---- one set per pthread ---- */

static void *other_pthread(void *arg)
{
    unsigned long long *seen = arg;

    seen[0] = _st_stat_thread_yield + (unsigned long long)_st_active_count;
    if (st_init() != 0) {
        return NULL;
    }
    st_thread_yield();
    st_thread_yield();
    seen[1] = _st_stat_thread_yield;
    seen[2] = (unsigned long long)_st_active_count;
    st_destroy();
    return NULL;
}

Test(stats, counters_are_per_pthread)
{
    unsigned long long seen[3] = {99, 99, 99};
    pthread_t th;
    struct snap before;

    st_test_init();
    st_thread_yield();
    before = take();
    cr_assert_eq(pthread_create(&th, NULL, other_pthread, seen), 0);
    cr_assert_eq(pthread_join(th, NULL), 0);
    cr_expect_eq(seen[0], 0, "a new pthread starts from zero");
    cr_expect_eq(seen[1], 2);
    cr_expect_eq(seen[2], 1);
    cr_expect_eq(delta(&before, C_thread_yield), 0);
    cr_expect_eq(_st_active_count, 1);
}
