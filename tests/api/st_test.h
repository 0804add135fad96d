/*
 * st_test.h - shared helpers for the api test suites.
 *
 * Every test runs in its own process (Criterion and st_runner.c fork a
 * worker per test), so each test brings the library up itself with
 * st_test_init(), which honours ST_TEST_EVENTSYS=epoll|poll|select|io_uring
 * to run the same file once per backend. A kernel that refuses io_uring
 * (ENOSYS, EPERM: seccomp, the io_uring_disabled sysctl) makes the io_uring
 * runs skip, not fail.
 *
 * The library's idle coroutine calls exit(0) when no coroutine is left. A
 * test that ends that way would look like a pass to Criterion, so the suite
 * hooks below turn any exit that happens before the test body finished into
 * exit status 97, which Criterion (and st_runner.c) report as a failure.
 */
#ifndef ST_TEST_H
#define ST_TEST_H

/* POSIX and socket extras; the build defines it too, this keeps the file standalone. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

/*
 * The same test files build against Criterion (natively) or, when the build
 * defines ST_TEST_RUNNER, against st_runner.h, the small Criterion-compatible
 * layer that also runs under qemu-user and ThreadSanitizer.
 */
#ifdef ST_TEST_RUNNER
#include "st_runner.h"
#else
#include <criterion/criterion.h>
#endif

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <st.h>

#include "st_test_util.h"

/* Seconds after which a hanging test is killed and reported as failed. */
#define ST_TEST_TIMEOUT 10

/* Exit status used when the process leaves before the test body finished. */
#define ST_TEST_EARLY_EXIT 97

static int st_test_body_finished;

static inline void st_test_check_exit(void)
{
    if (!st_test_body_finished) {
        _exit(ST_TEST_EARLY_EXIT);
    }
}

static inline int st_test_eventsys(void);

/*
 * 0 if st_set_eventsys(es) is accepted, else its errno. Asked in a child so
 * that the test's own pthreads still choose their backend themselves.
 */
static inline int st_test_probe_eventsys(int es)
{
    int status = 0;
    pid_t pid = fork();

    if (pid == 0) {
        _exit(st_set_eventsys(es) == 0 ? 0 : (errno > 0 && errno < 256 ? errno : EINVAL));
    }
    cr_assert_geq(pid, 0, "fork: %s", strerror(errno));
    cr_assert_eq(waitpid(pid, &status, 0), pid, "waitpid: %s", strerror(errno));
    cr_assert(WIFEXITED(status), "the eventsys probe died (status %d)", status);
    return WEXITSTATUS(status);
}

/* Skip (not fail) when the kernel refuses io_uring: a sandbox, not a bug. */
static inline void st_test_skip_if_refused(void)
{
    int err;

    if (st_test_eventsys() != ST_EVENTSYS_IO_URING) {
        return;
    }
    err = st_test_probe_eventsys(ST_EVENTSYS_IO_URING);
    if (err == ENOSYS || err == EPERM) {
        st_test_body_finished = 1;
        cr_skip("io_uring backend skipped: the kernel refuses io_uring (%s)", strerror(err));
    }
}

/*
 * tools/cross/run.sh sets ST_TEST_EMULATOR when it runs the suite under
 * qemu-user. st_test_skip_under_emulator() skips (not fails) a test that the
 * emulator cannot run, with the reason; natively the test runs.
 */
static inline const char *st_test_emulator(void)
{
    const char *emulator = getenv("ST_TEST_EMULATOR");

    return emulator != NULL && *emulator != '\0' ? emulator : NULL;
}

static inline void st_test_skip_under_emulator(const char *why)
{
    const char *emulator = st_test_emulator();

    if (emulator != NULL) {
        st_test_body_finished = 1;
        cr_skip_test("under %s: %s", emulator, why);
    }
}

static inline void st_test_suite_init(void)
{
    st_test_body_finished = 0;
    cr_assert_eq(atexit(st_test_check_exit), 0, "atexit failed");
    st_test_skip_if_refused();
}

static inline void st_test_suite_fini(void)
{
    st_test_body_finished = 1;
}

/* For a forked child that is expected to leave through exit(). */
static inline void st_test_allow_exit(void)
{
    st_test_body_finished = 1;
}

#define ST_TEST_SUITE(name)                                                                        \
    TestSuite(name, .init = st_test_suite_init, .fini = st_test_suite_fini,                        \
              .timeout = ST_TEST_TIMEOUT)

/* The event system requested through ST_TEST_EVENTSYS, or -1 for "none". */
static inline int st_test_eventsys(void)
{
    const char *name = getenv("ST_TEST_EVENTSYS");
    int es;

    if (name == NULL || *name == '\0') {
        return -1;
    }
    es = st_test_eventsys_by_name(name);
    if (es < 0) {
        cr_assert_fail("unknown ST_TEST_EVENTSYS value \"%s\"", name);
    }
    return es;
}

/* How many descriptors the process has open. */
static inline int st_test_open_fds(void)
{
    int n = st_test_count_open_fds();

    cr_assert_geq(n, 0, "/proc/self/fd: %s", strerror(errno));
    return n;
}

/* The value st_get_eventsys() must report once initialised. */
static inline int st_test_expected_eventsys(void)
{
    int es = st_test_eventsys();

    return es < 0 ? ST_EVENTSYS_SELECT : es;
}

static inline int st_test_is_select(void)
{
    return st_test_expected_eventsys() == ST_EVENTSYS_SELECT;
}

/* Select the requested backend and initialise; callable from any pthread. */
static inline int st_test_try_init(void)
{
    int es = st_test_eventsys();

    if (es >= 0 && st_set_eventsys(es) != 0) {
        return -1;
    }
    if (st_init() != 0) {
        return -1;
    }
    return st_get_eventsys() == st_test_expected_eventsys() ? 0 : -1;
}

static inline void st_test_init(void)
{
    int es = st_test_eventsys();

    if (es >= 0) {
        cr_assert_eq(st_set_eventsys(es), 0, "st_set_eventsys(%d): %s", es, strerror(errno));
    }
    cr_assert_eq(st_init(), 0, "st_init: %s", strerror(errno));
    cr_assert_eq(st_get_eventsys(), st_test_expected_eventsys(), "st_get_eventsys() is %d",
                 st_get_eventsys());
}

/* A joinable coroutine on the default stack; the test fails if it cannot be made. */
static inline st_thread_t st_test_spawn(void *(*fn)(void *), void *arg)
{
    st_thread_t t = st_thread_create(fn, arg, 1, 0);

    cr_assert_not_null(t, "st_thread_create: %s", strerror(errno));
    return t;
}

static inline void st_test_join(st_thread_t t)
{
    cr_assert_eq(st_thread_join(t, NULL), 0, "st_thread_join: %s", strerror(errno));
}

/* Runs fn(arg) in a coroutine of its own to its end. */
static inline void st_test_run(void *(*fn)(void *), void *arg)
{
    st_test_join(st_test_spawn(fn, arg));
}

/* A start function that returns its argument at once. */
static inline void *st_test_return_arg(void *arg)
{
    return arg;
}

/* A coroutine that has returned arg and waits for its joiner: a zombie. */
static inline st_thread_t st_test_zombie(void *arg)
{
    st_thread_t t = st_test_spawn(st_test_return_arg, arg);

    cr_assert_eq(st_usleep(1000), 0);
    return t;
}

/* Joins t, which must have returned expected. */
static inline void st_test_join_returns(st_thread_t t, const void *expected)
{
    void *ret = NULL;

    cr_assert_eq(st_thread_join(t, &ret), 0, "st_thread_join: %s", strerror(errno));
    cr_assert_eq(ret, expected, "the coroutine returned %p, not %p", ret, expected);
}

/* Monotonic wall clock in microseconds, independent of the library. */
static inline long long st_test_now_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000LL + ts.tv_nsec / 1000;
}

/* Spin without yielding, so that the scheduler does not run meanwhile. */
static inline void st_test_busy_wait_us(long long usecs)
{
    long long end = st_test_now_us() + usecs;

    while (st_test_now_us() < end) {
        ;
    }
}

/*
 * The instant a wait's timeout counts from. As in State Threads, a timeout
 * counts from the scheduler's last clock reading (st_utime_last_clock()),
 * which is earlier than the call that waits by however long the process ran,
 * or was preempted, since. That reading is on st_test_now_us()'s clock
 * (CLOCK_MONOTONIC in microseconds), so a measurement started here can
 * assert the whole duration: a wait of T ends no earlier than this plus T,
 * on a loaded machine too. Not for tests that set their own clock.
 */
static inline long long st_test_deadline_base(void)
{
    return (long long)st_utime_last_clock();
}

/* Upper bound for "returned promptly" / "did not hang" checks. */
#define ST_TEST_LATE_US 2000000LL

static inline int st_test_is_nonblocking(int osfd)
{
    int flags = fcntl(osfd, F_GETFL);

    return flags != -1 && (flags & O_NONBLOCK) != 0;
}

static inline int st_test_fd_is_open(int osfd)
{
    return fcntl(osfd, F_GETFD) != -1;
}

/* A connected AF_UNIX stream pair, both ends wrapped as netfds. */
static inline void st_test_socketpair(st_netfd_t *a, st_netfd_t *b)
{
    int sv[2];

    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0, "socketpair: %s", strerror(errno));
    *a = st_netfd_open_socket(sv[0]);
    cr_assert_not_null(*a, "st_netfd_open_socket: %s", strerror(errno));
    *b = st_netfd_open_socket(sv[1]);
    cr_assert_not_null(*b, "st_netfd_open_socket: %s", strerror(errno));
}

/* A pipe, both ends wrapped with st_netfd_open(): r reads, w writes. */
static inline void st_test_pipe(st_netfd_t *r, st_netfd_t *w)
{
    int p[2];

    cr_assert_eq(pipe(p), 0, "pipe: %s", strerror(errno));
    *r = st_netfd_open(p[0]);
    cr_assert_not_null(*r, "st_netfd_open: %s", strerror(errno));
    *w = st_netfd_open(p[1]);
    cr_assert_not_null(*w, "st_netfd_open: %s", strerror(errno));
}

/* A pair where only the st side is a netfd; the raw side stays blocking. */
static inline st_netfd_t st_test_socketpair_raw(int *raw)
{
    int sv[2];
    st_netfd_t nfd;

    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0, "socketpair: %s", strerror(errno));
    nfd = st_netfd_open_socket(sv[0]);
    cr_assert_not_null(nfd, "st_netfd_open_socket: %s", strerror(errno));
    *raw = sv[1];
    return nfd;
}

static inline void st_test_loopback(struct sockaddr_in *sin, unsigned short port)
{
    memset(sin, 0, sizeof(*sin));
    sin->sin_family = AF_INET;
    sin->sin_port = htons(port);
    sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
}

static inline unsigned short st_test_local_port(int osfd)
{
    struct sockaddr_in sin;
    socklen_t len = sizeof(sin);

    memset(&sin, 0, sizeof(sin));
    cr_assert_eq(getsockname(osfd, (struct sockaddr *)&sin, &len), 0, "getsockname: %s",
                 strerror(errno));
    return ntohs(sin.sin_port);
}

/* A socket of the given type bound to 127.0.0.1 on an ephemeral port. */
static inline int st_test_bound_socket(int type, unsigned short *port)
{
    struct sockaddr_in sin;
    int one = 1;
    int osfd = socket(AF_INET, type, 0);

    cr_assert_geq(osfd, 0, "socket: %s", strerror(errno));
    /*
     * Only for TCP (quick rebinding after TIME_WAIT). On UDP, SO_REUSEADDR
     * lets the kernel hand an ephemeral port that another such socket holds
     * to a new one, and datagrams sent to it reach only one of the two.
     */
    if (type == SOCK_STREAM) {
        setsockopt(osfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    }
    st_test_loopback(&sin, 0);
    cr_assert_eq(bind(osfd, (struct sockaddr *)&sin, sizeof(sin)), 0, "bind: %s", strerror(errno));
    *port = st_test_local_port(osfd);
    return osfd;
}

/* A listening TCP netfd on 127.0.0.1; its port is stored in *port. */
static inline st_netfd_t st_test_listener(unsigned short *port, int backlog)
{
    int osfd = st_test_bound_socket(SOCK_STREAM, port);
    st_netfd_t nfd;

    cr_assert_eq(listen(osfd, backlog), 0, "listen: %s", strerror(errno));
    nfd = st_netfd_open_socket(osfd);
    cr_assert_not_null(nfd, "st_netfd_open_socket: %s", strerror(errno));
    return nfd;
}

/* A fresh TCP client netfd (not yet connected). */
static inline st_netfd_t st_test_tcp_socket(void)
{
    int osfd = socket(AF_INET, SOCK_STREAM, 0);
    st_netfd_t nfd;

    cr_assert_geq(osfd, 0, "socket: %s", strerror(errno));
    nfd = st_netfd_open_socket(osfd);
    cr_assert_not_null(nfd, "st_netfd_open_socket: %s", strerror(errno));
    return nfd;
}

/*
 * Two UDP netfds on 127.0.0.1, each on its own ephemeral port (pa, pb), with
 * each one's address (sa, sb) to send to. The sockets come from
 * st_test_bound_socket(), so they do NOT set SO_REUSEADDR: on UDP it let the
 * kernel hand both sockets the same port.
 */
struct st_test_udp_pair {
    st_netfd_t a, b;
    unsigned short pa, pb;
    struct sockaddr_in sa, sb;
};

static inline void st_test_udp_pair_open(struct st_test_udp_pair *u)
{
    int fa = st_test_bound_socket(SOCK_DGRAM, &u->pa);
    int fb = st_test_bound_socket(SOCK_DGRAM, &u->pb);

    u->a = st_netfd_open_socket(fa);
    u->b = st_netfd_open_socket(fb);
    cr_assert_not_null(u->a);
    cr_assert_not_null(u->b);
    st_test_loopback(&u->sa, u->pa);
    st_test_loopback(&u->sb, u->pb);
}

static inline void st_test_udp_pair_close(struct st_test_udp_pair *u)
{
    cr_assert_eq(st_netfd_close(u->a), 0);
    cr_assert_eq(st_netfd_close(u->b), 0);
}

/*
 * A coroutine blocked in one call, for the tests that wake, interrupt, time
 * out or close under it: fill in call and what it uses, then st_test_block().
 * rc stays ST_TEST_NOT_RETURNED until the call returns; then rc is its result,
 * err its errno and woke the time it returned.
 */
#define ST_TEST_NOT_RETURNED 99

struct st_test_blocked {
    long long (*call)(struct st_test_blocked *b);
    st_netfd_t nfd;
    void *arg;          /* anything else the call works on */
    void *result;       /* a pointer the call hands back */
    st_utime_t timeout;
    long long rc;
    long long woke;
    int fd;
    int how;            /* st_netfd_poll() events */
    int interrupt_self; /* interrupt itself just before the call */
    int err;
    char buf[64];
};

static inline void *st_test_blocked_main(void *arg)
{
    struct st_test_blocked *b = arg;

    if (b->interrupt_self) {
        st_thread_interrupt(st_thread_self());
    }
    errno = 0;
    b->rc = b->call(b);
    b->err = errno;
    b->woke = st_test_now_us();
    return NULL;
}

static inline st_thread_t st_test_block(struct st_test_blocked *b)
{
    b->rc = ST_TEST_NOT_RETURNED;
    b->err = 0;
    return st_test_spawn(st_test_blocked_main, b);
}

/* st_test_block(), then a sleep of usecs, after which the call must still be blocked. */
static inline st_thread_t st_test_block_and_sleep(struct st_test_blocked *b, st_utime_t usecs)
{
    st_thread_t t = st_test_block(b);

    cr_assert_eq(st_usleep(usecs), 0);
    cr_assert_eq(b->rc, ST_TEST_NOT_RETURNED, "the call returned %lld without waiting (%s)", b->rc,
                 strerror(b->err));
    return t;
}

/* Calls for st_test_blocked: a read with no timeout, a netfd poll, a POLLIN poll of fd. */
static inline long long st_test_read_forever(struct st_test_blocked *b)
{
    return st_read(b->nfd, b->buf, sizeof(b->buf) - 1, ST_UTIME_NO_TIMEOUT);
}

static inline long long st_test_netfd_poll(struct st_test_blocked *b)
{
    return st_netfd_poll(b->nfd, b->how, b->timeout);
}

static inline long long st_test_poll_fd(struct st_test_blocked *b)
{
    struct pollfd pfd = {.fd = b->fd, .events = POLLIN};

    return st_poll(&pfd, 1, b->timeout);
}

/* A coroutine that echoes what it reads on nfd, rounds times; echoed counts the rounds done. */
struct st_test_echo {
    st_netfd_t nfd;
    int rounds;
    int echoed;
};

static inline void *st_test_echo_main(void *arg)
{
    struct st_test_echo *e = arg;
    char buf[64];

    while (e->echoed < e->rounds) {
        ssize_t n = st_read(e->nfd, buf, sizeof(buf), 5000000);

        if (n <= 0 || st_write(e->nfd, buf, (size_t)n, 5000000) != n) {
            break;
        }
        e->echoed++;
    }
    return NULL;
}

/* Interrupts the blocked coroutine t, which must then fail its call with EINTR. */
static inline void st_test_interrupt_blocked(st_thread_t t, const struct st_test_blocked *b)
{
    st_thread_interrupt(t);
    st_test_join(t);
    cr_assert_eq(b->rc, -1, "the interrupted call returned %lld", b->rc);
    cr_assert_eq(b->err, EINTR, "the interrupted call failed with %s", strerror(b->err));
}

/* Leaves b's call blocked on nfd for settle_us, then interrupts it (EINTR). */
static inline void st_test_interrupt_call_on(struct st_test_blocked *b, st_netfd_t nfd,
                                             st_utime_t settle_us)
{
    b->nfd = nfd;
    st_test_interrupt_blocked(st_test_block_and_sleep(b, settle_us), b);
}

/*
 * The same on a fresh socketpair_raw() netfd, which then closes: the
 * interrupted waiter is no longer registered.
 */
static inline void st_test_interrupt_call_on_socketpair(struct st_test_blocked *b,
                                                        st_utime_t settle_us)
{
    int raw;

    st_test_interrupt_call_on(b, st_test_socketpair_raw(&raw), settle_us);
    cr_assert_eq(st_netfd_close(b->nfd), 0, "the interrupted waiter is left: %s", strerror(errno));
    close(raw);
}


/*
 * That expr failed with -1 and the given errno, checked with check_eq
 * (cr_assert_eq: the test ends; cr_expect_eq: it carries on).
 */
#define ST_TEST_CHECK_FAILS_(check_eq, expr, err)                                                  \
    do {                                                                                           \
        errno = 0;                                                                                 \
        long long st_test_r_ = (long long)(expr);                                                  \
        int st_test_e_ = errno;                                                                    \
        check_eq(st_test_r_, -1, "%s returned %lld, expected -1", #expr, st_test_r_);              \
        check_eq(st_test_e_, (err), "%s: errno %d (%s), expected %s", #expr, st_test_e_,           \
                 strerror(st_test_e_), #err);                                                      \
    } while (0)

/* Asserts that expr failed with -1 and the given errno. */
#define ST_ASSERT_FAILS(expr, err) ST_TEST_CHECK_FAILS_(cr_assert_eq, expr, err)

/* Non-fatal variant for use inside coroutines. */
#define ST_EXPECT_FAILS(expr, err) ST_TEST_CHECK_FAILS_(cr_expect_eq, expr, err)

/* Asserts that a pointer-returning expr failed with NULL and the given errno. */
#define ST_ASSERT_FAILS_NULL(expr, err)                                                            \
    do {                                                                                           \
        errno = 0;                                                                                 \
        const void *st_test_p_ = (const void *)(expr);                                             \
        int st_test_e_ = errno;                                                                    \
        cr_assert_null(st_test_p_, "%s returned %p, expected NULL", #expr, st_test_p_);            \
        cr_assert_eq(st_test_e_, (err), "%s: errno %d (%s), expected %s", #expr, st_test_e_,       \
                     strerror(st_test_e_), #err);                                                  \
    } while (0)

#endif /* ST_TEST_H */
