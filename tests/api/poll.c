/*
 * Readiness waits: st_poll and st_netfd_poll.
 */
#include "st_test.h"

#include <signal.h>
#include <sys/wait.h>

ST_TEST_SUITE(poll);

Test(poll, ready_fds_are_counted)
{
    st_netfd_t a;
    st_netfd_t b;
    struct pollfd pds[3];
    char c;

    st_test_init();
    st_test_socketpair(&a, &b);
    cr_assert_eq(st_write(b, "x", 1, 1000000), 1);
    pds[0] = (struct pollfd){.fd = st_netfd_fileno(a), .events = POLLIN, .revents = 77};
    pds[1] = (struct pollfd){.fd = st_netfd_fileno(b), .events = POLLOUT, .revents = 77};
    pds[2] = (struct pollfd){.fd = st_netfd_fileno(b), .events = POLLIN, .revents = 77};
    cr_assert_eq(st_poll(pds, 3, 1000000), 2);
    cr_assert(pds[0].revents & POLLIN);
    cr_assert(pds[1].revents & POLLOUT);
    cr_assert_eq(pds[2].revents, 0, "revents of an idle fd is %d", pds[2].revents);
    cr_assert_eq(st_read(a, &c, 1, 1000), 1);
    cr_assert_eq(st_netfd_close(a), 0);
    cr_assert_eq(st_netfd_close(b), 0);
}

static void *write_later(void *arg)
{
    int raw = *(int *)arg;

    cr_expect_eq(st_usleep(3000), 0);
    cr_expect_eq(write(raw, "!", 1), 1);
    return NULL;
}

Test(poll, waits_until_an_fd_is_ready)
{
    st_netfd_t n1;
    st_netfd_t n2;
    int r1;
    int r2;
    struct pollfd pds[2];
    st_thread_t t;
    long long start;

    st_test_init();
    n1 = st_test_socketpair_raw(&r1);
    n2 = st_test_socketpair_raw(&r2);
    /* The writer only starts (and starts its delay) once the poll blocks. */
    t = st_test_spawn(write_later, &r2);
    pds[0] = (struct pollfd){.fd = st_netfd_fileno(n1), .events = POLLIN};
    pds[1] = (struct pollfd){.fd = st_netfd_fileno(n2), .events = POLLIN};
    start = st_test_deadline_base();
    cr_assert_eq(st_poll(pds, 2, 5000000), 1);
    cr_assert_geq(st_test_now_us() - start, 3000);
    cr_assert_eq(pds[0].revents, 0);
    cr_assert(pds[1].revents & POLLIN);
    st_test_join(t);
    cr_assert_eq(st_netfd_close(n1), 0);
    cr_assert_eq(st_netfd_close(n2), 0);
    close(r1);
    close(r2);
}

Test(poll, timeout_returns_zero)
{
    st_netfd_t nfd;
    int raw;
    struct pollfd pd;
    long long start;
    long long elapsed;

    st_test_init();
    nfd = st_test_socketpair_raw(&raw);
    pd = (struct pollfd){.fd = st_netfd_fileno(nfd), .events = POLLIN};
    start = st_test_deadline_base();
    cr_assert_eq(st_poll(&pd, 1, 20000), 0);
    elapsed = st_test_now_us() - start;
    cr_assert_geq(elapsed, 20000);
    cr_assert_lt(elapsed, ST_TEST_LATE_US);
    cr_assert_eq(pd.revents, 0);
    /* NO_WAIT polls once. */
    cr_assert_eq(st_poll(&pd, 1, ST_UTIME_NO_WAIT), 0);
    cr_assert_eq(write(raw, "d", 1), 1);
    cr_assert_eq(st_poll(&pd, 1, ST_UTIME_NO_WAIT), 1);
    cr_assert(pd.revents & POLLIN);
    cr_assert_eq(st_netfd_close(nfd), 0);
    close(raw);
}

Test(poll, no_fds_just_sleeps)
{
    long long start;
    long long elapsed;

    st_test_init();
    start = st_test_deadline_base();
    cr_assert_eq(st_poll(NULL, 0, 10000), 0);
    elapsed = st_test_now_us() - start;
    cr_assert_geq(elapsed, 10000);
    cr_assert_lt(elapsed, ST_TEST_LATE_US);
}

Test(poll, invalid_pollfds_are_einval)
{
    st_netfd_t nfd;
    int raw;
    struct pollfd pds[2];

    st_test_init();
    nfd = st_test_socketpair_raw(&raw);
    pds[0] = (struct pollfd){.fd = -1, .events = POLLIN};
    ST_ASSERT_FAILS(st_poll(pds, 1, 1000), EINVAL);
    pds[0] = (struct pollfd){.fd = st_netfd_fileno(nfd), .events = 0};
    ST_ASSERT_FAILS(st_poll(pds, 1, 1000), EINVAL);
    pds[0] = (struct pollfd){.fd = st_netfd_fileno(nfd), .events = POLLIN | 0x4000};
    ST_ASSERT_FAILS(st_poll(pds, 1, 1000), EINVAL);
    pds[0] = (struct pollfd){.fd = st_netfd_fileno(nfd), .events = POLLERR};
    ST_ASSERT_FAILS(st_poll(pds, 1, 1000), EINVAL);
    /* One bad entry spoils the whole set, and leaves nothing registered. */
    pds[0] = (struct pollfd){.fd = st_netfd_fileno(nfd), .events = POLLIN};
    pds[1] = (struct pollfd){.fd = -5, .events = POLLIN};
    ST_ASSERT_FAILS(st_poll(pds, 2, 1000), EINVAL);
    cr_assert_eq(st_netfd_close(nfd), 0);
    close(raw);
}

Test(poll, priority_and_output_events)
{
    st_netfd_t nfd;
    int raw;
    struct pollfd pd;

    st_test_init();
    nfd = st_test_socketpair_raw(&raw);
    pd = (struct pollfd){.fd = st_netfd_fileno(nfd), .events = POLLIN | POLLPRI};
    cr_assert_eq(st_poll(&pd, 1, 2000), 0);
    pd = (struct pollfd){.fd = st_netfd_fileno(nfd), .events = POLLIN | POLLOUT | POLLPRI};
    cr_assert_eq(st_poll(&pd, 1, 1000000), 1);
    cr_assert(pd.revents & POLLOUT);
    cr_assert_eq(pd.revents & POLLIN, 0);
    cr_assert_eq(st_netfd_close(nfd), 0);
    close(raw);
}

Test(poll, hangup_wakes_a_reader)
{
    st_netfd_t nfd;
    int raw;
    struct pollfd pd;

    st_test_init();
    nfd = st_test_socketpair_raw(&raw);
    close(raw);
    pd = (struct pollfd){.fd = st_netfd_fileno(nfd), .events = POLLIN};
    cr_assert_eq(st_poll(&pd, 1, 1000000), 1);
    cr_assert(pd.revents & (POLLIN | POLLHUP), "revents 0x%x", pd.revents);
    cr_assert_eq(st_netfd_close(nfd), 0);
}

#ifdef ST_TEST_HAVE_EPOLL
/*
 * With epoll, as in State Threads, an error or a hang-up reports the events
 * each pollfd asked for along with POLLERR/POLLHUP, so a wait for any
 * direction ends with its own bit set.
 */
Test(poll, epoll_hangup_also_reports_the_events_asked_for)
{
    st_netfd_t nfd;
    int raw;
    struct pollfd pd;

    if (st_test_expected_eventsys() != ST_EVENTSYS_ALT) {
        cr_skip_test("epoll's reporting (the other event systems report as poll(2) does)");
    }
    st_test_init();
    nfd = st_test_socketpair_raw(&raw);
    close(raw);
    pd = (struct pollfd){.fd = st_netfd_fileno(nfd), .events = POLLPRI};
    cr_assert_eq(st_poll(&pd, 1, 1000000), 1);
    cr_assert_eq(pd.revents & (POLLPRI | POLLHUP), POLLPRI | POLLHUP, "revents 0x%x", pd.revents);
    cr_assert_eq(st_netfd_close(nfd), 0);
}
#endif

/* A coroutine in st_netfd_poll(nfd, how, timeout). */
static st_thread_t start_poller(struct st_test_blocked *w, st_netfd_t nfd, int how,
                                st_utime_t timeout)
{
    *w = (struct st_test_blocked){.call = st_test_netfd_poll, .nfd = nfd, .how = how,
                                  .timeout = timeout};
    return st_test_block(w);
}

Test(poll, netfd_poll_ready_timeout_and_output)
{
    st_netfd_t nfd;
    int raw;
    long long start;

    st_test_init();
    nfd = st_test_socketpair_raw(&raw);
    cr_assert_eq(st_netfd_poll(nfd, POLLOUT, 1000000), 0);
    start = st_test_deadline_base();
    ST_ASSERT_FAILS(st_netfd_poll(nfd, POLLIN, 10000), ETIME);
    cr_assert_geq(st_test_now_us() - start, 10000);
    ST_ASSERT_FAILS(st_netfd_poll(nfd, POLLIN, ST_UTIME_NO_WAIT), ETIME);
    cr_assert_eq(write(raw, "r", 1), 1);
    cr_assert_eq(st_netfd_poll(nfd, POLLIN, 1000000), 0);
    cr_assert_eq(st_netfd_poll(nfd, POLLIN, ST_UTIME_NO_WAIT), 0);
    cr_assert_eq(st_netfd_close(nfd), 0);
    close(raw);
}

Test(poll, two_waiters_on_one_fd_both_wake)
{
    struct st_test_blocked w[2];
    st_thread_t t[2];
    st_netfd_t nfd;
    int raw;
    int i;

    st_test_init();
    nfd = st_test_socketpair_raw(&raw);
    for (i = 0; i < 2; i++) {
        t[i] = start_poller(&w[i], nfd, POLLIN, 5000000);
    }
    cr_assert_eq(st_usleep(2000), 0);
    cr_assert_eq(w[0].rc, ST_TEST_NOT_RETURNED);
    cr_assert_eq(w[1].rc, ST_TEST_NOT_RETURNED);
    cr_assert_eq(write(raw, "both", 4), 4);
    for (i = 0; i < 2; i++) {
        st_test_join(t[i]);
        cr_assert_eq(w[i].rc, 0, "waiter %d: rc %lld errno %d", i, w[i].rc, w[i].err);
    }
    cr_assert_eq(st_netfd_close(nfd), 0);
    close(raw);
}

Test(poll, waiter_timing_out_does_not_disturb_another)
{
    struct st_test_blocked w[2];
    st_thread_t t[2];
    st_netfd_t nfd;
    int raw;

    st_test_init();
    nfd = st_test_socketpair_raw(&raw);
    t[0] = start_poller(&w[0], nfd, POLLIN, 2000);
    t[1] = start_poller(&w[1], nfd, POLLIN, 5000000);
    st_test_join(t[0]);
    cr_assert_eq(w[0].rc, -1);
    cr_assert_eq(w[0].err, ETIME);
    cr_assert_eq(w[1].rc, ST_TEST_NOT_RETURNED);
    /* The remaining waiter is still registered and wakes on data. */
    cr_assert_eq(write(raw, "x", 1), 1);
    st_test_join(t[1]);
    cr_assert_eq(w[1].rc, 0);
    cr_assert_eq(st_netfd_close(nfd), 0);
    close(raw);
}

Test(poll, reader_and_writer_on_one_fd)
{
    struct st_test_blocked w[2];
    st_thread_t t[2];
    st_netfd_t nfd;
    int raw;

    st_test_init();
    nfd = st_test_socketpair_raw(&raw);
    t[0] = start_poller(&w[0], nfd, POLLIN, 5000000);
    t[1] = start_poller(&w[1], nfd, POLLOUT, 5000000);
    st_test_join(t[1]);
    cr_assert_eq(w[1].rc, 0);
    cr_assert_eq(w[0].rc, ST_TEST_NOT_RETURNED, "the reader woke without data");
    cr_assert_eq(write(raw, "x", 1), 1);
    st_test_join(t[0]);
    cr_assert_eq(w[0].rc, 0);
    cr_assert_eq(st_netfd_close(nfd), 0);
    close(raw);
}

Test(poll, interrupt_wakes_poll)
{
    struct st_test_blocked w = {.call = st_test_netfd_poll, .how = POLLIN,
                                .timeout = ST_UTIME_NO_TIMEOUT};

    st_test_init();
    /* Closes the netfd after: the fd is free of waiters again. */
    st_test_interrupt_call_on_socketpair(&w, 1000);
}

Test(poll, pending_interrupt_fails_poll_once)
{
    st_netfd_t nfd;
    int raw;
    struct pollfd pd;

    st_test_init();
    nfd = st_test_socketpair_raw(&raw);
    pd = (struct pollfd){.fd = st_netfd_fileno(nfd), .events = POLLIN};
    st_thread_interrupt(st_thread_self());
    ST_ASSERT_FAILS(st_poll(&pd, 1, 1000000), EINTR);
    cr_assert_eq(st_poll(&pd, 1, 1000), 0);
    st_thread_interrupt(st_thread_self());
    ST_ASSERT_FAILS(st_netfd_poll(nfd, POLLIN, 1000000), EINTR);
    ST_ASSERT_FAILS(st_netfd_poll(nfd, POLLIN, 1000), ETIME);
    cr_assert_eq(st_netfd_close(nfd), 0);
    close(raw);
}

struct many {
    st_netfd_t nfd;
    int ok;
};

static void *read_one(void *arg)
{
    struct many *m = arg;
    char c;

    if (st_read(m->nfd, &c, 1, 5000000) == 1 && c == 'm') {
        m->ok = 1;
    }
    return NULL;
}

Test(poll, many_fds_many_waiters)
{
    enum { N = 100 };
    static struct many m[N];
    static int raw[N];
    static st_thread_t t[N];
    int i;

    st_test_init();
    for (i = 0; i < N; i++) {
        m[i].nfd = st_test_socketpair_raw(&raw[i]);
        m[i].ok = 0;
        t[i] = st_test_spawn(read_one, &m[i]);
    }
    cr_assert_eq(st_usleep(1000), 0);
    /* Wake them in a scrambled order, a few at a time. */
    for (i = 0; i < N; i++) {
        int k = (i * 31) % N;

        cr_assert_eq(write(raw[k], "m", 1), 1);
        if (i % 10 == 9) {
            cr_assert_eq(st_usleep(200), 0);
        }
    }
    for (i = 0; i < N; i++) {
        st_test_join(t[i]);
        cr_assert_eq(m[i].ok, 1, "reader %d", i);
        cr_assert_eq(st_netfd_close(m[i].nfd), 0);
        close(raw[i]);
    }
}

Test(poll, one_poll_over_many_fds)
{
    enum { N = 40 };
    st_netfd_t nfd[N];
    int raw[N];
    struct pollfd pds[N];
    int i;

    st_test_init();
    for (i = 0; i < N; i++) {
        nfd[i] = st_test_socketpair_raw(&raw[i]);
        pds[i] = (struct pollfd){.fd = st_netfd_fileno(nfd[i]), .events = POLLIN};
    }
    cr_assert_eq(st_poll(pds, N, 2000), 0);
    cr_assert_eq(write(raw[7], "a", 1), 1);
    cr_assert_eq(write(raw[33], "b", 1), 1);
    cr_assert_eq(st_poll(pds, N, 1000000), 2);
    for (i = 0; i < N; i++) {
        if (i == 7 || i == 33) {
            cr_assert(pds[i].revents & POLLIN, "fd %d", i);
        } else {
            cr_assert_eq(pds[i].revents, 0, "fd %d", i);
        }
    }
    for (i = 0; i < N; i++) {
        cr_assert_eq(st_netfd_close(nfd[i]), 0);
        close(raw[i]);
    }
}

Test(poll, bad_counts_are_einval)
{
    struct pollfd pd = {.fd = 0, .events = POLLIN};

    st_test_init();
    ST_ASSERT_FAILS(st_poll(&pd, -1, 1000), EINVAL);
    ST_ASSERT_FAILS(st_poll(NULL, 1, 1000), EINVAL);
}

Test(poll, closed_descriptor_is_ebadf)
{
    st_netfd_t nfd;
    int raw;
    int osfd;
    char c;

    st_test_init();
    nfd = st_test_socketpair_raw(&raw);
    osfd = st_netfd_fileno(nfd);
    /* Closed behind the library's back. */
    cr_assert_eq(close(osfd), 0);
    ST_ASSERT_FAILS(st_netfd_poll(nfd, POLLIN, 1000000), EBADF);
    ST_ASSERT_FAILS(st_read(nfd, &c, 1, 1000000), EBADF);
    ST_ASSERT_FAILS(st_write(nfd, "x", 1, 1000000), EBADF);
    /* The scheduler is unharmed. */
    cr_assert_eq(st_usleep(1000), 0);
    st_netfd_free(nfd);
    close(raw);
}

/*
 * How many descriptors a test may open: the event system's limit (select:
 * FD_SETSIZE) less room for the test's other descriptors, at most `want`.
 */
static int fds_for_test(int want, int reserve)
{
    int room = st_getfdlimit() - reserve;

    return room < want ? room : want;
}

Test(poll, every_ready_descriptor_is_reported_in_one_call)
{
    enum { WANT = 4097 };
    struct pollfd *pds;
    int sv[2];
    int n;
    int i;

    st_test_init();
    n = fds_for_test(WANT, 64);
    cr_assert_gt(n, 512, "descriptor limit %d too low for this test", st_getfdlimit());
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    cr_assert_eq(write(sv[1], "x", 1), 1);
    pds = calloc((size_t)n, sizeof(*pds));
    cr_assert_not_null(pds);
    /* n descriptors, every one of them readable: the same socket under n numbers. */
    pds[0] = (struct pollfd){.fd = sv[0], .events = POLLIN};
    for (i = 1; i < n; i++) {
        int fd = dup(sv[0]);

        cr_assert_geq(fd, 0, "dup #%d: %s", i, strerror(errno));
        pds[i] = (struct pollfd){.fd = fd, .events = POLLIN};
    }
    cr_assert_eq(st_poll(pds, n, 1000000), n);
    for (i = 0; i < n; i++) {
        cr_assert_eq(pds[i].revents, POLLIN, "descriptor #%d", i);
    }
    for (i = 1; i < n; i++) {
        close(pds[i].fd);
    }
    free(pds);
    close(sv[0]);
    close(sv[1]);
}

enum { READ_DEADLINE_US = 1000000 };

struct deadline_reader {
    st_netfd_t nfd;
    st_utime_t base; /* the clock its deadline counts from */
    ssize_t rc;
    int err;
};

static void *read_with_deadline(void *arg)
{
    struct deadline_reader *r = arg;
    char c;

    r->base = st_utime_last_clock();
    r->rc = st_read(r->nfd, &c, 1, READ_DEADLINE_US);
    r->err = errno;
    return NULL;
}

/*
 * Data that arrived before a deadline is delivered, even when many readers'
 * data and their deadlines fall into the same scheduler cycle.
 */
Test(poll, ready_data_beats_an_expired_deadline_of_the_same_cycle)
{
    enum { WANT = 3000 };
    struct deadline_reader *r;
    st_thread_t *t;
    int *raw;
    int n;
    int i;
    int timed_out = 0;
    st_utime_t due = 0;

    st_test_init();
    n = fds_for_test(WANT, 64) / 2;
    r = calloc((size_t)n, sizeof(*r));
    t = calloc((size_t)n, sizeof(st_thread_t));
    raw = calloc((size_t)n, sizeof(*raw));
    cr_assert(r != NULL && t != NULL && raw != NULL);
    for (i = 0; i < n; i++) {
        r[i].nfd = st_test_socketpair_raw(&raw[i]);
        r[i].rc = 99;
        t[i] = st_test_spawn(read_with_deadline, &r[i]);
    }
    cr_assert_eq(st_usleep(1000), 0);
    for (i = 0; i < n; i++) {
        cr_assert_eq(r[i].rc, 99, "reader %d did not wait (machine too slow?)", i);
        if (r[i].base + READ_DEADLINE_US > due) {
            due = r[i].base + READ_DEADLINE_US;
        }
        cr_assert_eq(write(raw[i], "x", 1), 1);
    }
    /* Without letting the scheduler run, let every deadline pass. */
    while (st_utime() <= due + 1000) {
        ;
    }
    for (i = 0; i < n; i++) {
        st_test_join(t[i]);
        if (r[i].rc != 1) {
            timed_out++;
        }
    }
    cr_assert_eq(timed_out, 0, "%d of %d readers whose data was there got no data (errno %d)",
                 timed_out, n, r[0].err);
    for (i = 0; i < n; i++) {
        cr_assert_eq(st_netfd_close(r[i].nfd), 0);
        close(raw[i]);
    }
    free(r);
    free(t);
    free(raw);
}

/* A connected TCP pair on 127.0.0.1: the accepted side as a netfd, the client's raw descriptor. */
static st_netfd_t tcp_pair(int *client)
{
    unsigned short port;
    int listener = st_test_bound_socket(SOCK_STREAM, &port);
    struct sockaddr_in sin;
    int server;
    st_netfd_t nfd;

    cr_assert_eq(listen(listener, 1), 0);
    *client = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert_geq(*client, 0);
    st_test_loopback(&sin, port);
    cr_assert_eq(connect(*client, (struct sockaddr *)&sin, sizeof(sin)), 0, "connect: %s",
                 strerror(errno));
    server = accept(listener, NULL, NULL);
    cr_assert_geq(server, 0, "accept: %s", strerror(errno));
    close(listener);
    nfd = st_netfd_open_socket(server);
    cr_assert_not_null(nfd);
    return nfd;
}

struct pri_wait {
    int fd;
    short events; /* POLLPRI, with POLLIN or not */
    st_utime_t timeout;
    int rc;
    short revents;
};

static void *wait_for_urgent(void *arg)
{
    struct pri_wait *w = arg;
    struct pollfd pd = {.fd = w->fd, .events = w->events};

    w->rc = st_poll(&pd, 1, w->timeout);
    w->revents = pd.revents;
    return NULL;
}

/*
 * TCP urgent data ends a POLLPRI wait that began before it came. (The
 * kernel's io_uring poll ignores wake-ups for POLLPRI alone: that backend
 * must ask for more and check what it is told.)
 */
Test(poll, urgent_data_ends_a_pollpri_wait_that_began_before_it)
{
    int client;
    st_netfd_t nfd;
    struct pri_wait w;
    st_thread_t t;
    st_utime_t sent;

    st_test_init();
    nfd = tcp_pair(&client);
    w = (struct pri_wait){.fd = st_netfd_fileno(nfd), .events = POLLPRI, .timeout = 2000000};
    t = st_test_spawn(wait_for_urgent, &w);
    cr_assert_eq(st_usleep(10000), 0); /* it waits */
    cr_assert_eq(send(client, "!", 1, MSG_OOB), 1);
    sent = st_utime();
    st_test_join(t);
    cr_assert_eq(w.rc, 1, "st_poll returned %d after %llu us", w.rc,
                 (unsigned long long)(st_utime() - sent));
    cr_assert(w.revents & POLLPRI, "revents 0x%x", w.revents);
    cr_assert_lt(st_utime() - sent, 1000000, "woken by the data, not the deadline");
    cr_assert_eq(st_netfd_close(nfd), 0);
    close(client);
}

/* In-band data does not end a wait for urgent data, on any event system. */
Test(poll, in_band_data_does_not_end_a_pollpri_wait)
{
    int client;
    st_netfd_t nfd;
    struct pri_wait w;
    st_thread_t t;

    st_test_init();
    nfd = tcp_pair(&client);
    w = (struct pri_wait){.fd = st_netfd_fileno(nfd), .events = POLLPRI, .timeout = 100000};
    t = st_test_spawn(wait_for_urgent, &w);
    cr_assert_eq(st_usleep(10000), 0);
    cr_assert_eq(send(client, "x", 1, 0), 1);
    st_test_join(t);
    cr_assert_eq(w.rc, 0, "st_poll returned %d, revents 0x%x", w.rc, w.revents);
    cr_assert_eq(w.revents, 0);
    /* The wait after it still sees urgent data when it comes. */
    w = (struct pri_wait){.fd = st_netfd_fileno(nfd), .events = POLLPRI, .timeout = 2000000};
    t = st_test_spawn(wait_for_urgent, &w);
    cr_assert_eq(st_usleep(10000), 0);
    cr_assert_eq(send(client, "!", 1, MSG_OOB), 1);
    st_test_join(t);
    cr_assert_eq(w.rc, 1);
    cr_assert(w.revents & POLLPRI, "revents 0x%x", w.revents);
    cr_assert_eq(st_netfd_close(nfd), 0);
    close(client);
}

/*
 * Urgent data alone is not input: a wait for either reports POLLPRI without
 * POLLIN, as poll(2) does, on every event system. (io_uring's completion
 * carries the socket's wake-up events, which for urgent data name in-band
 * input too.)
 */
Test(poll, urgent_data_alone_is_not_reported_as_input)
{
    int client;
    st_netfd_t nfd;
    struct pri_wait w;
    struct pollfd pd;
    st_thread_t t;

    st_test_init();
    nfd = tcp_pair(&client);
    w = (struct pri_wait){
        .fd = st_netfd_fileno(nfd), .events = POLLIN | POLLPRI, .timeout = 2000000};
    t = st_test_spawn(wait_for_urgent, &w);
    cr_assert_eq(st_usleep(10000), 0); /* it waits */
    cr_assert_eq(send(client, "!", 1, MSG_OOB), 1);
    st_test_join(t);
    cr_assert_eq(w.rc, 1);
    pd = (struct pollfd){.fd = st_netfd_fileno(nfd), .events = POLLIN | POLLPRI};
    cr_assert_eq(poll(&pd, 1, 0), 1);
    cr_assert_eq(pd.revents, POLLPRI, "poll(2) itself reports 0x%x", pd.revents);
    cr_assert_eq(w.revents, POLLPRI, "revents 0x%x", w.revents);
    /* In-band data after it is input. */
    cr_assert_eq(send(client, "x", 1, 0), 1);
    w = (struct pri_wait){
        .fd = st_netfd_fileno(nfd), .events = POLLIN | POLLPRI, .timeout = 2000000};
    t = st_test_spawn(wait_for_urgent, &w);
    st_test_join(t);
    cr_assert_eq(w.rc, 1);
    cr_assert_eq(w.revents, POLLIN | POLLPRI, "revents 0x%x", w.revents);
    cr_assert_eq(st_netfd_close(nfd), 0);
    close(client);
}

static int fork_pipe[2];

static void *poll_fork_pipe(void *arg)
{
    struct pollfd pd = {.fd = fork_pipe[0], .events = POLLIN};

    (void)arg;
    return (void *)(long)st_poll(&pd, 1, 2000000);
}

/*
 * A child forked after st_init() must not change the parent's waits. With
 * epoll it shares the parent's instance: its copy of a waiter that leaves
 * would remove the parent's registration there, and the parent's waiter
 * would never see its descriptor ready. It gets an instance of its own, as
 * in State Threads.
 */
Test(poll, a_child_forked_after_init_leaves_the_parents_waits_alone)
{
    st_thread_t waiter;
    pid_t child;
    int status;
    void *ret;

    if (st_test_expected_eventsys() == ST_EVENTSYS_IO_URING) {
        cr_skip_test("io_uring: a child forked after st_init must st_destroy and st_init "
                     "(poll::on_io_uring_a_child_that_did_not_init_again_stops_with_a_message)");
    }
    st_test_init();
    cr_assert_eq(pipe(fork_pipe), 0);
    waiter = st_thread_create(poll_fork_pipe, NULL, 1, 0);
    cr_assert_not_null(waiter);
    st_thread_yield(); /* it waits: the descriptor is registered */
    child = fork();
    cr_assert_geq(child, 0);
    if (child == 0) {
        /* The child's copy of the waiter leaves its wait (EINTR), and the child ends. */
        st_thread_interrupt(waiter);
        _exit(st_thread_join(waiter, &ret) == 0 && (long)ret == -1 ? 0 : 1);
    }
    cr_assert_eq(waitpid(child, &status, 0), child);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status 0x%x", status);
    cr_assert_eq(write(fork_pipe[1], "x", 1), 1);
    cr_assert_eq(st_thread_join(waiter, &ret), 0);
    cr_assert_eq((long)ret, 1, "the parent's wait returned %ld, not its ready descriptor",
                 (long)ret);
    close(fork_pipe[0]);
    close(fork_pipe[1]);
}

/*
 * On io_uring a child forked after st_init() shares the parent's ring (its
 * memory too), whose submissions the kernel refuses to it: its first wait
 * stops the process with a message naming the fix, instead of spinning for
 * ever or taking the parent's completions.
 */
Test(poll, on_io_uring_a_child_that_did_not_init_again_stops_with_a_message)
{
    int err[2];
    pid_t child;
    int status;
    char text[512] = {0};
    ssize_t n;

    if (st_test_expected_eventsys() != ST_EVENTSYS_IO_URING) {
        cr_skip_test("only io_uring's ring cannot be shared with a child");
    }
    st_test_init();
    cr_assert_eq(pipe(err), 0);
    child = fork();
    cr_assert_geq(child, 0);
    if (child == 0) {
        dup2(err[1], STDERR_FILENO);
        alarm(10); /* a spinning child fails the test, not the run */
        (void)st_usleep(1000);
        _exit(0);
    }
    close(err[1]);
    cr_assert_eq(waitpid(child, &status, 0), child);
    n = read(err[0], text, sizeof(text) - 1);
    close(err[0]);
    cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGABRT, "child status 0x%x: %s", status,
              n > 0 ? text : "");
    cr_assert(n > 0 && strstr(text, "call st_destroy and st_init after fork") != NULL,
              "stderr: %s", n > 0 ? text : "");
}
