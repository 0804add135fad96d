/* verify: failure recording and small helpers shared by the checks. */
#include "verify.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

enum { VF_REASON_MAX = 512 };

static char first_failure[VF_REASON_MAX];
static int have_failure;
static const struct vf_backend *current_backend;

char vf_co_failed_marker;

const struct vf_backend *vf_current_backend(void)
{
    return current_backend;
}

void vf_set_current_backend(const struct vf_backend *backend)
{
    current_backend = backend;
}

static const char *base_name(const char *path)
{
    const char *slash = strrchr(path, '/');
    return slash ? slash + 1 : path;
}

/* Does errno say anything about this expectation (a call's error path)? */
static int mentions_errno(const char *what)
{
    static const char *const hints[] = {"errno", "== -1", "NULL", "== 0", "!= 0"};
    for (size_t i = 0; i < sizeof hints / sizeof hints[0]; i++) {
        if (strstr(what, hints[i]) != NULL) {
            return 1;
        }
    }
    return 0;
}

int vf_fail_at(const char *file, int line, const char *what)
{
    int err = errno;
    if (have_failure) {
        return -1;
    }
    have_failure = 1;
    if (err != 0 && mentions_errno(what)) {
        (void)snprintf(first_failure, sizeof first_failure, "%s:%d: expected %s (errno %d: %s)",
                       base_name(file), line, what, err, strerror(err));
    } else {
        (void)snprintf(first_failure, sizeof first_failure, "%s:%d: expected %s", base_name(file),
                       line, what);
    }
    return -1;
}

int vf_fail(const char *fmt, ...)
{
    va_list ap;
    if (have_failure) {
        return -1;
    }
    have_failure = 1;
    va_start(ap, fmt);
    (void)vsnprintf(first_failure, sizeof first_failure, fmt, ap);
    va_end(ap);
    return -1;
}

const char *vf_first_failure(void)
{
    return have_failure ? first_failure : NULL;
}

st_thread_t vf_spawn(void *(*start)(void *), void *arg)
{
    st_thread_t thread = st_thread_create(start, arg, 1, 0);
    if (thread == NULL) {
        (void)vf_fail("st_thread_create failed (errno %d: %s)", errno, strerror(errno));
    }
    return thread;
}

int vf_join_ok(st_thread_t thread)
{
    void *retval = NULL;
    if (thread == NULL) {
        return -1;
    }
    if (st_thread_join(thread, &retval) != 0) {
        return vf_fail("st_thread_join failed (errno %d: %s)", errno, strerror(errno));
    }
    return retval == VF_CO_FAILED ? -1 : 0;
}

void vf_settle(void)
{
    enum { ROUNDS = 8 };
    for (int i = 0; i < ROUNDS; i++) {
        st_thread_yield();
    }
}

st_utime_t vf_elapsed(st_utime_t since)
{
    return st_utime() - since;
}

int vf_socketpair(st_netfd_t pair[2])
{
    int fds[2];
    pair[0] = NULL;
    pair[1] = NULL;
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds) != 0) {
        return vf_fail("socketpair: %s", strerror(errno));
    }
    pair[0] = st_netfd_open_socket(fds[0]);
    pair[1] = st_netfd_open_socket(fds[1]);
    if (pair[0] == NULL || pair[1] == NULL) {
        return vf_fail("st_netfd_open_socket failed (errno %d: %s)", errno, strerror(errno));
    }
    return 0;
}

void vf_close_pair(st_netfd_t pair[2])
{
    for (int i = 0; i < 2; i++) {
        if (pair[i] != NULL) {
            (void)st_netfd_close(pair[i]);
            pair[i] = NULL;
        }
    }
}

void vf_loopback_addr(void *sin, unsigned short port)
{
    struct sockaddr_in *addr = sin;
    memset(addr, 0, sizeof *addr);
    addr->sin_family = AF_INET;
    addr->sin_port = htons(port);
    addr->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
}

static int bind_loopback(int fd, int type, unsigned short *port)
{
    enum { BACKLOG = 128 };
    struct sockaddr_in addr;
    socklen_t len = sizeof addr;
    vf_loopback_addr(&addr, 0);
    if (bind(fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
        return vf_fail("bind 127.0.0.1:0: %s", strerror(errno));
    }
    if (type == SOCK_STREAM && listen(fd, BACKLOG) != 0) {
        return vf_fail("listen: %s", strerror(errno));
    }
    if (getsockname(fd, (struct sockaddr *)&addr, &len) != 0) {
        return vf_fail("getsockname: %s", strerror(errno));
    }
    *port = ntohs(addr.sin_port);
    return 0;
}

st_netfd_t vf_loopback_socket(int type, unsigned short *port)
{
    st_netfd_t nfd = NULL;
    int fd = socket(AF_INET, type, 0);
    if (fd < 0) {
        (void)vf_fail("socket: %s", strerror(errno));
        return NULL;
    }
    if (bind_loopback(fd, type, port) != 0) {
        (void)close(fd);
        return NULL;
    }
    nfd = st_netfd_open_socket(fd);
    if (nfd == NULL) {
        (void)vf_fail("st_netfd_open_socket: %s", strerror(errno));
        (void)close(fd);
    }
    return nfd;
}

static unsigned char pattern_byte(size_t i, unsigned seed)
{
    return (unsigned char)((i * 131U + seed * 7U + (i >> 8)) & 0xffU);
}

void vf_fill(void *buf, size_t len, unsigned seed)
{
    unsigned char *p = buf;
    for (size_t i = 0; i < len; i++) {
        p[i] = pattern_byte(i, seed);
    }
}

int vf_matches(const void *buf, size_t len, unsigned seed)
{
    const unsigned char *p = buf;
    for (size_t i = 0; i < len; i++) {
        if (p[i] != pattern_byte(i, seed)) {
            return 0;
        }
    }
    return 1;
}
