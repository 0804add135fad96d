/*
 * Loopback TCP echo with 64-byte messages.
 *
 * Two servers, both single-threaded: the st server (epoll backend, one
 * coroutine per connection, st_read/st_write) and a plain level-triggered
 * epoll loop (read, write, back to epoll_wait). A third, the same loop
 * reading until read() says EAGAIN (as many epoll servers do), makes the
 * system calls the st server makes, since every st_read tries read()
 * first: st against it shows what st costs besides that read. The load client is plain
 * epoll too: every connection has exactly one request in flight (send 64
 * bytes, wait for all 64 back, check them, send again).
 *
 * Servers from outside this program (libuv, Go, a liburing loop: peer.c)
 * are run the same way and compared with the same plain epoll loop.
 *
 * The driver (bench_echo) forks the server into its own process, pins the
 * two processes to different CPUs when there are two, opens the connections
 * (one blocking round trip each, so every one has been accepted), runs a
 * warm-up, then several measurement windows: requests per second and the
 * server's CPU time per request (from /proc/<pid>/schedstat, all threads). It alternates
 * the two servers over several rounds, so that a disturbance on a noisy
 * machine hits both alike, and reports medians over all windows.
 */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "st.h"

enum {
    MSG = 64,
    SERVER_BUF = 4096,
    EVENTS = 1024,
    MAX_WINDOWS = 64,
    FD_HEADROOM = 32,
};

static bool serve_once; /* exit when the first connection ends (callgrind runs) */

/* ---- the st server ------------------------------------------------------------------ */

static void *st_connection(void *arg)
{
    st_netfd_t fd = arg;
    char buf[SERVER_BUF];
    ssize_t n = 0;
    while ((n = st_read(fd, buf, sizeof buf, ST_UTIME_NO_TIMEOUT)) > 0) {
        if (st_write(fd, buf, (size_t)n, ST_UTIME_NO_TIMEOUT) != n) {
            break;
        }
    }
    (void)st_netfd_close(fd);
    if (serve_once) {
        exit(0);
    }
    return NULL;
}

int bench_st_serve(int lfd, int eventsys, void *(*connection)(void *fd), bool nodelay,
                   int ready_fd)
{
    if (st_set_eventsys(eventsys) != 0) {
        perror("bench: st_set_eventsys");
        return -1;
    }
    if (st_init() != 0) {
        perror("bench: st_init");
        return -1;
    }
    st_netfd_t listener = st_netfd_open_socket(lfd);
    if (listener == NULL) {
        perror("bench: st_netfd_open_socket");
        return -1;
    }
    if (ready_fd >= 0) {
        bench_say_ready(ready_fd);
    }
    for (;;) {
        st_netfd_t fd = st_accept(listener, NULL, NULL, ST_UTIME_NO_TIMEOUT);
        if (fd == NULL) {
            perror("bench: st_accept");
            (void)st_usleep(10000);
            continue;
        }
        if (nodelay) {
            bench_set_nodelay(st_netfd_fileno(fd));
        }
        if (st_thread_create(connection, fd, 0, 0) == NULL) {
            perror("bench: st_thread_create");
            (void)st_netfd_close(fd);
        }
    }
}

static int st_server(int lfd, int eventsys)
{
    return bench_st_serve(lfd, eventsys, st_connection, true, -1);
}

/* ---- the plain epoll server --------------------------------------------------------------- */

/* Write all of buf; a full socket buffer (never in this closed loop) waits in poll(). */
static int write_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n > 0) {
            buf += n;
            len -= (size_t)n;
        } else if (n < 0 && errno == EAGAIN) {
            struct pollfd pfd = {.fd = fd, .events = POLLOUT};
            (void)poll(&pfd, 1, -1);
        } else if (n < 0 && errno != EINTR) {
            return -1;
        }
    }
    return 0;
}

static void epoll_accept(int epfd, int lfd)
{
    for (;;) {
        int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno != EAGAIN && errno != EINTR) {
                perror("bench: accept4");
            }
            return;
        }
        struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
        bench_set_nodelay(fd);
        if (epoll_ctl(epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
            perror("bench: epoll_ctl");
            (void)close(fd);
        }
    }
}

/* One read and its echo; with `drain`, again until read() says EAGAIN. */
static void epoll_echo(int fd, char *buf, bool drain)
{
    for (;;) {
        ssize_t n = read(fd, buf, SERVER_BUF);
        if (n > 0 && write_all(fd, buf, (size_t)n) == 0) {
            if (drain) {
                continue;
            }
            return;
        }
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0 && errno == EAGAIN) {
            return;
        }
        (void)close(fd); /* also leaves the epoll set */
        if (serve_once) {
            exit(0);
        }
        return;
    }
}

static int epoll_server(int lfd, bool drain)
{
    static struct epoll_event events[EVENTS];
    static char buf[SERVER_BUF];
    int epfd = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = lfd};
    if (epfd < 0 || bench_set_nonblocking(lfd) != 0 || epoll_ctl(epfd, EPOLL_CTL_ADD, lfd, &ev) != 0) {
        perror("bench: epoll server");
        return -1;
    }
    for (;;) {
        int n = epoll_wait(epfd, events, EVENTS, -1);
        if (n < 0 && errno != EINTR) {
            perror("bench: epoll_wait");
            return -1;
        }
        for (int i = 0; i < n; i++) {
            if (events[i].data.fd == lfd) {
                epoll_accept(epfd, lfd);
            } else {
                epoll_echo(events[i].data.fd, buf, drain);
            }
        }
    }
}

static int run_server(const char *server, int lfd)
{
    (void)bench_raise_fd_limit();
    if (strcmp(server, "st") == 0) {
        return st_server(lfd, ST_EVENTSYS_ALT);
    }
    if (strcmp(server, "st-io_uring") == 0) {
        return st_server(lfd, ST_EVENTSYS_IO_URING);
    }
    if (strcmp(server, "epoll") == 0 || strcmp(server, "epoll-drain") == 0) {
        return epoll_server(lfd, strcmp(server, "epoll-drain") == 0);
    }
    if (bench_peer_find(server) != NULL) {
        return bench_peer_exec(server, lfd, -1, serve_once);
    }
    fprintf(stderr,
            "bench: unknown server '%s' (st, st-io_uring, epoll, epoll-drain or a --peer)\n",
            server);
    return -1;
}

int bench_serve(const char *server, long port, bool once)
{
    unsigned bound = 0;
    int lfd = bench_listen_loopback(port, SOMAXCONN, &bound);
    if (lfd < 0) {
        perror("bench: listen");
        return -1;
    }
    serve_once = once;
    printf("port %u\n", bound);
    (void)fflush(stdout);
    return run_server(server, lfd);
}

/* ---- the load client ------------------------------------------------------------------------ */

struct client {
    int epfd;
    long nconns;
    int *fds;
    unsigned *got;      /* bytes of the current echo received, per connection */
    long requests;      /* completed round trips */
    long issued;        /* requests sent */
    long budget;        /* stop sending after this many (0: no limit) */
    long gap_us;        /* pause before each request after the first */
    long errors;
    char message[MSG];
};

static void client_close(struct client *cl)
{
    for (long i = 0; cl->fds != NULL && i < cl->nconns; i++) {
        if (cl->fds[i] >= 0) {
            (void)close(cl->fds[i]);
        }
    }
    free(cl->fds);
    free(cl->got);
    if (cl->epfd >= 0) {
        (void)close(cl->epfd);
    }
}

static void conn_fail(struct client *cl, long i, const char *what)
{
    if (cl->errors++ < 3) {
        fprintf(stderr, "bench: client connection %ld: %s: %s\n", i, what,
                errno != 0 ? strerror(errno) : "closed");
    }
    (void)close(cl->fds[i]);
    cl->fds[i] = -1;
}

/* Connect, then one blocking round trip, so the server has accepted it. */
static int client_connect(struct client *cl, long i, const struct sockaddr_in *addr)
{
    char buf[MSG];
    size_t got = 0;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    cl->fds[i] = fd;
    if (fd < 0 || connect(fd, (const struct sockaddr *)addr, sizeof *addr) != 0) {
        return -1;
    }
    bench_set_nodelay(fd);
    if (send(fd, cl->message, MSG, MSG_NOSIGNAL) != MSG) {
        return -1;
    }
    while (got < MSG) {
        ssize_t n = recv(fd, buf, MSG - got, 0);
        if (n <= 0) {
            return -1;
        }
        got += (size_t)n;
    }
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = (uint64_t)i};
    return bench_set_nonblocking(fd) == 0 && epoll_ctl(cl->epfd, EPOLL_CTL_ADD, fd, &ev) == 0 ? 0 : -1;
}

static int client_open(struct client *cl, long port, long nconns)
{
    struct sockaddr_in addr;
    memset(cl, 0, sizeof *cl);
    cl->fds = malloc((size_t)nconns * sizeof *cl->fds);
    cl->got = calloc((size_t)nconns, sizeof *cl->got);
    if (cl->fds == NULL || cl->got == NULL) {
        cl->epfd = -1;
        return -1;
    }
    cl->nconns = nconns;
    for (long i = 0; i < nconns; i++) {
        cl->fds[i] = -1;
    }
    cl->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (cl->epfd < 0) {
        return -1;
    }
    for (int i = 0; i < MSG; i++) {
        cl->message[i] = (char)('a' + i % 26);
    }
    bench_loopback_addr(&addr, port);
    for (long i = 0; i < nconns; i++) {
        if (client_connect(cl, i, &addr) != 0) {
            fprintf(stderr, "bench: client connection %ld of %ld: %s\n", i, nconns,
                    strerror(errno));
            return -1;
        }
    }
    return 0;
}

static void client_send(struct client *cl, long i)
{
    if (cl->budget > 0 && cl->issued >= cl->budget) {
        return;
    }
    cl->got[i] = 0;
    cl->issued++;
    if (send(cl->fds[i], cl->message, MSG, MSG_NOSIGNAL) != MSG) {
        conn_fail(cl, i, "send");
    }
}

static void client_receive(struct client *cl, long i)
{
    char buf[MSG];
    unsigned got = cl->got[i];
    ssize_t n = recv(cl->fds[i], buf, MSG - got, 0);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
        return;
    }
    if (n <= 0) {
        errno = n == 0 ? 0 : errno;
        conn_fail(cl, i, "recv");
        return;
    }
    if (memcmp(buf, cl->message + got, (size_t)n) != 0) {
        errno = 0;
        conn_fail(cl, i, "echo mismatch");
        return;
    }
    cl->got[i] = got + (unsigned)n;
    if (cl->got[i] == MSG) {
        cl->requests++;
        if (cl->gap_us > 0) {
            (void)usleep((useconds_t)cl->gap_us);
        }
        client_send(cl, i);
    }
}

/* One epoll_wait and the work it reports. */
static int client_step(struct client *cl, int timeout_ms)
{
    struct epoll_event events[EVENTS];
    int n = epoll_wait(cl->epfd, events, EVENTS, timeout_ms);
    if (n < 0 && errno != EINTR) {
        perror("bench: client epoll_wait");
        return -1;
    }
    for (int i = 0; i < n; i++) {
        long c = (long)events[i].data.u64;
        if (cl->fds[c] >= 0) {
            client_receive(cl, c);
        }
    }
    return cl->errors == 0 ? 0 : -1;
}

static int client_run_until(struct client *cl, double until)
{
    while (bench_now() < until) {
        if (client_step(cl, 10) != 0) {
            return -1;
        }
    }
    return 0;
}

int bench_client(long port, long conns, long requests, long gap_us)
{
    struct client cl;
    int rc = -1;
    (void)bench_raise_fd_limit();
    if (client_open(&cl, port, conns) == 0) {
        cl.budget = requests;
        cl.gap_us = gap_us;
        for (long i = 0; i < conns; i++) {
            client_send(&cl, i);
        }
        rc = 0;
        while (rc == 0 && cl.requests < requests) {
            rc = client_step(&cl, 1000);
        }
    }
    printf("requests=%ld errors=%ld\n", cl.requests, cl.errors);
    client_close(&cl);
    return rc;
}

/* ---- the driver ---------------------------------------------------------------------------- */

struct window {
    double rps;
    double server_ns;    /* server CPU per request */
    double server_util;  /* server CPU / wall time */
    double client_util;
    double other_util;   /* CPU the rest of the machine used / wall time */
};

static int measure_windows(struct client *cl, pid_t server, const struct echo_params *p,
                           struct window *w)
{
    for (int k = 0; k < p->windows; k++) {
        long r0 = cl->requests;
        long long s0 = bench_cpu_ns(server);
        long long c0 = bench_cpu_ns(getpid());
        long long m0 = bench_machine_busy_ns();
        double t0 = bench_now();
        if (client_run_until(cl, t0 + p->window_s) != 0) {
            return -1;
        }
        double t = bench_now() - t0;
        double done = (double)(cl->requests - r0);
        double server_ns = (double)(bench_cpu_ns(server) - s0);
        double client_ns = (double)(bench_cpu_ns(getpid()) - c0);
        double machine_ns = (double)(bench_machine_busy_ns() - m0);
        w[k].rps = done / t;
        w[k].server_ns = done > 0 ? server_ns / done : 0.0;
        w[k].server_util = server_ns / (t * 1e9);
        w[k].client_util = client_ns / (t * 1e9);
        w[k].other_util = (machine_ns - server_ns - client_ns) / (t * 1e9);
        if (w[k].other_util < 0) {
            w[k].other_util = 0; /* /proc/stat counts in clock ticks */
        }
    }
    return 0;
}

/* The CPUs the two processes are pinned to (-1, -1 with a single CPU). */
struct echo_cpus {
    int server;
    int client;
};

/* One round with one server: its windows in w[0..p->windows). */
static int echo_round(const struct echo_params *p, const char *name, struct echo_cpus cpus,
                      struct window *w)
{
    struct client cl;
    unsigned port = 0;
    int rc = -1;
    int lfd = bench_listen_loopback(0, SOMAXCONN, &port);
    if (lfd < 0) {
        perror("bench: listen");
        return -1;
    }
    pid_t server = bench_fork();
    if (server < 0) {
        (void)close(lfd);
        return -1;
    }
    if (server == 0) {
        bench_pin(cpus.server);
        _exit(run_server(name, lfd) == 0 ? 0 : 1);
    }
    (void)close(lfd);
    bench_pin(cpus.client);

    if (client_open(&cl, port, p->conns) == 0) {
        for (long i = 0; i < p->conns; i++) {
            client_send(&cl, i);
        }
        if (client_run_until(&cl, bench_now() + p->warmup_s) == 0 &&
            measure_windows(&cl, server, p, w) == 0) {
            rc = 0;
        }
    }
    /* The server closes first, so the TIME_WAIT entries are on its fresh port. */
    bench_stop_child(server);
    client_close(&cl);
    if (rc != 0) {
        fprintf(stderr, "bench: echo %s with %ld connections failed\n", name, p->conns);
    }
    return rc;
}

static double median_of(const struct window *w, int n, size_t offset)
{
    return bench_median_field(w, sizeof *w, n, offset);
}

/*
 * The windows in which the rest of the machine used under 25% of a CPU (if
 * at least three), else all of them: a noisy neighbour shows in the note.
 */
static int quiet_windows(const struct window *w, int n, struct window *out)
{
    int kept = 0;
    for (int k = 0; k < n; k++) {
        if (w[k].other_util < 0.25) {
            out[kept++] = w[k];
        }
    }
    if (kept >= 3) {
        return kept;
    }
    memcpy(out, w, (size_t)n * sizeof *w);
    return n;
}

static void report_echo(const struct echo_params *p, const char *name, const struct window *measured,
                        int all, bool pinned)
{
    char key[64];
    char base[64];
    bool st = strcmp(name, "epoll") != 0; /* compared with the plain loop */
    struct window w[MAX_WINDOWS];
    int n = quiet_windows(measured, all, w);
    (void)snprintf(key, sizeof key, "echo_%s_%ld", name, p->conns);
    (void)snprintf(base, sizeof base, "echo_epoll_%ld", p->conns);
    bench_result(key, median_of(w, n, offsetof(struct window, rps)), "req/s", st ? base : "-",
                 "echo %s, %ld connection%s", name, p->conns, p->conns == 1 ? "" : "s");
    (void)snprintf(key, sizeof key, "echo_%s_%ld_cpu", name, p->conns);
    (void)snprintf(base, sizeof base, "echo_epoll_%ld_cpu", p->conns);
    bench_result(key, median_of(w, n, offsetof(struct window, server_ns)), "ns",
                 st ? base : "-", "  server CPU per request");
    bench_note("echo %s %ld: server CPU %.0f%%, client CPU %.0f%%, everything else %.0f%% of a "
               "CPU (medians of %d of %d windows of %.2f s in %d rounds%s)%s",
               name, p->conns, 100 * median_of(w, n, offsetof(struct window, server_util)),
               100 * median_of(w, n, offsetof(struct window, client_util)),
               100 * median_of(w, n, offsetof(struct window, other_util)), n, all, p->window_s,
               p->rounds, n < all ? "; the others were disturbed" : "",
               pinned ? "" : "; one CPU: not pinned");
}

/* st against the loop that reads until EAGAIN, when both ran: rate and server CPU. */
static void report_st_vs_drain(const struct echo_params *p, const struct window *st, int nst,
                               const struct window *drain, int ndrain)
{
    struct window a[MAX_WINDOWS];
    struct window b[MAX_WINDOWS];
    int na = quiet_windows(st, nst, a);
    int nb = quiet_windows(drain, ndrain, b);
    char key[64];
    (void)snprintf(key, sizeof key, "echo_st_vs_drain_%ld", p->conns);
    bench_result(key,
                 median_of(a, na, offsetof(struct window, rps)) /
                     median_of(b, nb, offsetof(struct window, rps)),
                 "x", "-", "  st / epoll-drain, requests/s");
    (void)snprintf(key, sizeof key, "echo_st_vs_drain_%ld_cpu", p->conns);
    bench_result(key,
                 median_of(a, na, offsetof(struct window, server_ns)) /
                     median_of(b, nb, offsetof(struct window, server_ns)),
                 "x", "-", "  st / epoll-drain, server CPU per request");
}

/* st-io_uring is measured when asked for by name ("both" leaves it out): it is an extension. */
const char *const bench_echo_servers[] = {"epoll", "st", "st-io_uring", "epoll-drain", NULL};

int bench_echo(const struct echo_params *p)
{
    enum {
        BUILTIN = sizeof bench_echo_servers / sizeof bench_echo_servers[0] - 1,
        ST = 1,    /* bench_echo_servers[ST], compared with [DRAIN] */
        DRAIN = 3,
        MAX_SERVERS = BUILTIN + BENCH_MAX_PEERS,
    };
    const char *names[MAX_SERVERS];
    size_t servers = bench_server_list(bench_echo_servers, names);
    struct window w[MAX_SERVERS][MAX_WINDOWS];
    int n[MAX_SERVERS] = {0};
    long limit = bench_raise_fd_limit();
    struct echo_cpus cpus = {bench_cpu(0), bench_cpu(1)};
    if (cpus.client < 0) {
        cpus.server = -1;
    }

    if (p->windows < 1 || p->rounds < 1 || p->windows * p->rounds > MAX_WINDOWS ||
        p->conns < 1 || p->conns + FD_HEADROOM > limit) {
        fprintf(stderr, "bench: echo: %d windows x %d rounds (at most %d), %ld connections "
                        "(fd limit %ld)\n",
                p->windows, p->rounds, MAX_WINDOWS, p->conns, limit);
        return -1;
    }
    for (int r = 0; r < p->rounds; r++) {
        for (size_t s = 0; s < servers; s++) {
            if (!bench_server_wanted(p->servers, names[s])) {
                continue;
            }
            if (echo_round(p, names[s], cpus, &w[s][n[s]]) != 0) {
                return -1;
            }
            n[s] += p->windows;
        }
    }
    for (size_t s = 0; s < servers; s++) {
        if (n[s] > 0) {
            report_echo(p, names[s], w[s], n[s], cpus.client >= 0);
        }
    }
    if (n[ST] > 0 && n[DRAIN] > 0) {
        report_st_vs_drain(p, w[ST], n[ST], w[DRAIN], n[DRAIN]);
    }
    return 0;
}
