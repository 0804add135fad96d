/* verify: TCP and UDP over loopback, and st_poll. */
#include "verify.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

enum { MS = 1000, CLIENTS = 8, MSG_LEN = 10000 };

/* ---- TCP echo --------------------------------------------------------------------- */

static void *echo_connection(void *arg)
{
    st_netfd_t conn = arg;
    char buf[4096];
    ssize_t n = 0;
    while ((n = st_read(conn, buf, sizeof buf, VF_LONG_US)) > 0) {
        VF_CO_CHECK(st_write(conn, buf, (size_t)n, VF_LONG_US) == n);
    }
    VF_CO_CHECK(n == 0);
    VF_CO_CHECK(st_netfd_close(conn) == 0);
    return NULL;
}

static void *accept_clients(void *arg)
{
    st_netfd_t listener = arg;
    st_thread_t handlers[CLIENTS];
    for (int i = 0; i < CLIENTS; i++) {
        struct sockaddr_in from;
        int fromlen = (int)sizeof from;
        st_netfd_t conn = st_accept(listener, (struct sockaddr *)&from, &fromlen, VF_LONG_US);
        VF_CO_CHECK(conn != NULL);
        VF_CO_CHECK(fromlen == (int)sizeof from && from.sin_family == AF_INET);
        VF_CO_CHECK(from.sin_addr.s_addr == htonl(INADDR_LOOPBACK));
        handlers[i] = vf_spawn(echo_connection, conn);
        VF_CO_CHECK(handlers[i] != NULL);
    }
    for (int i = 0; i < CLIENTS; i++) {
        VF_CO_CHECK(vf_join_ok(handlers[i]) == 0);
    }
    return NULL;
}

static st_netfd_t tcp_connect(unsigned short port, st_utime_t timeout)
{
    struct sockaddr_in addr;
    st_netfd_t nfd = NULL;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) {
        return NULL;
    }
    nfd = st_netfd_open_socket(fd);
    if (nfd == NULL) {
        (void)close(fd);
        return NULL;
    }
    vf_loopback_addr(&addr, port);
    if (st_connect(nfd, (struct sockaddr *)&addr, (int)sizeof addr, timeout) != 0) {
        int err = errno;
        (void)st_netfd_close(nfd);
        errno = err;
        return NULL;
    }
    return nfd;
}

struct client {
    unsigned short port;
    unsigned seed;
};

static void *echo_client(void *arg)
{
    static char out[CLIENTS][MSG_LEN];
    static char in[CLIENTS][MSG_LEN];
    struct client *c = arg;
    st_netfd_t nfd = tcp_connect(c->port, VF_LONG_US);
    VF_CO_CHECK(nfd != NULL);
    vf_fill(out[c->seed], MSG_LEN, c->seed);
    VF_CO_CHECK(st_write(nfd, out[c->seed], MSG_LEN, VF_LONG_US) == MSG_LEN);
    VF_CO_CHECK(st_read_fully(nfd, in[c->seed], MSG_LEN, VF_LONG_US) == MSG_LEN);
    VF_CO_CHECK(vf_matches(in[c->seed], MSG_LEN, c->seed));
    VF_CO_CHECK(st_netfd_close(nfd) == 0);
    return NULL;
}

static int check_tcp_echo(void)
{
    unsigned short port = 0;
    st_netfd_t listener = vf_loopback_socket(SOCK_STREAM, &port);
    struct client clients[CLIENTS];
    st_thread_t threads[CLIENTS] = {NULL};
    st_thread_t server = NULL;

    VF_CHECK(listener != NULL);
    errno = 0;
    VF_CHECK(st_accept(listener, NULL, NULL, VF_SHORT_US) == NULL && errno == ETIME);
    server = vf_spawn(accept_clients, listener);
    VF_CHECK(server != NULL);
    for (int i = 0; i < CLIENTS; i++) {
        clients[i] = (struct client){port, (unsigned)i};
        threads[i] = vf_spawn(echo_client, &clients[i]);
        VF_CHECK(threads[i] != NULL);
    }
    for (int i = 0; i < CLIENTS; i++) {
        VF_CHECK(vf_join_ok(threads[i]) == 0);
    }
    VF_CHECK(vf_join_ok(server) == 0);
    VF_CHECK(st_netfd_close(listener) == 0);
    return 0;
}

/* A TCP socket bound to a loopback port but not listening: connects are refused. */
static int bound_not_listening(unsigned short *port)
{
    struct sockaddr_in addr;
    socklen_t len = sizeof addr;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) {
        return -1;
    }
    vf_loopback_addr(&addr, 0);
    if (bind(fd, (struct sockaddr *)&addr, sizeof addr) != 0 ||
        getsockname(fd, (struct sockaddr *)&addr, &len) != 0) {
        (void)close(fd);
        return -1;
    }
    *port = ntohs(addr.sin_port);
    return fd;
}

/*
 * The error a non-blocking connect() to `port` ends with, as the kernel
 * reports it through SO_ERROR, which is how st_connect() learns it. That is
 * ECONNREFUSED, except under qemu-user for CPUs whose errno numbers differ
 * from the host's (mips): qemu passes SO_ERROR values through untranslated.
 */
static int so_error_of_refused_connect(unsigned short port)
{
    struct sockaddr_in addr;
    struct pollfd pd = {.fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0), .events = POLLOUT};
    int err = 0;
    socklen_t len = sizeof err;
    if (pd.fd < 0) {
        return -1;
    }
    vf_loopback_addr(&addr, port);
    if (connect(pd.fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
        err = errno;
        if (err == EINPROGRESS && poll(&pd, 1, 5000) == 1 &&
            getsockopt(pd.fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) {
            err = -1;
        }
    }
    (void)close(pd.fd);
    return err;
}

/* A silent peer: the read times out; a closed port: connect is refused. */
static int check_tcp_timeouts(void)
{
    unsigned short port = 0;
    unsigned short dead_port = 0;
    st_netfd_t listener = vf_loopback_socket(SOCK_STREAM, &port);
    int dead_fd = bound_not_listening(&dead_port);
    st_netfd_t client = NULL;
    st_netfd_t server_side = NULL;
    char c = 0;

    VF_CHECK(listener != NULL && dead_fd >= 0);
    client = tcp_connect(port, VF_LONG_US);
    VF_CHECK(client != NULL);
    server_side = st_accept(listener, NULL, NULL, VF_LONG_US);
    VF_CHECK(server_side != NULL);
    errno = 0;
    VF_CHECK(st_read(client, &c, 1, VF_SHORT_US) == -1 && errno == ETIME);
    VF_CHECK(st_write(server_side, "z", 1, VF_LONG_US) == 1);
    VF_CHECK(st_read(client, &c, 1, VF_LONG_US) == 1 && c == 'z');
    int refused = so_error_of_refused_connect(dead_port);
    VF_CHECK(refused > 0);
    errno = 0;
    VF_CHECK(tcp_connect(dead_port, VF_LONG_US) == NULL &&
             (errno == ECONNREFUSED || errno == refused));
    VF_CHECK(close(dead_fd) == 0);
    VF_CHECK(st_netfd_close(server_side) == 0);
    VF_CHECK(st_netfd_close(client) == 0);
    VF_CHECK(st_netfd_close(listener) == 0);
    return 0;
}

/* ---- UDP --------------------------------------------------------------------------------- */

struct udp_peer {
    st_netfd_t fd;
    unsigned short expect_from;
};

static void *udp_responder(void *arg)
{
    struct udp_peer *peer = arg;
    char buf[16] = {0};
    struct sockaddr_in from;
    int fromlen = (int)sizeof from;
    int n = st_recvfrom(peer->fd, buf, (int)sizeof buf - 1, (struct sockaddr *)&from, &fromlen,
                        VF_LONG_US);
    VF_CO_CHECK(n == 4 && strcmp(buf, "ping") == 0);
    VF_CO_CHECK(ntohs(from.sin_port) == peer->expect_from);
    VF_CO_CHECK(st_sendto(peer->fd, "pong", 4, (struct sockaddr *)&from, fromlen, VF_LONG_US) == 4);
    return NULL;
}

static int check_udp(void)
{
    unsigned short pa = 0;
    unsigned short pb = 0;
    st_netfd_t a = vf_loopback_socket(SOCK_DGRAM, &pa);
    st_netfd_t b = vf_loopback_socket(SOCK_DGRAM, &pb);
    struct udp_peer peer = {b, 0};
    struct sockaddr_in to;
    char buf[16] = {0};
    st_thread_t responder = NULL;

    VF_CHECK(a != NULL && b != NULL);
    peer.expect_from = pa;
    errno = 0;
    VF_CHECK(st_recvfrom(b, buf, (int)sizeof buf, NULL, NULL, VF_SHORT_US) == -1 && errno == ETIME);
    responder = vf_spawn(udp_responder, &peer);
    VF_CHECK(responder != NULL);
    vf_settle(); /* the responder now waits in st_recvfrom */
    vf_loopback_addr(&to, pb);
    VF_CHECK(st_sendto(a, "ping", 4, (struct sockaddr *)&to, (int)sizeof to, VF_LONG_US) == 4);
    VF_CHECK(st_recvfrom(a, buf, (int)sizeof buf - 1, NULL, NULL, VF_LONG_US) == 4);
    VF_CHECK(strcmp(buf, "pong") == 0);
    VF_CHECK(vf_join_ok(responder) == 0);
    VF_CHECK(st_netfd_close(a) == 0 && st_netfd_close(b) == 0);
    return 0;
}

/* ---- st_poll ------------------------------------------------------------------------------- */

static int check_poll_basic(void)
{
    st_netfd_t p[2];
    st_netfd_t q[2];
    struct pollfd pds[2];
    st_utime_t start = 0;

    VF_CHECK(vf_socketpair(p) == 0 && vf_socketpair(q) == 0);
    pds[0] = (struct pollfd){st_netfd_fileno(p[1]), POLLIN, 0};
    pds[1] = (struct pollfd){st_netfd_fileno(q[1]), POLLIN, 0};
    start = st_utime_last_clock();
    VF_CHECK(st_poll(pds, 2, VF_SHORT_US) == 0);
    VF_CHECK(vf_elapsed(start) >= VF_SHORT_US);
    VF_CHECK(st_write(q[0], "q", 1, VF_LONG_US) == 1);
    VF_CHECK(st_poll(pds, 2, VF_LONG_US) == 1);
    VF_CHECK(pds[0].revents == 0 && (pds[1].revents & POLLIN) != 0);
    pds[0] = (struct pollfd){st_netfd_fileno(p[0]), POLLOUT, 0};
    VF_CHECK(st_poll(pds, 1, VF_LONG_US) == 1 && (pds[0].revents & POLLOUT) != 0);
    errno = 0;
    VF_CHECK(st_netfd_poll(p[1], POLLIN, VF_SHORT_US) == -1 && errno == ETIME);
    VF_CHECK(st_netfd_poll(q[1], POLLIN, VF_LONG_US) == 0);
    start = st_utime_last_clock();
    VF_CHECK(st_poll(NULL, 0, 10 * MS) == 0); /* a plain sleep */
    VF_CHECK(vf_elapsed(start) >= 10 * MS);
    vf_close_pair(p);
    vf_close_pair(q);
    return 0;
}

struct poller {
    int fd;
    short revents;
};

static void *poll_one(void *arg)
{
    struct poller *p = arg;
    struct pollfd pd = {p->fd, POLLIN, 0};
    VF_CO_CHECK(st_poll(&pd, 1, VF_LONG_US) == 1);
    p->revents = pd.revents;
    return NULL;
}

/* Two coroutines wait on the same fd; one write wakes both; hang-up wakes too. */
static int check_poll_shared_fd(void)
{
    st_netfd_t p[2];
    struct poller pollers[2];
    st_thread_t threads[2];
    char c = 0;

    VF_CHECK(vf_socketpair(p) == 0);
    for (int i = 0; i < 2; i++) {
        pollers[i] = (struct poller){st_netfd_fileno(p[1]), 0};
        threads[i] = vf_spawn(poll_one, &pollers[i]);
        VF_CHECK(threads[i] != NULL);
    }
    vf_settle();
    VF_CHECK(st_write(p[0], "x", 1, VF_LONG_US) == 1);
    for (int i = 0; i < 2; i++) {
        VF_CHECK(vf_join_ok(threads[i]) == 0);
        VF_CHECK((pollers[i].revents & POLLIN) != 0);
    }
    VF_CHECK(st_read(p[1], &c, 1, VF_LONG_US) == 1);
    errno = 0; /* the registrations are gone: nothing is ready now */
    VF_CHECK(st_netfd_poll(p[1], POLLIN, VF_SHORT_US) == -1 && errno == ETIME);
    threads[0] = vf_spawn(poll_one, &pollers[0]);
    VF_CHECK(threads[0] != NULL);
    vf_settle();
    VF_CHECK(st_netfd_close(p[0]) == 0);
    p[0] = NULL;
    VF_CHECK(vf_join_ok(threads[0]) == 0);
    VF_CHECK((pollers[0].revents & (POLLIN | POLLHUP)) != 0);
    vf_close_pair(p);
    return 0;
}

/* Batched datagrams: a receiver waits in st_recvmmsg, a batch sent at once arrives. */
enum { BATCH = 8, DGRAM = 16 };

struct mmsg_receiver {
    st_netfd_t fd;
    int received;
    int ok;
};

static void *mmsg_receive(void *arg)
{
    struct mmsg_receiver *r = arg;
    char bufs[BATCH][DGRAM];
    struct iovec iov[BATCH];
    struct mmsghdr msgs[BATCH];
    memset(msgs, 0, sizeof msgs);
    for (int i = 0; i < BATCH; i++) {
        iov[i].iov_base = bufs[i];
        iov[i].iov_len = DGRAM;
        msgs[i].msg_hdr.msg_iov = &iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
    }
    r->ok = 1;
    while (r->received < BATCH) {
        int n = st_recvmmsg(r->fd, msgs, BATCH, 0, VF_LONG_US);
        VF_CO_CHECK(n > 0);
        for (int i = 0; i < n; i++) {
            int seq = r->received + i;
            if (msgs[i].msg_len != DGRAM || !vf_matches(bufs[i], DGRAM, (unsigned)seq)) {
                r->ok = 0;
            }
        }
        r->received += n;
    }
    return NULL;
}

static int check_udp_batch(void)
{
    unsigned short port = 0;
    unsigned short unused = 0;
    struct mmsg_receiver r = {.fd = vf_loopback_socket(SOCK_DGRAM, &port), .received = 0};
    st_netfd_t sender = vf_loopback_socket(SOCK_DGRAM, &unused);
    VF_CHECK(r.fd != NULL && sender != NULL);
    errno = 0;
    char spare[DGRAM];
    struct iovec spare_iov = {.iov_base = spare, .iov_len = sizeof spare};
    struct mmsghdr none;
    memset(&none, 0, sizeof none);
    none.msg_hdr.msg_iov = &spare_iov;
    none.msg_hdr.msg_iovlen = 1;
    VF_CHECK(st_recvmmsg(r.fd, &none, 1, 0, VF_SHORT_US) == -1 && errno == ETIME);
    st_thread_t receiver = vf_spawn(mmsg_receive, &r);
    VF_CHECK(receiver != NULL);
    st_thread_yield(); /* the receiver is now waiting */

    struct sockaddr_in to;
    vf_loopback_addr(&to, port);
    char bufs[BATCH][DGRAM];
    struct iovec iov[BATCH];
    struct mmsghdr msgs[BATCH];
    memset(msgs, 0, sizeof msgs);
    for (int i = 0; i < BATCH; i++) {
        vf_fill(bufs[i], DGRAM, (unsigned)i);
        iov[i].iov_base = bufs[i];
        iov[i].iov_len = DGRAM;
        msgs[i].msg_hdr.msg_name = &to;
        msgs[i].msg_hdr.msg_namelen = sizeof to;
        msgs[i].msg_hdr.msg_iov = &iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
    }
    VF_CHECK(st_sendmmsg(sender, msgs, BATCH, 0, VF_LONG_US) == BATCH);
    VF_CHECK(vf_join_ok(receiver) == 0);
    VF_CHECK(r.received == BATCH && r.ok);
    VF_CHECK(st_netfd_close(sender) == 0 && st_netfd_close(r.fd) == 0);
    return 0;
}

const struct vf_check vf_checks_net[] = {
    {"udp_batch", check_udp_batch, VF_AFTER_INIT},
    {"tcp_echo", check_tcp_echo, VF_AFTER_INIT},
    {"tcp_timeouts", check_tcp_timeouts, VF_AFTER_INIT},
    {"udp", check_udp, VF_AFTER_INIT},
    {"poll_basic", check_poll_basic, VF_AFTER_INIT},
    {"poll_shared_fd", check_poll_shared_fd, VF_AFTER_INIT},
    {NULL, NULL, VF_AFTER_INIT},
};
