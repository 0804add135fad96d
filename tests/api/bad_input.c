/*
 * Bad input to the public API, beyond what each topic's file already checks
 * (docs/reliability.md lists both): calls before st_init and after
 * st_destroy, NULL and stale handles, descriptors that are closed, foreign or
 * beyond a backend's limit, sizes and counts at the edges, objects destroyed
 * while in use, and what a scheduler that belongs to another pthread sees.
 * Each case either fails with the documented errno or has the documented
 * State Threads behaviour, and leaves the scheduler usable.
 */
#include "st_test.h"

#include <limits.h>
#include <pthread.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/uio.h>

ST_TEST_SUITE(bad_input);

static const int compiled_backends[] = {
#ifdef ST_TEST_HAVE_EPOLL
    ST_EVENTSYS_ALT,
#endif
#ifdef ST_TEST_HAVE_POLL
    ST_EVENTSYS_POLL,
#endif
#ifdef ST_TEST_HAVE_SELECT
    ST_EVENTSYS_SELECT,
#endif
};

#define NBACKENDS (sizeof(compiled_backends) / sizeof(compiled_backends[0]))

static void init_backend(int eventsys)
{
    cr_assert_eq(st_set_eventsys(eventsys), 0);
    cr_assert_eq(st_init(), 0, "st_init: %s", strerror(errno));
}

/* The scheduler still runs, joins and wakes I/O waiters. */
static void expect_usable(void)
{
    st_netfd_t a;
    st_netfd_t b;
    char c = 0;

    st_test_join_returns(st_test_spawn(st_test_return_arg, &c), &c);
    st_test_socketpair(&a, &b);
    cr_assert_eq(st_write(b, "k", 1, 100000), 1);
    cr_assert_eq(st_read(a, &c, 1, 100000), 1);
    cr_assert_eq(c, 'k');
    cr_assert_eq(st_netfd_close(a), 0);
    cr_assert_eq(st_netfd_close(b), 0);
}

/* ---- before st_init, after st_destroy -------------------------------------------- */

static int destructor_calls;

static void count_destructor(void *value)
{
    (void)value;
    destructor_calls++;
}

Test(bad_input, every_blocking_call_before_init_fails_with_einval)
{
    st_cond_t cv = st_cond_new(); /* plain objects may be made before st_init */
    st_mutex_t m = st_mutex_new();
    char buf[4];
    size_t resid = sizeof(buf);
    int sv[2];

    cr_assert(cv != NULL && m != NULL);
    ST_ASSERT_FAILS(st_sleep(1), EINVAL);
    ST_ASSERT_FAILS(st_usleep(ST_UTIME_NO_TIMEOUT), EINVAL);
    ST_ASSERT_FAILS(st_cond_wait(cv), EINVAL);
    ST_ASSERT_FAILS(st_cond_timedwait(cv, 1000), EINVAL);
    ST_ASSERT_FAILS(st_mutex_lock(m), EINVAL);
    ST_ASSERT_FAILS(st_mutex_trylock(m), EINVAL);
    ST_ASSERT_FAILS(st_mutex_unlock(m), EPERM);
    cr_assert_eq(st_cond_signal(cv), 0, "nobody waits: nothing to do");
    cr_assert_eq(st_cond_broadcast(cv), 0);
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    ST_ASSERT_FAILS_NULL(st_netfd_open_socket(sv[0]), EINVAL);
    cr_assert(!st_test_is_nonblocking(sv[0]), "the descriptor was not touched");
    ST_ASSERT_FAILS(st_read(NULL, buf, sizeof(buf), 1000), EBADF);
    ST_ASSERT_FAILS(st_read_resid(NULL, buf, &resid, 1000), EBADF);
    ST_ASSERT_FAILS_NULL(st_accept(NULL, NULL, NULL, 1000), EBADF);
    ST_ASSERT_FAILS(st_thread_setspecific(0, buf), EINVAL);
    cr_assert_null(st_thread_getspecific(0));
    cr_assert_null(st_thread_self());
    cr_assert_eq(st_getfdlimit(), -1);
    cr_assert_eq(st_utime_last_clock(), 0);
    cr_assert_str_eq(st_get_eventsys_name(), "");
    cr_assert_gt(st_utime(), 0);
    cr_assert_gt(st_time(), 0);

    /* Settings and keys are kept until st_init. */
    int key = -1;
    cr_assert_eq(st_key_create(&key, count_destructor), 0);
    cr_assert_eq(key, 0);
    cr_assert_eq(st_init(), 0);
    cr_assert_eq(st_thread_setspecific(key, buf), 0, "a key made before st_init works");
    cr_assert_eq(st_mutex_lock(m), 0, "objects made before st_init work");
    cr_assert_eq(st_mutex_unlock(m), 0);
    ST_ASSERT_FAILS(st_cond_timedwait(cv, 1000), ETIME);
    cr_assert_eq(st_cond_destroy(cv), 0);
    cr_assert_eq(st_mutex_destroy(m), 0);
    close(sv[0]);
    close(sv[1]);
    expect_usable();
}

Test(bad_input, handles_outlive_st_destroy)
{
    st_netfd_t a;
    st_netfd_t b;
    st_cond_t cv;
    st_mutex_t m;
    int before;
    int bfd;

    before = st_test_open_fds();
    st_test_init();
    st_test_socketpair(&a, &b);
    cv = st_cond_new();
    m = st_mutex_new();
    cr_assert(cv != NULL && m != NULL);
    st_netfd_setspecific(a, &before, count_destructor);
    st_destroy();
    st_destroy(); /* a second call has nothing left to do */
    cr_assert_eq(st_get_eventsys(), -1);
    /* Netfds, conds and mutexes are plain objects: they are still released cleanly. */
    cr_assert_eq(st_netfd_fileno(a) >= 0, 1);
    cr_assert_eq(st_netfd_close(a), 0);
    cr_assert_eq(destructor_calls, 1);
    bfd = st_netfd_fileno(b);
    st_netfd_free(b); /* frees the handle, keeps the descriptor */
    cr_assert_eq(st_cond_destroy(cv), 0);
    cr_assert_eq(st_mutex_destroy(m), 0);
    cr_assert_eq(st_test_open_fds(), before + 1, "only b's descriptor is still open");
    close(bfd);
    /* And a new scheduler starts from scratch. */
    st_test_init();
    expect_usable();
}

/* ---- NULL, stale and closed handles ------------------------------------------------ */

Test(bad_input, null_handles)
{
    int value = 0;
    int key = -1;
    struct mmsghdr *none = NULL;

    st_test_init();
    ST_ASSERT_FAILS(st_netfd_fileno(NULL), EBADF);
    ST_ASSERT_FAILS(st_netfd_close(NULL), EBADF);
    ST_ASSERT_FAILS(st_netfd_serialize_accept(NULL), EBADF);
    ST_ASSERT_FAILS(st_recvmmsg(NULL, none, 1, 0, 1000), EBADF);
    ST_ASSERT_FAILS(st_sendmmsg(NULL, none, 1, 0, 1000), EBADF);
    st_netfd_free(NULL);
    st_netfd_setspecific(NULL, &value, count_destructor);
    cr_assert_null(st_netfd_getspecific(NULL));
    cr_assert_eq(destructor_calls, 0);
    cr_assert_eq(st_key_create(&key, NULL), 0);
    ST_ASSERT_FAILS(st_thread_setspecific2(NULL, key, &value), EINVAL);
    cr_assert_null(st_thread_getspecific(-1));
    cr_assert_null(st_thread_getspecific(key + 1));
    cr_assert_null(st_thread_getspecific(INT_MAX));
    st_set_primordial_stack(NULL, &value); /* ignored */
    st_thread_interrupt(NULL);
    expect_usable();
}

Test(bad_input, a_closed_netfd_is_ebadf_until_its_handle_is_reused)
{
    st_netfd_t a;
    st_netfd_t b;
    char c;

    st_test_init();
    st_test_socketpair(&a, &b);
    cr_assert_eq(st_netfd_close(a), 0);
    /* Until another netfd recycles it, the stale handle is refused. */
    ST_ASSERT_FAILS(st_netfd_close(a), EBADF);
    ST_ASSERT_FAILS(st_netfd_fileno(a), EBADF);
    ST_ASSERT_FAILS(st_read(a, &c, 1, 1000), EBADF);
    ST_ASSERT_FAILS(st_write(a, "x", 1, 1000), EBADF);
    ST_ASSERT_FAILS(st_netfd_poll(a, POLLIN, 1000), EBADF);
    st_netfd_free(a); /* no-op */
    cr_assert_eq(st_netfd_close(b), 0);
    expect_usable();
}

Test(bad_input, descriptor_closed_behind_the_netfd)
{
    st_netfd_t a;
    st_netfd_t b;
    char c;
    int fd;

    st_test_init();
    st_test_socketpair(&a, &b);
    fd = st_netfd_fileno(a);
    close(fd);
    ST_ASSERT_FAILS(st_read(a, &c, 1, 1000), EBADF);
    ST_ASSERT_FAILS(st_write(a, "x", 1, 1000), EBADF);
    /* close() reports EBADF, and the handle is released all the same. */
    ST_ASSERT_FAILS(st_netfd_close(a), EBADF);
    cr_assert_eq(st_netfd_close(b), 0);
    expect_usable();
}

/* ---- foreign descriptors and backend limits ---------------------------------------- */

Test(bad_input, regular_files_and_directories)
{
    for (size_t i = 0; i < NBACKENDS; i++) {
        int es = compiled_backends[i];
        char buf[8];
        st_netfd_t f;
        st_netfd_t d;

        init_backend(es);
        f = st_open("/dev/null", O_RDONLY, 0);
        cr_assert_not_null(f);
        cr_assert_eq(st_read(f, buf, sizeof(buf), 1000), 0, "files never wait");
        if (es == ST_EVENTSYS_ALT) {
            /* epoll cannot watch files: waiting on one is refused. */
            ST_ASSERT_FAILS(st_netfd_poll(f, POLLIN, 1000), EPERM);
        } else {
            cr_assert_eq(st_netfd_poll(f, POLLIN, 1000), 0, "poll/select: always ready");
        }
        cr_assert_eq(st_netfd_close(f), 0);
        d = st_open("/", O_RDONLY | O_DIRECTORY, 0);
        cr_assert_not_null(d);
        ST_ASSERT_FAILS(st_read(d, buf, sizeof(buf), 1000), EISDIR);
        cr_assert_eq(st_netfd_close(d), 0);
        expect_usable();
        st_destroy();
    }
}

/*
 * select cannot watch descriptors from FD_SETSIZE on, so st_init() lowers
 * the process's descriptor limit to FD_SETSIZE, soft and hard: the kernel
 * then never hands out a number select cannot watch, and a client that
 * cannot be accepted stays queued instead of being accepted and dropped.
 */
Test(bad_input, select_lowers_the_descriptor_limit_to_fd_setsize)
{
#ifndef ST_TEST_HAVE_SELECT
    cr_skip_test("select is not compiled in");
#else
    struct rlimit rl;
    struct sockaddr_in sin;
    int high = FD_SETSIZE + 100;
    int sv[2];
    int fillers[FD_SETSIZE + 8];
    int nfill = 0;
    unsigned short port = 0;
    st_netfd_t l;
    st_netfd_t s;
    int client;
    int before;
    char c;

    /* A descriptor above FD_SETSIZE, opened while the limit allows it. */
    cr_assert_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur <= (rlim_t)high) {
        rl.rlim_cur = (rlim_t)high + 1;
        if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < rl.rlim_cur) {
            rl.rlim_max = rl.rlim_cur;
        }
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0) {
            cr_skip_test("cannot raise RLIMIT_NOFILE above %d: %s", high, strerror(errno));
        }
    }
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    cr_assert_eq(dup2(sv[0], high), high, "dup2: %s", strerror(errno));
    close(sv[0]);

    init_backend(ST_EVENTSYS_SELECT);
    cr_assert_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
    cr_assert_eq(rl.rlim_cur, (rlim_t)FD_SETSIZE, "soft limit %llu", (unsigned long long)rl.rlim_cur);
    cr_assert_eq(st_getfdlimit(), FD_SETSIZE);
    /* A descriptor opened earlier above the limit is refused, and stays the caller's. */
    ST_ASSERT_FAILS_NULL(st_netfd_open_socket(high), EMFILE);
    cr_assert(st_test_fd_is_open(high), "the caller keeps its descriptor");
    close(high);
    close(sv[1]);
    if (rl.rlim_max != (rlim_t)FD_SETSIZE) {
        /* Only where the hard limit cannot be lowered at all. */
        struct rlimit lower = {.rlim_cur = FD_SETSIZE, .rlim_max = FD_SETSIZE};

        cr_assert_neq(setrlimit(RLIMIT_NOFILE, &lower), 0, "hard limit left at %llu",
                      (unsigned long long)rl.rlim_max);
        /*
         * That is valgrind, which keeps the descriptor limit to itself: the
         * kernel still hands out higher numbers, which valgrind then closes
         * (an accepted connection with them). Nothing below can hold there.
         */
        cr_skip_test("the descriptor limit is emulated (hard limit %llu stays): "
                     "the listen queue cannot be observed",
                     (unsigned long long)rl.rlim_max);
    }

    l = st_test_listener(&port, 8);
    before = st_test_open_fds();
    client = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert_geq(client, 0);
    st_test_loopback(&sin, port);
    cr_assert_eq(connect(client, (struct sockaddr *)&sin, sizeof(sin)), 0);
    /* Every number the limit allows is taken. */
    for (;;) {
        int fd = dup(st_netfd_fileno(l));

        if (fd < 0) {
            cr_assert_eq(errno, EMFILE, "dup: %s", strerror(errno));
            break;
        }
        cr_assert_lt(fd, FD_SETSIZE, "the kernel handed out %d", fd);
        cr_assert_lt(nfill, FD_SETSIZE + 8);
        fillers[nfill++] = fd;
    }
    ST_ASSERT_FAILS_NULL(st_accept(l, NULL, NULL, 1000000), EMFILE);
    while (nfill > 0) {
        close(fillers[--nfill]);
    }
    /* The client was left in the listen queue, not dropped: it is accepted now. */
    s = st_accept(l, NULL, NULL, 1000000);
    cr_assert_not_null(s, "%s", strerror(errno));
    cr_assert_eq(write(client, "q", 1), 1);
    cr_assert_eq(st_read(s, &c, 1, 1000000), 1);
    cr_assert_eq(c, 'q');
    cr_assert_eq(st_netfd_close(s), 0);
    close(client);
    cr_assert_eq(st_test_open_fds(), before, "nothing leaked");
    cr_assert_eq(st_netfd_close(l), 0);
    expect_usable();
#endif
}

#ifdef ST_TEST_HAVE_EPOLL
/* Event systems without a descriptor limit of their own raise the soft limit to the hard one. */
Test(bad_input, other_event_systems_keep_the_hard_limit)
{
    struct rlimit rl;
    struct rlimit after;

    cr_assert_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
    if (rl.rlim_max == RLIM_INFINITY || rl.rlim_max <= (rlim_t)FD_SETSIZE) {
        cr_skip_test("hard RLIMIT_NOFILE %llu is not a finite number above FD_SETSIZE",
                     (unsigned long long)rl.rlim_max);
    }
    rl.rlim_cur = FD_SETSIZE / 2;
    cr_assert_eq(setrlimit(RLIMIT_NOFILE, &rl), 0, "setrlimit: %s", strerror(errno));
    init_backend(ST_EVENTSYS_ALT);
    cr_assert_eq(getrlimit(RLIMIT_NOFILE, &after), 0);
    cr_assert_eq(after.rlim_max, rl.rlim_max);
    cr_assert_eq(after.rlim_cur, rl.rlim_max);
    cr_assert_eq((rlim_t)st_getfdlimit(), rl.rlim_max);
}
#endif

Test(bad_input, unknown_or_missing_event_systems)
{
    ST_ASSERT_FAILS(st_set_eventsys(-1), EINVAL);
    ST_ASSERT_FAILS(st_set_eventsys(ST_EVENTSYS_ALT + 100), EINVAL);
    ST_ASSERT_FAILS(st_set_eventsys(INT_MIN), EINVAL);
    ST_ASSERT_FAILS(st_set_eventsys(INT_MAX), EINVAL);
    cr_assert_eq(st_get_eventsys(), -1, "nothing chosen yet");
    st_test_init();
    expect_usable();
}

/* ---- sizes and counts at the edges -------------------------------------------------- */

Test(bad_input, zero_and_huge_sizes)
{
    st_netfd_t a;
    st_netfd_t b;
    char buf[16];
    struct iovec none[1] = {{buf, 0}};

    st_test_init();
    st_test_socketpair(&a, &b);
    cr_assert_eq(st_write(a, buf, 0, 1000), 0);
    cr_assert_eq(st_writev(a, none, 0, 1000), 0);
    cr_assert_eq(st_writev(a, none, 1, 1000), 0);
    ST_ASSERT_FAILS(st_read_fully(b, buf, 1, 1000), ETIME); /* nothing was sent */
    cr_assert_eq(st_read(b, buf, 0, 1000), 0);
    /* Sizes are handed to the kernel as they are (a size past the buffer is EFAULT there). */
    cr_assert_eq(st_write(a, "four", 4, 1000), 4);
    cr_assert_eq(st_read(b, buf, 4, 1000), 4);
    cr_assert_eq(memcmp(buf, "four", 4), 0);
    cr_assert_eq(st_netfd_close(a), 0);
    cr_assert_eq(st_netfd_close(b), 0);
    expect_usable();
}

Test(bad_input, vector_counts_beyond_iov_max)
{
    enum { N = IOV_MAX + 100 };
    static struct iovec iov[N];
    static char bytes[N];
    st_netfd_t a;
    st_netfd_t b;
    struct iovec *cursor = iov;
    int count = N;

    st_test_init();
    st_test_socketpair(&a, &b);
    for (int i = 0; i < N; i++) {
        iov[i].iov_base = &bytes[i];
        iov[i].iov_len = 1;
    }
    /* st_readv passes the count to readv(2), which refuses it... */
    ST_ASSERT_FAILS(st_readv(a, iov, N, 1000), EINVAL);
    /* ...while the writing and *_resid functions move it IOV_MAX entries at a time. */
    cr_assert_eq(st_writev(b, iov, N, 1000000), N);
    cr_assert_eq(st_readv_resid(a, &cursor, &count, 1000000), 0);
    cr_assert_eq(count, 0);
    cr_assert_eq(st_netfd_close(a), 0);
    cr_assert_eq(st_netfd_close(b), 0);
    expect_usable();
}

Test(bad_input, negative_lengths_of_datagram_calls)
{
    st_netfd_t a;
    st_netfd_t b;
    char buf[8];
    struct sockaddr_in sin;
    int fromlen = -1;

    st_test_init();
    st_test_socketpair(&a, &b);
    st_test_loopback(&sin, 9);
    ST_ASSERT_FAILS(st_recvfrom(a, buf, sizeof(buf), (struct sockaddr *)&sin, &fromlen, 1000),
                    EINVAL);
    ST_ASSERT_FAILS(st_sendto(a, buf, 1, (struct sockaddr *)&sin, -1, 1000), EINVAL);
    ST_ASSERT_FAILS(st_recvfrom(a, buf, INT_MIN, NULL, NULL, 1000), EINVAL);
    cr_assert_eq(st_netfd_close(a), 0);
    cr_assert_eq(st_netfd_close(b), 0);
    expect_usable();
}

Test(bad_input, poll_events_outside_in_out_pri_are_einval)
{
    st_netfd_t a;
    st_netfd_t b;
    struct pollfd pd;

    st_test_init();
    st_test_socketpair(&a, &b);
    ST_ASSERT_FAILS(st_netfd_poll(a, 0, 1000), EINVAL);
    ST_ASSERT_FAILS(st_netfd_poll(a, POLLERR, 1000), EINVAL);
    ST_ASSERT_FAILS(st_netfd_poll(a, POLLIN | POLLNVAL, 1000), EINVAL);
    pd.fd = st_netfd_fileno(a);
    pd.events = POLLOUT | POLLHUP;
    ST_ASSERT_FAILS(st_poll(&pd, 1, 1000), EINVAL);
    ST_ASSERT_FAILS(st_poll(&pd, INT_MIN, 1000), EINVAL);
    cr_assert_eq(st_netfd_close(a), 0, "no failed call left a waiter behind");
    cr_assert_eq(st_netfd_close(b), 0);
    expect_usable();
}

Test(bad_input, a_large_stack_is_granted_or_refused_with_enomem)
{
    st_thread_t t;
    void *ret = NULL;

    st_test_init();
    errno = 0;
    t = st_thread_create(st_test_return_arg, &ret, 1, 256 << 20);
    if (t == NULL) {
        cr_assert_eq(errno, ENOMEM);
    } else {
        cr_assert_eq(st_thread_join(t, &ret), 0);
        cr_assert_eq(ret, &ret);
    }
    expect_usable();
}

/* ---- objects in use, dead coroutines ---------------------------------------------- */

static void *sleep_forever(void *arg)
{
    (void)arg;
    return (void *)(intptr_t)st_sleep(-1);
}

Test(bad_input, negative_sleep_waits_until_interrupted)
{
    st_thread_t t;
    void *ret = NULL;

    st_test_init();
    t = st_test_spawn(sleep_forever, NULL);
    cr_assert_eq(st_usleep(20000), 0);
    st_thread_interrupt(t);
    cr_assert_eq(st_thread_join(t, &ret), 0);
    cr_assert_eq((intptr_t)ret, -1);
}

Test(bad_input, finished_coroutines_until_they_are_joined)
{
    st_thread_t t;
    int token;

    st_test_init();
    t = st_test_zombie(&token); /* it has finished: a zombie until joined */
    st_thread_interrupt(t);     /* no effect on a zombie */
    cr_assert_eq(st_thread_setspecific2(t, 0, NULL), -1, "no key yet");
    st_test_join_returns(t, &token);
    /*
     * The handle is now dead: joining it again is ESRCH while its stack is
     * cached (joining_a_joined_coroutine_is_esrch); once a new coroutine
     * reuses the stack, the handle names that one.
     */
    expect_usable();
}

static void *yield_then_return(void *arg)
{
    for (int i = 0; i < 3; i++) {
        st_thread_yield();
    }
    return arg;
}

Test(bad_input, joining_a_joined_coroutine_is_esrch)
{
#ifndef ST_TEST_STACK_CACHE
    cr_skip_test("stack_mode=free unmaps a joined coroutine's stack: its handle is gone for good");
#else
    int token;
    int ta;
    int tb;
    void *ret = NULL;
    st_thread_t t;
    st_thread_t a;
    st_thread_t b;

    st_test_init();
    t = st_test_spawn(st_test_return_arg, &token);
    st_test_join_returns(t, &token);
    ret = NULL;
    ST_ASSERT_FAILS(st_thread_join(t, &ret), ESRCH);
    cr_assert_null(ret, "a failed join stores nothing");
    st_thread_interrupt(t); /* no effect */
    /* The stack went back to the pool once: the next two coroutines each get their own. */
    a = st_thread_create(yield_then_return, &ta, 1, 0);
    b = st_thread_create(yield_then_return, &tb, 1, 0);
    cr_assert(a != NULL && b != NULL);
    cr_assert_neq(a, b);
    cr_assert_eq(st_thread_join(a, &ret), 0);
    cr_assert_eq(ret, &ta);
    cr_assert_eq(st_thread_join(b, &ret), 0);
    cr_assert_eq(ret, &tb);
    expect_usable();
#endif
}

/* ---- a woken waiter that has not run yet -------------------------------------------- */

/*
 * Leave a reader blocked on a, make a readable and let the scheduler wake
 * the reader: st_usleep(0) returns to the caller before the woken reader
 * runs (the caller's deadline had passed first).
 */
static st_thread_t wake_reader_without_running_it(struct st_test_blocked *r, st_netfd_t b)
{
    st_thread_t t = st_test_block_and_sleep(r, 1000);

    cr_assert_eq(st_write(b, "for a", 5, 100000), 5);
    cr_assert_eq(st_usleep(0), 0);
    cr_assert_eq(r->rc, ST_TEST_NOT_RETURNED, "the woken reader ran before us: the case is not set up");
    return t;
}

Test(bad_input, closing_a_netfd_whose_waiter_was_woken_is_ebusy)
{
    for (size_t i = 0; i < NBACKENDS; i++) {
        struct st_test_blocked r = {.call = st_test_read_forever};
        st_netfd_t b;
        st_netfd_t c;
        st_netfd_t d;
        st_thread_t t;

        init_backend(compiled_backends[i]);
        st_test_socketpair(&r.nfd, &b);
        t = wake_reader_without_running_it(&r, b);
        /* Closing now would let a new netfd recycle the handle under the reader. */
        ST_ASSERT_FAILS(st_netfd_close(r.nfd), EBUSY);
        st_test_socketpair(&c, &d);
        cr_assert(c != r.nfd && d != r.nfd);
        cr_assert_eq(st_write(d, "for c", 5, 100000), 5);
        st_test_join(t);
        cr_assert_eq(r.rc, 5);
        cr_assert_str_eq(r.buf, "for a");
        /* Once the reader has left, the netfd closes. */
        cr_assert_eq(st_netfd_close(r.nfd), 0);
        cr_assert_eq(st_netfd_close(b), 0);
        cr_assert_eq(st_netfd_close(c), 0);
        cr_assert_eq(st_netfd_close(d), 0);
        expect_usable();
        st_destroy();
    }
}

/*
 * st_destroy while a coroutine still waits on a netfd freed under it: the
 * netfd, which only that coroutine still held, is released with it (the
 * leak checkers of the ASan and valgrind runs see the difference).
 */
Test(bad_input, st_destroy_releases_a_netfd_freed_under_its_waiter)
{
    for (size_t i = 0; i < NBACKENDS; i++) {
        struct st_test_blocked waiting = {.call = st_test_read_forever};
        int before = st_test_open_fds();
        int raw;
        int fd;

        init_backend(compiled_backends[i]);
        waiting.nfd = st_test_socketpair_raw(&raw);
        fd = st_netfd_fileno(waiting.nfd);
        cr_assert_not_null(st_test_block_and_sleep(&waiting, 1000));
        st_netfd_free(waiting.nfd);
        st_destroy();
        close(fd);
        close(raw);
        cr_assert_eq(st_test_open_fds(), before, "descriptors left behind");
    }
    st_test_init();
    expect_usable();
}

Test(bad_input, freeing_a_netfd_under_its_waiters_fails_them_with_ebadf)
{
    for (size_t i = 0; i < NBACKENDS; i++) {
        struct st_test_blocked woken = {.call = st_test_read_forever};
        struct st_test_blocked waiting = {.call = st_test_read_forever};
        st_netfd_t b;
        st_netfd_t b2;
        st_netfd_t c;
        st_netfd_t d;
        st_thread_t t;
        st_thread_t t2;
        int fd;
        int fd2;
        int before = st_test_open_fds();

        init_backend(compiled_backends[i]);
        /* Freed after its waiter was woken, before the waiter ran. */
        st_test_socketpair(&woken.nfd, &b);
        fd = st_netfd_fileno(woken.nfd);
        t = wake_reader_without_running_it(&woken, b);
        st_netfd_free(woken.nfd);
        /* A netfd made now must not be the freed one, which the reader still holds. */
        st_test_socketpair(&c, &d);
        cr_assert(c != woken.nfd && d != woken.nfd);
        cr_assert_eq(st_write(d, "for c", 5, 100000), 5);
        st_test_join(t);
        cr_assert_eq(woken.rc, -1);
        cr_assert_eq(woken.err, EBADF);

        /* Freed while its waiter still waits: the waiter fails when it wakes. */
        st_test_socketpair(&waiting.nfd, &b2);
        fd2 = st_netfd_fileno(waiting.nfd);
        t2 = st_test_block_and_sleep(&waiting, 1000);
        st_netfd_free(waiting.nfd);
        cr_assert_eq(st_write(b2, "x", 1, 100000), 1);
        st_test_join(t2);
        cr_assert_eq(waiting.rc, -1);
        cr_assert_eq(waiting.err, EBADF);

        cr_assert_eq(close(fd), 0, "st_netfd_free leaves the descriptor open");
        cr_assert_eq(close(fd2), 0);
        cr_assert_eq(st_netfd_close(b), 0);
        cr_assert_eq(st_netfd_close(b2), 0);
        cr_assert_eq(st_netfd_close(c), 0);
        cr_assert_eq(st_netfd_close(d), 0);
        expect_usable();
        st_destroy();
        cr_assert_eq(st_test_open_fds(), before);
    }
}

static void *wait_on(void *arg);

static void *lock_and_sleep(void *arg)
{
    if (st_mutex_lock(arg) == 0) {
        (void)st_usleep(ST_UTIME_NO_TIMEOUT);
    }
    return NULL;
}

static void *lock_once(void *arg)
{
    if (st_mutex_lock(arg) == 0) {
        (void)st_mutex_unlock(arg);
    }
    return NULL;
}

static void *join_arg(void *arg)
{
    (void)st_thread_join(arg, NULL);
    return NULL;
}

/*
 * st_destroy() ends coroutines that wait on conds and mutexes, or hold
 * mutexes: those objects belong to the application and stay usable.
 */
Test(bad_input, conds_and_mutexes_outlive_the_coroutines_st_destroy_ends)
{
    st_cond_t cv;
    st_mutex_t held;
    st_mutex_t free_m;
    st_thread_t sleeper;
    int round;

    cv = st_cond_new();
    held = st_mutex_new();
    free_m = st_mutex_new();
    cr_assert(cv != NULL && held != NULL && free_m != NULL);
    for (round = 0; round < 3; round++) {
        st_test_init();
        cr_assert_not_null(st_thread_create(wait_on, cv, 0, 0));
        cr_assert_not_null(st_thread_create(wait_on, cv, 1, 0));
        cr_assert_not_null(st_thread_create(lock_and_sleep, held, 0, 0));
        cr_assert_not_null(st_thread_create(lock_once, held, 0, 0));
        sleeper = st_test_spawn(lock_and_sleep, free_m);
        cr_assert_not_null(st_thread_create(join_arg, sleeper, 0, 0));
        cr_assert_eq(st_usleep(1000), 0);
        ST_ASSERT_FAILS(st_cond_destroy(cv), EBUSY);
        ST_ASSERT_FAILS(st_mutex_destroy(held), EBUSY);
        ST_ASSERT_FAILS(st_mutex_trylock(held), EBUSY);
        /* One waiter is woken and never runs: it must not keep the cond busy. */
        cr_assert_eq(st_cond_signal(cv), 0);
        st_destroy();
        /* No waiter left on the cond, no owner left on the mutexes. */
        cr_assert_eq(st_cond_signal(cv), 0);
        cr_assert_eq(st_cond_broadcast(cv), 0);
        st_test_init();
        cr_assert_eq(st_mutex_trylock(held), 0, "the owner st_destroy ended still holds it");
        cr_assert_eq(st_mutex_unlock(held), 0);
        cr_assert_eq(st_mutex_lock(free_m), 0);
        cr_assert_eq(st_mutex_unlock(free_m), 0);
        ST_ASSERT_FAILS(st_cond_timedwait(cv, 1000), ETIME);
        expect_usable();
        st_destroy();
    }
    cr_assert_eq(st_cond_destroy(cv), 0);
    cr_assert_eq(st_mutex_destroy(held), 0);
    cr_assert_eq(st_mutex_destroy(free_m), 0);
}

Test(bad_input, a_mutex_held_at_st_destroy_can_be_destroyed)
{
    st_mutex_t by_coroutine = st_mutex_new();
    st_mutex_t by_primordial = st_mutex_new();

    cr_assert(by_coroutine != NULL && by_primordial != NULL);
    st_test_init();
    cr_assert_not_null(st_thread_create(lock_and_sleep, by_coroutine, 0, 0));
    cr_assert_eq(st_mutex_lock(by_primordial), 0);
    cr_assert_eq(st_usleep(1000), 0);
    ST_ASSERT_FAILS(st_mutex_destroy(by_coroutine), EBUSY);
    ST_ASSERT_FAILS(st_mutex_destroy(by_primordial), EBUSY);
    st_destroy();
    /* Their owners are gone with the scheduler (no st_init since). */
    cr_assert_eq(st_mutex_destroy(by_coroutine), 0);
    cr_assert_eq(st_mutex_destroy(by_primordial), 0);
}

static int key_value_destroyed;

static void key_destructor(void *value)
{
    (void)value;
    key_value_destroyed++;
}

static void *wait_on(void *arg)
{
    return (void *)(intptr_t)st_cond_wait(arg);
}

Test(bad_input, destroying_objects_in_use_is_refused)
{
    st_cond_t cv;
    st_mutex_t m;
    st_thread_t t;
    void *ret = NULL;

    st_test_init();
    cv = st_cond_new();
    m = st_mutex_new();
    cr_assert(cv != NULL && m != NULL);
    t = st_test_spawn(wait_on, cv);
    cr_assert_eq(st_usleep(1000), 0);
    ST_ASSERT_FAILS(st_cond_destroy(cv), EBUSY);
    cr_assert_eq(st_mutex_lock(m), 0);
    ST_ASSERT_FAILS(st_mutex_destroy(m), EBUSY);
    cr_assert_eq(st_mutex_unlock(m), 0);
    cr_assert_eq(st_cond_signal(cv), 0);
    /* Signalled but not yet run, the waiter is still on the queue. */
    ST_ASSERT_FAILS(st_cond_destroy(cv), EBUSY);
    cr_assert_eq(st_thread_join(t, &ret), 0);
    cr_assert_eq((intptr_t)ret, 0);
    cr_assert_eq(st_cond_destroy(cv), 0);
    cr_assert_eq(st_mutex_destroy(m), 0);
    expect_usable();
}

/*
 * A value set on a zombie (its destructors have already run) is released
 * when it is replaced, but not at the join: st_thread_setspecific2 on a
 * finished coroutine leaves releasing it to the caller.
 */
Test(bad_input, values_set_on_a_zombie_are_the_callers_to_release)
{
    int key = -1;
    int v1;
    int v2;
    st_thread_t t;

    st_test_init();
    cr_assert_eq(st_key_create(&key, key_destructor), 0);
    t = st_test_zombie(NULL); /* finished: its destructors have run */
    cr_assert_eq(st_thread_setspecific2(t, key, &v1), 0);
    cr_assert_eq(st_thread_setspecific2(t, key, &v2), 0);
    cr_assert_eq(key_value_destroyed, 1, "the replaced value was released");
    cr_assert_eq(st_thread_setspecific2(t, key, NULL), 0);
    cr_assert_eq(key_value_destroyed, 2);
    st_test_join(t);
}

/* ---- across pthreads ------------------------------------------------------------------ */

struct other_pthread {
    int key;
    int setspecific_rc;
    int setspecific_errno;
    int eventsys;
};

static void *other_pthread_main(void *arg)
{
    struct other_pthread *o = arg;

    o->eventsys = st_get_eventsys();
    if (st_init() != 0) {
        return NULL;
    }
    errno = 0;
    o->setspecific_rc = st_thread_setspecific(o->key, &o->key);
    o->setspecific_errno = errno;
    st_destroy();
    return NULL;
}

Test(bad_input, keys_and_settings_belong_to_their_pthread)
{
    struct other_pthread o = {.key = -1, .setspecific_rc = 0, .setspecific_errno = 0};
    pthread_t th;

    cr_assert_eq(st_set_eventsys(ST_EVENTSYS_POLL), 0);
    cr_assert_eq(st_key_create(&o.key, NULL), 0);
    cr_assert_eq(st_init(), 0);
    cr_assert_eq(pthread_create(&th, NULL, other_pthread_main, &o), 0);
    cr_assert_eq(pthread_join(th, NULL), 0);
    cr_assert_eq(o.eventsys, -1, "another pthread starts without a scheduler");
    cr_assert_eq(o.setspecific_rc, -1, "keys are per pthread");
    cr_assert_eq(o.setspecific_errno, EINVAL);
    cr_assert_eq(st_get_eventsys(), ST_EVENTSYS_POLL);
    cr_assert_eq(st_thread_setspecific(o.key, &o), 0);
    expect_usable();
}
