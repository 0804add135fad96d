/*
 * Event backends: the I/O multiplexers behind one vtable.
 *
 * Each backend (select, poll, epoll, io_uring) is one file exporting one
 * const instance of struct st__backend_ops. epoll and io_uring keep who
 * waits on each descriptor in the core's fdwatch module. Its per-pthread state hangs off the
 * scheduler (sched->backend_state), created by init() and freed by fini().
 * Backends speak struct pollfd: POLLIN, POLLOUT and POLLPRI in, the same plus
 * POLLERR, POLLHUP and POLLNVAL out.
 */
#ifndef ST__BACKEND_H
#define ST__BACKEND_H

#include <poll.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/socket.h>
#include <sys/types.h>

#include "st.h"

struct st__sched;
struct st__pollq;

/*
 * One I/O operation, for a backend that submits operations (submit_io):
 * socket I/O of io.c, and file I/O (a regular file or block device).
 * The socket kinds come first, the file kinds from ST__IO_READ on.
 */
enum st__io_kind {
    ST__IO_RECV,    /* buf, len, flags */
    ST__IO_SEND,    /* buf, len, flags */
    ST__IO_RECVMSG, /* msg, flags */
    ST__IO_SENDMSG, /* msg, flags */
    ST__IO_ACCEPT,  /* buf: the address or NULL, len its room, addrlen (in-out) or NULL; SOCK_NONBLOCK */
    ST__IO_CONNECT, /* peer, len its length */
    ST__IO_READ,    /* file: buf, len, offset */
    ST__IO_WRITE,   /* file: buf, len, offset */
    ST__IO_READV,   /* file: buf is the struct iovec array, len its count, offset */
    ST__IO_WRITEV,  /* file: as READV */
    ST__IO_FSYNC,   /* file: flags ST__IO_DATASYNC for fdatasync */
};

/* ST__IO_FSYNC of the data only (fdatasync). */
#define ST__IO_DATASYNC 1

struct st__io_req {
    enum st__io_kind kind;
    int flags;          /* MSG_* for sockets; ST__IO_DATASYNC for ST__IO_FSYNC */
    void *buf;
    size_t len;
    union {
        struct msghdr *msg;          /* only read from for ST__IO_SENDMSG */
        socklen_t *addrlen;          /* ST__IO_ACCEPT */
        const struct sockaddr *peer; /* ST__IO_CONNECT */
    };
    off_t offset;       /* file operations: where, or -1 for the file position */
};

/* submit_io did nothing: the caller carries the call out another way (see submit_io). */
#define ST__IO_NOT_SUBMITTED ((ssize_t)-2)

struct st__backend_ops {
    const char *name;
    int id; /* ST_EVENTSYS_* */

    /* Can this kernel run the backend? Probed when it is selected. */
    bool (*supported)(void);

    /* Create / destroy this pthread's state. init: 0, or -1 with errno. */
    int (*init)(struct st__sched *sched);
    void (*fini)(struct st__sched *sched);

    /*
     * Wait up to `timeout` microseconds (ST_UTIME_NO_TIMEOUT: no limit) for
     * the descriptors of the io_q, then wake their waiters through
     * st__pollq_ready().
     */
    void (*dispatch)(struct st__sched *sched, st_utime_t timeout);

    /*
     * A coroutine starts / stops waiting on pq->pds (validated by st_poll;
     * pq->fds gives one list link per pollfd). add: 0 or -1 with errno.
     */
    int (*pollset_add)(struct st__sched *sched, struct st__pollq *pq);
    void (*pollset_del)(struct st__sched *sched, struct st__pollq *pq);

    /* An fd becomes a netfd: 0, or -1 with errno if the backend cannot watch it. */
    int (*fd_new)(struct st__sched *sched, int osfd);

    /* An fd is about to be closed: 0, or -1 with EBUSY while a coroutine waits on it. */
    int (*fd_close)(struct st__sched *sched, int osfd);

    /* A netfd lets go of its fd (freed or closed): forget what is kept for it. */
    void (*fd_free)(struct st__sched *sched, int osfd);

    /*
     * Optional (NULL for select, poll and epoll): run `req` on `osfd` as a
     * request the kernel carries out, the current coroutine waiting up to
     * `timeout` (not 0) for its completion. Its result (>= 0), -1 with
     * errno (ETIME, EINTR as st_netfd_poll; ECANCELED when fd_free
     * cancelled it), or ST__IO_NOT_SUBMITTED when nothing was done and the
     * caller should carry the call out another way: for a socket, try the
     * system call and wait for readiness; for a file, hand it to the
     * worker pool.
     */
    ssize_t (*submit_io)(struct st__sched *sched, int osfd, const struct st__io_req *req,
                         st_utime_t timeout);

    /*
     * Optional: in a child made by fork(2), run in the thread that forked
     * (a pthread_atfork child handler) when that thread's scheduler uses
     * this backend; for a kernel object the child would share with its
     * parent. Installed by st__backend_handle_forks().
     */
    void (*after_fork)(struct st__sched *sched);

    /* Highest fd number + 1 the backend can watch, or 0 for no limit. */
    int fd_limit;
};

/*
 * A backend's wait failed in a way no retry can cure: the library's own
 * state is broken (its epoll descriptor closed behind its back, a buffer
 * it passed is bad). Waiters for I/O could never be woken again, and the
 * idle loop would call the failing wait for ever at full speed without a
 * word, so this says which call failed and why on stderr, and aborts.
 * Errors that can pass (EINTR, a shortage of memory) are retried by the
 * idle loop instead, and never come here.
 */
_Noreturn void st__backend_wait_broken(const char *call);

/*
 * For a backend whose kernel object a child would share with its parent
 * (an epoll instance, an io_uring ring), called when it makes the object:
 * installs, once, the pthread_atfork child handler that runs the forking
 * thread's backend's after_fork. Nothing is checked on the hot paths.
 */
void st__backend_handle_forks(void);

/* Shared by the backends that keep nothing per descriptor (poll, select). */
bool st__backend_always_supported(void);
void st__backend_fd_free_nothing(struct st__sched *sched, int osfd);

/* The compiled-in backend for an ST_EVENTSYS_* value; NULL + errno if none. */
const struct st__backend_ops *st__backend_find(int eventsys);

/* Convert a timeout in microseconds to whole milliseconds, rounded up; -1 for none. */
int st__backend_timeout_ms(st_utime_t timeout);

#endif /* ST__BACKEND_H */
