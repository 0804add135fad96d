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
 *
 * The listening socket, the accept loop, the stop and the list of live
 * connections are shared with the other example servers (example_net.c,
 * example_stop.c, example_conns.c); this file is the echo itself.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "example_args.h"
#include "example_conns.h"
#include "example_eventsys.h"
#include "example_net.h"
#include "example_stop.h"
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
    struct example_conn link; /* in server.conns */
    st_netfd_t fd;
    st_thread_t thread;
};

struct server {
    st_netfd_t listener;
    struct example_conns conns; /* live connections, for the shutdown */
    long served;
};

static struct server server;

/* ---- options ---------------------------------------------------------------------- */

struct options {
    long port;
    const char *backend;
    long seconds;
};

static int parse_options(int argc, char **argv, struct options *opt)
{
    int c = 0;
    opt->port = 0;
    opt->backend = NULL;
    opt->seconds = 0;
    while ((c = getopt(argc, argv, "p:b:t:")) != -1) {
        int rc = 0;
        if (c == 'p') {
            rc = example_parse_long(optarg, 0, MAX_PORT, &opt->port);
        } else if (c == 'b') {
            opt->backend = optarg;
        } else if (c == 't') {
            rc = example_parse_long(optarg, 0, 365L * 24 * 3600, &opt->seconds);
        } else {
            rc = -1;
        }
        if (rc != 0) {
            return -1;
        }
    }
    return optind == argc ? 0 : -1;
}

/* ---- connections -------------------------------------------------------------------- */

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
    example_conns_remove(&server.conns, &c->link);
    (void)st_netfd_close(c->fd);
    free(c);
    return NULL;
}

static void start_connection(st_netfd_t fd)
{
    struct conn *c = calloc(1, sizeof *c);
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
    example_conns_add(&server.conns, &c->link, c);
    server.served++;
}

/* ---- stopping -------------------------------------------------------------------------- */

/* On stop (example_stop.h): ends every connection and waits for them. */
static void drain_connections(void)
{
    for (struct example_conn *l = server.conns.head; l != NULL; l = l->next) {
        const struct conn *c = l->owner;
        st_thread_interrupt(c->thread);
    }
    if (example_conns_wait(&server.conns, (st_utime_t)DRAIN_TIMEOUT_S * US_PER_S) != 0) {
        fprintf(stderr, "echo_server: %ld connections did not finish\n", server.conns.active);
    }
}

/* ---- start-up ----------------------------------------------------------------------------- */

static int start(const struct options *opt)
{
    unsigned port = 0;
    if (example_set_eventsys(opt->backend) != 0) {
        fprintf(stderr, "echo_server: event system '%s': %s\n", opt->backend, strerror(errno));
        return -1;
    }
    if (st_init() != 0 || example_conns_init(&server.conns) != 0) {
        perror("echo_server: st_init");
        return -1;
    }
    server.listener = example_open_loopback(SOCK_STREAM, opt->port, 0, BACKLOG, &port);
    if (server.listener == NULL) {
        fprintf(stderr, "echo_server: cannot listen on 127.0.0.1:%ld: %s\n", opt->port,
                strerror(errno));
        return -1;
    }
    /* The stop interrupts this coroutine, the acceptor, out of st_accept. */
    if (example_stop_init(st_thread_self(), opt->seconds) != 0) {
        perror("echo_server: signals");
        return -1;
    }
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
    example_accept_loop(server.listener, start_connection, "echo_server");
    drain_connections();
    (void)st_netfd_close(server.listener);
    printf("stopped: %ld connections served\n", server.served);
    (void)fflush(stdout);
    return 0;
}
