/*
 * TCP connection set-up: st_accept and st_connect on loopback.
 */
#include "st_test.h"

#include <netinet/tcp.h>

ST_TEST_SUITE(accept_connect);

struct server {
    st_netfd_t lfd;
    st_netfd_t conn;
    struct sockaddr_in peer;
    int peerlen;
    int err;
    int nonblocking;
    int use_addr;
};

static void *accept_and_echo(void *arg)
{
    struct server *s = arg;
    char buf[64];
    ssize_t n;

    s->peerlen = sizeof(s->peer);
    errno = 0;
    if (s->use_addr) {
        s->conn = st_accept(s->lfd, (struct sockaddr *)&s->peer, &s->peerlen, 5000000);
    } else {
        s->conn = st_accept(s->lfd, NULL, NULL, 5000000);
    }
    s->err = errno;
    if (s->conn == NULL) {
        return NULL;
    }
    s->nonblocking = st_test_is_nonblocking(st_netfd_fileno(s->conn));
    while ((n = st_read(s->conn, buf, sizeof(buf), 5000000)) > 0) {
        if (st_write(s->conn, buf, (size_t)n, 5000000) != n) {
            break;
        }
    }
    st_netfd_close(s->conn);
    return NULL;
}

static void client_round_trip(st_netfd_t cfd)
{
    char buf[16] = {0};

    cr_assert_eq(st_write(cfd, "echo me", 7, 1000000), 7);
    cr_assert_eq(st_read_fully(cfd, buf, 7, 1000000), 7);
    cr_assert_str_eq(buf, "echo me");
}

Test(accept_connect, connect_accept_and_talk)
{
    struct server s = {.use_addr = 1};
    struct sockaddr_in sin;
    unsigned short port;
    st_netfd_t cfd;
    st_thread_t t;

    st_test_init();
    s.lfd = st_test_listener(&port, 16);
    t = st_test_spawn(accept_and_echo, &s);
    cfd = st_test_tcp_socket();
    st_test_loopback(&sin, port);
    cr_assert_eq(st_connect(cfd, (struct sockaddr *)&sin, sizeof(sin), 1000000), 0,
                 "st_connect: %s", strerror(errno));
    client_round_trip(cfd);
    cr_assert_eq(st_netfd_close(cfd), 0);
    st_test_join(t);
    cr_assert_not_null(s.conn, "st_accept: %s", strerror(s.err));
    cr_assert(s.nonblocking, "accepted socket is blocking");
    cr_assert_eq(s.peerlen, (int)sizeof(struct sockaddr_in));
    cr_assert_eq(s.peer.sin_family, AF_INET);
    cr_assert_eq(s.peer.sin_addr.s_addr, htonl(INADDR_LOOPBACK));
    cr_assert_neq(s.peer.sin_port, 0);
    cr_assert_eq(st_netfd_close(s.lfd), 0);
}

Test(accept_connect, accept_without_address)
{
    struct server s = {.use_addr = 0};
    struct sockaddr_in sin;
    unsigned short port;
    st_netfd_t cfd;
    st_thread_t t;

    st_test_init();
    s.lfd = st_test_listener(&port, 16);
    t = st_test_spawn(accept_and_echo, &s);
    cfd = st_test_tcp_socket();
    st_test_loopback(&sin, port);
    cr_assert_eq(st_connect(cfd, (struct sockaddr *)&sin, sizeof(sin), ST_UTIME_NO_TIMEOUT), 0);
    client_round_trip(cfd);
    cr_assert_eq(st_netfd_close(cfd), 0);
    st_test_join(t);
    cr_assert_not_null(s.conn);
    cr_assert(s.nonblocking);
    cr_assert_eq(st_netfd_close(s.lfd), 0);
}

/*
 * The call owed after a connect completed in the background is owed
 * however the next st_connect is made: with no wait, or with an interrupt
 * pending (which connect(2) succeeding leaves pending, as in ST).
 */
Test(accept_connect, the_call_after_a_completed_connect_succeeds_with_no_wait_or_an_interrupt)
{
    struct sockaddr_in sin;
    unsigned short port;
    st_test_init();
    st_netfd_t lfd = st_test_listener(&port, 16);
    st_test_loopback(&sin, port);
    for (int how = 0; how < 2; how++) {
        st_netfd_t cfd = st_test_tcp_socket();
        cr_assert_eq(st_connect(cfd, (struct sockaddr *)&sin, sizeof(sin), 1000000), 0);
        if (how == 0) {
            cr_assert_eq(st_connect(cfd, (struct sockaddr *)&sin, sizeof(sin), 0), 0,
                         "a second st_connect with no wait: %s", strerror(errno));
        } else {
            st_thread_interrupt(st_thread_self());
            cr_assert_eq(st_connect(cfd, (struct sockaddr *)&sin, sizeof(sin), 1000000), 0,
                         "a second st_connect with an interrupt pending: %s", strerror(errno));
            ST_ASSERT_FAILS(st_usleep(1000), EINTR); /* still pending */
        }
        ST_ASSERT_FAILS(st_connect(cfd, (struct sockaddr *)&sin, sizeof(sin), 0), EISCONN);
        st_netfd_t conn = st_accept(lfd, NULL, NULL, 1000000);
        cr_assert_not_null(conn, "st_accept: %s", strerror(errno));
        cr_assert_eq(st_netfd_close(conn), 0);
        cr_assert_eq(st_netfd_close(cfd), 0);
    }
    cr_assert_eq(st_netfd_close(lfd), 0);
}

Test(accept_connect, accept_pending_connection_without_waiting)
{
    struct sockaddr_in sin;
    struct sockaddr_in peer;
    int peerlen = sizeof(peer);
    unsigned short port;
    st_netfd_t lfd;
    st_netfd_t cfd;
    st_netfd_t conn;

    st_test_init();
    lfd = st_test_listener(&port, 16);
    cfd = st_test_tcp_socket();
    st_test_loopback(&sin, port);
    /* Loopback connects complete in the kernel before anyone accepts. */
    cr_assert_eq(st_connect(cfd, (struct sockaddr *)&sin, sizeof(sin), 1000000), 0);
    /*
     * Calls again on the socket do what connect(2) does after a non-blocking
     * connect completed: the first succeeds (it moves the socket from
     * "connecting" to "connected"), the next fail with EISCONN.
     */
    cr_assert_eq(st_connect(cfd, (struct sockaddr *)&sin, sizeof(sin), 1000000), 0,
                 "a second st_connect: %s", strerror(errno));
    ST_ASSERT_FAILS(st_connect(cfd, (struct sockaddr *)&sin, sizeof(sin), 1000000), EISCONN);
    ST_ASSERT_FAILS(st_connect(cfd, (struct sockaddr *)&sin, sizeof(sin), 1000000), EISCONN);
    conn = st_accept(lfd, (struct sockaddr *)&peer, &peerlen, 1000000);
    cr_assert_not_null(conn, "st_accept: %s", strerror(errno));
    cr_assert_eq(ntohs(peer.sin_port), st_test_local_port(st_netfd_fileno(cfd)));
    cr_assert_eq(st_write(conn, "hey", 3, 1000000), 3);
    {
        char buf[4] = {0};

        cr_assert_eq(st_read_fully(cfd, buf, 3, 1000000), 3);
        cr_assert_str_eq(buf, "hey");
    }
    cr_assert_eq(st_netfd_close(conn), 0);
    cr_assert_eq(st_netfd_close(cfd), 0);
    cr_assert_eq(st_netfd_close(lfd), 0);
}

/* A client that connects after a sleep of delay_us (0: none) and then stays connected. */
struct late_client {
    unsigned short port;
    st_utime_t delay_us;
    st_netfd_t cfd;
    int rc;
    int err;
};

static void *connect_late(void *arg)
{
    struct late_client *c = arg;
    struct sockaddr_in sin;

    if (c->delay_us > 0 && st_usleep(c->delay_us) != 0) {
        c->rc = -1;
        c->err = errno;
        return NULL;
    }
    c->cfd = st_netfd_open_socket(socket(AF_INET, SOCK_STREAM, 0));
    if (c->cfd == NULL) {
        c->rc = -1;
        c->err = errno;
        return NULL;
    }
    st_test_loopback(&sin, c->port);
    errno = 0;
    c->rc = st_connect(c->cfd, (struct sockaddr *)&sin, sizeof(sin), 1000000);
    c->err = errno;
    return NULL;
}

/*
 * The socket st_accept() returns after waiting: non-blocking, not
 * close-on-exec (as accept4(2) with SOCK_NONBLOCK makes it), and an address
 * buffer too small holds the truncated address while *addrlen says its
 * full length.
 */
Test(accept_connect, waited_accept_makes_the_socket_as_accept4_does)
{
    struct late_client c = {.delay_us = 5000};
    struct sockaddr_in peer;
    unsigned char *raw = (unsigned char *)&peer;
    int peerlen = 4;
    st_netfd_t lfd;
    st_netfd_t conn;
    st_thread_t t;
    int fdflags;

    st_test_init();
    lfd = st_test_listener(&c.port, 16);
    memset(&peer, 0xA5, sizeof(peer));
    t = st_test_spawn(connect_late, &c);
    conn = st_accept(lfd, (struct sockaddr *)&peer, &peerlen, 1000000);
    cr_assert_not_null(conn, "st_accept: %s", strerror(errno));
    st_test_join(t);
    cr_assert_eq(c.rc, 0, "st_connect: %s", strerror(c.err));
    cr_assert(st_test_is_nonblocking(st_netfd_fileno(conn)), "accepted socket is blocking");
    fdflags = fcntl(st_netfd_fileno(conn), F_GETFD);
    cr_assert_neq(fdflags, -1);
    cr_assert_eq(fdflags & FD_CLOEXEC, 0, "accepted socket is close-on-exec");
    cr_assert_eq(peerlen, (int)sizeof(struct sockaddr_in), "*addrlen is %d", peerlen);
    cr_assert_eq(peer.sin_family, AF_INET);
    cr_assert_eq(raw[4], 0xA5, "more than *addrlen bytes of the address were written");
    cr_assert_eq(st_netfd_close(conn), 0);
    cr_assert_eq(st_netfd_close(c.cfd), 0);
    cr_assert_eq(st_netfd_close(lfd), 0);
}

/*
 * Accepts with deadlines that expire around the time the connections come:
 * every connection is accepted exactly once, by the call whose deadline
 * passed (it came while the wait was being given up) or by a later one.
 */
Test(accept_connect, accepts_that_time_out_lose_no_connection)
{
    enum { N = 40 };
    struct late_client c[N];
    st_thread_t t[N];
    unsigned short port;
    st_netfd_t lfd;
    int accepted = 0;
    int timed_out = 0;
    int i;

    st_test_init();
    lfd = st_test_listener(&port, N);
    for (i = 0; i < N; i++) {
        st_netfd_t conn;

        c[i] = (struct late_client){.port = port, .delay_us = 1000 + (st_utime_t)(i % 5) * 500};
        t[i] = st_test_spawn(connect_late, &c[i]);
        errno = 0;
        conn = st_accept(lfd, NULL, NULL, 2000);
        if (conn != NULL) {
            accepted++;
            cr_assert_eq(st_netfd_close(conn), 0);
        } else {
            cr_assert_eq(errno, ETIME, "st_accept: %s", strerror(errno));
            timed_out++;
        }
        st_test_join(t[i]);
        cr_assert_eq(c[i].rc, 0, "st_connect %d: %s", i, strerror(c[i].err));
    }
    for (;;) {
        st_netfd_t conn = st_accept(lfd, NULL, NULL, 100000);

        if (conn == NULL) {
            cr_assert_eq(errno, ETIME, "st_accept: %s", strerror(errno));
            break;
        }
        accepted++;
        cr_assert_eq(st_netfd_close(conn), 0);
    }
    cr_assert_eq(accepted, N, "%d connections accepted of %d (%d accepts timed out)", accepted, N,
                 timed_out);
    for (i = 0; i < N; i++) {
        cr_assert_eq(st_netfd_close(c[i].cfd), 0);
    }
    cr_assert_eq(st_netfd_close(lfd), 0);
}

Test(accept_connect, accept_timeout_is_etime)
{
    unsigned short port;
    st_netfd_t lfd;
    long long start;
    long long elapsed;

    st_test_init();
    lfd = st_test_listener(&port, 16);
    start = st_test_deadline_base();
    ST_ASSERT_FAILS_NULL(st_accept(lfd, NULL, NULL, 20000), ETIME);
    elapsed = st_test_now_us() - start;
    cr_assert_geq(elapsed, 20000);
    cr_assert_lt(elapsed, ST_TEST_LATE_US);
    ST_ASSERT_FAILS_NULL(st_accept(lfd, NULL, NULL, ST_UTIME_NO_WAIT), ETIME);
    cr_assert_eq(st_netfd_close(lfd), 0);
}

Test(accept_connect, accept_on_non_listening_socket_fails)
{
    st_netfd_t nfd;

    st_test_init();
    nfd = st_test_tcp_socket();
    ST_ASSERT_FAILS_NULL(st_accept(nfd, NULL, NULL, 1000), EINVAL);
    cr_assert_eq(st_netfd_close(nfd), 0);
}

static long long accept_forever(struct st_test_blocked *b)
{
    b->result = st_accept(b->nfd, NULL, NULL, ST_UTIME_NO_TIMEOUT);
    return b->result != NULL ? 0 : -1;
}

Test(accept_connect, interrupt_wakes_accept_and_the_listener_works_after)
{
    struct st_test_blocked a = {.call = accept_forever};
    unsigned short port;
    st_thread_t t;

    st_test_init();
    a.nfd = st_test_listener(&port, 16);
    t = st_test_block_and_sleep(&a, 1000);
    /* A listener with a coroutine in st_accept() cannot be closed. */
    ST_ASSERT_FAILS(st_netfd_close(a.nfd), EBUSY);
    st_test_interrupt_blocked(t, &a);
    cr_assert_null(a.result);
    {
        /* The listener still accepts. */
        struct late_client c = {.port = port};
        st_netfd_t conn;

        t = st_test_spawn(connect_late, &c);
        conn = st_accept(a.nfd, NULL, NULL, 1000000);
        cr_assert_not_null(conn, "st_accept after the interrupt: %s", strerror(errno));
        st_test_join(t);
        cr_assert_eq(c.rc, 0);
        cr_assert_eq(st_netfd_close(conn), 0);
        cr_assert_eq(st_netfd_close(c.cfd), 0);
    }
    cr_assert_eq(st_netfd_close(a.nfd), 0);
}

/*
 * st_destroy while a coroutine waits in st_accept(), with no connection
 * and with one that came just before (the accept may complete while the
 * scheduler goes): no descriptor is left open, the listener is not closed.
 */
Test(accept_connect, st_destroy_with_an_accept_waiting_leaves_no_descriptor)
{
    for (int with_client = 0; with_client <= 1; with_client++) {
        struct st_test_blocked waiting = {.call = accept_forever};
        struct sockaddr_in sin;
        unsigned short port;
        int before = st_test_open_fds();
        int lfd;
        int client = -1;

        st_test_init();
        waiting.nfd = st_test_listener(&port, 16);
        lfd = st_netfd_fileno(waiting.nfd);
        cr_assert_not_null(st_test_block_and_sleep(&waiting, 1000));
        if (with_client) {
            client = socket(AF_INET, SOCK_STREAM, 0); /* blocking: connected on return */
            cr_assert_geq(client, 0);
            st_test_loopback(&sin, port);
            cr_assert_eq(connect(client, (struct sockaddr *)&sin, sizeof(sin)), 0,
                         "connect: %s", strerror(errno));
        }
        st_destroy();
        cr_assert_eq(waiting.rc, ST_TEST_NOT_RETURNED);
        /* The handle outlives the scheduler; its descriptor was not closed. */
        cr_assert(fcntl(lfd, F_GETFD) != -1, "the listener was closed");
        cr_assert_eq(st_netfd_close(waiting.nfd), 0);
        if (client >= 0) {
            cr_assert_eq(close(client), 0);
        }
        cr_assert_eq(st_test_open_fds(), before, "descriptors left behind (%s)",
                     with_client ? "a connection came" : "no connection");
    }
}

struct accept_twice {
    st_netfd_t lfd;
    st_netfd_t first;
    st_netfd_t second;
    int first_err;
    int second_err;
};

static void *accept_then_accept_again(void *arg)
{
    struct accept_twice *a = arg;

    errno = 0;
    a->first = st_accept(a->lfd, NULL, NULL, ST_UTIME_NO_TIMEOUT);
    a->first_err = errno;
    errno = 0;
    a->second = st_accept(a->lfd, NULL, NULL, 200000);
    a->second_err = errno;
    return NULL;
}

/*
 * A connection comes and the waiting acceptor is interrupted before it ran
 * again: either the interrupt wins (EINTR, and the next accept returns the
 * connection) or the connection does (returned, and the interrupt stays
 * pending for the next call). The connection is never lost.
 */
Test(accept_connect, interrupt_racing_a_connection_loses_nothing)
{
    struct accept_twice a = {0};
    struct sockaddr_in sin;
    unsigned short port;
    st_thread_t t;
    int osfd;

    st_test_init();
    a.lfd = st_test_listener(&port, 16);
    t = st_test_spawn(accept_then_accept_again, &a);
    cr_assert_eq(st_usleep(1000), 0);
    osfd = socket(AF_INET, SOCK_STREAM, 0); /* blocking: connected on return */
    cr_assert_geq(osfd, 0);
    st_test_loopback(&sin, port);
    /* Loopback: the handshake is done and the connection queued when connect() returns. */
    cr_assert_eq(connect(osfd, (struct sockaddr *)&sin, sizeof(sin)), 0, "connect: %s",
                 strerror(errno));
    st_thread_interrupt(t);
    st_test_join(t);
    if (a.first != NULL) {
        cr_assert_null(a.second, "two connections accepted of one");
        cr_assert_eq(a.second_err, EINTR, "the pending interrupt: %s", strerror(a.second_err));
        cr_assert_eq(st_netfd_close(a.first), 0);
    } else {
        cr_assert_eq(a.first_err, EINTR, "st_accept: %s", strerror(a.first_err));
        cr_assert_not_null(a.second, "the connection was lost: %s", strerror(a.second_err));
        cr_assert_eq(st_netfd_close(a.second), 0);
    }
    cr_assert_eq(close(osfd), 0);
    cr_assert_eq(st_netfd_close(a.lfd), 0);
}

/*
 * The error a plain non-blocking connect() to the port ends with, as
 * SO_ERROR reports it: that is how st_connect() learns it.
 */
static int so_error_of_refused_connect(const struct sockaddr_in *sin)
{
    struct pollfd pd = {.fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), .events = POLLOUT};
    int err = 0;
    socklen_t len = sizeof(err);

    cr_assert_geq(pd.fd, 0, "socket: %s", strerror(errno));
    if (connect(pd.fd, (const struct sockaddr *)sin, sizeof(*sin)) != 0) {
        err = errno;
        if (err == EINPROGRESS) {
            cr_assert_eq(poll(&pd, 1, 5000), 1);
            cr_assert_eq(getsockopt(pd.fd, SOL_SOCKET, SO_ERROR, &err, &len), 0);
        }
    }
    close(pd.fd);
    return err;
}

Test(accept_connect, connect_to_closed_port_is_refused)
{
    struct sockaddr_in sin;
    unsigned short port;
    int osfd;
    st_netfd_t cfd;
    int refused = ECONNREFUSED;

    st_test_init();
    /* Reserve a port, then release it so that nothing listens there. */
    osfd = st_test_bound_socket(SOCK_STREAM, &port);
    close(osfd);
    cfd = st_test_tcp_socket();
    st_test_loopback(&sin, port);
    if (st_test_emulator() != NULL) {
        /*
         * qemu-user passes SO_ERROR values through untranslated, so on a CPU
         * whose errno numbers differ from the host's (mips) st_connect() can
         * only report the host's number.
         */
        int raw = so_error_of_refused_connect(&sin);
        if (raw != ECONNREFUSED) {
            fprintf(stderr,
                    "under %s, SO_ERROR says %d for a refused connect, not ECONNREFUSED (%d): "
                    "expecting %d\n",
                    st_test_emulator(), raw, ECONNREFUSED, raw);
            refused = raw;
        }
    }
    ST_ASSERT_FAILS(st_connect(cfd, (struct sockaddr *)&sin, sizeof(sin), 1000000), refused);
    cr_assert_eq(st_netfd_close(cfd), 0);
}

Test(accept_connect, connect_with_bad_address_fails)
{
    struct sockaddr_in sin;
    st_netfd_t cfd;

    st_test_init();
    cfd = st_test_tcp_socket();
    st_test_loopback(&sin, 9);
    /* An address length that is too short is rejected by the kernel. */
    ST_ASSERT_FAILS(st_connect(cfd, (struct sockaddr *)&sin, 2, 1000000), EINVAL);
    cr_assert_eq(st_netfd_close(cfd), 0);
}

/*
 * A listener with a full accept queue drops new SYNs, so a further connect
 * stays pending and must time out.
 */
Test(accept_connect, connect_timeout_is_etime)
{
    struct sockaddr_in sin;
    unsigned short port;
    st_netfd_t lfd;
    st_netfd_t cfd[8];
    int used = 0;
    int timed_out = 0;
    int i;
    long long elapsed = 0;

    st_test_init();
    lfd = st_test_listener(&port, 0);
    st_test_loopback(&sin, port);
    while (used < 8 && !timed_out) {
        long long start;
        int rc;

        cfd[used] = st_test_tcp_socket();
        start = st_test_deadline_base();
        errno = 0;
        rc = st_connect(cfd[used], (struct sockaddr *)&sin, sizeof(sin), 20000);
        elapsed = st_test_now_us() - start;
        if (rc == -1) {
            cr_assert_eq(errno, ETIME, "st_connect: errno %d (%s)", errno, strerror(errno));
            timed_out = 1;
        }
        used++;
    }
    if (!timed_out) {
        cr_skip_test("the kernel accepted 8 connections on a backlog of 0");
    }
    cr_assert_geq(elapsed, 20000);
    cr_assert_lt(elapsed, ST_TEST_LATE_US);
    /* The attempt goes on after the timeout: a second call finds it in progress (connect(2)). */
    ST_ASSERT_FAILS(st_connect(cfd[used - 1], (struct sockaddr *)&sin, sizeof(sin), 20000),
                    EALREADY);
    for (i = 0; i < used; i++) {
        cr_assert_eq(st_netfd_close(cfd[i]), 0);
    }
    cr_assert_eq(st_netfd_close(lfd), 0);
}

struct client {
    unsigned short port;
    int id;
    int ok;
};

static void *client_main(void *arg)
{
    struct client *c = arg;
    struct sockaddr_in sin;
    char msg[32];
    char buf[32];
    int len = snprintf(msg, sizeof(msg), "client %d", c->id);
    int osfd = socket(AF_INET, SOCK_STREAM, 0);
    st_netfd_t cfd = osfd >= 0 ? st_netfd_open_socket(osfd) : NULL;

    if (cfd == NULL) {
        return NULL;
    }
    st_test_loopback(&sin, c->port);
    if (st_connect(cfd, (struct sockaddr *)&sin, sizeof(sin), 5000000) == 0 &&
        st_write(cfd, msg, (size_t)len, 5000000) == len &&
        st_read_fully(cfd, buf, (size_t)len, 5000000) == len &&
        memcmp(buf, msg, (size_t)len) == 0) {
        c->ok = 1;
    }
    st_netfd_close(cfd);
    return NULL;
}

static void *serve_one(void *arg)
{
    st_netfd_t conn = arg;
    char buf[64];
    ssize_t n;

    while ((n = st_read(conn, buf, sizeof(buf), 5000000)) > 0) {
        if (st_write(conn, buf, (size_t)n, 5000000) != n) {
            break;
        }
    }
    st_netfd_close(conn);
    return NULL;
}

struct acceptor_loop {
    st_netfd_t lfd;
    int count;
};

static void *accept_loop(void *arg)
{
    struct acceptor_loop *al = arg;

    for (;;) {
        st_netfd_t conn = st_accept(al->lfd, NULL, NULL, ST_UTIME_NO_TIMEOUT);

        if (conn == NULL) {
            return NULL;
        }
        al->count++;
        if (st_thread_create(serve_one, conn, 0, 0) == NULL) {
            st_netfd_close(conn);
        }
    }
}

Test(accept_connect, many_concurrent_clients)
{
    enum { N = 30 };
    struct acceptor_loop al = {0};
    struct client c[N];
    st_thread_t ct[N];
    st_thread_t at;
    unsigned short port;
    int i;

    st_test_init();
    al.lfd = st_test_listener(&port, 64);
    at = st_test_spawn(accept_loop, &al);
    for (i = 0; i < N; i++) {
        c[i] = (struct client){.port = port, .id = i};
        ct[i] = st_test_spawn(client_main, &c[i]);
    }
    for (i = 0; i < N; i++) {
        st_test_join(ct[i]);
        cr_assert_eq(c[i].ok, 1, "client %d failed", i);
    }
    cr_assert_eq(al.count, N);
    st_thread_interrupt(at);
    st_test_join(at);
    cr_assert_eq(st_usleep(1000), 0); /* let the servers see EOF and close */
    cr_assert_eq(st_netfd_close(al.lfd), 0);
}

Test(accept_connect, negative_address_lengths_are_einval)
{
    struct sockaddr_in sin;
    int len = -1;
    unsigned short port;
    st_netfd_t lfd;
    st_netfd_t cfd;

    st_test_init();
    lfd = st_test_listener(&port, 16);
    cfd = st_test_tcp_socket();
    st_test_loopback(&sin, port);
    ST_ASSERT_FAILS_NULL(st_accept(lfd, (struct sockaddr *)&sin, &len, 1000), EINVAL);
    ST_ASSERT_FAILS(st_connect(cfd, (struct sockaddr *)&sin, -1, 1000), EINVAL);
    /* Both still work with proper arguments. */
    cr_assert_eq(st_connect(cfd, (struct sockaddr *)&sin, sizeof(sin), 1000000), 0);
    len = sizeof(sin);
    {
        st_netfd_t conn = st_accept(lfd, (struct sockaddr *)&sin, &len, 1000000);

        cr_assert_not_null(conn);
        cr_assert_eq(st_netfd_close(conn), 0);
    }
    cr_assert_eq(st_netfd_close(cfd), 0);
    cr_assert_eq(st_netfd_close(lfd), 0);
}
