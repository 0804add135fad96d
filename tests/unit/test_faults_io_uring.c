/*
 * Failure paths of the io_uring backend (src/backend_uring.c); the table of
 * sites and tests is in docs/reliability.md.
 *
 * The backend reaches liburing only through function pointers it gets from
 * dlopen("liburing.so.2") and dlsym(). dlopen, dlsym and dlclose are
 * wrapped (fault_table.h), and the wrapped dlsym hands the backend shims
 * instead of liburing's functions (fault_inject.c): each shim calls the
 * real one until a test arms it to fail the n-th next call with a chosen
 * errno, the way liburing reports it (-errno). The completion reader can
 * also rewrite the result of the n-th poll completion, to play a POLL_ADD
 * the kernel failed.
 *
 * Each test checks what the caller sees, that the scheduler is still usable
 * (a coroutine is created and joined, a waiting read is woken by a write),
 * and that /proc/self/fd holds what it held before; ASan and valgrind check
 * memory. Where the kernel or sandbox refuses io_uring, every test skips
 * and says why.
 */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fault_checks.h"
#include "fault_inject.h"
#include "st.h"
#include "st_config.h"

#if ST__HAVE_IO_URING
#include "backend_uring.h"
#include "liburing_api.h"
#endif

#if !ST__HAVE_IO_URING

Test(faults_io_uring, io_uring_backend)
{
    cr_skip_test("st was built without liburing: there is no io_uring backend to inject faults into");
}

#else

/* ---- helpers ---------------------------------------------------------------------- */

static void skip_without_uring(int err)
{
    if (err == ENOSYS || err == EPERM || err == EACCES) {
        cr_skip_test("io_uring is refused here (%s): its failure paths cannot be exercised",
                     strerror(err));
    }
    cr_assert_fail("io_uring selection failed with an unexpected errno: %s", strerror(err));
}

/* Once io_uring was seen to work in this test, a refusal is a failure, not a reason to skip. */
static bool uring_works;

/* Select io_uring for this pthread's scheduler, or skip the test with the reason. */
static void select_uring(void)
{
    errno = 0;
    if (st_set_eventsys(ST_EVENTSYS_IO_URING) != 0) {
        int err = errno;
        cr_assert_not(uring_works, "io_uring worked before, now: %s", strerror(err));
        skip_without_uring(err);
    }
    uring_works = true;
    cr_assert_eq(fault_log.unshimmed_lookups, 0, "every liburing function goes through a shim");
}

/*
 * Loading liburing is the first thing a test may fail, so the availability
 * probe runs in a child: the test's own process still has liburing to load.
 */
static void skip_unless_uring_loads(void)
{
    pid_t pid = fork();
    cr_assert_neq(pid, -1, "fork: %s", strerror(errno));
    if (pid == 0) {
        _exit(st_set_eventsys(ST_EVENTSYS_IO_URING) == 0 ? 0 : errno & 0xff);
    }
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status), "the probe child died");
    if (WEXITSTATUS(status) != 0) {
        skip_without_uring(WEXITSTATUS(status));
    }
    uring_works = true;
}

static void init_uring(void)
{
    select_uring();
    cr_assert_eq(st_init(), 0, "st_init: %s", strerror(errno));
}

/* A scheduler whose ring holds 64 requests: st_init's first ring fails as if memory were short. */
static void init_small_ring(void)
{
    select_uring();
    fault_log.nring_requests = 0;
    arm(F_io_uring_queue_init_params, 1, ENOMEM);
    cr_assert_eq(st_init(), 0, "st_init: %s", strerror(errno));
    cr_assert_eq(fault_log.nring_requests, 2);
    cr_assert_lt(fault_log.ring_requests[1].entries, fault_log.ring_requests[0].entries,
                 "a smaller ring was made");
}

/* A coroutine reading one message from a netfd. */
struct reader {
    st_netfd_t fd;
    st_utime_t timeout;
    ssize_t got;
    int err;
};

static void *read_message(void *arg)
{
    struct reader *r = arg;
    char buf[16];
    errno = 0;
    r->got = st_read(r->fd, buf, sizeof(buf), r->timeout);
    r->err = errno;
    return NULL;
}

/* A coroutine running `body` (read_message...) on `r`. */
static st_thread_t start_reader_with(void *(*body)(void *), struct reader *r, st_netfd_t fd,
                                     st_utime_t timeout)
{
    *r = (struct reader){.fd = fd, .timeout = timeout, .got = -2};
    st_thread_t t = st_thread_create(body, r, 1, 0);
    cr_assert_not_null(t, "st_thread_create: %s", strerror(errno));
    return t;
}

static st_thread_t start_reader(struct reader *r, st_netfd_t fd, st_utime_t timeout)
{
    return start_reader_with(read_message, r, fd, timeout);
}

static void expect_read(st_thread_t t, const struct reader *r, ssize_t want, const char *what)
{
    cr_assert_eq(st_thread_join(t, NULL), 0);
    cr_expect_eq(r->got, want, "%s: read returned %zd (%s)", what, r->got,
                 r->got < 0 ? strerror(r->err) : "");
}

/* A coroutine in st_poll on one descriptor. */
struct poller {
    struct pollfd pd;
    int rc;
    int err;
};

static void *poll_once(void *arg)
{
    struct poller *p = arg;
    errno = 0;
    p->rc = st_poll(&p->pd, 1, 5000000);
    p->err = errno;
    return NULL;
}

/* A coroutine in st_poll for POLLIN on `fd`, which is waiting when this returns. */
static st_thread_t start_poller(struct poller *w, st_netfd_t fd)
{
    *w = (struct poller){.pd = {.fd = st_netfd_fileno(fd), .events = POLLIN}};
    st_thread_t t = st_thread_create(poll_once, w, 1, 0);
    cr_assert_not_null(t, "st_thread_create: %s", strerror(errno));
    cr_assert_eq(st_usleep(1000), 0);
    return t;
}

/* A socketpair: `a` a netfd (the side read), `peer` a plain descriptor (the side written). */
struct pair {
    st_netfd_t a;
    int peer;
};

static void open_pair(struct pair *p)
{
    int sv[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0, "socketpair: %s", strerror(errno));
    p->a = st_netfd_open_socket(sv[0]);
    cr_assert_not_null(p->a, "st_netfd_open_socket: %s", strerror(errno));
    p->peer = sv[1];
}

static void close_pair(struct pair *p)
{
    cr_expect_eq(st_netfd_close(p->a), 0);
    cr_expect_eq(close(p->peer), 0);
}

/* Counts the descriptors open before the test, then makes an io_uring scheduler and a pair. */
static int init_uring_with_pair(struct pair *p)
{
    int before = open_fd_count();
    init_uring();
    open_pair(p);
    return before;
}

/* n pairs, each with a reader on its st end (5 s timeout). */
static void start_readers(int n, struct pair *p, struct reader *r, st_thread_t *t)
{
    for (int i = 0; i < n; i++) {
        open_pair(&p[i]);
        t[i] = start_reader(&r[i], p[i].a, 5000000);
    }
}

/* Write to every pair, check that every reader got it, close the pairs. */
static void feed_readers(int n, struct pair *p, struct reader *r, st_thread_t *t, const char *what)
{
    for (int i = 0; i < n; i++) {
        cr_assert_eq(write(p[i].peer, "ping", 4), 4);
    }
    for (int i = 0; i < n; i++) {
        expect_read(t[i], &r[i], 4, what);
        close_pair(&p[i]);
    }
}

/* ---- loading liburing ------------------------------------------------------------- */

Test(faults_io_uring, liburing_that_cannot_be_loaded_is_enosys_and_loading_is_retried)
{
    skip_unless_uring_loads();
    int before = open_fd_count();
    arm(F_dlopen, 1, 0);
    EXPECT_FAIL(st_set_eventsys(ST_EVENTSYS_IO_URING), ENOSYS);
    cr_assert(fired(F_dlopen));
    cr_expect_eq(st_get_eventsys(), -1, "no event system was chosen");
    /* A dlopen that failed for want of memory is not for ever: the next selection loads it. */
    init_uring();
    expect_usable_then_clean_destroy(before);
}

ParameterizedTestParameters(faults_io_uring, a_missing_liburing_function_is_enosys_and_lets_go_of_it)
{
    /* The backend looks up eight functions: each lookup fails in turn. */
    static int nth[] = {1, 2, 3, 4, 5, 6, 7, 8};
    return cr_make_param_array(int, nth, sizeof(nth) / sizeof(nth[0]));
}

ParameterizedTest(const int *nth, faults_io_uring, a_missing_liburing_function_is_enosys_and_lets_go_of_it)
{
    skip_unless_uring_loads();
    int before = open_fd_count();
    arm(F_dlsym, *nth, 0);
    EXPECT_FAIL(st_set_eventsys(ST_EVENTSYS_IO_URING), ENOSYS);
    cr_assert(fired(F_dlsym), "lookup %d happened", *nth);
    cr_expect_eq(faults[F_dlsym].calls, *nth, "the lookups stop at the missing %s",
                 fault_log.last_dlsym_name);
    cr_expect_eq(fault_log.dlclose_calls, 1, "the library lacking %s is closed",
                 fault_log.last_dlsym_name);
    cr_expect_eq(fault_log.last_dlclose_handle, fault_log.last_dlopen_handle);
    cr_expect_eq(st_get_eventsys(), -1);
    /* Another scheduler may load it later: the failure is not remembered. */
    init_uring();
    cr_expect_eq(fault_log.dlclose_calls, 1, "the library that loaded is kept");
    expect_usable_then_clean_destroy(before);
}

Test(faults_io_uring, a_refused_probe_ring_reports_the_kernels_errno)
{
    select_uring(); /* loads liburing; the probe ring is made by every selection */
    st_destroy();
    int before = open_fd_count();
    /* seccomp filters say ENOSYS or EPERM, io_uring_disabled EPERM, RLIMIT_MEMLOCK ENOMEM. */
    static const int errs[] = {ENOSYS, EPERM, ENOMEM, EMFILE};
    for (size_t i = 0; i < sizeof(errs) / sizeof(errs[0]); i++) {
        arm(F_io_uring_queue_init, 1, errs[i]);
        errno = 0;
        cr_expect_eq(st_set_eventsys(ST_EVENTSYS_IO_URING), -1);
        cr_expect_eq(errno, errs[i], "errno %s, want %s", strerror(errno), strerror(errs[i]));
        cr_assert(fired(F_io_uring_queue_init));
        cr_expect_eq(st_get_eventsys(), -1, "no event system was chosen");
        cr_expect_eq(open_fd_count(), before);
    }
    /* The refusal is not remembered either. */
    init_uring();
    expect_usable();
    st_destroy();
    cr_expect_eq(fault_log.rings_made, fault_log.rings_exited, "every ring made was torn down");
    cr_expect_eq(open_fd_count(), before);
}

/* ---- st_init: the state and the ring ------------------------------------------------ */

Test(faults_io_uring, ring_setup_falls_back_to_what_older_kernels_take)
{
    int before = open_fd_count();
    struct {
        int err;
        int times;
        int attempts;        /* io_uring_queue_init_params calls st_init makes */
        unsigned last_flags; /* of the ring that was made */
        bool smaller;        /* fewer entries than the first attempt asked for */
    } const cases[] = {
        /* before 6.0: no IORING_SETUP_SINGLE_ISSUER */
        {EINVAL, 1, 2,
         IORING_SETUP_CQSIZE | IORING_SETUP_CLAMP | IORING_SETUP_SUBMIT_ALL |
             IORING_SETUP_COOP_TASKRUN,
         false},
        /* before 5.18/5.19: no IORING_SETUP_SUBMIT_ALL, no IORING_SETUP_COOP_TASKRUN */
        {EINVAL, 2, 3, IORING_SETUP_CQSIZE | IORING_SETUP_CLAMP, false},
        /* before 5.5: no IORING_SETUP_CQSIZE either */
        {EINVAL, 3, 4, 0, false},
        /* locked memory too short for 1024 entries (before 5.12) */
        {ENOMEM, 1, 2, 0, true},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        select_uring();
        fault_log.nring_requests = 0;
        arm_times(F_io_uring_queue_init_params, 1, cases[i].err, cases[i].times);
        cr_assert_eq(st_init(), 0, "case %zu: st_init: %s", i, strerror(errno));
        cr_assert(fired(F_io_uring_queue_init_params));
        cr_expect_eq(fault_log.nring_requests, cases[i].attempts, "case %zu", i);
        cr_assert_gt(fault_log.nring_requests, 1);
        const struct fault_ring_request *first = &fault_log.ring_requests[0];
        const struct fault_ring_request *last =
            &fault_log.ring_requests[fault_log.nring_requests - 1];
        cr_expect_neq(first->flags & IORING_SETUP_SUBMIT_ALL, 0, "the newest flags come first");
        cr_expect_eq(last->flags, cases[i].last_flags, "case %zu: flags %#x", i, last->flags);
        cr_expect_eq(last->entries < first->entries, cases[i].smaller, "case %zu: %u entries", i,
                     last->entries);
        expect_usable();
        st_destroy();
        cr_expect_eq(fault_log.rings_made, fault_log.rings_exited);
        cr_expect_eq(open_fd_count(), before, "case %zu", i);
    }
}

Test(faults_io_uring, ring_setup_failure_fails_init_with_its_errno)
{
    select_uring();
    int before = open_fd_count();
    struct {
        int err;
        int times;
        int attempts;
    } const cases[] = {
        {EMFILE, 1, 1}, /* no descriptor for the ring: no retry */
        {EPERM, 1, 1},  /* io_uring_disabled was set after the probe */
        {EINVAL, 4, 4}, /* every set of flags refused */
        {ENOMEM, 2, 2}, /* even the small ring */
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        fault_log.nring_requests = 0;
        arm_times(F_io_uring_queue_init_params, 1, cases[i].err, cases[i].times);
        errno = 0;
        cr_expect_eq(st_init(), -1, "case %zu", i);
        cr_expect_eq(errno, cases[i].err, "case %zu: errno %s", i, strerror(errno));
        cr_assert(fired(F_io_uring_queue_init_params));
        cr_expect_eq(fault_log.nring_requests, cases[i].attempts, "case %zu", i);
        cr_expect_eq(st_get_eventsys(), ST_EVENTSYS_IO_URING, "the choice stays");
        cr_expect_eq(open_fd_count(), before, "case %zu", i);
    }
    cr_assert_eq(st_init(), 0, "st_init once the kernel agrees: %s", strerror(errno));
    expect_usable();
    st_destroy();
    cr_expect_eq(fault_log.rings_made, fault_log.rings_exited);
    cr_expect_eq(open_fd_count(), before);
}

Test(faults_io_uring, init_fails_cleanly_at_every_allocation)
{
    select_uring();
    st_destroy();
    int before = open_fd_count();
    static const enum fault_id allocators[] = {F_calloc, F_malloc, F_realloc};
    bool failed_before_the_ring = false; /* the backend's state */
    bool failed_after_the_ring = false;  /* the ring was made, then had to go */
    for (size_t a = 0; a < sizeof(allocators) / sizeof(allocators[0]); a++) {
        enum fault_id f = allocators[a];
        select_uring();
        for (int n = 1;; n++) {
            cr_assert_lt(n, 1000, "st_init allocates without end");
            int made = fault_log.rings_made;
            arm(f, n, ENOMEM);
            errno = 0;
            int rc = st_init();
            int err = errno;
            bool failed = fired(f);
            disarm(f);
            if (!failed) {
                cr_assert_eq(rc, 0, "st_init without a fault: %s", strerror(err));
                break;
            }
            if (rc == 0) {
                /* A best-effort allocation (the overflow reporter's signal stack). */
                st_destroy();
                cr_expect_eq(fault_log.rings_made, fault_log.rings_exited);
                select_uring();
                continue;
            }
            cr_expect_eq(rc, -1, "allocation %d failed, st_init returned %d", n, rc);
            cr_expect_eq(err, ENOMEM, "allocation %d: errno %s", n, strerror(err));
            cr_expect_eq(fault_log.rings_made, fault_log.rings_exited,
                         "allocation %d: the ring was torn down", n);
            cr_expect_eq(open_fd_count(), before, "allocation %d", n);
            failed_before_the_ring |= fault_log.rings_made == made;
            failed_after_the_ring |= fault_log.rings_made > made;
        }
        expect_usable();
        st_destroy();
        cr_expect_eq(open_fd_count(), before);
    }
    cr_expect(failed_before_the_ring, "the state allocation was failed");
    cr_expect(failed_after_the_ring, "an allocation after the ring was failed");
}

/* ---- the descriptor table ------------------------------------------------------------ */

Test(faults_io_uring, table_growth_failure_fails_the_wait_and_netfd_creation)
{
    int before = open_fd_count();
    init_uring();
    int sv[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    struct pollfd pd = {.fd = sv[0], .events = POLLIN};

    /* The first descriptor needs the chunk table (realloc), then its chunk (calloc). */
    arm(F_realloc, 1, ENOMEM);
    EXPECT_FAIL(st_poll(&pd, 1, 0), ENOMEM);
    cr_expect(fired(F_realloc));
    arm(F_calloc, 1, ENOMEM);
    EXPECT_FAIL(st_poll(&pd, 1, 0), ENOMEM);
    cr_expect(fired(F_calloc));
    arm(F_calloc, 1, ENOMEM);
    EXPECT_FAIL_NULL(st_netfd_open_socket(sv[0]), ENOMEM);
    cr_expect(fired(F_calloc));
    cr_expect_neq(fcntl(sv[0], F_GETFD), -1, "the caller's descriptor stays open");
    /* Past the first table's 4 chunks of 256 descriptors the table grows again. */
    int high = fcntl(sv[0], F_DUPFD_CLOEXEC, 1100);
    cr_assert_geq(high, 1100, "F_DUPFD: %s", strerror(errno));
    arm(F_realloc, 1, ENOMEM);
    EXPECT_FAIL_NULL(st_netfd_open_socket(high), ENOMEM);
    cr_expect(fired(F_realloc));
    cr_expect_neq(fcntl(high, F_GETFD), -1, "the caller's descriptor stays open");
    cr_assert_eq(close(high), 0);

    /* With memory back, the same descriptor waits and is woken. */
    cr_expect_eq(st_poll(&pd, 1, 0), 0, "nothing to read yet");
    cr_assert_eq(write(sv[1], "x", 1), 1);
    cr_expect_eq(st_poll(&pd, 1, 1000000), 1);
    cr_expect_eq(pd.revents, POLLIN);
    cr_assert_eq(close(sv[0]), 0);
    cr_assert_eq(close(sv[1]), 0);
    expect_usable_then_clean_destroy(before);
}

/* A wait on a low descriptor (chunk present) and a high one (table or chunk missing). */
Test(faults_io_uring, growth_failure_rolls_back_the_pollfds_already_added)
{
    struct pair p;
    int before = init_uring_with_pair(&p);
    struct {
        enum fault_id f;
        int min_fd; /* 256 fds a chunk, 4 chunks in the first table */
    } const cases[] = {{F_calloc, 300}, {F_realloc, 1100}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int high = fcntl(p.peer, F_DUPFD_CLOEXEC, cases[i].min_fd);
        cr_assert_geq(high, cases[i].min_fd, "F_DUPFD: %s", strerror(errno));
        struct pollfd pds[2] = {{.fd = st_netfd_fileno(p.a), .events = POLLIN},
                                {.fd = high, .events = POLLIN}};
        arm(cases[i].f, 1, ENOMEM);
        EXPECT_FAIL(st_poll(pds, 2, ST_UTIME_NO_TIMEOUT), ENOMEM);
        cr_expect(fired(cases[i].f), "case %zu", i);
        /* Nobody is left waiting on the low descriptor, and it still waits and wakes. */
        struct reader r;
        st_thread_t t = start_reader(&r, p.a, 2000000);
        cr_assert_eq(st_usleep(1000), 0);
        cr_assert_eq(write(p.peer, "ping", 4), 4);
        expect_read(t, &r, 4, "the low descriptor after the rollback");
        cr_assert_eq(close(high), 0);
    }
    close_pair(&p); /* st_netfd_close: EBUSY if a rolled-back waiter were left */
    expect_usable_then_clean_destroy(before);
}

/* ---- submission ----------------------------------------------------------------------- */

Test(faults_io_uring, a_full_submission_queue_whose_submit_fails_loses_no_waiter)
{
    int before = open_fd_count();
    init_small_ring();
    enum { N = 100 }; /* more than the 64 requests the ring holds */
    static const int errs[] = {EBUSY, EAGAIN};
    for (size_t e = 0; e < sizeof(errs) / sizeof(errs[0]); e++) {
        struct pair p[N];
        struct reader r[N];
        st_thread_t t[N];
        start_readers(N, p, r, t);
        /* The ring fills up and making room fails twice: the rest wait for the next dispatch. */
        arm_times(F_io_uring_submit, 1, errs[e], 2);
        cr_assert_eq(st_usleep(1000), 0);
        cr_expect(fired(F_io_uring_submit), "the full ring's submits were refused");
        feed_readers(N, p, r, t, "reader of a full ring");
    }
    expect_usable_then_clean_destroy(before);
}

Test(faults_io_uring, a_failed_submit_and_wait_loses_no_waiter)
{
    struct pair p;
    int before = init_uring_with_pair(&p);
    /* Interrupted by a signal, CQ overflow (before 5.19), no memory for the requests. */
    static const int errs[] = {EINTR, EBUSY, EAGAIN, ENOMEM};
    for (size_t e = 0; e < sizeof(errs) / sizeof(errs[0]); e++) {
        struct reader r;
        st_thread_t t = start_reader(&r, p.a, 5000000);
        /* The wait fails, and so does the retry of its submission: the request stays queued. */
        arm(F_io_uring_submit_and_wait_timeout, 1, errs[e]);
        arm(F_io_uring_submit, 1, errs[e]);
        cr_assert_eq(st_usleep(1000), 0);
        cr_expect(fired(F_io_uring_submit_and_wait_timeout), "%s", strerror(errs[e]));
        cr_expect(fired(F_io_uring_submit), "%s", strerror(errs[e]));
        cr_assert_eq(write(p.peer, "ping", 4), 4);
        expect_read(t, &r, 4, strerror(errs[e]));
    }
    close_pair(&p);
    expect_usable_then_clean_destroy(before);
}

/*
 * Readers leave (interrupted) while the ring is full and cannot be
 * submitted: the last removal has no room. Their descriptors are closed and
 * the numbers reused by new sockets, read from on both ends: every new
 * reader is woken, none is left relying on the old request.
 */
Test(faults_io_uring, a_removal_the_ring_cannot_take_does_not_strand_the_next_user_of_the_fd)
{
    int before = open_fd_count();
    init_small_ring();
    enum { N = 65 }; /* one removal more than the 64-entry ring holds */
    struct pair p[N];
    struct reader r[N];
    st_thread_t t[N];
    int numbers[N];
    for (int i = 0; i < N; i++) {
        open_pair(&p[i]);
        numbers[i] = st_netfd_fileno(p[i].a);
        t[i] = start_reader(&r[i], p[i].a, ST_UTIME_NO_TIMEOUT);
    }
    cr_assert_eq(st_usleep(1000), 0); /* every reader's poll is in the kernel */

    arm_times(F_io_uring_submit, 1, EBUSY, INT_MAX);
    for (int i = 0; i < N; i++) {
        st_thread_interrupt(t[i]);
    }
    for (int i = 0; i < N; i++) {
        cr_assert_eq(st_thread_join(t[i], NULL), 0);
        cr_expect_eq(r[i].got, -1);
        cr_expect_eq(r[i].err, EINTR);
        cr_expect_eq(st_netfd_close(p[i].a), 0, "reader %d left", i);
    }
    cr_expect_gt(faults[F_io_uring_submit].calls, 0,
                 "room for the removals was asked for and refused");
    disarm(F_io_uring_submit);

    /* The peers stay open: the old sockets' polls must not fire on their own. */
    struct {
        st_netfd_t end[2];
        struct reader r[2];
        st_thread_t t[2];
    } q[N];
    bool reused[N] = {false};
    for (int i = 0; i < N; i++) {
        int sv[2];
        cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
        for (int k = 0; k < 2; k++) {
            for (int j = 0; j < N; j++) {
                reused[j] |= sv[k] == numbers[j];
            }
            q[i].end[k] = st_netfd_open_socket(sv[k]);
            cr_assert_not_null(q[i].end[k]);
            q[i].t[k] = start_reader(&q[i].r[k], q[i].end[k], 3000000);
        }
    }
    for (int j = 0; j < N; j++) {
        cr_assert(reused[j], "descriptor number %d was reused", numbers[j]);
    }
    cr_assert_eq(st_usleep(1000), 0);
    for (int i = 0; i < N; i++) {
        for (int k = 0; k < 2; k++) {
            cr_assert_eq(st_write(q[i].end[k], "ping", 4, 1000000), 4);
        }
    }
    for (int i = 0; i < N; i++) {
        for (int k = 0; k < 2; k++) {
            expect_read(q[i].t[k], &q[i].r[k], 4, "reader of a reused descriptor number");
            cr_expect_eq(st_netfd_close(q[i].end[k]), 0);
        }
        cr_expect_eq(close(p[i].peer), 0);
    }
    expect_usable_then_clean_destroy(before);
}

/* ---- completions --------------------------------------------------------------------- */

Test(faults_io_uring, a_cancelled_poll_is_rearmed_and_wakes_nobody)
{
    struct pair p;
    int before = init_uring_with_pair(&p);
    struct poller w;
    st_thread_t t = start_poller(&w, p.a);
    arm(F_io_uring_cqe_res, 1, ECANCELED); /* io-wq or the task cancelled it, not the backend */
    cr_assert_eq(write(p.peer, "x", 1), 1);
    cr_assert_eq(st_thread_join(t, NULL), 0);
    cr_expect(fired(F_io_uring_cqe_res));
    cr_expect_eq(w.rc, 1, "st_poll: %d (%s)", w.rc, strerror(w.err));
    cr_expect_eq(w.pd.revents, POLLIN, "woken by the new request, not by the cancellation");
    close_pair(&p);
    expect_usable_then_clean_destroy(before);
}

Test(faults_io_uring, a_failed_poll_request_wakes_its_waiters_with_pollerr)
{
    struct pair p;
    int before = init_uring_with_pair(&p);
    static const int errs[] = {ENOMEM, EINVAL};
    for (size_t e = 0; e < sizeof(errs) / sizeof(errs[0]); e++) {
        /* st_poll: the wait ends, POLLERR says the descriptor needs looking at. */
        struct poller w;
        st_thread_t t = start_poller(&w, p.a);
        arm(F_io_uring_cqe_res, 1, errs[e]);
        cr_assert_eq(write(p.peer, "x", 1), 1);
        cr_assert_eq(st_thread_join(t, NULL), 0);
        cr_expect(fired(F_io_uring_cqe_res));
        cr_expect_eq(w.rc, 1, "%s: st_poll %d", strerror(errs[e]), w.rc);
        cr_expect_eq(w.pd.revents, POLLERR, "%s: revents %#x", strerror(errs[e]), w.pd.revents);

        /* The I/O functions try the call again: the byte is read. */
        struct reader r;
        t = start_reader(&r, p.a, 2000000);
        expect_read(t, &r, 1, "the byte behind the failed poll");

        /* On a pipe (no socket operations: the I/O functions wait for readiness). */
        int pv[2];
        cr_assert_eq(pipe(pv), 0);
        st_netfd_t in = st_netfd_open(pv[0]);
        cr_assert_not_null(in);
        t = start_reader(&r, in, 2000000);
        cr_assert_eq(st_usleep(1000), 0);
        arm(F_io_uring_cqe_res, 1, errs[e]);
        cr_assert_eq(write(pv[1], "ping", 4), 4);
        expect_read(t, &r, 4, "a read whose poll failed retries");
        cr_expect(fired(F_io_uring_cqe_res));
        cr_expect_eq(st_netfd_close(in), 0);
        cr_expect_eq(close(pv[1]), 0);
    }
    close_pair(&p);
    expect_usable_then_clean_destroy(before);
}

static void *poll_netfd(void *arg)
{
    struct reader *r = arg;
    errno = 0;
    r->got = st_netfd_poll(r->fd, POLLIN, r->timeout);
    r->err = errno;
    return NULL;
}

Test(faults_io_uring, a_poll_refused_with_ebadf_is_pollnval)
{
    struct pair p;
    int before = init_uring_with_pair(&p);
    struct poller w;
    st_thread_t t = start_poller(&w, p.a);
    /* As when the descriptor was closed before the kernel saw the poll. */
    arm(F_io_uring_cqe_res, 1, EBADF);
    cr_assert_eq(write(p.peer, "x", 1), 1);
    cr_assert_eq(st_thread_join(t, NULL), 0);
    cr_expect(fired(F_io_uring_cqe_res));
    cr_expect_eq(w.rc, 1);
    cr_expect_eq(w.pd.revents, POLLNVAL);

    struct reader r = {.fd = p.a, .timeout = 2000000};
    arm(F_io_uring_cqe_res, 1, EBADF);
    t = st_thread_create(poll_netfd, &r, 1, 0);
    cr_assert_not_null(t);
    cr_assert_eq(st_thread_join(t, NULL), 0);
    cr_expect(fired(F_io_uring_cqe_res));
    cr_expect_eq(r.got, -1);
    cr_expect_eq(r.err, EBADF, "st_netfd_poll: %s", strerror(r.err));
    close_pair(&p);
    expect_usable_then_clean_destroy(before);
}

/* 300 completions at once in a 128-entry completion queue: the kernel keeps the overflow. */
Test(faults_io_uring, more_completions_than_the_completion_queue_holds_wake_everyone)
{
    int before = open_fd_count();
    init_small_ring();
    enum { N = 300 };
    static struct pair p[N];
    static struct reader r[N];
    static st_thread_t t[N];
    start_readers(N, p, r, t);
    cr_assert_eq(st_usleep(1000), 0);
    feed_readers(N, p, r, t, "reader behind an overflowing completion queue");
    expect_usable_then_clean_destroy(before);
}

/* ---- operations: reads and writes as submitted requests ------------------------------- */

/* Reader t times out (ETIME); then a new read on the pair gets what the peer sends. */
static void expect_timeout_then_a_read(struct pair *p, st_thread_t t, struct reader *r,
                                       const char *what)
{
    expect_read(t, r, -1, what);
    cr_expect_eq(r->err, ETIME, "%s: %s", what, strerror(r->err));
    t = start_reader(r, p->a, 2000000);
    cr_assert_eq(write(p->peer, "ping", 4), 4);
    expect_read(t, r, 4, "a read after a cancelled one");
}

/*
 * A read that times out is cancelled; the cancellation's completion says it
 * missed (the operation had completed, was running, or the request was
 * refused): the reader still ends with ETIME once the read's own completion
 * came, and the socket works afterwards.
 */
Test(faults_io_uring, a_cancellation_that_misses_still_ends_the_read)
{
    struct pair p;
    int before = init_uring_with_pair(&p);
    static const int errs[] = {ENOENT, EALREADY, EINVAL};
    for (size_t e = 0; e < sizeof(errs) / sizeof(errs[0]); e++) {
        struct reader r;
        arm(F_io_uring_cancel_res, 1, errs[e]);
        st_thread_t t = start_reader(&r, p.a, 10000);
        expect_timeout_then_a_read(&p, t, &r, strerror(errs[e]));
        cr_expect(fired(F_io_uring_cancel_res), "%s", strerror(errs[e]));
    }
    close_pair(&p);
    expect_usable_then_clean_destroy(before);
}

/* The cancellation of a timed-out read cannot be submitted at first: it goes with the next. */
Test(faults_io_uring, a_cancellation_whose_submission_fails_goes_with_the_next)
{
    struct pair p;
    int before = init_uring_with_pair(&p);
    static const int errs[] = {EINTR, EBUSY, EAGAIN, ENOMEM};
    for (size_t e = 0; e < sizeof(errs) / sizeof(errs[0]); e++) {
        struct reader r;
        st_thread_t t = start_reader(&r, p.a, 10000);
        cr_assert_eq(st_usleep(5000), 0);
        arm_times(F_io_uring_submit_and_wait_timeout, 1, errs[e], 2);
        arm(F_io_uring_submit, 1, errs[e]);
        expect_timeout_then_a_read(&p, t, &r, strerror(errs[e]));
        cr_expect(fired(F_io_uring_submit_and_wait_timeout), "%s", strerror(errs[e]));
        disarm(F_io_uring_submit);
    }
    close_pair(&p);
    expect_usable_then_clean_destroy(before);
}

/* ---- accepts and connects as submitted requests ------------------------------------------ */

/* A listening netfd on 127.0.0.1 and its address. */
static st_netfd_t open_listener(struct sockaddr_in *sin)
{
    int osfd = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert_geq(osfd, 0, "socket: %s", strerror(errno));
    *sin = (struct sockaddr_in){.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(*sin);
    cr_assert_eq(bind(osfd, (struct sockaddr *)sin, len), 0, "bind: %s", strerror(errno));
    cr_assert_eq(getsockname(osfd, (struct sockaddr *)sin, &len), 0);
    cr_assert_eq(listen(osfd, 16), 0, "listen: %s", strerror(errno));
    st_netfd_t lfd = st_netfd_open_socket(osfd);
    cr_assert_not_null(lfd, "st_netfd_open_socket: %s", strerror(errno));
    return lfd;
}

/* A plain client socket connected to `sin` (blocking: queued on the listener when this returns). */
static int connected_client(const struct sockaddr_in *sin)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert_geq(fd, 0, "socket: %s", strerror(errno));
    cr_assert_eq(connect(fd, (const struct sockaddr *)sin, sizeof(*sin)), 0, "connect: %s",
                 strerror(errno));
    return fd;
}

/* Accepts the client's connection with st_accept, checks it and closes both (client -1: none). */
static void expect_accept(st_netfd_t lfd, int client, const char *what)
{
    errno = 0;
    st_netfd_t conn = st_accept(lfd, NULL, NULL, 1000000);
    cr_expect_not_null(conn, "%s: st_accept: %s", what, strerror(errno));
    if (conn != NULL) {
        cr_expect_eq(st_netfd_close(conn), 0);
    }
    if (client >= 0) {
        cr_assert_eq(close(client), 0);
    }
}

/* The kernel has io_uring's accept and connect, or the test skips and says why. */
static struct st__uring_state *socket_ops_or_skip(void)
{
    struct st__uring_state *st = st__sched_peek()->backend_state;
    unsigned both = 1U << ST__IO_ACCEPT | 1U << ST__IO_CONNECT;
    if ((st->socket_kinds & both) != both || !st->ops_enabled) {
        cr_skip_test("this kernel lacks io_uring's accept or connect: they wait for readiness");
    }
    return st;
}

/* Counts the descriptors open before the test, then makes an io_uring scheduler and a listener. */
static int init_uring_with_listener(st_netfd_t *lfd, struct sockaddr_in *sin)
{
    int before = open_fd_count();
    init_uring();
    (void)socket_ops_or_skip();
    *lfd = open_listener(sin);
    return before;
}

/* Closes the test's listener, then checks the scheduler and that no descriptor is left. */
static void close_listener_then_clean_destroy(st_netfd_t lfd, int before)
{
    cr_expect_eq(st_netfd_close(lfd), 0);
    expect_usable_then_clean_destroy(before);
}

/* st_connect on a fresh socket to `sin`, then st_accept; how often accept4 and connect ran. */
static void connect_and_accept(st_netfd_t lfd, const struct sockaddr_in *sin, int *accepts,
                               int *connects)
{
    st_netfd_t cfd = st_netfd_open_socket(socket(AF_INET, SOCK_STREAM, 0));
    cr_assert_not_null(cfd);
    faults[F_accept4].calls = 0;
    faults[F_connect].calls = 0;
    cr_expect_eq(st_connect(cfd, (const struct sockaddr *)sin, sizeof(*sin), 1000000), 0,
                 "st_connect: %s", strerror(errno));
    st_netfd_t conn = st_accept(lfd, NULL, NULL, 1000000);
    cr_expect_not_null(conn, "st_accept: %s", strerror(errno));
    *accepts = faults[F_accept4].calls;
    *connects = faults[F_connect].calls;
    if (conn != NULL) {
        cr_expect_eq(st_netfd_close(conn), 0);
    }
    cr_expect_eq(st_netfd_close(cfd), 0);
}

Test(faults_io_uring, accept_and_connect_are_requests_unless_the_probe_fails)
{
    int before = open_fd_count();
    select_uring();
    arm(F_io_uring_get_probe_ring, 1, ENOMEM);
    cr_assert_eq(st_init(), 0, "st_init: %s", strerror(errno));
    cr_expect(fired(F_io_uring_get_probe_ring));
    const struct st__uring_state *st = st__sched_peek()->backend_state;
    cr_expect_eq(st->socket_kinds, 0);
    struct sockaddr_in sin;
    st_netfd_t lfd = open_listener(&sin);
    int accepts;
    int connects;
    connect_and_accept(lfd, &sin, &accepts, &connects);
    cr_expect_gt(accepts, 0, "without the probe, st_accept calls accept4");
    cr_expect_gt(connects, 0, "without the probe, st_connect calls connect");
    cr_expect_eq(st_netfd_close(lfd), 0);
    st_destroy();

    init_uring();
    (void)socket_ops_or_skip();
    lfd = open_listener(&sin);
    connect_and_accept(lfd, &sin, &accepts, &connects);
    cr_expect_eq(accepts, 0, "st_accept is a request");
    cr_expect_eq(connects, 0, "st_connect is a request");
    cr_expect_eq(st_netfd_close(lfd), 0);
    expect_usable_then_clean_destroy(before);
    cr_expect_eq(fault_log.probes_freed, fault_log.probes_got, "every probe was given back");
}

/* Fill the submission queue with NOPs, and make the next submit, which would make room, fail. */
static void fill_ring_and_fail_submit(struct st__uring_state *st)
{
    while (io_uring_sq_space_left(&st->ring) > 0) {
        struct io_uring_sqe *sqe = io_uring_get_sqe(&st->ring);
        io_uring_prep_nop(sqe);
        io_uring_sqe_set_data64(sqe, ST__URING_UDATA_IGNORED);
    }
    arm(F_io_uring_submit, 1, EBUSY);
}

Test(faults_io_uring, an_accept_or_connect_without_room_waits_for_readiness)
{
    int before = open_fd_count();
    init_small_ring();
    struct st__uring_state *st = socket_ops_or_skip();
    struct sockaddr_in sin;
    st_netfd_t lfd = open_listener(&sin);

    fill_ring_and_fail_submit(st);
    faults[F_accept4].calls = 0;
    expect_accept(lfd, connected_client(&sin), "no room");
    cr_expect(fired(F_io_uring_submit));
    cr_expect_gt(faults[F_accept4].calls, 0, "st_accept calls accept4");

    fill_ring_and_fail_submit(st);
    st_netfd_t cfd = st_netfd_open_socket(socket(AF_INET, SOCK_STREAM, 0));
    cr_assert_not_null(cfd);
    faults[F_connect].calls = 0;
    cr_expect_eq(st_connect(cfd, (const struct sockaddr *)&sin, sizeof(sin), 1000000), 0,
                 "st_connect: %s", strerror(errno));
    cr_expect(fired(F_io_uring_submit));
    cr_expect_gt(faults[F_connect].calls, 0, "st_connect calls connect");
    cr_expect_eq(st_netfd_close(cfd), 0);
    cr_expect_eq(st->ops_in_flight, 0);
    expect_accept(lfd, -1, "the connection of the connect without room");

    /* Room is made once submitting works. */
    int accepts;
    int connects;
    connect_and_accept(lfd, &sin, &accepts, &connects);
    cr_expect_eq(accepts, 0, "st_accept is a request again");
    cr_expect_eq(connects, 0, "st_connect is a request again");
    close_listener_then_clean_destroy(lfd, before);
}

Test(faults_io_uring, an_accept_whose_submission_fails_goes_with_the_next)
{
    struct sockaddr_in sin;
    st_netfd_t lfd;
    int before = init_uring_with_listener(&lfd, &sin);
    static const int errs[] = {EINTR, EBUSY, EAGAIN, ENOMEM};
    for (size_t e = 0; e < sizeof(errs) / sizeof(errs[0]); e++) {
        int client = connected_client(&sin);
        arm(F_io_uring_submit_and_wait_timeout, 1, errs[e]);
        arm(F_io_uring_submit, 1, errs[e]);
        expect_accept(lfd, client, strerror(errs[e]));
        cr_expect(fired(F_io_uring_submit_and_wait_timeout), "%s", strerror(errs[e]));
        disarm(F_io_uring_submit);
    }
    close_listener_then_clean_destroy(lfd, before);
}

/*
 * An accept whose result says it did nothing (-EAGAIN, -EINTR, -EINVAL) goes
 * the readiness way; another error is the call's. The kernel had accepted a
 * connection each time (the shim rewrote its descriptor): the test closes it.
 */
Test(faults_io_uring, an_accept_result_that_did_nothing_waits_for_readiness)
{
    struct sockaddr_in sin;
    st_netfd_t lfd;
    int before = init_uring_with_listener(&lfd, &sin);
    static const int errs[] = {EAGAIN, EINTR, EINVAL};
    for (size_t e = 0; e < sizeof(errs) / sizeof(errs[0]); e++) {
        int lost = connected_client(&sin);
        int client = connected_client(&sin);
        arm(F_io_uring_op_res, 1, errs[e]);
        faults[F_accept4].calls = 0;
        expect_accept(lfd, client, strerror(errs[e]));
        cr_expect(fired(F_io_uring_op_res), "%s", strerror(errs[e]));
        cr_expect_gt(faults[F_accept4].calls, 0, "%s: accept4 was called", strerror(errs[e]));
        cr_assert_geq(fault_log.op_res_replaced, 0);
        cr_assert_eq(close(fault_log.op_res_replaced), 0);
        cr_assert_eq(close(lost), 0);
    }
    int lost = connected_client(&sin);
    arm(F_io_uring_op_res, 1, ECONNABORTED);
    EXPECT_FAIL_NULL(st_accept(lfd, NULL, NULL, 1000000), ECONNABORTED);
    cr_assert_geq(fault_log.op_res_replaced, 0);
    cr_assert_eq(close(fault_log.op_res_replaced), 0);
    cr_assert_eq(close(lost), 0);
    close_listener_then_clean_destroy(lfd, before);
}

/* A coroutine accepting on r->fd. */
static void *accept_one(void *arg)
{
    struct reader *r = arg;
    errno = 0;
    st_netfd_t conn = st_accept(r->fd, NULL, NULL, r->timeout);
    r->err = errno;
    r->got = conn != NULL ? 1 : -1;
    if (conn != NULL) {
        (void)st_netfd_close(conn);
    }
    return NULL;
}

/* A timed-out accept whose cancellation misses still ends with ETIME; the listener works. */
Test(faults_io_uring, an_accept_whose_cancellation_misses_still_times_out)
{
    struct sockaddr_in sin;
    st_netfd_t lfd;
    int before = init_uring_with_listener(&lfd, &sin);
    static const int errs[] = {ENOENT, EALREADY, EINVAL};
    for (size_t e = 0; e < sizeof(errs) / sizeof(errs[0]); e++) {
        struct reader r;
        arm(F_io_uring_cancel_res, 1, errs[e]);
        st_thread_t t = start_reader_with(accept_one, &r, lfd, 10000);
        cr_assert_eq(st_thread_join(t, NULL), 0);
        cr_expect(fired(F_io_uring_cancel_res), "%s", strerror(errs[e]));
        cr_expect_eq(r.got, -1);
        cr_expect_eq(r.err, ETIME, "%s: %s", strerror(errs[e]), strerror(r.err));
        expect_accept(lfd, connected_client(&sin), strerror(errs[e]));
    }
    close_listener_then_clean_destroy(lfd, before);
}

/* A connect's error is the call's, and then no success is owed to a later call. */
Test(faults_io_uring, a_connects_result_is_the_calls)
{
    struct sockaddr_in sin;
    st_netfd_t lfd;
    int before = init_uring_with_listener(&lfd, &sin);
    st_netfd_t cfd = st_netfd_open_socket(socket(AF_INET, SOCK_STREAM, 0));
    cr_assert_not_null(cfd);
    arm(F_io_uring_op_res, 1, ETIMEDOUT);
    EXPECT_FAIL(st_connect(cfd, (const struct sockaddr *)&sin, sizeof(sin), 1000000), ETIMEDOUT);
    cr_expect(fired(F_io_uring_op_res));
    cr_expect_eq(fault_log.op_res_replaced, 0, "the kernel connected");
    /* The socket is connected, but the call that did it failed: nothing is owed. */
    EXPECT_FAIL(st_connect(cfd, (const struct sockaddr *)&sin, sizeof(sin), 1000000), EISCONN);
    cr_expect_eq(st_netfd_close(cfd), 0);
    st_netfd_t conn = st_accept(lfd, NULL, NULL, 1000000);
    cr_expect_not_null(conn, "st_accept: %s", strerror(errno));
    if (conn != NULL) {
        cr_expect_eq(st_netfd_close(conn), 0);
    }
    close_listener_then_clean_destroy(lfd, before);
}

/* ---- file operations: reads, writes and fsyncs as submitted requests ------------------- */

/* One file operation through the backend, as the file I/O functions make it. */
static ssize_t file_op(int fd, enum st__io_kind kind, const char *buf, size_t len, off_t offset,
                       st_utime_t timeout)
{
    struct st__sched *sched = st__sched_peek();
    struct st__io_req req = {
        .kind = kind, .buf = (void *)(uintptr_t)buf, .len = len, .offset = offset};
    errno = 0;
    return sched->backend->submit_io(sched, fd, &req, timeout);
}

/* A temporary file, unlinked, as a plain descriptor. */
static int temp_file(void)
{
    char path[] = "/tmp/st_faults_uring_XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0, "mkstemp: %s", strerror(errno));
    cr_assert_eq(unlink(path), 0);
    return fd;
}

/* The file holds `want` (NUL-terminated) and nothing more. */
static void expect_file(int fd, const char *want)
{
    char got[64];
    memset(got, 0, sizeof(got));
    ssize_t n = pread(fd, got, sizeof(got) - 1, 0);
    cr_expect_eq(n, (ssize_t)strlen(want), "the file holds %zd bytes (%s)", n, got);
    cr_expect_str_eq(got, want);
}

/* The kernel has io_uring's file operations, or the test skips and says why. */
static struct st__uring_state *file_ops_or_skip(void)
{
    struct st__uring_state *st = st__sched_peek()->backend_state;
    if (st->file_kinds == 0 || !st->file_position) {
        cr_skip_test("this kernel lacks io_uring's file operations: they are left to the caller");
    }
    return st;
}

/* Counts the descriptors open before the test, then makes an io_uring scheduler and a file. */
static int init_uring_with_file(int *fd)
{
    int before = open_fd_count();
    init_uring();
    (void)file_ops_or_skip();
    *fd = temp_file();
    return before;
}

/* Closes the test's file, then checks the scheduler and that no descriptor is left. */
static void close_file_then_clean_destroy(int fd, int before)
{
    cr_assert_eq(close(fd), 0);
    expect_usable_then_clean_destroy(before);
}

Test(faults_io_uring, a_failed_probe_leaves_file_operations_to_the_caller)
{
    int before = open_fd_count();
    select_uring();
    arm(F_io_uring_get_probe_ring, 1, ENOMEM);
    cr_assert_eq(st_init(), 0, "st_init: %s", strerror(errno));
    cr_expect(fired(F_io_uring_get_probe_ring));
    int fd = temp_file();
    cr_expect_eq(file_op(fd, ST__IO_WRITE, "abc", 3, 0, ST_UTIME_NO_TIMEOUT), ST__IO_NOT_SUBMITTED);
    cr_expect_eq(file_op(fd, ST__IO_FSYNC, NULL, 0, 0, ST_UTIME_NO_TIMEOUT), ST__IO_NOT_SUBMITTED);
    expect_file(fd, "");
    expect_usable(); /* sockets' operations do not depend on the probe */
    st_destroy();

    init_uring();
    (void)file_ops_or_skip();
    cr_expect_eq(file_op(fd, ST__IO_WRITE, "abc", 3, 0, ST_UTIME_NO_TIMEOUT), 3);
    expect_file(fd, "abc");
    close_file_then_clean_destroy(fd, before);
    cr_expect_gt(fault_log.probes_got, 0);
    cr_expect_eq(fault_log.probes_freed, fault_log.probes_got, "every probe was given back");
}

Test(faults_io_uring, a_file_operation_without_room_or_memory_is_left_to_the_caller)
{
    int before = open_fd_count();
    init_small_ring();
    struct st__uring_state *st = file_ops_or_skip();
    int fd = temp_file();

    /* The submission queue is full and making room fails: nothing is done. */
    while (io_uring_sq_space_left(&st->ring) > 0) {
        struct io_uring_sqe *sqe = io_uring_get_sqe(&st->ring);
        io_uring_prep_nop(sqe);
        io_uring_sqe_set_data64(sqe, ST__URING_UDATA_IGNORED);
    }
    static const int errs[] = {EBUSY, EAGAIN};
    for (size_t e = 0; e < sizeof(errs) / sizeof(errs[0]); e++) {
        arm(F_io_uring_submit, 1, errs[e]);
        cr_expect_eq(file_op(fd, ST__IO_WRITE, "abc", 3, -1, ST_UTIME_NO_TIMEOUT),
                     ST__IO_NOT_SUBMITTED, "%s", strerror(errs[e]));
        cr_expect(fired(F_io_uring_submit));
        cr_expect_eq(file_op(fd, ST__IO_FSYNC, NULL, 0, 0, 0), ST__IO_NOT_SUBMITTED, "timeout 0");
    }
    cr_expect_eq(st->ops_in_flight, 0);
    expect_file(fd, "");
    cr_expect_eq(lseek(fd, 0, SEEK_CUR), 0);
    cr_expect_eq(file_op(fd, ST__IO_WRITE, "abc", 3, -1, ST_UTIME_NO_TIMEOUT), 3,
                 "room is made once submitting works");
    expect_file(fd, "abc");

    /* A descriptor in a chunk of the table not allocated yet, and no memory for it. */
    int high = fcntl(fd, F_DUPFD_CLOEXEC, 300);
    cr_assert_geq(high, 300, "F_DUPFD: %s", strerror(errno));
    arm(F_calloc, 1, ENOMEM);
    cr_expect_eq(file_op(high, ST__IO_WRITE, "def", 3, 3, ST_UTIME_NO_TIMEOUT),
                 ST__IO_NOT_SUBMITTED);
    cr_expect(fired(F_calloc));
    expect_file(fd, "abc");
    cr_expect_eq(file_op(high, ST__IO_WRITE, "def", 3, 3, ST_UTIME_NO_TIMEOUT), 3);
    expect_file(fd, "abcdef");
    cr_assert_eq(close(high), 0);
    close_file_then_clean_destroy(fd, before);
}

Test(faults_io_uring, a_file_operation_whose_submission_fails_goes_with_the_next)
{
    int fd;
    int before = init_uring_with_file(&fd);
    static const int errs[] = {EINTR, EBUSY, EAGAIN, ENOMEM};
    for (size_t e = 0; e < sizeof(errs) / sizeof(errs[0]); e++) {
        arm(F_io_uring_submit_and_wait_timeout, 1, errs[e]);
        arm(F_io_uring_submit, 1, errs[e]);
        cr_expect_eq(file_op(fd, ST__IO_WRITE, "ab", 2, (off_t)(2 * e), ST_UTIME_NO_TIMEOUT), 2,
                     "%s: %s", strerror(errs[e]), strerror(errno));
        cr_expect(fired(F_io_uring_submit_and_wait_timeout), "%s", strerror(errs[e]));
        cr_expect(fired(F_io_uring_submit), "%s", strerror(errs[e]));
    }
    expect_file(fd, "abababab");
    close_file_then_clean_destroy(fd, before);
}

Test(faults_io_uring, eagain_and_eintr_from_a_file_operation_submit_it_again)
{
    int fd;
    int before = init_uring_with_file(&fd);
    static const int errs[] = {EAGAIN, EINTR};
    for (size_t e = 0; e < sizeof(errs) / sizeof(errs[0]); e++) {
        /* Three completions in a row say it did nothing: the fourth submission's result counts. */
        arm_times(F_io_uring_op_res, 1, errs[e], 3);
        cr_expect_eq(file_op(fd, ST__IO_WRITE, "xyz", 3, 0, ST_UTIME_NO_TIMEOUT), 3, "%s: %s",
                     strerror(errs[e]), strerror(errno));
        cr_expect(fired(F_io_uring_op_res));
        cr_expect_eq(faults[F_io_uring_op_res].calls, 4, "%s: submitted %d times",
                     strerror(errs[e]), faults[F_io_uring_op_res].calls);
        arm(F_io_uring_op_res, 1, errs[e]);
        cr_expect_eq(file_op(fd, ST__IO_FSYNC, NULL, 0, 0, ST_UTIME_NO_TIMEOUT), 0);
        cr_expect_eq(faults[F_io_uring_op_res].calls, 2);
    }
    expect_file(fd, "xyz");

    /* For ever: the deadline still holds, across the submissions. */
    arm_times(F_io_uring_op_res, 1, EAGAIN, INT_MAX);
    st_utime_t start = st_utime();
    EXPECT_FAIL(file_op(fd, ST__IO_READ, "", 0, 0, 20000), ETIME);
    cr_expect_geq(st_utime() - start, 20000);
    cr_expect_gt(faults[F_io_uring_op_res].calls, 1);
    disarm(F_io_uring_op_res);

    /* Other errors are the call's. */
    arm(F_io_uring_op_res, 1, EIO);
    EXPECT_FAIL(file_op(fd, ST__IO_FSYNC, NULL, 0, 0, ST_UTIME_NO_TIMEOUT), EIO);
    cr_expect_eq(faults[F_io_uring_op_res].calls, 1, "not submitted again");
    close_file_then_clean_destroy(fd, before);
}

/* A coroutine reading with a file operation (at the file position) from the descriptor of r->fd. */
static void *read_file_op(void *arg)
{
    struct reader *r = arg;
    char buf[16];
    memset(buf, 0, sizeof(buf));
    r->got = file_op(st_netfd_fileno(r->fd), ST__IO_READ, buf, sizeof(buf), -1, r->timeout);
    r->err = errno;
    return NULL;
}

/* Such a coroutine on the pipe behind `in`, its read in the kernel, which keeps it pending. */
static st_thread_t start_file_reader(struct reader *r, st_netfd_t in, st_utime_t timeout)
{
    st_thread_t t = start_reader_with(read_file_op, r, in, timeout);
    cr_assert_eq(st_usleep(2000), 0);
    return t;
}

/* Counts the descriptors open before the test, then makes an io_uring scheduler and a pipe. */
static int init_uring_with_pipe(int pv[2], st_netfd_t *in)
{
    int before = open_fd_count();
    init_uring();
    (void)file_ops_or_skip();
    cr_assert_eq(pipe(pv), 0);
    *in = st_netfd_open(pv[0]);
    cr_assert_not_null(*in);
    return before;
}

Test(faults_io_uring, a_file_operation_whose_cancellation_misses_still_ends)
{
    int pv[2];
    st_netfd_t in;
    int before = init_uring_with_pipe(pv, &in);
    static const int errs[] = {ENOENT, EALREADY, EINVAL};
    for (size_t e = 0; e < sizeof(errs) / sizeof(errs[0]); e++) {
        /* As for a read a kernel worker runs: the read's own completion still ends the wait. */
        arm(F_io_uring_cancel_res, 1, errs[e]);
        struct reader r;
        st_thread_t t = start_file_reader(&r, in, 10000);
        cr_assert_eq(st_thread_join(t, NULL), 0);
        cr_expect(fired(F_io_uring_cancel_res), "%s", strerror(errs[e]));
        cr_expect_eq(r.got, -1);
        cr_expect_eq(r.err, ETIME, "%s: %s", strerror(errs[e]), strerror(r.err));
    }
    cr_assert_eq(write(pv[1], "ping", 4), 4);
    struct reader r;
    st_thread_t t = start_file_reader(&r, in, 1000000);
    cr_assert_eq(st_thread_join(t, NULL), 0);
    cr_expect_eq(r.got, 4, "the data written after the cancellations is read");
    cr_expect_eq(st_netfd_close(in), 0);
    cr_assert_eq(close(pv[1]), 0);
    expect_usable_then_clean_destroy(before);
}

Test(faults_io_uring, a_file_operation_the_netfd_let_go_of_is_not_submitted_again)
{
    int pv[2];
    st_netfd_t in;
    int before = init_uring_with_pipe(pv, &in);
    struct reader r;
    st_thread_t t = start_file_reader(&r, in, ST_UTIME_NO_TIMEOUT);
    /* Cancelled by st_netfd_free, the read says it was interrupted, as a running one may. */
    arm(F_io_uring_op_res, 1, EINTR);
    st_netfd_free(in);
    cr_assert_eq(st_thread_join(t, NULL), 0);
    cr_expect(fired(F_io_uring_op_res));
    cr_expect_eq(r.got, -1);
    cr_expect_eq(r.err, ECANCELED, "%s", strerror(r.err));
    /* No read was left in the kernel to take this. */
    cr_assert_eq(write(pv[1], "kept", 4), 4);
    char buf[8] = {0};
    cr_expect_eq(read(pv[0], buf, sizeof(buf)), 4);
    cr_expect_str_eq(buf, "kept");
    cr_assert_eq(close(pv[0]), 0);
    cr_assert_eq(close(pv[1]), 0);
    expect_usable_then_clean_destroy(before);
}

/* ---- teardown -------------------------------------------------------------------------- */

Test(faults_io_uring, destroy_tears_the_ring_down_with_requests_in_flight)
{
    struct pair p;
    int before = init_uring_with_pair(&p);
    int sv[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    /* A netfd reader that timed out (its removal queued), a raw st_poll that timed out. */
    struct reader r;
    st_thread_t t = start_reader(&r, p.a, 1000);
    expect_read(t, &r, -1, "a read with nothing to read times out");
    cr_expect_eq(r.err, ETIME);
    struct pollfd pd = {.fd = sv[0], .events = POLLIN};
    cr_expect_eq(st_poll(&pd, 1, 1000), 0);
    /* A read in flight, into a buffer on a stack st_destroy unmaps: cancelled first. */
    struct reader pending;
    (void)start_reader(&pending, p.a, ST_UTIME_NO_TIMEOUT);
    cr_assert_eq(st_usleep(1000), 0);
    int made = fault_log.rings_made;
    st_destroy();
    cr_assert_eq(write(p.peer, "late", 4), 4); /* nothing may land on the stack that went */
    cr_expect_eq(fault_log.rings_exited, fault_log.rings_made, "st_destroy tore the ring down");
    cr_expect_eq(fault_log.rings_made, made);
    close_pair(&p);
    cr_assert_eq(close(sv[0]), 0);
    cr_assert_eq(close(sv[1]), 0);
    cr_expect_eq(open_fd_count(), before, "the ring's descriptor is closed");
    init_uring();
    expect_usable_then_clean_destroy(before);
}

#endif /* ST__HAVE_IO_URING */
