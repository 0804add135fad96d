/*
 * load_client: drives an echo server on 127.0.0.1 with request/response
 * round trips. Written with plain epoll (no st), so it measures the server
 * and not itself.
 *
 * usage: load_client -p port [-c connections] [-d seconds] [-s msgsize]
 *                    [--pid server_pid]
 *
 * Opens the connections, then on each one repeatedly sends msgsize bytes and
 * waits for the complete echo (checking every byte) for the given number of
 * seconds. Prints a progress line to stderr once per second and, at the
 * end, one summary line to stdout:
 *
 *   connections=<c> requests=<n> seconds=<d> rps=<r> server_rss_kib=<kib> errors=<e>
 *
 * server_rss_kib is VmRSS from /proc/<pid>/status (or "n/a" without --pid).
 * Exit status 0 iff some requests completed and no connection failed.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "example_args.h"

enum {
    MAX_CONNS = 100000,
    MAX_SECONDS = 3600,
    MAX_MSG = 1024 * 1024,
    MAX_PORT = 65535,
    EVENTS = 512,
    TICK_MS = 100,
    FD_HEADROOM = 64,
};

struct options {
    long port;
    long conns;
    long seconds;
    long msg_size;
    long pid;
};

enum conn_state { CONNECTING, SENDING, RECEIVING, DEAD };

struct conn {
    int fd;
    enum conn_state state;
    size_t sent;
    size_t received;
};

struct client {
    struct options opt;
    int epfd;
    struct conn *conns;
    unsigned char *message;
    unsigned char *scratch;
    long connected;
    long requests;
    long errors;
};

/* ---- options ---------------------------------------------------------------------- */

static int parse_option(int c, const char *arg, struct options *opt)
{
    switch (c) {
    case 'p':
        return example_parse_long(arg, 1, MAX_PORT, &opt->port);
    case 'c':
        return example_parse_long(arg, 1, MAX_CONNS, &opt->conns);
    case 'd':
        return example_parse_long(arg, 1, MAX_SECONDS, &opt->seconds);
    case 's':
        return example_parse_long(arg, 1, MAX_MSG, &opt->msg_size);
    case 'P':
        return example_parse_long(arg, 1, 1L << 30, &opt->pid);
    default:
        return -1;
    }
}

static int parse_options(int argc, char **argv, struct options *opt)
{
    static const struct option longopts[] = {{"pid", required_argument, NULL, 'P'},
                                             {NULL, 0, NULL, 0}};
    int c = 0;
    *opt = (struct options){0, 100, 5, 64, 0};
    while ((c = getopt_long(argc, argv, "p:c:d:s:", longopts, NULL)) != -1) {
        if (parse_option(c, optarg, opt) != 0) {
            return -1;
        }
    }
    return (optind == argc && opt->port != 0) ? 0 : -1;
}

/* ---- time and memory ------------------------------------------------------------------ */

static double now_s(void)
{
    struct timespec ts;
    (void)clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* VmRSS of a process in KiB, or -1. */
static long rss_kib(long pid)
{
    char path[64];
    char line[256];
    long kib = -1;
    FILE *f = NULL;
    (void)snprintf(path, sizeof path, "/proc/%ld/status", pid);
    f = fopen(path, "r");
    if (f == NULL) {
        return -1;
    }
    while (fgets(line, sizeof line, f) != NULL) {
        if (strncmp(line, "VmRSS:", 6) == 0) {
            kib = strtol(line + 6, NULL, 10);
            break;
        }
    }
    (void)fclose(f);
    return kib;
}

static void raise_fd_limit(long needed)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (rlim_t)needed) {
        rl.rlim_cur = rl.rlim_max;
        (void)setrlimit(RLIMIT_NOFILE, &rl);
    }
}

/* ---- connections ---------------------------------------------------------------------- */

static void conn_fail(struct client *cl, struct conn *c, const char *what, int err)
{
    if (cl->errors < 5) {
        fprintf(stderr, "\nload_client: connection %ld: %s: %s\n", (long)(c - cl->conns), what,
                err != 0 ? strerror(err) : "unexpected data");
    }
    cl->errors++;
    if (c->state != CONNECTING) {
        cl->connected--;
    }
    c->state = DEAD;
    (void)close(c->fd); /* also leaves the epoll set */
    c->fd = -1;
}

static int watch(struct client *cl, struct conn *c, unsigned events, int op)
{
    struct epoll_event ev;
    memset(&ev, 0, sizeof ev);
    ev.events = events;
    ev.data.ptr = c;
    return epoll_ctl(cl->epfd, op, c->fd, &ev);
}

static int open_conn(struct client *cl, struct conn *c)
{
    int one = 1;
    struct sockaddr_in addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons((unsigned short)cl->opt.port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    c->state = CONNECTING;
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (c->fd < 0) {
        return -1;
    }
    (void)setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(c->fd, (struct sockaddr *)&addr, sizeof addr) != 0 && errno != EINPROGRESS) {
        conn_fail(cl, c, "connect", errno);
        return 0;
    }
    return watch(cl, c, EPOLLOUT, EPOLL_CTL_ADD);
}

/* Send what is left of the current request; switch to receiving when done. */
static void send_more(struct client *cl, struct conn *c)
{
    size_t len = (size_t)cl->opt.msg_size;
    while (c->sent < len) {
        ssize_t n = send(c->fd, cl->message + c->sent, len - c->sent, MSG_NOSIGNAL);
        if (n < 0) {
            if (errno == EAGAIN || errno == EWOULDBLOCK) {
                if (c->state != SENDING) {
                    c->state = SENDING;
                    (void)watch(cl, c, EPOLLOUT, EPOLL_CTL_MOD);
                }
                return;
            }
            conn_fail(cl, c, "send", errno);
            return;
        }
        c->sent += (size_t)n;
    }
    if (c->state != RECEIVING) {
        c->state = RECEIVING;
        (void)watch(cl, c, EPOLLIN, EPOLL_CTL_MOD);
    }
}

static void start_request(struct client *cl, struct conn *c)
{
    c->sent = 0;
    c->received = 0;
    send_more(cl, c);
}

static void on_connected(struct client *cl, struct conn *c)
{
    int err = 0;
    socklen_t len = sizeof err;
    if (getsockopt(c->fd, SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
        conn_fail(cl, c, "connect", err != 0 ? err : errno);
        return;
    }
    cl->connected++;
    c->state = SENDING;
    start_request(cl, c);
}

static void receive_more(struct client *cl, struct conn *c)
{
    size_t len = (size_t)cl->opt.msg_size;
    for (;;) {
        ssize_t n = recv(c->fd, cl->scratch, len - c->received, 0);
        if (n < 0) {
            if (errno != EAGAIN && errno != EWOULDBLOCK) {
                conn_fail(cl, c, "recv", errno);
            }
            return;
        }
        if (n == 0 || memcmp(cl->scratch, cl->message + c->received, (size_t)n) != 0) {
            conn_fail(cl, c, n == 0 ? "server closed the connection" : "echo mismatch", 0);
            return;
        }
        c->received += (size_t)n;
        if (c->received == len) {
            cl->requests++;
            start_request(cl, c);
            return;
        }
    }
}

static void on_event(struct client *cl, const struct epoll_event *ev)
{
    struct conn *c = ev->data.ptr;
    if (c->state == CONNECTING) {
        on_connected(cl, c);
    } else if ((ev->events & (EPOLLERR | EPOLLHUP)) != 0 && (ev->events & EPOLLIN) == 0) {
        conn_fail(cl, c, "socket error", ECONNRESET);
    } else if (c->state == SENDING) {
        send_more(cl, c);
    } else if (c->state == RECEIVING) {
        receive_more(cl, c);
    }
}

/* ---- the run ---------------------------------------------------------------------------- */

static void progress(const struct client *cl, double elapsed, long *last_requests)
{
    /* On a terminal the line rewrites itself; ESC [K clears what a longer one left. */
    const char *end = isatty(STDERR_FILENO) ? "\033[K\r" : "\n";
    fprintf(stderr, "[%3.0fs] connections=%ld requests/s=%ld errors=%ld%s", elapsed,
            cl->connected, cl->requests - *last_requests, cl->errors, end);
    *last_requests = cl->requests;
}

static double run(struct client *cl)
{
    struct epoll_event events[EVENTS];
    double start = now_s();
    double next_report = start + 1.0;
    double deadline = start + (double)cl->opt.seconds;
    long last_requests = 0;

    double t = start;

    while (t < deadline) {
        int n = epoll_wait(cl->epfd, events, EVENTS, TICK_MS);
        if (n < 0 && errno != EINTR) {
            perror("load_client: epoll_wait");
            cl->errors++;
            break;
        }
        for (int i = 0; i < n; i++) {
            on_event(cl, &events[i]);
        }
        t = now_s();
        if (t >= next_report) {
            progress(cl, t - start, &last_requests);
            next_report += 1.0;
        }
    }
    if (isatty(STDERR_FILENO)) {
        fprintf(stderr, "\n");
    }
    return now_s() - start;
}

static int setup(struct client *cl)
{
    size_t n = (size_t)cl->opt.conns;
    cl->epfd = epoll_create1(0);
    cl->conns = calloc(n, sizeof *cl->conns);
    cl->message = malloc((size_t)cl->opt.msg_size);
    cl->scratch = malloc((size_t)cl->opt.msg_size);
    if (cl->epfd < 0 || cl->conns == NULL || cl->message == NULL || cl->scratch == NULL) {
        perror("load_client: setup");
        return -1;
    }
    for (long i = 0; i < cl->opt.msg_size; i++) {
        cl->message[i] = (unsigned char)('a' + i % 26);
    }
    raise_fd_limit(cl->opt.conns + FD_HEADROOM);
    for (size_t i = 0; i < n; i++) {
        cl->conns[i].fd = -1;
    }
    for (size_t i = 0; i < n; i++) {
        if (open_conn(cl, &cl->conns[i]) != 0) {
            perror("load_client: socket");
            return -1;
        }
    }
    return 0;
}

static void teardown(struct client *cl)
{
    for (long i = 0; cl->conns != NULL && i < cl->opt.conns; i++) {
        if (cl->conns[i].fd >= 0) {
            (void)close(cl->conns[i].fd);
        }
    }
    free(cl->conns);
    free(cl->message);
    free(cl->scratch);
    if (cl->epfd >= 0) {
        (void)close(cl->epfd);
    }
}

static void summary(const struct client *cl, double elapsed)
{
    long rss = cl->opt.pid > 0 ? rss_kib(cl->opt.pid) : -1;
    char rss_text[32] = "n/a";
    if (rss >= 0) {
        (void)snprintf(rss_text, sizeof rss_text, "%ld", rss);
    }
    printf("connections=%ld requests=%ld seconds=%ld rps=%.0f server_rss_kib=%s errors=%ld\n",
           cl->connected, cl->requests, cl->opt.seconds,
           elapsed > 0 ? (double)cl->requests / elapsed : 0.0, rss_text, cl->errors);
    (void)fflush(stdout);
}

int main(int argc, char **argv)
{
    struct client cl;
    double elapsed = 0;
    int ok = 0;

    memset(&cl, 0, sizeof cl);
    cl.epfd = -1;
    if (parse_options(argc, argv, &cl.opt) != 0) {
        fprintf(stderr,
                "usage: %s -p port [-c connections] [-d seconds] [-s msgsize] [--pid server_pid]\n",
                argv[0]);
        return 2;
    }
    if (setup(&cl) != 0) {
        teardown(&cl);
        return 1;
    }
    elapsed = run(&cl);
    summary(&cl, elapsed);
    ok = cl.requests > 0 && cl.errors == 0;
    teardown(&cl);
    return ok ? 0 : 1;
}
