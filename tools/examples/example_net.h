/*
 * example_net: the sockets the example servers in tools/examples/ serve
 * on, all bound to 127.0.0.1, and the accept loop of the TCP ones.
 *
 * Loopback only, on purpose: the examples and their tests must never be
 * reachable from another machine.
 */
#ifndef EXAMPLE_NET_H
#define EXAMPLE_NET_H

#include "st.h"

enum {
    /* SO_REUSEPORT: several processes bind the same port and the kernel
     * spreads the connections over them (http_server -w). */
    EXAMPLE_REUSEPORT = 1,
};

/*
 * Creates a close-on-exec socket of `type` (SOCK_STREAM or SOCK_DGRAM),
 * binds it to 127.0.0.1:port (port 0: any free one) and, if backlog > 0,
 * listens on it; *bound_port gets the port it is on. `flags`: 0 or
 * EXAMPLE_REUSEPORT. Returns the descriptor, or -1 with errno set.
 */
int example_bind_loopback(int type, long port, int flags, int backlog, unsigned *bound_port);

/* The same, opened for st I/O. Returns NULL with errno set on failure. */
st_netfd_t example_open_loopback(int type, long port, int flags, int backlog,
                                 unsigned *bound_port);

/*
 * Accepts connections on `listener` and hands each to `start` (which owns
 * it from then on) until example_stopping() (example_stop.h) is true. An
 * accept error other than the stop's EINTR is reported on stderr as
 * "<prog>: st_accept: <error>" and retried after a pause.
 */
void example_accept_loop(st_netfd_t listener, void (*start)(st_netfd_t client), const char *prog);

#endif
