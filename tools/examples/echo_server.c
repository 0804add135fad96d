/*
 * echo_server: an st echo server, one coroutine per connection.
 *
 * usage: echo_server [-p port] [-b epoll|poll|select|io_uring] [-t seconds]
 *
 *   -p  TCP port on 127.0.0.1 (default 0: pick a free one)
 *   -b  event system (default epoll where st has it, else st's default)
 *   -t  stop after this many seconds (default 0: run until SIGINT/SIGTERM)
 *
 * Prints `listening on 127.0.0.1:<port>` once it accepts connections. A
 * connection that stays idle for 30 s is closed. On stop the server
 * interrupts every connection coroutine, waits for them to finish, and exits
 * with status 0.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "st.h"

enum {
    BUF_SIZE = 4096,
    BACKLOG = 1024,
    IDLE_TIMEOUT_S = 30,
    DRAIN_TIMEOUT_S = 5,
    US_PER_S = 1000000,
    MAX_PORT = 65535,
};

struct conn {
    st_netfd_t fd;
    st_thread_t thread;
    struct conn *prev;
    struct conn *next;
};

struct server {
    st_netfd_t listener;
    st_thread_t acceptor;
    struct conn *conns; /* live connections, for the shutdown */
    long active;
    long served;
    int stopping;
    st_cond_t drained;
};

static struct server server;

/* ---- options ---------------------------------------------------------------------- */

struct options {
    long port;
    const char *backend;
    long seconds;
};

static int parse_long(const char *s, long min, long max, long *out)
{
    char *end = NULL;
    long v = 0;
    errno = 0;
    v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < min || v > max) {
        return -1;
    }
    *out = v;
    return 0;
}

static int parse_options(int argc, char **argv, struct options *opt)
{
    int c = 0;
    opt->port = 0;
    opt->backend = NULL;
    opt->seconds = 0;
    while ((c = getopt(argc, argv, "p:b:t:")) != -1) {
        int rc = 0;
        if (c == 'p') {
            rc = parse_long(optarg, 0, MAX_PORT, &opt->port);
        } else if (c == 'b') {
            opt->backend = optarg;
        } else if (c == 't') {
            rc = parse_long(optarg, 0, 365L * 24 * 3600, &opt->seconds);
        } else {
            rc = -1;
        }
        if (rc != 0) {
            return -1;
        }
    }
    return optind == argc ? 0 : -1;
}

static int select_backend(const char *name)
{
    static const struct {
        const char *name;
        int eventsys;
    } names[] = {{"epoll", ST_EVENTSYS_ALT},
                 {"poll", ST_EVENTSYS_POLL},
                 {"select", ST_EVENTSYS_SELECT},
                 {"io_uring", ST_EVENTSYS_IO_URING}};
    if (name == NULL) {
        (void)st_set_eventsys(ST_EVENTSYS_ALT); /* keep st's default if it has no epoll */
        return 0;
    }
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (strcmp(names[i].name, name) == 0) {
            return st_set_eventsys(names[i].eventsys);
        }
    }
    errno = EINVAL;
    return -1;
}

/* ---- connections -------------------------------------------------------------------- */

static void conn_link(struct conn *c)
{
    c->prev = NULL;
    c->next = server.conns;
    if (server.conns != NULL) {
        server.conns->prev = c;
    }
    server.conns = c;
    server.active++;
}

static void conn_unlink(struct conn *c)
{
    if (c->prev != NULL) {
        c->prev->next = c->next;
    } else {
        server.conns = c->next;
    }
    if (c->next != NULL) {
        c->next->prev = c->prev;
    }
    server.active--;
    if (server.stopping && server.active == 0) {
        (void)st_cond_signal(server.drained);
    }
}

static void *serve_connection(void *arg)
{
    struct conn *c = arg;
    char buf[BUF_SIZE];
    ssize_t n = 0;
    while ((n = st_read(c->fd, buf, sizeof buf, (st_utime_t)IDLE_TIMEOUT_S * US_PER_S)) > 0) {
        if (st_write(c->fd, buf, (size_t)n, (st_utime_t)IDLE_TIMEOUT_S * US_PER_S) != n) {
            break;
        }
    }
    conn_unlink(c);
    (void)st_netfd_close(c->fd);
    free(c);
    return NULL;
}

static void start_connection(st_netfd_t fd)
{
    int one = 1;
    struct conn *c = calloc(1, sizeof *c);
    (void)setsockopt(st_netfd_fileno(fd), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (c == NULL) {
        (void)st_netfd_close(fd);
        return;
    }
    c->fd = fd;
    c->thread = st_thread_create(serve_connection, c, 0, 0);
    if (c->thread == NULL) {
        perror("echo_server: st_thread_create");
        (void)st_netfd_close(fd);
        free(c);
        return;
    }
    conn_link(c);
    server.served++;
}

static void accept_loop(void)
{
    while (!server.stopping) {
        st_netfd_t fd = st_accept(server.listener, NULL, NULL, ST_UTIME_NO_TIMEOUT);
        if (fd != NULL) {
            start_connection(fd);
        } else if (errno != EINTR) {
            perror("echo_server: st_accept");
            (void)st_usleep(US_PER_S / 10); /* e.g. out of fds: back off */
        }
    }
}

/* ---- stopping -------------------------------------------------------------------------- */

static void stop_server(void)
{
    if (!server.stopping) {
        server.stopping = 1;
        st_thread_interrupt(server.acceptor);
    }
}

static void *stop_after(void *arg)
{
    long seconds = *(const long *)arg;
    if (st_sleep((int)seconds) == 0) {
        stop_server();
    }
    return NULL;
}

static int signal_pipe[2] = {-1, -1};

static void on_signal(int sig)
{
    char c = (char)sig;
    (void)write(signal_pipe[1], &c, 1); /* async-signal-safe; read by a coroutine */
}

static void *watch_signals(void *arg)
{
    char c = 0;
    st_netfd_t fd = arg;
    if (st_read(fd, &c, 1, ST_UTIME_NO_TIMEOUT) == 1) {
        stop_server();
    }
    return NULL;
}

static int install_signals(void)
{
    struct sigaction sa;
    st_netfd_t fd = NULL;
    if (pipe(signal_pipe) != 0) {
        return -1;
    }
    (void)fcntl(signal_pipe[1], F_SETFL, O_NONBLOCK);
    fd = st_netfd_open(signal_pipe[0]);
    if (fd == NULL || st_thread_create(watch_signals, fd, 0, 0) == NULL) {
        return -1;
    }
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    (void)sigemptyset(&sa.sa_mask);
    if (sigaction(SIGINT, &sa, NULL) != 0 || sigaction(SIGTERM, &sa, NULL) != 0) {
        return -1;
    }
    return 0;
}

static void drain_connections(void)
{
    for (struct conn *c = server.conns; c != NULL; c = c->next) {
        st_thread_interrupt(c->thread);
    }
    while (server.active > 0) {
        if (st_cond_timedwait(server.drained, (st_utime_t)DRAIN_TIMEOUT_S * US_PER_S) != 0) {
            fprintf(stderr, "echo_server: %ld connections did not finish\n", server.active);
            return;
        }
    }
}

/* ---- start-up ----------------------------------------------------------------------------- */

static st_netfd_t open_listener(long port, unsigned *bound_port)
{
    int one = 1;
    struct sockaddr_in addr;
    socklen_t len = sizeof addr;
    st_netfd_t nfd = NULL;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) {
        return NULL;
    }
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons((unsigned short)port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&addr, sizeof addr) != 0 || listen(fd, BACKLOG) != 0 ||
        getsockname(fd, (struct sockaddr *)&addr, &len) != 0 ||
        (nfd = st_netfd_open_socket(fd)) == NULL) {
        int err = errno;
        (void)close(fd);
        errno = err;
        return NULL;
    }
    *bound_port = ntohs(addr.sin_port);
    return nfd;
}

static int start(const struct options *opt)
{
    static long seconds;
    unsigned port = 0;
    if (select_backend(opt->backend) != 0) {
        fprintf(stderr, "echo_server: event system '%s': %s\n", opt->backend, strerror(errno));
        return -1;
    }
    if (st_init() != 0 || (server.drained = st_cond_new()) == NULL || install_signals() != 0) {
        perror("echo_server: st_init");
        return -1;
    }
    server.listener = open_listener(opt->port, &port);
    if (server.listener == NULL) {
        fprintf(stderr, "echo_server: cannot listen on 127.0.0.1:%ld: %s\n", opt->port,
                strerror(errno));
        return -1;
    }
    seconds = opt->seconds;
    if (seconds > 0 && st_thread_create(stop_after, &seconds, 0, 0) == NULL) {
        perror("echo_server: st_thread_create");
        return -1;
    }
    server.acceptor = st_thread_self();
    printf("listening on 127.0.0.1:%u\n", port);
    (void)fflush(stdout);
    fprintf(stderr, "echo_server: event system %s, pid %ld\n", st_get_eventsys_name(),
            (long)getpid());
    return 0;
}

int main(int argc, char **argv)
{
    struct options opt;
    if (parse_options(argc, argv, &opt) != 0) {
        fprintf(stderr,
                "usage: %s [-p port] [-b epoll|poll|select|io_uring] [-t seconds, 0 = forever]\n",
                argv[0]);
        return 2;
    }
    if (start(&opt) != 0) {
        return 1;
    }
    accept_loop();
    drain_connections();
    (void)st_netfd_close(server.listener);
    printf("stopped: %ld connections served\n", server.served);
    (void)fflush(stdout);
    return 0;
}
