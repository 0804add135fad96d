/*
 * example_net: loopback sockets and the accept loop of the example servers
 * (see example_net.h).
 */
#include "example_net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "example_stop.h"

enum { ACCEPT_BACKOFF_US = 100 * 1000 };

int example_bind_loopback(int type, long port, int flags, int backlog, unsigned *bound_port)
{
    int one = 1;
    struct sockaddr_in addr;
    socklen_t len = sizeof addr;
    int fd = socket(AF_INET, type | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return -1;
    }
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_port = htons((unsigned short)port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    /* A restarted TCP server may take its port back while connections of
     * the previous run are still in TIME_WAIT. */
    if ((type == SOCK_STREAM && setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0) ||
        ((flags & EXAMPLE_REUSEPORT) != 0 &&
         setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) != 0) ||
        bind(fd, (struct sockaddr *)&addr, sizeof addr) != 0 ||
        (backlog > 0 && listen(fd, backlog) != 0) ||
        getsockname(fd, (struct sockaddr *)&addr, &len) != 0) { /* the port that port 0 got */
        int err = errno;
        (void)close(fd);
        errno = err; /* for the caller's message, not close()'s */
        return -1;
    }
    *bound_port = ntohs(addr.sin_port);
    return fd;
}

st_netfd_t example_open_loopback(int type, long port, int flags, int backlog,
                                 unsigned *bound_port)
{
    st_netfd_t nfd = NULL;
    int fd = example_bind_loopback(type, port, flags, backlog, bound_port);
    if (fd >= 0 && (nfd = st_netfd_open_socket(fd)) == NULL) {
        int err = errno;
        (void)close(fd);
        errno = err;
    }
    return nfd;
}

void example_accept_loop(st_netfd_t listener, void (*start)(st_netfd_t client), const char *prog)
{
    while (!example_stopping()) {
        st_netfd_t fd = st_accept(listener, NULL, NULL, ST_UTIME_NO_TIMEOUT);
        if (fd != NULL) {
            /* The servers answer each request at once: Nagle's algorithm
             * would only hold small replies back. */
            int one = 1;
            (void)setsockopt(st_netfd_fileno(fd), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            start(fd);
        } else if (errno != EINTR) {
            /* e.g. out of descriptors: a pause lets connections close
             * instead of spinning on the same error. */
            fprintf(stderr, "%s: st_accept: %s\n", prog, strerror(errno));
            (void)st_usleep(ACCEPT_BACKOFF_US);
        }
    }
}
