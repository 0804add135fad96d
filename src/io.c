/*
 * Coroutine-aware I/O. Every function tries the system call first and only
 * waits (st_netfd_poll) when the descriptor is not ready, so I/O that can
 * complete at once costs one system call and no scheduling.
 *
 * A backend that carries operations out itself (submit_io: io_uring) gets
 * the socket reads and writes, accepts and connects first, as requests it
 * submits with its next wait; what it does not take (no room, not a socket,
 * a call that must not wait) goes the try-first way as above.
 *
 * A netfd on a regular file or a block device never says "not ready", so
 * trying first would block: its reads and writes go to file_io.h instead.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "backend.h"
#include "file_io.h"
#include "netfd.h"
#include "scheduler.h"
#include "st_config.h"

/* Enough iovecs for common gathers without touching the heap. */
#define LOCAL_IOVECS 16

static bool not_ready(int err)
{
    return err == EAGAIN || err == EWOULDBLOCK;
}

int st_netfd_poll(st_netfd_t fd, int how, st_utime_t timeout)
{
    if (!st__netfd_usable(fd)) {
        return -1;
    }
    struct pollfd pd = {.fd = fd->osfd, .events = (short)how};
    st__netfd_enter(fd);
    int n = st__poll_one(&pd, timeout);
    bool freed = !fd->inuse; /* st_netfd_free() while we waited */
    st__netfd_leave(st__sched_peek(), fd);
    if (freed) {
        errno = EBADF;
        return -1;
    }
    if (n > 0 && (pd.revents & POLLNVAL) == 0) {
        return 0;
    }
    if (n == 0) {
        errno = ETIME;
    } else if (n > 0) {
        errno = EBADF;
    }
    return -1;
}

/* Does the backend submit operations? (Then trying the call first would only add one.) */
static inline bool io_submits(void)
{
    const struct st__sched *sched = st__sched_peek();
    return sched != NULL && sched->submits_io;
}

/*
 * `req` as a request of the backend, if it submits operations: its result,
 * -1 with errno, or ST__IO_NOT_SUBMITTED. The operation in flight counts as
 * a user of the netfd, as a wait in st_netfd_poll does.
 */
__attribute__((noinline)) ssize_t st__io_submit(st_netfd_t fd, const struct st__io_req *req,
                                               st_utime_t timeout)
{
    struct st__sched *sched = st__sched_peek();
    if (sched == NULL || !sched->submits_io || timeout == 0) {
        return ST__IO_NOT_SUBMITTED;
    }
    st__netfd_enter(fd);
    ssize_t n = sched->backend->submit_io(sched, fd->osfd, req, timeout);
    bool freed = !fd->inuse; /* st_netfd_free() while it was in flight */
    st__netfd_leave(sched, fd);
    if (freed && n < 0 && n != ST__IO_NOT_SUBMITTED) {
        errno = EBADF;
    }
    return n;
}

/* One attempt of a system call on `osfd`; the arguments are in `args`. */
typedef ssize_t (*st__io_attempt_fn)(int osfd, void *args);

/*
 * Optimised builds inline the retry loop in each I/O function, so that its
 * attempt is a direct call there; debug builds keep it a frame of its own,
 * as debuggers and the frame-pointer walk then name it alike.
 */
#ifdef __OPTIMIZE__
#define ST__IO_INLINE inline __attribute__((always_inline))
#else
#define ST__IO_INLINE
#endif

/*
 * Retry `attempt` until it completes, waiting for `events` while not ready;
 * `req` (or NULL) is the same operation for a backend that submits them.
 */
static ST__IO_INLINE ssize_t
io_retry(st_netfd_t fd, short events, st_utime_t timeout, st__io_attempt_fn attempt, void *args,
         const struct st__io_req *req)
{
    if (!st__netfd_usable(fd)) {
        return -1;
    }
    if (req != NULL && io_submits()) {
        ssize_t n = st__io_submit(fd, req, timeout);
        if (n != ST__IO_NOT_SUBMITTED) {
            return n;
        }
    }
    for (;;) {
        ssize_t n = attempt(fd->osfd, args);
        if (n >= 0) {
            return n;
        }
        if (errno == EINTR) {
            continue;
        }
        if (!not_ready(errno) || st_netfd_poll(fd, events, timeout) != 0) {
            return -1;
        }
    }
}

struct st__buf_args {
    void *buf;
    size_t len;
};

static ssize_t attempt_read(int osfd, void *args)
{
    struct st__buf_args *a = args;
    return ST__STAT_EAGAIN(read(osfd, a->buf, a->len), read_eagain);
}

ssize_t st_read(st_netfd_t fd, void *buf, size_t nbyte, st_utime_t timeout)
{
    ST__STAT_INC(read);
    if (st__netfd_file(fd)) {
        struct st__io_req file = {.kind = ST__IO_READ, .buf = buf, .len = nbyte, .offset = -1};
        return st__file_io(fd, &file, timeout);
    }
    struct st__buf_args args = {buf, nbyte};
    struct st__io_req req = {.kind = ST__IO_RECV, .buf = buf, .len = nbyte};
    return io_retry(fd, POLLIN, timeout, attempt_read, &args, &req);
}

struct st__vec_args {
    const struct iovec *iov;
    int count;
};

static ssize_t attempt_readv(int osfd, void *args)
{
    struct st__vec_args *a = args;
    return ST__STAT_EAGAIN(readv(osfd, a->iov, a->count), readv_eagain);
}

/* One readv or writev of a file netfd at its file position. */
static ssize_t file_vector(st_netfd_t fd, const struct iovec *iov, int count, st_utime_t timeout,
                           bool writing)
{
    if (count < 0) {
        errno = EINVAL;
        return -1;
    }
    struct st__io_req req = {.kind = writing ? ST__IO_WRITEV : ST__IO_READV, .len = (size_t)count,
                             .offset = -1};
    memcpy(&req.buf, &iov, sizeof(req.buf)); /* only read from: the request has no const member */
    return st__file_io(fd, &req, timeout);
}

ssize_t st_readv(st_netfd_t fd, const struct iovec *iov, int iov_size, st_utime_t timeout)
{
    ST__STAT_INC(readv);
    if (st__netfd_file(fd)) {
        return file_vector(fd, iov, iov_size, timeout, false);
    }
    struct st__vec_args args = {iov, iov_size};
    void *vector; /* only written through: msghdr has no const member */
    memcpy(&vector, &iov, sizeof(vector));
    struct msghdr msg = {.msg_iov = vector, .msg_iovlen = iov_size > 0 ? (size_t)iov_size : 0};
    struct st__io_req req = {.kind = ST__IO_RECVMSG, .msg = &msg};
    return io_retry(fd, POLLIN, timeout, attempt_readv, &args, iov_size >= 0 ? &req : NULL);
}

/* Account for `done` bytes moved: skip finished entries, trim the current one. */
static void iov_advance(struct iovec **iov, int *iov_size, size_t done)
{
    while (*iov_size > 0 && done >= (*iov)->iov_len) {
        done -= (*iov)->iov_len;
        (*iov)->iov_base = (char *)(*iov)->iov_base + (*iov)->iov_len;
        (*iov)->iov_len = 0;
        (*iov)++;
        (*iov_size)--;
    }
    if (*iov_size > 0) {
        (*iov)->iov_base = (char *)(*iov)->iov_base + done;
        (*iov)->iov_len -= done;
    }
}

static ssize_t transfer_once(int osfd, const struct iovec *iov, int count, bool writing)
{
    if (count > IOV_MAX) {
        count = IOV_MAX;
    }
    if (count == 1) {
        return writing ? write(osfd, iov->iov_base, iov->iov_len)
                       : read(osfd, iov->iov_base, iov->iov_len);
    }
    return writing ? writev(osfd, iov, count) : readv(osfd, iov, count);
}

/* One transfer of *iov as a request of the backend (see st__io_submit). */
static ssize_t submit_transfer(st_netfd_t fd, struct iovec *iov, int count, st_utime_t timeout,
                               bool writing)
{
    if (count > IOV_MAX) {
        count = IOV_MAX;
    }
    struct msghdr msg = {.msg_iov = iov, .msg_iovlen = (size_t)count};
    struct st__io_req req = {.kind = writing ? ST__IO_SENDMSG : ST__IO_RECVMSG, .msg = &msg};
    if (count == 1) {
        req = (struct st__io_req){.kind = writing ? ST__IO_SEND : ST__IO_RECV,
                                  .buf = iov->iov_base, .len = iov->iov_len};
    }
    return st__io_submit(fd, &req, timeout);
}

/*
 * Which way transfer_resid moves bytes. ST__XFER_WRITEV is st_writev's
 * writing, which differs only in the debug_stats counters: State Threads'
 * st_writev hands a last vector left alone to st_write, so that a call that
 * comes down to one vector counts twice in _st_stat_writev.
 */
enum st__xfer { ST__XFER_READ, ST__XFER_WRITE, ST__XFER_WRITEV };

/*
 * Move every byte described by *iov, waiting as needed. On return *iov and
 * *iov_size describe what is left (nothing on success, unless a read hit
 * end of file), which is how the *_resid functions report partial progress.
 */
/* What one try-first attempt of transfer_resid leaves to do. */
enum st__try {
    ST__TRY_DONE,   /* everything moved, or end of file */
    ST__TRY_AGAIN,  /* interrupted by a signal: try again at once */
    ST__TRY_WAIT,   /* not ready, or some moved: wait for the descriptor */
    ST__TRY_FAILED, /* an error, in errno */
};

/* One read or write of what is left; `returned`: the call moved bytes or saw end of file. */
static enum st__try try_transfer(st_netfd_t fd, struct iovec **iov, int *iov_size, bool writing,
                                 bool *returned)
{
    ssize_t n = transfer_once(fd->osfd, *iov, *iov_size, writing);
    *returned = n >= 0;
    if (n < 0) {
        if (errno == EINTR) {
            return ST__TRY_AGAIN;
        }
        return not_ready(errno) ? ST__TRY_WAIT : ST__TRY_FAILED;
    }
    if (n == 0 && !writing) {
        return ST__TRY_DONE;
    }
    iov_advance(iov, iov_size, (size_t)n);
    return *iov_size == 0 ? ST__TRY_DONE : ST__TRY_WAIT;
}

/* transfer_resid on a file netfd: operation after operation until done, end of file or error. */
static int file_resid(st_netfd_t fd, struct iovec **iov, int *iov_size, st_utime_t timeout,
                      bool writing)
{
    while (*iov_size > 0) {
        ssize_t n = file_vector(fd, *iov, *iov_size > IOV_MAX ? IOV_MAX : *iov_size, timeout,
                                writing);
        if (n < 0) {
            return -1;
        }
        if (n == 0 && !writing) {
            break; /* end of file */
        }
        iov_advance(iov, iov_size, (size_t)n);
    }
    return 0;
}

static int transfer_resid(st_netfd_t fd, struct iovec **iov, int *iov_size, st_utime_t timeout,
                          enum st__xfer how)
{
    const bool writing = how != ST__XFER_READ;
    if (!st__netfd_usable(fd)) {
        return -1;
    }
    if (iov == NULL || iov_size == NULL || *iov_size < 0 || (*iov_size > 0 && *iov == NULL)) {
        errno = EINVAL;
        return -1;
    }
    iov_advance(iov, iov_size, 0);
    if (fd->is_file) {
        return file_resid(fd, iov, iov_size, timeout, writing);
    }
    while (*iov_size > 0) {
        ssize_t n = submit_transfer(fd, *iov, *iov_size, timeout, writing);
        if (n > 0) {
            iov_advance(iov, iov_size, (size_t)n);
            continue;
        }
        if (n == 0 && !writing) {
            break; /* end of file */
        }
        if (n == -1) {
            return -1;
        }
        if (!st__netfd_usable(fd)) {
            return -1; /* freed by another coroutine while the request was in flight */
        }
        bool returned = false;
        enum st__try step = try_transfer(fd, iov, iov_size, writing, &returned);
        if (step == ST__TRY_AGAIN) {
            continue;
        }
        if (step != ST__TRY_WAIT) {
            return step == ST__TRY_FAILED ? -1 : 0;
        }
        if (writing) {
            ST__STAT_INC(writev_eagain);
        }
        if (st_netfd_poll(fd, writing ? POLLOUT : POLLIN, timeout) != 0) {
            return -1;
        }
#if ST__DEBUG_STATS
        /* The vectors left, as State Threads counts them, change only when an attempt returned. */
        if (how == ST__XFER_WRITEV && returned && *iov_size == 1) {
            ST__STAT_INC(writev);
            how = ST__XFER_WRITE;
        }
#endif
    }
    return 0;
}

int st_readv_resid(st_netfd_t fd, struct iovec **iov, int *iov_size, st_utime_t timeout)
{
    return transfer_resid(fd, iov, iov_size, timeout, ST__XFER_READ);
}

int st_writev_resid(st_netfd_t fd, struct iovec **iov, int *iov_size, st_utime_t timeout)
{
    ST__STAT_INC(writev);
    return transfer_resid(fd, iov, iov_size, timeout, ST__XFER_WRITE);
}

static int buffer_resid(st_netfd_t fd, void *buf, size_t *resid, st_utime_t timeout, bool writing)
{
    if (resid == NULL) {
        errno = EINVAL;
        return -1;
    }
    struct iovec iov = {.iov_base = buf, .iov_len = *resid};
    struct iovec *cursor = &iov;
    int count = 1;
    int rv = transfer_resid(fd, &cursor, &count, timeout, writing ? ST__XFER_WRITE : ST__XFER_READ);
    *resid = iov.iov_len;
    return rv;
}

int st_read_resid(st_netfd_t fd, void *buf, size_t *resid, st_utime_t timeout)
{
    return buffer_resid(fd, buf, resid, timeout, false);
}

/* State Threads' st_write_resid (and st_write) is st_writev_resid: each call counts as writev. */
int st_write_resid(st_netfd_t fd, const void *buf, size_t *resid, st_utime_t timeout)
{
    ST__STAT_INC(writev);
    /* The buffer is only read from; iovec just has no const member. */
    void *data;
    memcpy(&data, &buf, sizeof(data));
    return buffer_resid(fd, data, resid, timeout, true);
}

ssize_t st_read_fully(st_netfd_t fd, void *buf, size_t nbyte, st_utime_t timeout)
{
    size_t resid = nbyte;
    return st_read_resid(fd, buf, &resid, timeout) == 0 ? (ssize_t)(nbyte - resid) : -1;
}

ssize_t st_write(st_netfd_t fd, const void *buf, size_t nbyte, st_utime_t timeout)
{
    /*
     * The common case first: the socket takes it all at once. (The same
     * write(2) transfer_resid would make, without its iovec bookkeeping,
     * which costs more than the rest of an echo server's write path.)
     */
    ssize_t done = 0;
    if (nbyte > 0 && st__netfd_usable(fd) && !fd->is_file && !io_submits()) {
        done = write(fd->osfd, buf, nbyte);
        if (done == (ssize_t)nbyte) {
            ST__STAT_INC(writev); /* counted by st_write_resid when it goes on there */
            return done;
        }
        if (done < 0 && errno != EINTR && !not_ready(errno)) {
            ST__STAT_INC(writev);
            return -1;
        }
        if (done > 0) {
            buf = (const char *)buf + done;
        } else {
            done = 0;
        }
    }
    size_t resid = nbyte - (size_t)done;
    return st_write_resid(fd, buf, &resid, timeout) == 0 ? (ssize_t)(nbyte - resid) : -1;
}

ssize_t st_writev(st_netfd_t fd, const struct iovec *iov, int iov_size, st_utime_t timeout)
{
    ST__STAT_INC(writev);
    if (iov_size < 0 || (iov_size > 0 && iov == NULL)) {
        errno = EINVAL;
        return -1;
    }
    /* transfer_resid consumes the vector it is given: work on a copy. */
    struct iovec local[LOCAL_IOVECS];
    struct iovec *copy = local;
    if (iov_size > LOCAL_IOVECS) {
        copy = malloc((size_t)iov_size * sizeof(*copy));
        if (copy == NULL) {
            errno = ENOMEM;
            return -1;
        }
    }
    size_t total = 0;
    for (int i = 0; i < iov_size; i++) {
        copy[i] = iov[i];
        total += iov[i].iov_len;
    }
    struct iovec *cursor = copy;
    int left = iov_size;
    enum st__xfer how = ST__XFER_WRITEV;
#if ST__DEBUG_STATS
    if (iov_size == 1 && total > 0) {
        ST__STAT_INC(writev); /* State Threads goes to st_write at once (see enum st__xfer) */
        how = ST__XFER_WRITE;
    }
#endif
    ssize_t rv = -1;
    if (transfer_resid(fd, &cursor, &left, timeout, how) == 0) {
        rv = (ssize_t)total;
    }
    if (copy != local) {
        free(copy);
    }
    return rv;
}

struct st__recvfrom_args {
    void *buf;
    size_t len;
    struct sockaddr *from;
    socklen_t *fromlen;
};

static ssize_t attempt_recvfrom(int osfd, void *args)
{
    struct st__recvfrom_args *a = args;
    return ST__STAT_EAGAIN(recvfrom(osfd, a->buf, a->len, 0, a->from, a->fromlen), recvfrom_eagain);
}

int st_recvfrom(st_netfd_t fd, void *buf, int len, struct sockaddr *from, int *fromlen,
                st_utime_t timeout)
{
    ST__STAT_INC(recvfrom);
    if (len < 0 || (fromlen != NULL && *fromlen < 0)) {
        errno = EINVAL;
        return -1;
    }
    socklen_t addrlen = fromlen != NULL ? (socklen_t)*fromlen : 0;
    bool want_addr = from != NULL && fromlen != NULL;
    struct st__recvfrom_args args = {buf, (size_t)len, want_addr ? from : NULL,
                                 want_addr ? &addrlen : NULL};
    struct iovec iov = {.iov_base = buf, .iov_len = (size_t)len};
    socklen_t given = want_addr ? addrlen : 0;
    struct msghdr msg = {.msg_name = args.from, .msg_namelen = given, .msg_iov = &iov,
                         .msg_iovlen = 1};
    struct st__io_req req = {.kind = ST__IO_RECVMSG, .msg = &msg};
    ssize_t n = io_retry(fd, POLLIN, timeout, attempt_recvfrom, &args, &req);
    if (n >= 0 && want_addr) {
        /* A submitted recvmsg reports the length in the header, recvfrom(2) in addrlen. */
        *fromlen = (int)(msg.msg_namelen != given ? msg.msg_namelen : addrlen);
    }
    return (int)n;
}

struct st__sendto_args {
    const void *buf;
    size_t len;
    const struct sockaddr *to;
    socklen_t tolen;
};

static ssize_t attempt_sendto(int osfd, void *args)
{
    const struct st__sendto_args *a = args;
    return ST__STAT_EAGAIN(sendto(osfd, a->buf, a->len, 0, a->to, a->tolen), sendto_eagain);
}

int st_sendto(st_netfd_t fd, const void *msg, int len, const struct sockaddr *to, int tolen,
              st_utime_t timeout)
{
    ST__STAT_INC(sendto);
    if (len < 0 || tolen < 0) {
        errno = EINVAL;
        return -1;
    }
    struct st__sendto_args args = {msg, (size_t)len, to, (socklen_t)tolen};
    struct iovec iov = {.iov_len = (size_t)len};
    memcpy(&iov.iov_base, &msg, sizeof(iov.iov_base)); /* only read from */
    struct msghdr hdr = {.msg_namelen = (socklen_t)tolen, .msg_iov = &iov, .msg_iovlen = 1};
    memcpy(&hdr.msg_name, &to, sizeof(hdr.msg_name));  /* only read from */
    struct st__io_req req = {.kind = ST__IO_SENDMSG, .msg = &hdr};
    return (int)io_retry(fd, POLLOUT, timeout, attempt_sendto, &args, &req);
}

struct st__recvmsg_args {
    struct msghdr *msg;
    int flags;
};

static ssize_t attempt_recvmsg(int osfd, void *args)
{
    struct st__recvmsg_args *a = args;
    return ST__STAT_EAGAIN(recvmsg(osfd, a->msg, a->flags), recvmsg_eagain);
}

int st_recvmsg(st_netfd_t fd, struct msghdr *msg, int flags, st_utime_t timeout)
{
    ST__STAT_INC(recvmsg);
    struct st__recvmsg_args args = {msg, flags};
    struct st__io_req req = {.kind = ST__IO_RECVMSG, .flags = flags, .msg = msg};
    return (int)io_retry(fd, POLLIN, timeout, attempt_recvmsg, &args, msg != NULL ? &req : NULL);
}

struct st__sendmsg_args {
    const struct msghdr *msg;
    int flags;
};

static ssize_t attempt_sendmsg(int osfd, void *args)
{
    const struct st__sendmsg_args *a = args;
    return ST__STAT_EAGAIN(sendmsg(osfd, a->msg, a->flags), sendmsg_eagain);
}

int st_sendmsg(st_netfd_t fd, const struct msghdr *msg, int flags, st_utime_t timeout)
{
    ST__STAT_INC(sendmsg);
    struct st__sendmsg_args args = {msg, flags};
    void *header; /* only read from: the request has no const member */
    memcpy(&header, &msg, sizeof(header));
    struct st__io_req req = {.kind = ST__IO_SENDMSG, .flags = flags, .msg = header};
    return (int)io_retry(fd, POLLOUT, timeout, attempt_sendmsg, &args, msg != NULL ? &req : NULL);
}

struct st__mmsg_args {
    struct mmsghdr *msgvec;
    unsigned int vlen;
    int flags;
};

static ssize_t attempt_recvmmsg(int osfd, void *args)
{
    struct st__mmsg_args *a = args;
    return recvmmsg(osfd, a->msgvec, a->vlen, a->flags, NULL);
}

static ssize_t attempt_sendmmsg(int osfd, void *args)
{
    struct st__mmsg_args *a = args;
    return sendmmsg(osfd, a->msgvec, a->vlen, a->flags);
}

/*
 * Batched datagrams: as many messages as the kernel takes (or has) at once.
 * Like every function here: try first, wait while not ready, ETIME on
 * timeout; the count of messages is returned.
 */
int st_recvmmsg(st_netfd_t fd, struct mmsghdr *msgvec, unsigned int vlen, int flags,
                st_utime_t timeout)
{
    struct st__mmsg_args args = {msgvec, vlen, flags};
    return (int)io_retry(fd, POLLIN, timeout, attempt_recvmmsg, &args, NULL);
}

int st_sendmmsg(st_netfd_t fd, struct mmsghdr *msgvec, unsigned int vlen, int flags,
                st_utime_t timeout)
{
    struct st__mmsg_args args = {msgvec, vlen, flags};
    return (int)io_retry(fd, POLLOUT, timeout, attempt_sendmmsg, &args, NULL);
}

struct st__accept_args {
    struct sockaddr *addr;
    socklen_t *addrlen;
};

static ssize_t attempt_accept(int osfd, void *args)
{
    struct st__accept_args *a = args;
    /* Accepted sockets do not inherit O_NONBLOCK: set it atomically. */
    return accept4(osfd, a->addr, a->addrlen, SOCK_NONBLOCK);
}

/*
 * How many connections a listener's accept queue holds: Linux reports a
 * TCP listener's backlog in tcp_info's tcpi_sacked. Another listening
 * socket gets 128 (SOMAXCONN of old); a socket that does not listen, 0.
 */
static size_t accept_queue_length(int osfd)
{
    int saved_errno = errno;
    size_t length = 0;
    struct tcp_info info;
    socklen_t len = sizeof(info);
    int listening = 0;
    socklen_t flag_len = sizeof(listening);
    if (getsockopt(osfd, IPPROTO_TCP, TCP_INFO, &info, &len) == 0 &&
        len >= offsetof(struct tcp_info, tcpi_sacked) + sizeof(info.tcpi_sacked)) {
        length = info.tcpi_state == TCP_LISTEN ? info.tcpi_sacked : 0;
    } else if (getsockopt(osfd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &flag_len) == 0 &&
               listening != 0) {
        length = 128;
    }
    errno = saved_errno;
    return length;
}

/*
 * A burst of connections that fills a listener's accept queue becomes as
 * many coroutines at once, each wanting a new stack while the queue waits:
 * the first accept on a listener has the scheduler make that many stacks
 * ahead of need, when it is idle (stack.h). They take the size of the
 * accepting coroutine's own stack, as a server's coroutines are usually
 * all made alike (the default size when the primordial thread accepts).
 */
static void reserve_stacks_for(struct _st_netfd *listener)
{
    struct st__sched *sched = st__sched_peek();
    if (sched == NULL || sched->current == NULL) {
        return; /* not this pthread's netfd: st_accept fails */
    }
    listener->accepted_on = true;
    const struct st__stack *own = sched->current->stack;
    size_t size = own != NULL ? own->size : ST__DEFAULT_STACK_SIZE;
    st__stack_reserve(&sched->stacks, accept_queue_length(listener->osfd), size);
}

st_netfd_t st_accept(st_netfd_t fd, struct sockaddr *addr, int *addrlen, st_utime_t timeout)
{
    if (addrlen != NULL && *addrlen < 0) {
        errno = EINVAL;
        return NULL;
    }
    if (fd != NULL && fd->inuse && !fd->accepted_on) {
        reserve_stacks_for(fd);
    }
    socklen_t len = addrlen != NULL ? (socklen_t)*addrlen : 0;
    bool want_addr = addr != NULL && addrlen != NULL;
    struct st__accept_args args = {want_addr ? addr : NULL, want_addr ? &len : NULL};
    /* len: the address's room, for the io_uring engine (valgrind needs it after the call). */
    struct st__io_req req = {
        .kind = ST__IO_ACCEPT, .buf = args.addr, .len = len, .addrlen = args.addrlen};
    ssize_t osfd = io_retry(fd, POLLIN, timeout, attempt_accept, &args, &req);
    if (osfd < 0) {
        return NULL;
    }
    if (want_addr) {
        *addrlen = (int)len;
    }
    st_netfd_t client = st__netfd_new((int)osfd, 0); /* a socket: no fstat */
    if (client == NULL) {
        int err = errno;
        (void)close((int)osfd);
        errno = err;
    }
    return client;
}

/* Consume the connect(2) an io_uring CONNECT left owed (see connect_submitted). */
static bool take_connect_owed(st_netfd_t fd)
{
    bool owed = fd->connect_owed;
    fd->connect_owed = false;
    return owed;
}

/*
 * A CONNECT the io_uring engine completed after the attempt went on in the
 * background was finished by a connect(2) the kernel made, which the
 * readiness path (wait for writability, SO_ERROR) leaves to the program's
 * next call: that call moves a TCP socket from "connecting" to "connected"
 * and succeeds, and only the one after fails with EISCONN. The netfd
 * remembers the call it is owed, and its next EISCONN, however that call
 * is carried out, is the success it would have been, once.
 */
static int connect_submitted(st_netfd_t fd, const struct sockaddr *addr, ssize_t n)
{
    if (n == 0) {
        /* Only TCP connects go on in the background; a datagram socket never says EISCONN. */
        sa_family_t family = addr != NULL ? addr->sa_family : AF_UNSPEC;
        fd->connect_owed = family == AF_INET || family == AF_INET6;
        return 0;
    }
    return errno == EISCONN && take_connect_owed(fd) ? 0 : -1;
}

int st_connect(st_netfd_t fd, const struct sockaddr *addr, int addrlen, st_utime_t timeout)
{
    if (!st__netfd_usable(fd)) {
        return -1;
    }
    if (addrlen < 0) {
        errno = EINVAL;
        return -1;
    }
    if (io_submits()) {
        struct st__io_req req = {.kind = ST__IO_CONNECT, .len = (size_t)addrlen, .peer = addr};
        ssize_t n = st__io_submit(fd, &req, timeout);
        if (n != ST__IO_NOT_SUBMITTED) {
            return connect_submitted(fd, addr, n);
        }
    }
    bool interrupted = false;
    while (connect(fd->osfd, addr, (socklen_t)addrlen) != 0) {
        if (errno == EINTR) {
            interrupted = true;
            continue;
        }
        /*
         * EINPROGRESS: the handshake goes on without us. After an
         * interrupted connect() the kernel may report the bound socket as
         * EADDRINUSE or EALREADY; that too means "wait for the outcome".
         * EISCONN after an interruption means the handshake completed.
         */
        if (errno == EISCONN && (interrupted || take_connect_owed(fd))) {
            return 0; /* the interrupted attempt, or an io_uring one, finished the handshake */
        }
        if (errno != EINPROGRESS && !(interrupted && (errno == EADDRINUSE || errno == EALREADY))) {
            return -1;
        }
        if (st_netfd_poll(fd, POLLOUT, timeout) != 0) {
            return -1;
        }
        int err = 0;
        socklen_t len = sizeof(err);
        if (getsockopt(fd->osfd, SOL_SOCKET, SO_ERROR, &err, &len) != 0) {
            return -1;
        }
        if (err != 0) {
            errno = err;
            return -1;
        }
        return 0;
    }
    return 0;
}

st_netfd_t st_open(const char *path, int oflags, mode_t mode)
{
    if (path == NULL) {
        errno = EINVAL;
        return NULL;
    }
    if (st__sched_running() == NULL) {
        return NULL;
    }
    int osfd;
    do {
        osfd = open(path, oflags | O_NONBLOCK, mode);
    } while (osfd < 0 && errno == EINTR);
    if (osfd < 0) {
        return NULL;
    }
    st_netfd_t fd = st__netfd_new(osfd, ST__NETFD_ANY);
    if (fd == NULL) {
        int err = errno;
        (void)close(osfd);
        errno = err;
    }
    return fd;
}
