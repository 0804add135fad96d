/*
 * tcp_proxy: a TCP proxy on st, two coroutines per connection pair.
 *
 * usage: tcp_proxy -u host:port [-l port] [-t seconds] [-i idle_seconds]
 *                  [-c connect_seconds]
 *
 *   -u  upstream address: host:port, [ipv6]:port (resolved once at start)
 *   -l  TCP port on 127.0.0.1 to accept on (default 0: pick a free one)
 *   -t  stop after this many seconds (default 0: run until SIGINT/SIGTERM)
 *   -i  idle timeout: a pair on which neither side sent anything for this
 *       long is reset (default 300)
 *   -c  connect timeout per upstream address (default 5)
 *
 * Prints `listening on 127.0.0.1:<port>` once it accepts connections. For
 * each accepted client one coroutine connects to the upstream (trying its
 * addresses in order) and then copies client -> upstream, while a second
 * coroutine copies upstream -> client. End of stream on one side is passed
 * on as a half-close, shutdown(SHUT_WR), to the other, and the pair ends
 * when both directions have ended. An error or the idle timeout in either
 * direction ends both, and the two sockets are closed with a reset so that
 * neither peer mistakes the cut for a clean end of data.
 *
 * On stop, the proxy stops accepting, gives open pairs 5 s to finish, resets
 * the rest, prints one line `stopped: <n> connections, <up> bytes up, <down>
 * bytes down, <f> upstream failures` and exits with status 0.
 *
 * The listening socket, the accept loop, the stop and the list of live
 * pairs are shared with the other example servers (example_net.c,
 * example_stop.c, example_conns.c); this file is the proxying itself.
 */
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "example_args.h"
#include "example_conns.h"
#include "example_net.h"
#include "example_stop.h"
#include "st.h"

enum {
    BUF_SIZE = 16 * 1024,
    PUMP_STACK = 64 * 1024, /* BUF_SIZE plus headroom, whatever st's default */
    BACKLOG = 1024,
    DRAIN_TIMEOUT_S = 5,
    US_PER_S = 1000000,
    MAX_PORT = 65535,
    HOST_MAX = 256,
};

enum pump_end { PUMP_EOF, PUMP_ERROR };

struct pair {
    struct example_conn link; /* in proxy.pairs */
    st_netfd_t client;
    st_netfd_t upstream;
    st_thread_t up;        /* the pair's own coroutine: connect, then client -> upstream */
    st_thread_t down;      /* upstream -> client */
    int up_running;        /* is `up` still connecting or copying (interruptible)? */
    int down_running;
    int aborted;
    st_utime_t last_active;
};

struct options {
    const char *upstream;
    long port;
    long seconds;
    long idle_s;
    long connect_s;
};

struct proxy {
    struct options opt;
    struct addrinfo *upstream;
    st_netfd_t listener;
    struct example_conns pairs; /* live pairs, for the shutdown */
    long connections;
    long failures;
    unsigned long long bytes_up;
    unsigned long long bytes_down;
};

static struct proxy proxy;

/* ---- options ---------------------------------------------------------------------- */

static int parse_options(int argc, char **argv, struct options *opt)
{
    int c = 0;
    *opt = (struct options){NULL, 0, 0, 300, 5};
    while ((c = getopt(argc, argv, "u:l:t:i:c:")) != -1) {
        int rc = 0;
        switch (c) {
        case 'u':
            opt->upstream = optarg;
            break;
        case 'l':
            rc = example_parse_long(optarg, 0, MAX_PORT, &opt->port);
            break;
        case 't':
            rc = example_parse_long(optarg, 0, 365L * 24 * 3600, &opt->seconds);
            break;
        case 'i':
            rc = example_parse_long(optarg, 1, 24L * 3600, &opt->idle_s);
            break;
        case 'c':
            rc = example_parse_long(optarg, 1, 3600, &opt->connect_s);
            break;
        default:
            rc = -1;
            break;
        }
        if (rc != 0) {
            return -1;
        }
    }
    return optind == argc && opt->upstream != NULL ? 0 : -1;
}

/* Resolves host:port or [host]:port into proxy.upstream. */
static int resolve_upstream(const char *spec)
{
    char host[HOST_MAX];
    const char *port = NULL;
    size_t hlen = 0;
    if (spec[0] == '[') {
        const char *close = strchr(spec, ']');
        if (close == NULL || close[1] != ':') {
            return EAI_NONAME;
        }
        hlen = (size_t)(close - spec - 1);
        spec++;
        port = close + 2;
    } else {
        const char *colon = strrchr(spec, ':');
        if (colon == NULL) {
            return EAI_NONAME;
        }
        hlen = (size_t)(colon - spec);
        port = colon + 1;
    }
    if (hlen == 0 || hlen >= sizeof host || *port == '\0') {
        return EAI_NONAME;
    }
    memcpy(host, spec, hlen);
    host[hlen] = '\0';
    struct addrinfo hints;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_NUMERICSERV;
    return getaddrinfo(host, port, &hints, &proxy.upstream);
}

/* ---- one direction ----------------------------------------------------------------- */

/* Time left before the pair counts as idle, or 0. */
static st_utime_t idle_left(const struct pair *p)
{
    st_utime_t limit = (st_utime_t)proxy.opt.idle_s * US_PER_S;
    st_utime_t idle = st_utime() - p->last_active;
    return idle < limit ? limit - idle : 0;
}

/*
 * Copies from -> to until end of stream (passed on as a half-close) or an
 * error. A read that times out is retried while the other direction keeps
 * the pair active: a long download is not idle just because the client is
 * silent.
 */
static enum pump_end pump(struct pair *p, st_netfd_t from, st_netfd_t to, unsigned long long *bytes)
{
    char buf[BUF_SIZE];
    for (;;) {
        st_utime_t left = idle_left(p);
        if (left == 0) {
            return PUMP_ERROR;
        }
        ssize_t n = st_read(from, buf, sizeof buf, left);
        if (n > 0) {
            p->last_active = st_utime();
            if (st_write(to, buf, (size_t)n, (st_utime_t)proxy.opt.idle_s * US_PER_S) != n) {
                return PUMP_ERROR;
            }
            p->last_active = st_utime();
            *bytes += (unsigned long long)n;
        } else if (n == 0) {
            return shutdown(st_netfd_fileno(to), SHUT_WR) == 0 ? PUMP_EOF : PUMP_ERROR;
        } else if (errno != ETIME) {
            return PUMP_ERROR;
        }
    }
}

static void abort_pair(struct pair *p)
{
    p->aborted = 1;
    if (p->up_running) {
        st_thread_interrupt(p->up);
    }
    if (p->down_running) {
        st_thread_interrupt(p->down);
    }
}

static void *pump_down(void *arg)
{
    struct pair *p = arg;
    enum pump_end end = pump(p, p->upstream, p->client, &proxy.bytes_down);
    p->down_running = 0;
    if (end == PUMP_ERROR) {
        abort_pair(p);
    }
    return NULL;
}

/* ---- pairs ----------------------------------------------------------------------------- */

static st_netfd_t connect_upstream(void)
{
    for (const struct addrinfo *ai = proxy.upstream; ai != NULL; ai = ai->ai_next) {
        int one = 1;
        int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        st_netfd_t nfd = fd >= 0 ? st_netfd_open_socket(fd) : NULL;
        if (nfd == NULL) {
            if (fd >= 0) {
                (void)close(fd);
            }
            return NULL;
        }
        (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        if (st_connect(nfd, ai->ai_addr, (int)ai->ai_addrlen,
                       (st_utime_t)proxy.opt.connect_s * US_PER_S) == 0) {
            return nfd;
        }
        int err = errno;
        (void)st_netfd_close(nfd);
        if (err == EINTR) {
            return NULL; /* stopping */
        }
    }
    return NULL;
}

/* Closes a socket; with reset, as an RST instead of a FIN. */
static void close_socket(st_netfd_t fd, int reset)
{
    if (fd == NULL) {
        return;
    }
    if (reset) {
        struct linger lg = {1, 0};
        (void)setsockopt(st_netfd_fileno(fd), SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    }
    (void)st_netfd_close(fd);
}

static void *run_pair(void *arg)
{
    struct pair *p = arg;
    p->upstream = connect_upstream();
    if (p->upstream == NULL) {
        proxy.failures++;
        p->aborted = 1;
    } else {
        p->last_active = st_utime();
        p->down_running = 1;
        p->down = st_thread_create(pump_down, p, 1, PUMP_STACK);
        if (p->down == NULL) {
            p->down_running = 0;
            p->aborted = 1;
        }
    }
    if (!p->aborted && pump(p, p->client, p->upstream, &proxy.bytes_up) == PUMP_ERROR) {
        p->up_running = 0;
        abort_pair(p);
    }
    p->up_running = 0;
    if (p->down != NULL) {
        (void)st_thread_join(p->down, NULL); /* never interrupted: up_running is 0 */
    }
    example_conns_remove(&proxy.pairs, &p->link);
    close_socket(p->upstream, p->aborted);
    close_socket(p->client, p->aborted);
    free(p);
    return NULL;
}

static void start_pair(st_netfd_t client)
{
    struct pair *p = calloc(1, sizeof *p);
    if (p == NULL) {
        (void)st_netfd_close(client);
        return;
    }
    p->client = client;
    p->up_running = 1;
    p->up = st_thread_create(run_pair, p, 0, PUMP_STACK);
    if (p->up == NULL) {
        (void)st_netfd_close(client);
        free(p);
        return;
    }
    example_conns_add(&proxy.pairs, &p->link, p);
    proxy.connections++;
}

/* ---- stopping --------------------------------------------------------------------------- */

/*
 * On stop (example_stop.h): waits for the open pairs to end by themselves,
 * then resets the rest.
 */
static void drain_pairs(void)
{
    if (example_conns_wait(&proxy.pairs, (st_utime_t)DRAIN_TIMEOUT_S * US_PER_S) == 0) {
        return;
    }
    for (struct example_conn *l = proxy.pairs.head; l != NULL; l = l->next) {
        abort_pair(l->owner);
    }
    if (example_conns_wait(&proxy.pairs, US_PER_S) != 0) {
        fprintf(stderr, "tcp_proxy: %ld pairs did not finish\n", proxy.pairs.active);
    }
}

/* ---- start-up ----------------------------------------------------------------------------- */

static int start(void)
{
    unsigned port = 0;
    int rc = resolve_upstream(proxy.opt.upstream);
    if (rc != 0) {
        fprintf(stderr, "tcp_proxy: upstream %s: %s\n", proxy.opt.upstream,
                rc == EAI_SYSTEM ? strerror(errno) : gai_strerror(rc));
        return -1;
    }
    (void)st_set_eventsys(ST_EVENTSYS_ALT); /* epoll where st has it */
    if (st_init() != 0 || example_conns_init(&proxy.pairs) != 0) {
        perror("tcp_proxy: st_init");
        return -1;
    }
    proxy.listener = example_open_loopback(SOCK_STREAM, proxy.opt.port, 0, BACKLOG, &port);
    if (proxy.listener == NULL) {
        fprintf(stderr, "tcp_proxy: cannot listen on 127.0.0.1:%ld: %s\n", proxy.opt.port,
                strerror(errno));
        return -1;
    }
    /* The stop interrupts this coroutine, the acceptor, out of st_accept. */
    if (example_stop_init(st_thread_self(), proxy.opt.seconds) != 0) {
        perror("tcp_proxy: signals");
        return -1;
    }
    printf("listening on 127.0.0.1:%u\n", port);
    (void)fflush(stdout);
    fprintf(stderr, "tcp_proxy: upstream %s, event system %s, pid %ld\n", proxy.opt.upstream,
            st_get_eventsys_name(), (long)getpid());
    return 0;
}

int main(int argc, char **argv)
{
    if (parse_options(argc, argv, &proxy.opt) != 0) {
        fprintf(stderr,
                "usage: %s -u host:port [-l port] [-t seconds] [-i idle_seconds] "
                "[-c connect_seconds]\n",
                argv[0]);
        return 2;
    }
    if (start() != 0) {
        if (proxy.upstream != NULL) {
            freeaddrinfo(proxy.upstream);
        }
        return 1;
    }
    example_accept_loop(proxy.listener, start_pair, "tcp_proxy");
    (void)st_netfd_close(proxy.listener);
    drain_pairs();
    printf("stopped: %ld connections, %llu bytes up, %llu bytes down, %ld upstream failures\n",
           proxy.connections, proxy.bytes_up, proxy.bytes_down, proxy.failures);
    (void)fflush(stdout);
    freeaddrinfo(proxy.upstream);
    return 0;
}
