/*
 * What the peer echo servers in this directory share: how st_bench runs
 * them (tools/bench/peer.c, README.md here). A peer finds its listening
 * socket, bound to a loopback port, as fd 3; with --once it exits when its
 * first connection ends; with --probe it prints one NOTE line saying what
 * it uses and exits.
 */
#ifndef BENCH_PEER_H
#define BENCH_PEER_H

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

enum {
    PEER_LISTEN_FD = 3,
    PEER_BUF = 4096, /* bytes per read, as the servers in echo.c */
};

struct peer_args {
    bool once;
    bool probe;
};

/* Parse [--once] [--probe]; 0, or -1 after a usage message. */
static inline int peer_parse_args(int argc, char **argv, struct peer_args *args)
{
    memset(args, 0, sizeof *args);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--once") == 0) {
            args->once = true;
        } else if (strcmp(argv[i], "--probe") == 0) {
            args->probe = true;
        } else {
            fprintf(stderr, "usage: %s [--once] [--probe] (the listening socket is fd 3)\n",
                    argv[0]);
            return -1;
        }
    }
    return 0;
}

/* Requests are 64 bytes, one in flight: no Nagle delay on the echo. */
static inline void peer_nodelay(int fd)
{
    int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

#endif /* BENCH_PEER_H */
