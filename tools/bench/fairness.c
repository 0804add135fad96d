/*
 * Fairness under CPU starvation: how long new connections wait for their
 * first byte from a server that is busy streaming to the connections it
 * already serves, while the server gets a small fixed share of its CPU
 * (starve.c: a cgroup CPU quota, or busy processes on its CPU).
 *
 * The load has the shape of the players of a live-streaming media server
 * (HTTP-FLV): `conns` connections are opened at once; each sends a small
 * HTTP GET; the server reads it and from then on streams 4 KiB chunks to
 * that player, the first at once and then one every 10-40 ms (a sleep or a
 * timer between chunks, the pause drawn from a fixed-seed PRNG), until the
 * run ends. The players served first keep the server busy with timers and
 * writes while the later ones still sit in the accept queue or wait for
 * their request to be read.
 *
 * Servers, each single-threaded, in a process of its own:
 *
 *   st         a listener coroutine looping st_accept + st_thread_create,
 *              as a media server's listener does; one coroutine per
 *              player: st_read the request, then st_write a chunk and
 *              st_usleep, over and over; epoll backend (st-poll and
 *              st-select: the other backends);
 *   epoll      the reference: a level-triggered epoll loop and a binary
 *              heap of deadlines. Each epoll_wait waits until the earliest
 *              deadline; then the loop handles the ready descriptors in the
 *              order epoll lists them (accepting until EAGAIN, reading
 *              requests, finishing partial writes), then every expired
 *              deadline (a chunk each);
 *   epoll-timers  the same loop handling the expired deadlines first, then
 *              the ready descriptors: the order of State Threads and st,
 *              which run the coroutines whose deadline passed before those
 *              that I/O woke;
 *   epoll-st   the same loop run as State Threads runs a listener and its
 *              coroutines: expired deadlines first, then the ready
 *              descriptors, and the connections the listener accepted are
 *              served (their request read if it is there, and the first
 *              chunk written) before the loop waits again, as the new
 *              coroutines run before the scheduler next polls;
 *   epoll-page the reference loop writing into one fresh page for every
 *              connection it accepts, the pages as far apart as st's
 *              default stacks: the least a new coroutine's stack costs (its
 *              top page, where the coroutine starts), and nothing else;
 *   a peer     (--peer NAME=PATH, tools/bench/peers/README.md): a player
 *              server from outside this program, run in the same starved
 *              process; peers/st_players.c is the st server's code in
 *              State Threads' API alone, to build against State Threads.
 *
 * The client runs in the driver's process, pinned to another CPU and never
 * starved: plain epoll, every connect() started at once without blocking,
 * the request sent when the connection completes, everything the server
 * sends read and dropped. A connection's latency is the time from the start
 * of its connect() to the first byte of the response. A run ends when every
 * connection has had its first byte, or after `limit` seconds.
 *
 * The server has been up and idle for `pause` seconds (half a second by
 * default) when the burst starts, as a restarted server whose players
 * come back after their reconnect delay; `--pause 0` sends the burst the
 * moment the server listens.
 *
 * With `warm`, one burst of as many connections runs to completion first and
 * is closed, and the measured burst follows half a second later: the server
 * has seen as many players before (st's stacks are cached) instead of
 * starting cold.
 *
 * The listen backlog is `backlog` (512 by default, as nginx and SRS use).
 * A connection that finds the accept queue full has its SYN dropped, and
 * TCP tries again after 1 s, then 2 s, then 4 s: how promptly the server
 * drains its accept queue shows in those steps.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "players_st.h"
#include "st_config.h"

enum {
    EVENTS = 1024,
    CLIENT_BUF = 65536,
    MAX_ROUNDS = 32,
    READY_WAIT_MS = 10000,
    WARM_SETTLE_US = 500000, /* for the server to see the warm-up players gone */
};

static const char request_text[] = "GET /live/livestream.flv HTTP/1.1\r\n"
                                   "Host: 127.0.0.1\r\n"
                                   "User-Agent: st_bench\r\n"
                                   "\r\n";

static char chunk[PLAYERS_CHUNK]; /* what every chunk carries (zeros) */

/* ---- the st server ------------------------------------------------------------------ */

static int st_fair_server(int lfd, int eventsys, int ready_fd)
{
    return bench_st_serve(lfd, eventsys, players_st_coroutine, false, ready_fd);
}

/* ---- the reference: an epoll loop with a heap of deadlines ---------------------------------- */

struct ref_conn {
    long long due;           /* the next chunk's deadline, microseconds */
    unsigned long long seed; /* the pauses' PRNG */
    int heap_at;             /* index in the heap, or -1 */
    unsigned got;            /* request bytes read */
    unsigned sent;           /* bytes of the current chunk written */
    bool streaming;          /* the request is read */
    bool want_out;           /* registered for EPOLLOUT: a chunk is half written */
    char req[PLAYERS_REQUEST_MAX];
};

struct ref_server {
    int epfd;
    int lfd;
    long nfds;              /* entries of conns: the fd limit */
    struct ref_conn *conns; /* by descriptor */
    int *heap;              /* descriptors, a binary min-heap on their deadline */
    int heap_len;
    int *fresh;             /* epoll-st: descriptors accepted since the last wait */
    int fresh_len;
    char *pages;            /* epoll-page: page_stride apart, one per descriptor, or NULL */
    long npages;
    size_t page_stride;
    size_t page_size;
    long long now;          /* microseconds, read once after every wait */
};

/*
 * epoll-page's pages lie as far apart as st's default stacks with their
 * guard page, so that each is a fresh page in its own part of a page table,
 * as a new stack's top page is; at most PAGE_SLOTS of them (a descriptor
 * beyond reuses a page, which costs nothing more).
 */
#define PAGE_SLOTS 65536L

static int ref_map_pages(struct ref_server *s)
{
    s->page_size = (size_t)sysconf(_SC_PAGESIZE);
    s->page_stride = (size_t)ST__DEFAULT_STACK_SIZE + s->page_size;
    s->npages = s->nfds < PAGE_SLOTS ? s->nfds : PAGE_SLOTS;
    /* MAP_STACK: no transparent huge pages (Linux 6.7), as st's stacks. */
    void *p = mmap(NULL, (size_t)s->npages * s->page_stride, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    s->pages = p == MAP_FAILED ? NULL : p;
    return s->pages != NULL ? 0 : -1;
}

static long long now_us(void)
{
    return (long long)(bench_now() * 1e6);
}

static bool heap_before(const struct ref_server *s, int a, int b)
{
    return s->conns[s->heap[a]].due < s->conns[s->heap[b]].due;
}

static void heap_swap(struct ref_server *s, int a, int b)
{
    int fd = s->heap[a];
    s->heap[a] = s->heap[b];
    s->heap[b] = fd;
    s->conns[s->heap[a]].heap_at = a;
    s->conns[s->heap[b]].heap_at = b;
}

static void heap_sift(struct ref_server *s, int i)
{
    while (i > 0 && heap_before(s, i, (i - 1) / 2)) {
        heap_swap(s, i, (i - 1) / 2);
        i = (i - 1) / 2;
    }
    for (;;) {
        int least = i;
        int left = 2 * i + 1;
        if (left < s->heap_len && heap_before(s, left, least)) {
            least = left;
        }
        if (left + 1 < s->heap_len && heap_before(s, left + 1, least)) {
            least = left + 1;
        }
        if (least == i) {
            return;
        }
        heap_swap(s, i, least);
        i = least;
    }
}

static void heap_push(struct ref_server *s, int fd)
{
    s->heap[s->heap_len] = fd;
    s->conns[fd].heap_at = s->heap_len++;
    heap_sift(s, s->heap_len - 1);
}

static void heap_remove(struct ref_server *s, int fd)
{
    int at = s->conns[fd].heap_at;
    if (at < 0) {
        return;
    }
    s->conns[fd].heap_at = -1;
    if (at != --s->heap_len) {
        s->heap[at] = s->heap[s->heap_len];
        s->conns[s->heap[at]].heap_at = at;
        heap_sift(s, at);
    }
}

static void ref_close(struct ref_server *s, int fd)
{
    heap_remove(s, fd);
    (void)close(fd); /* also leaves the epoll set */
}

static void ref_watch(struct ref_server *s, int fd, bool out)
{
    struct epoll_event ev = {.events = EPOLLIN | (out ? EPOLLOUT : 0), .data.fd = fd};
    s->conns[fd].want_out = out;
    (void)epoll_ctl(s->epfd, EPOLL_CTL_MOD, fd, &ev);
}

/* Write (the rest of) a chunk; once it is all out, the next one is due after a pause. */
static void ref_send(struct ref_server *s, int fd)
{
    struct ref_conn *c = &s->conns[fd];
    ssize_t n = send(fd, chunk + c->sent, PLAYERS_CHUNK - c->sent, MSG_NOSIGNAL);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
        if (!c->want_out) {
            ref_watch(s, fd, true);
        }
        return;
    }
    if (n <= 0) {
        ref_close(s, fd);
        return;
    }
    c->sent += (unsigned)n;
    if (c->sent < PLAYERS_CHUNK) {
        if (!c->want_out) {
            ref_watch(s, fd, true);
        }
        return;
    }
    c->sent = 0;
    if (c->want_out) {
        ref_watch(s, fd, false);
    }
    c->due = s->now + players_next_gap_us(&c->seed);
    heap_push(s, fd);
}

static void ref_accept(struct ref_server *s)
{
    for (;;) {
        int fd = accept4(s->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno != EAGAIN && errno != EINTR) {
                perror("bench: accept4");
            }
            return;
        }
        struct epoll_event ev = {.events = EPOLLIN, .data.fd = fd};
        if (fd >= s->nfds || epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &ev) != 0) {
            (void)close(fd);
            continue;
        }
        if (s->fresh != NULL) {
            s->fresh[s->fresh_len++] = fd;
        }
        if (s->pages != NULL) {
            /* The top of the page, as a stack is first written at its top. */
            s->pages[(size_t)(fd % s->npages) * s->page_stride + s->page_size - 1] = 1;
        }
        struct ref_conn *c = &s->conns[fd];
        c->heap_at = -1;
        c->got = 0;
        c->sent = 0;
        c->streaming = false;
        c->want_out = false;
        c->seed = players_seed(fd);
    }
}

/* Input on a connection: its request, or (streaming) the end of the connection. */
static void ref_input(struct ref_server *s, int fd)
{
    struct ref_conn *c = &s->conns[fd];
    char drop[256];
    char *buf = c->streaming ? drop : c->req + c->got;
    size_t room = c->streaming ? sizeof drop : PLAYERS_REQUEST_MAX - c->got;
    ssize_t n = read(fd, buf, room);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
        return;
    }
    if (n <= 0) {
        ref_close(s, fd);
        return;
    }
    if (!c->streaming) {
        c->got += (unsigned)n;
        if (players_request_complete(c->req, c->got)) {
            c->streaming = true;
            ref_send(s, fd);
        }
    }
}

static void ref_event(struct ref_server *s, const struct epoll_event *ev)
{
    int fd = ev->data.fd;
    if (fd == s->lfd) {
        ref_accept(s);
    } else if ((ev->events & EPOLLOUT) != 0 && s->conns[fd].want_out) {
        ref_send(s, fd);
    } else if ((ev->events & (EPOLLIN | EPOLLERR | EPOLLHUP)) != 0) {
        ref_input(s, fd);
    }
}

/* Write a chunk to every player whose deadline has passed. */
static void ref_expire(struct ref_server *s)
{
    while (s->heap_len > 0 && s->conns[s->heap[0]].due <= s->now) {
        int fd = s->heap[0];
        heap_remove(s, fd);
        ref_send(s, fd);
    }
}

/* How the reference loop orders its work (see the top of the file). */
enum ref_order { REF_IO_FIRST, REF_TIMERS_FIRST, REF_AS_ST };

/* What ref_server allocated, for its way out on an error. */
static int ref_fail(struct ref_server *s, const char *what)
{
    perror(what);
    if (s->epfd >= 0) {
        (void)close(s->epfd);
    }
    free(s->conns);
    free(s->heap);
    free(s->fresh);
    if (s->pages != NULL) {
        (void)munmap(s->pages, (size_t)s->npages * s->page_stride);
    }
    return -1;
}

/* page_each: epoll-page's fresh page per connection. */
static int ref_server(int lfd, enum ref_order order, bool page_each, int ready_fd)
{
    static struct epoll_event events[EVENTS];
    struct ref_server s = {.lfd = lfd, .nfds = bench_raise_fd_limit()};
    if (order == REF_AS_ST) {
        s.fresh = calloc((size_t)s.nfds, sizeof *s.fresh);
    }
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = lfd};
    s.epfd = epoll_create1(EPOLL_CLOEXEC);
    s.conns = calloc((size_t)s.nfds, sizeof *s.conns);
    s.heap = calloc((size_t)s.nfds, sizeof *s.heap);
    if (s.epfd < 0 || s.conns == NULL || s.heap == NULL ||
        (order == REF_AS_ST && s.fresh == NULL) ||
        (page_each && ref_map_pages(&s) != 0) || bench_set_nonblocking(lfd) != 0 ||
        epoll_ctl(s.epfd, EPOLL_CTL_ADD, lfd, &ev) != 0) {
        return ref_fail(&s, "bench: epoll server");
    }
    bench_say_ready(ready_fd);
    s.now = now_us();
    for (;;) {
        int timeout = -1;
        if (s.heap_len > 0) {
            long long wait = s.conns[s.heap[0]].due - s.now;
            timeout = wait <= 0 ? 0 : (int)((wait + 999) / 1000);
        }
        int n = epoll_wait(s.epfd, events, EVENTS, timeout);
        if (n < 0 && errno != EINTR) {
            return ref_fail(&s, "bench: epoll_wait");
        }
        s.now = now_us();
        if (order != REF_IO_FIRST) {
            ref_expire(&s);
        }
        for (int i = 0; i < n; i++) {
            ref_event(&s, &events[i]);
        }
        for (int i = 0; i < s.fresh_len; i++) {
            ref_input(&s, s.fresh[i]); /* like st_read: try before waiting */
        }
        s.fresh_len = 0;
        if (order == REF_IO_FIRST) {
            ref_expire(&s);
        }
    }
}

static int run_fair_server(const char *name, int lfd, int ready_fd)
{
    (void)bench_raise_fd_limit();
    if (bench_peer_find(name) != NULL) {
        return bench_peer_exec(name, lfd, ready_fd, false);
    }
    if (strcmp(name, "st") == 0) {
        return st_fair_server(lfd, ST_EVENTSYS_ALT, ready_fd);
    }
    if (strcmp(name, "st-poll") == 0) {
        return st_fair_server(lfd, ST_EVENTSYS_POLL, ready_fd);
    }
    if (strcmp(name, "st-select") == 0) {
        return st_fair_server(lfd, ST_EVENTSYS_SELECT, ready_fd);
    }
    if (strcmp(name, "epoll") == 0) {
        return ref_server(lfd, REF_IO_FIRST, false, ready_fd);
    }
    if (strcmp(name, "epoll-timers") == 0) {
        return ref_server(lfd, REF_TIMERS_FIRST, false, ready_fd);
    }
    if (strcmp(name, "epoll-st") == 0) {
        return ref_server(lfd, REF_AS_ST, false, ready_fd);
    }
    if (strcmp(name, "epoll-page") == 0) {
        return ref_server(lfd, REF_IO_FIRST, true, ready_fd);
    }
    fprintf(stderr, "bench: unknown server '%s'\n", name);
    return -1;
}

/* ---- the client ---------------------------------------------------------------------------- */

enum player_state { CONNECTING, WAITING, SERVED, GONE };

struct player {
    double start; /* when its connect() started */
    double first; /* when its first byte came; 0: not yet */
    int fd;
    enum player_state state;
};

struct burst {
    int epfd;
    long n;
    struct player *players;
    long served;
    long failed;
};

static void player_fail(struct burst *b, long i, const char *what)
{
    if (b->failed++ < 3) {
        fprintf(stderr, "bench: player %ld: %s: %s\n", i, what, errno != 0 ? strerror(errno) : "closed");
    }
    (void)close(b->players[i].fd);
    b->players[i].fd = -1;
    b->players[i].state = GONE;
}

/*
 * Send the request and wait for input: at once after connect() (on loopback
 * the handshake is usually done by then), else when the connection is up.
 * false: not connected yet (the caller waits for EPOLLOUT). `watched`: in
 * the epoll set already (for EPOLLOUT).
 */
static bool player_request(struct burst *b, long i, bool watched)
{
    struct player *p = &b->players[i];
    ssize_t n = send(p->fd, request_text, sizeof request_text - 1, MSG_NOSIGNAL);
    if (n < 0 && (errno == EAGAIN || errno == ENOTCONN) && p->state == CONNECTING) {
        return false;
    }
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = (uint64_t)i};
    if (n != (ssize_t)(sizeof request_text - 1)) {
        player_fail(b, i, "send");
    } else if (epoll_ctl(b->epfd, watched ? EPOLL_CTL_MOD : EPOLL_CTL_ADD, p->fd, &ev) != 0) {
        player_fail(b, i, "epoll_ctl");
    } else {
        p->state = WAITING;
    }
    return true;
}

/* The connection completed (or failed) after connect() said EINPROGRESS. */
static void player_connected(struct burst *b, long i)
{
    int err = 0;
    socklen_t len = sizeof err;
    if (getsockopt(b->players[i].fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
        errno = err;
        player_fail(b, i, "connect");
        return;
    }
    (void)player_request(b, i, true);
}

static void player_input(struct burst *b, long i, char *buf)
{
    struct player *p = &b->players[i];
    ssize_t n = read(p->fd, buf, CLIENT_BUF);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
        return;
    }
    if (n <= 0) {
        errno = n == 0 ? 0 : errno;
        player_fail(b, i, "read");
        return;
    }
    if (p->state == WAITING) {
        p->first = bench_now();
        p->state = SERVED;
        b->served++;
    }
}

static int burst_open(struct burst *b, unsigned port)
{
    struct sockaddr_in addr;
    bench_loopback_addr(&addr, port);
    for (long i = 0; i < b->n; i++) {
        struct player *p = &b->players[i];
        p->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
        if (p->fd < 0) {
            perror("bench: socket");
            return -1;
        }
        p->state = WAITING;
        p->start = bench_now();
        if (connect(p->fd, (const struct sockaddr *)&addr, sizeof addr) != 0) {
            if (errno != EINPROGRESS) {
                player_fail(b, i, "connect");
                continue;
            }
            p->state = CONNECTING;
        }
        if (!player_request(b, i, false)) {
            struct epoll_event ev = {.events = EPOLLOUT, .data.u64 = (uint64_t)i};
            if (epoll_ctl(b->epfd, EPOLL_CTL_ADD, p->fd, &ev) != 0) {
                player_fail(b, i, "epoll_ctl");
            }
        }
    }
    return 0;
}

/* Open every connection at once and read until each has had its first byte, or `limit` s. */
static int burst_run(struct burst *b, unsigned port, double limit)
{
    static struct epoll_event events[EVENTS];
    static char buf[CLIENT_BUF];
    double end = bench_now() + limit;
    if (burst_open(b, port) != 0) {
        return -1;
    }
    while (b->served + b->failed < b->n && bench_now() < end) {
        int n = epoll_wait(b->epfd, events, EVENTS, 10);
        if (n < 0 && errno != EINTR) {
            perror("bench: client epoll_wait");
            return -1;
        }
        for (int k = 0; k < n; k++) {
            long i = (long)events[k].data.u64;
            if (b->players[i].state == CONNECTING) {
                player_connected(b, i);
            } else if (b->players[i].state != GONE) {
                player_input(b, i, buf);
            }
        }
    }
    return 0;
}

static int burst_init(struct burst *b, long n)
{
    memset(b, 0, sizeof *b);
    b->n = n;
    b->epfd = epoll_create1(EPOLL_CLOEXEC);
    b->players = calloc((size_t)n, sizeof *b->players);
    for (long i = 0; b->players != NULL && i < n; i++) {
        b->players[i].fd = -1;
    }
    return b->epfd >= 0 && b->players != NULL ? 0 : -1;
}

static void burst_close(struct burst *b)
{
    for (long i = 0; b->players != NULL && i < b->n; i++) {
        if (b->players[i].fd >= 0) {
            (void)close(b->players[i].fd);
        }
    }
    free(b->players);
    if (b->epfd >= 0) {
        (void)close(b->epfd);
    }
}

/* ---- the driver ---------------------------------------------------------------------------- */

struct fair_stats {
    double p50, p90, p99, max, mean; /* milliseconds; a connection not served counts as `limit` */
    long served;
    long drops;         /* connection attempts the full accept queue dropped (whole host) */
    double seconds;     /* how long the run took */
    double server_util; /* the server's CPU time over that time */
};

static int burst_stats(const struct burst *b, double limit, struct fair_stats *st)
{
    double *ms = malloc((size_t)b->n * sizeof *ms);
    double sum = 0;
    if (ms == NULL) {
        return -1;
    }
    for (long i = 0; i < b->n; i++) {
        const struct player *p = &b->players[i];
        ms[i] = p->first > 0 ? (p->first - p->start) * 1e3 : limit * 1e3;
        sum += ms[i];
    }
    bench_sort(ms, b->n);
    st->p50 = bench_percentile(ms, b->n, 50);
    st->p90 = bench_percentile(ms, b->n, 90);
    st->p99 = bench_percentile(ms, b->n, 99);
    st->max = ms[b->n - 1];
    st->mean = sum / (double)b->n;
    st->served = b->served;
    free(ms);
    return 0;
}

/*
 * TcpExt ListenDrops of /proc/net/netstat: connection attempts dropped at a
 * listener, mostly because its accept queue was full (the kernel counts for
 * the whole network namespace), or -1.
 */
static long listen_drops(void)
{
    char names[4096];
    char values[4096];
    long drops = -1;
    FILE *f = fopen("/proc/net/netstat", "r");
    if (f == NULL) {
        return -1;
    }
    while (drops < 0 && fgets(names, sizeof names, f) != NULL &&
           fgets(values, sizeof values, f) != NULL) {
        if (strncmp(names, "TcpExt:", 7) != 0) {
            continue;
        }
        char *ns = NULL;
        char *vs = NULL;
        for (char *n = strtok_r(names, " \n", &ns), *v = strtok_r(values, " \n", &vs);
             n != NULL && v != NULL; n = strtok_r(NULL, " \n", &ns), v = strtok_r(NULL, " \n", &vs)) {
            if (strcmp(n, "ListenDrops") == 0) {
                drops = bench_parse_long(v);
                break;
            }
        }
    }
    (void)fclose(f);
    return drops;
}

struct fair_cpus {
    int server;
    int client;
};

/* Fork the server, starved, and wait until it accepts; its pid, or -1. */
static pid_t start_server(const char *name, int lfd, const struct bench_starve *starve,
                          struct fair_cpus cpus)
{
    int ready[2];
    if (pipe2(ready, O_CLOEXEC) != 0) {
        perror("bench: pipe");
        return -1;
    }
    pid_t pid = bench_fork();
    if (pid < 0) {
        (void)close(ready[0]);
        (void)close(ready[1]);
        return -1;
    }
    if (pid == 0) {
        (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
        (void)close(ready[0]);
        bench_pin(cpus.server);
        _exit(bench_starve_enter(starve) == 0 && run_fair_server(name, lfd, ready[1]) == 0 ? 0 : 1);
    }
    (void)close(ready[1]);
    struct pollfd pd = {.fd = ready[0], .events = POLLIN};
    char c = 0;
    bool ok = poll(&pd, 1, READY_WAIT_MS) == 1 && read(ready[0], &c, 1) == 1;
    (void)close(ready[0]);
    if (!ok) {
        fprintf(stderr, "bench: fairness: server %s did not start\n", name);
        bench_stop_child(pid);
        return -1;
    }
    return pid;
}

/* One burst against one server. */
static int fair_round(const struct fairness_params *p, const char *name,
                      const struct bench_starve *starve, struct fair_cpus cpus,
                      struct fair_stats *st)
{
    unsigned port = 0;
    int rc = -1;
    int lfd = bench_listen_loopback(0, (int)p->backlog, &port);
    if (lfd < 0) {
        perror("bench: listen");
        return -1;
    }
    pid_t server = start_server(name, lfd, starve, cpus);
    (void)close(lfd);
    if (server < 0) {
        return -1;
    }
    if (p->pause_s > 0) {
        (void)usleep((useconds_t)(p->pause_s * 1e6));
    }
    bench_pin(cpus.client);
    struct burst b;
    bool ok = true;
    if (p->warm) {
        ok = burst_init(&b, p->conns) == 0 && burst_run(&b, port, p->limit_s) == 0;
        burst_close(&b);
        (void)usleep(WARM_SETTLE_US);
    }
    ok = burst_init(&b, p->conns) == 0 && ok;
    long long cpu0 = bench_cpu_ns(server);
    long drops0 = listen_drops();
    double t0 = bench_now();
    if (ok && burst_run(&b, port, p->limit_s) == 0) {
        st->seconds = bench_now() - t0;
        st->server_util = (double)(bench_cpu_ns(server) - cpu0) / (st->seconds * 1e9);
        st->drops = drops0 >= 0 ? listen_drops() - drops0 : -1;
        rc = burst_stats(&b, p->limit_s, st);
    }
    /* The server closes first, so the TIME_WAIT entries are on its fresh port. */
    bench_stop_child(server);
    burst_close(&b);
    if (rc != 0) {
        fprintf(stderr, "bench: fairness %s with %ld connections failed\n", name, p->conns);
    }
    return rc;
}

/* Print the figures of a server's runs; whether every run served every connection. */
static bool report(const struct fairness_params *p, const char *name, const struct fair_stats *s,
                   int n)
{
    static const struct {
        const char *key;
        const char *what;
        size_t offset;
    } figures[] = {
        {"p50", "median", offsetof(struct fair_stats, p50)},
        {"p90", "90th percentile", offsetof(struct fair_stats, p90)},
        {"p99", "99th percentile", offsetof(struct fair_stats, p99)},
        {"max", "slowest", offsetof(struct fair_stats, max)},
        {"mean", "mean", offsetof(struct fair_stats, mean)},
    };
    bool st = strcmp(name, "epoll") != 0; /* compared with the reference loop */
    long served_min = p->conns;
    /* Key suffixes: "w" after a first burst, "n" for a burst the moment the server listens. */
    const char *suffix = p->warm ? "w" : p->pause_s > 0 ? "" : "n";
    const char *variant = p->warm ? " (warm)" : p->pause_s > 0 ? "" : " (no pause)";
    for (int k = 0; k < n; k++) {
        bench_note("fairness %s %ld%s, run %d: first byte p50 %.1f p90 %.1f p99 %.1f max %.1f "
                   "mean %.1f ms; %ld of %ld served in %.2f s; server CPU %.0f%% (%.1f ms); "
                   "%ld SYNs dropped",
                   name, p->conns, suffix, k + 1, s[k].p50, s[k].p90, s[k].p99, s[k].max, s[k].mean,
                   s[k].served, p->conns, s[k].seconds, 100 * s[k].server_util,
                   s[k].server_util * s[k].seconds * 1e3, s[k].drops);
        served_min = s[k].served < served_min ? s[k].served : served_min;
    }
    for (size_t f = 0; f < sizeof figures / sizeof figures[0]; f++) {
        char key[64];
        char base[64];
        (void)snprintf(key, sizeof key, "fair_%s_%ld%s_%s", name, p->conns, suffix, figures[f].key);
        (void)snprintf(base, sizeof base, "fair_epoll_%ld%s_%s", p->conns, suffix, figures[f].key);
        if (f == 0) {
            bench_result(key, bench_median_field(s, sizeof *s, n, figures[f].offset), "ms",
                         st ? base : "-", "first byte, %s, %ld at once%s: %s", name, p->conns,
                         variant, figures[f].what);
        } else {
            bench_result(key, bench_median_field(s, sizeof *s, n, figures[f].offset), "ms",
                         st ? base : "-", "  %s", figures[f].what);
        }
    }
    char key[64];
    (void)snprintf(key, sizeof key, "fair_%s_%ld%s_served", name, p->conns, suffix);
    bench_result(key, (double)served_min, "conns", "-", "  served within %.0f s (fewest of %d runs)",
                 p->limit_s, n);
    if (served_min < p->conns) {
        bench_note("fairness %s %ld%s: connections not served within %.0f s count as %.0f s",
                   name, p->conns, suffix, p->limit_s, p->limit_s);
    }
    return served_min == p->conns;
}

const char *const bench_fair_servers[] = {"epoll",      "st",      "epoll-timers", "epoll-st",
                                          "epoll-page", "st-poll", "st-select",    NULL};
enum {
    FAIR_BUILTIN = sizeof bench_fair_servers / sizeof bench_fair_servers[0] - 1,
    FAIR_MAX_SERVERS = FAIR_BUILTIN + BENCH_MAX_PEERS,
};

int bench_fairness(const struct fairness_params *p)
{
    static struct fair_stats stats[FAIR_MAX_SERVERS][MAX_ROUNDS];
    const char *fair_names[FAIR_MAX_SERVERS];
    size_t servers = bench_server_list(bench_fair_servers, fair_names);
    struct fair_cpus cpus = {bench_cpu(0), bench_cpu(1)};
    struct bench_starve starve;
    long limit = bench_raise_fd_limit();
    int rc = 0;
    if (cpus.client < 0) {
        cpus.server = -1;
    }
    if (p->rounds < 1 || p->rounds > MAX_ROUNDS || p->conns < 1 || p->conns + 64 > limit ||
        p->backlog < 1 || p->share < 0 || p->share > 100 || p->period_us < 1000 ||
        p->period_us > 1000000) {
        fprintf(stderr, "bench: fairness: %d rounds (1..%d), %ld connections (fd limit %ld), "
                        "backlog %ld, share %d%%, period %ld us (1000..1000000)\n",
                p->rounds, MAX_ROUNDS, p->conns, limit, p->backlog, p->share, p->period_us);
        return -1;
    }
    if (bench_starve_start(&starve, p->method, p->share, p->period_us, cpus.server) != 0) {
        fprintf(stderr, "bench: fairness: cannot starve the server (%s): %s\n", p->method,
                starve.why);
        return -1;
    }
    bench_note("fairness: the server gets %d%% of a CPU: %s", starve.share, starve.why);
    fprintf(stderr, "st_bench: fairness: %s\n", starve.why);
    for (int r = 0; r < p->rounds && rc == 0; r++) {
        for (size_t s = 0; s < servers && rc == 0; s++) {
            if (bench_server_wanted(p->servers, fair_names[s])) {
                rc = fair_round(p, fair_names[s], &starve, cpus, &stats[s][r]);
            }
        }
    }
    bench_starve_stop(&starve);
    bool all_served = true;
    for (size_t s = 0; s < servers && rc == 0; s++) {
        if (bench_server_wanted(p->servers, fair_names[s]) &&
            !report(p, fair_names[s], stats[s], p->rounds)) {
            fprintf(stderr, "bench: fairness: %s did not serve every connection\n", fair_names[s]);
            all_served = false;
        }
    }
    return rc == 0 && p->serve_all && !all_served ? -1 : rc;
}
