/* verify: netfd objects and stream I/O over socket pairs. */
#include "verify.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

enum { MS = 1000, BIG = 4 * 1024 * 1024 };

/* ---- the netfd object ---------------------------------------------------------- */

static int destructor_calls;
static void *destructor_value;

static void count_destructor(void *value)
{
    destructor_calls++;
    destructor_value = value;
}

static int check_netfd_free_keeps_fd(void)
{
    static char value;
    int fds[2];
    st_netfd_t nfd = NULL;

    VF_CHECK(pipe(fds) == 0);
    nfd = st_netfd_open(fds[0]);
    VF_CHECK(nfd != NULL);
    VF_CHECK(st_netfd_fileno(nfd) == fds[0]);
    VF_CHECK((fcntl(fds[0], F_GETFL) & O_NONBLOCK) != 0);
    VF_CHECK(st_netfd_getspecific(nfd) == NULL);
    st_netfd_setspecific(nfd, &value, count_destructor);
    VF_CHECK(st_netfd_getspecific(nfd) == &value);
    VF_CHECK(st_netfd_serialize_accept(nfd) == 0);
    st_netfd_free(nfd);
    VF_CHECK(destructor_calls == 1 && destructor_value == &value);
    VF_CHECK(fcntl(fds[0], F_GETFD) != -1); /* the OS fd is still open */
    VF_CHECK(close(fds[0]) == 0 && close(fds[1]) == 0);
    return 0;
}

static int check_netfd_close(void)
{
    static char value;
    int fds[2];
    st_netfd_t nfd = NULL;

    VF_CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, fds) == 0);
    nfd = st_netfd_open_socket(fds[0]);
    VF_CHECK(nfd != NULL);
    VF_CHECK((fcntl(fds[0], F_GETFL) & O_NONBLOCK) != 0);
    st_netfd_setspecific(nfd, &value, count_destructor);
    VF_CHECK(st_netfd_close(nfd) == 0);
    VF_CHECK(destructor_calls == 1 && destructor_value == &value);
    errno = 0;
    VF_CHECK(fcntl(fds[0], F_GETFD) == -1 && errno == EBADF);
    VF_CHECK(close(fds[1]) == 0);
    return 0;
}

/* A descriptor that is not open is refused with EBADF, not wrapped. */
static int check_netfd_bad_fd(void)
{
    int fds[2];
    errno = 0;
    VF_CHECK(st_netfd_open(-1) == NULL && errno == EBADF);
    VF_CHECK(pipe(fds) == 0);
    VF_CHECK(close(fds[0]) == 0 && close(fds[1]) == 0);
    errno = 0;
    VF_CHECK(st_netfd_open_socket(fds[0]) == NULL && errno == EBADF);
    return 0;
}

static int check_st_open(void)
{
    char buf[8];
    st_netfd_t nfd = st_open("/dev/null", O_RDONLY, 0);
    VF_CHECK(nfd != NULL);
    VF_CHECK((fcntl(st_netfd_fileno(nfd), F_GETFL) & O_NONBLOCK) != 0);
    VF_CHECK(st_read(nfd, buf, sizeof buf, VF_LONG_US) == 0);
    VF_CHECK(st_netfd_close(nfd) == 0);
    errno = 0;
    VF_CHECK(st_open("/nonexistent/st-verify", O_RDONLY, 0) == NULL && errno == ENOENT);
    return 0;
}

/* ---- read and write ---------------------------------------------------------------- */

struct delayed_write {
    st_netfd_t fd;
    const char *data;
    size_t len;
    int pieces;
    int close_after;
};

static void *write_in_pieces(void *arg)
{
    struct delayed_write *w = arg;
    size_t piece = w->len / (size_t)w->pieces;
    for (int i = 0; i < w->pieces; i++) {
        size_t len = (i == w->pieces - 1) ? w->len - piece * (size_t)i : piece;
        VF_CO_CHECK(st_usleep(2 * MS) == 0);
        VF_CO_CHECK(st_write(w->fd, w->data + piece * (size_t)i, len, VF_LONG_US) == (ssize_t)len);
    }
    if (w->close_after) {
        VF_CO_CHECK(shutdown(st_netfd_fileno(w->fd), SHUT_WR) == 0);
    }
    return NULL;
}

static int check_read_write(void)
{
    char buf[64] = {0};
    st_netfd_t pair[2];
    struct delayed_write w = {NULL, "later", 5, 1, 1};
    st_thread_t writer = NULL;

    VF_CHECK(vf_socketpair(pair) == 0);
    VF_CHECK(st_write(pair[0], "hello", 5, VF_LONG_US) == 5);
    VF_CHECK(st_read(pair[1], buf, sizeof buf, VF_LONG_US) == 5); /* what is there */
    VF_CHECK(memcmp(buf, "hello", 5) == 0);
    w.fd = pair[0];
    writer = vf_spawn(write_in_pieces, &w);
    VF_CHECK(writer != NULL);
    VF_CHECK(st_read(pair[1], buf, sizeof buf, VF_LONG_US) == 5); /* waits for data */
    VF_CHECK(memcmp(buf, "later", 5) == 0);
    VF_CHECK(st_read(pair[1], buf, sizeof buf, VF_LONG_US) == 0); /* end of file */
    VF_CHECK(vf_join_ok(writer) == 0);
    vf_close_pair(pair);
    return 0;
}

static int check_read_fully(void)
{
    enum { LEN = 3000 };
    static char data[LEN];
    static char buf[LEN + 100];
    st_netfd_t pair[2];
    struct delayed_write w = {NULL, data, LEN, 3, 0};
    st_thread_t writer = NULL;

    vf_fill(data, LEN, 1);
    VF_CHECK(vf_socketpair(pair) == 0);
    w.fd = pair[0];
    writer = vf_spawn(write_in_pieces, &w);
    VF_CHECK(writer != NULL);
    VF_CHECK(st_read_fully(pair[1], buf, LEN, VF_LONG_US) == LEN);
    VF_CHECK(vf_matches(buf, LEN, 1));
    VF_CHECK(vf_join_ok(writer) == 0);
    /* A short count at end of file. */
    VF_CHECK(st_write(pair[0], data, 10, VF_LONG_US) == 10);
    VF_CHECK(shutdown(st_netfd_fileno(pair[0]), SHUT_WR) == 0);
    VF_CHECK(st_read_fully(pair[1], buf, 100, VF_LONG_US) == 10);
    vf_close_pair(pair);
    return 0;
}

static int check_read_timeout(void)
{
    char buf[16];
    st_netfd_t pair[2];
    st_utime_t start = 0;

    VF_CHECK(vf_socketpair(pair) == 0);
    start = st_utime_last_clock();
    errno = 0;
    VF_CHECK(st_read(pair[1], buf, sizeof buf, VF_SHORT_US) == -1 && errno == ETIME);
    VF_CHECK(vf_elapsed(start) >= VF_SHORT_US);
    VF_CHECK(vf_elapsed(start) < VF_SHORT_US + VF_SLACK_US);
    errno = 0;
    VF_CHECK(st_read(pair[1], buf, sizeof buf, ST_UTIME_NO_WAIT) == -1 && errno == ETIME);
    VF_CHECK(st_write(pair[0], "abc", 3, VF_LONG_US) == 3);
    errno = 0;
    VF_CHECK(st_read_fully(pair[1], buf, 6, VF_SHORT_US) == -1 && errno == ETIME);
    vf_close_pair(pair);
    return 0;
}

static int check_read_resid(void)
{
    char buf[32];
    size_t resid = 20;
    st_netfd_t pair[2];

    VF_CHECK(vf_socketpair(pair) == 0);
    VF_CHECK(st_write(pair[0], "0123456789", 10, VF_LONG_US) == 10);
    errno = 0;
    VF_CHECK(st_read_resid(pair[1], buf, &resid, VF_SHORT_US) == -1 && errno == ETIME);
    VF_CHECK(resid == 10);
    VF_CHECK(memcmp(buf, "0123456789", 10) == 0);
    VF_CHECK(st_write(pair[0], "abcde", 5, VF_LONG_US) == 5);
    VF_CHECK(shutdown(st_netfd_fileno(pair[0]), SHUT_WR) == 0);
    resid = 20;
    VF_CHECK(st_read_resid(pair[1], buf, &resid, VF_LONG_US) == 0); /* EOF is not an error */
    VF_CHECK(resid == 15);
    VF_CHECK(memcmp(buf, "abcde", 5) == 0);
    vf_close_pair(pair);
    return 0;
}

/* ---- writes that fill the socket ------------------------------------------------------ */

struct drain {
    st_netfd_t fd;
    size_t expect;
    unsigned seed;
};

static void *drain_and_check(void *arg)
{
    struct drain *d = arg;
    char *buf = malloc(d->expect + 1);
    char extra = 0;
    ssize_t n = 0;
    VF_CO_CHECK(buf != NULL);
    n = st_read_fully(d->fd, buf, d->expect, VF_LONG_US);
    if (n != (ssize_t)d->expect || !vf_matches(buf, d->expect, d->seed)) {
        free(buf);
        (void)vf_fail("drained %ld bytes, expected %lu bytes of the written pattern", (long)n,
                      (unsigned long)d->expect);
        return VF_CO_FAILED;
    }
    free(buf);
    errno = 0;
    VF_CO_CHECK(st_read(d->fd, &extra, 1, ST_UTIME_NO_WAIT) == -1 && errno == ETIME);
    return NULL;
}

static int check_write_blocks(void)
{
    char *data = malloc(BIG);
    st_netfd_t pair[2];
    struct drain d = {NULL, BIG, 2};
    st_thread_t reader = NULL;
    ssize_t n = 0;

    VF_CHECK(data != NULL);
    vf_fill(data, BIG, 2);
    VF_CHECK(vf_socketpair(pair) == 0);
    d.fd = pair[1];
    reader = vf_spawn(drain_and_check, &d);
    n = st_write(pair[0], data, BIG, VF_LONG_US);
    free(data);
    VF_CHECK(reader != NULL);
    VF_CHECK(n == BIG);
    VF_CHECK(vf_join_ok(reader) == 0);
    vf_close_pair(pair);
    return 0;
}

static int check_write_resid(void)
{
    char *data = malloc(BIG);
    st_netfd_t pair[2];
    size_t resid = BIG;
    struct drain d = {NULL, 0, 3};
    int rc = 0;
    int err = 0;

    VF_CHECK(data != NULL);
    vf_fill(data, BIG, 3);
    VF_CHECK(vf_socketpair(pair) == 0);
    errno = 0;
    rc = st_write_resid(pair[0], data, &resid, VF_SHORT_US);
    err = errno;
    free(data);
    VF_CHECK(rc == -1 && err == ETIME);
    VF_CHECK(resid > 0 && resid < BIG);
    d.fd = pair[1];
    d.expect = BIG - resid; /* exactly what went out */
    VF_CHECK(vf_join_ok(vf_spawn(drain_and_check, &d)) == 0);
    vf_close_pair(pair);
    return 0;
}

static int check_write_epipe(void)
{
    st_netfd_t pair[2];
    VF_CHECK(vf_socketpair(pair) == 0);
    VF_CHECK(st_netfd_close(pair[1]) == 0);
    pair[1] = NULL;
    errno = 0; /* SIGPIPE is ignored, so this is an error, not death */
    VF_CHECK(st_write(pair[0], "x", 1, VF_LONG_US) == -1 && errno == EPIPE);
    vf_close_pair(pair);
    return 0;
}

/* ---- vectors ---------------------------------------------------------------------------- */

static int check_readv_writev(void)
{
    char out[32] = {0};
    char a[4];
    char b[20];
    struct iovec wv[3] = {{"abc", 3}, {"defgh", 5}, {"ij", 2}};
    struct iovec rv[2] = {{a, sizeof a}, {b, sizeof b}};
    st_netfd_t pair[2];

    VF_CHECK(vf_socketpair(pair) == 0);
    VF_CHECK(st_writev(pair[0], wv, 3, VF_LONG_US) == 10);
    VF_CHECK(st_readv(pair[1], rv, 2, VF_LONG_US) == 10);
    memcpy(out, a, 4);
    memcpy(out + 4, b, 6);
    VF_CHECK(strcmp(out, "abcdefghij") == 0);
    errno = 0;
    VF_CHECK(st_readv(pair[1], rv, 2, VF_SHORT_US) == -1 && errno == ETIME);
    vf_close_pair(pair);
    return 0;
}

static int check_readv_resid(void)
{
    char a[8];
    char b[8];
    struct iovec vec[2] = {{a, sizeof a}, {b, sizeof b}};
    struct iovec *iov = vec;
    int count = 2;
    st_netfd_t pair[2];

    VF_CHECK(vf_socketpair(pair) == 0);
    VF_CHECK(st_write(pair[0], "0123456789AB", 12, VF_LONG_US) == 12);
    errno = 0;
    VF_CHECK(st_readv_resid(pair[1], &iov, &count, VF_SHORT_US) == -1 && errno == ETIME);
    VF_CHECK(count == 1 && iov == &vec[1]);
    VF_CHECK(iov->iov_len == 4 && iov->iov_base == b + 4);
    VF_CHECK(memcmp(a, "01234567", 8) == 0 && memcmp(b, "89AB", 4) == 0);
    VF_CHECK(st_write(pair[0], "CDEF", 4, VF_LONG_US) == 4);
    VF_CHECK(st_readv_resid(pair[1], &iov, &count, VF_LONG_US) == 0);
    VF_CHECK(count == 0);
    VF_CHECK(memcmp(b, "89ABCDEF", 8) == 0);
    vf_close_pair(pair);
    return 0;
}

static int check_writev_resid(void)
{
    enum { HALF = BIG / 2 };
    char *data = malloc(BIG);
    struct iovec vec[2];
    struct iovec *iov = vec;
    int count = 2;
    size_t left = 0;
    int rc = 0;
    st_netfd_t pair[2];
    struct drain d = {NULL, 0, 4};

    VF_CHECK(data != NULL);
    vf_fill(data, BIG, 4);
    vec[0] = (struct iovec){data, HALF};
    vec[1] = (struct iovec){data + HALF, HALF};
    VF_CHECK(vf_socketpair(pair) == 0);
    errno = 0;
    rc = st_writev_resid(pair[0], &iov, &count, VF_SHORT_US);
    VF_CHECK(rc == -1 && errno == ETIME);
    VF_CHECK(count >= 1 && count <= 2 && iov == &vec[2 - count]);
    for (int i = 0; i < count; i++) {
        left += iov[i].iov_len;
    }
    VF_CHECK(left > 0 && left < BIG);
    VF_CHECK((char *)iov[0].iov_base + iov[0].iov_len == data + (size_t)(3 - count) * HALF);
    d.fd = pair[1];
    d.expect = BIG - left;
    rc = vf_join_ok(vf_spawn(drain_and_check, &d));
    free(data);
    VF_CHECK(rc == 0);
    vf_close_pair(pair);
    return 0;
}

/* ---- messages --------------------------------------------------------------------------- */

static int check_sendmsg_recvmsg(void)
{
    char in[16] = {0};
    struct iovec out_iov[2] = {{"mes", 3}, {"sage", 4}};
    struct iovec in_iov = {in, sizeof in};
    struct msghdr out_msg;
    struct msghdr in_msg;
    st_netfd_t pair[2];

    memset(&out_msg, 0, sizeof out_msg);
    memset(&in_msg, 0, sizeof in_msg);
    out_msg.msg_iov = out_iov;
    out_msg.msg_iovlen = 2;
    in_msg.msg_iov = &in_iov;
    in_msg.msg_iovlen = 1;
    VF_CHECK(vf_socketpair(pair) == 0);
    errno = 0;
    VF_CHECK(st_recvmsg(pair[1], &in_msg, 0, VF_SHORT_US) == -1 && errno == ETIME);
    VF_CHECK(st_sendmsg(pair[0], &out_msg, 0, VF_LONG_US) == 7);
    VF_CHECK(st_recvmsg(pair[1], &in_msg, 0, VF_LONG_US) == 7);
    VF_CHECK(strcmp(in, "message") == 0);
    vf_close_pair(pair);
    return 0;
}

/* ---- closing an fd somebody waits on ------------------------------------------------------ */

static void *read_until_interrupted(void *arg)
{
    char c = 0;
    errno = 0;
    VF_CO_CHECK(st_read((st_netfd_t)arg, &c, 1, ST_UTIME_NO_TIMEOUT) == -1 && errno == EINTR);
    return NULL;
}

static int check_netfd_close_busy(void)
{
    st_netfd_t pair[2];
    st_thread_t reader = NULL;

    VF_CHECK(vf_socketpair(pair) == 0);
    reader = vf_spawn(read_until_interrupted, pair[1]);
    VF_CHECK(reader != NULL);
    vf_settle();
    errno = 0;
    VF_CHECK(st_netfd_close(pair[1]) == -1 && errno == EBUSY);
    VF_CHECK(fcntl(st_netfd_fileno(pair[1]), F_GETFD) != -1); /* still open */
    st_thread_interrupt(reader);
    VF_CHECK(vf_join_ok(reader) == 0);
    VF_CHECK(st_netfd_close(pair[1]) == 0);
    pair[1] = NULL;
    vf_close_pair(pair);
    return 0;
}

const struct vf_check vf_checks_io[] = {
    {"netfd_free_keeps_fd", check_netfd_free_keeps_fd, VF_AFTER_INIT},
    {"netfd_close", check_netfd_close, VF_AFTER_INIT},
    {"netfd_bad_fd", check_netfd_bad_fd, VF_AFTER_INIT},
    {"st_open", check_st_open, VF_AFTER_INIT},
    {"read_write", check_read_write, VF_AFTER_INIT},
    {"read_fully", check_read_fully, VF_AFTER_INIT},
    {"read_timeout", check_read_timeout, VF_AFTER_INIT},
    {"read_resid", check_read_resid, VF_AFTER_INIT},
    {"write_blocks", check_write_blocks, VF_AFTER_INIT},
    {"write_resid", check_write_resid, VF_AFTER_INIT},
    {"write_epipe", check_write_epipe, VF_AFTER_INIT},
    {"readv_writev", check_readv_writev, VF_AFTER_INIT},
    {"readv_resid", check_readv_resid, VF_AFTER_INIT},
    {"writev_resid", check_writev_resid, VF_AFTER_INIT},
    {"sendmsg_recvmsg", check_sendmsg_recvmsg, VF_AFTER_INIT},
    {"netfd_close_busy", check_netfd_close_busy, VF_AFTER_INIT},
    {NULL, NULL, VF_AFTER_INIT},
};
