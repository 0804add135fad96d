/*
 * File I/O that does not stall the scheduler (file_io.h): the process-wide
 * mode, the choice of how each call is carried out, and the functions that
 * exist for files only (st_pread, st_pwrite, st_fsync, st_fdatasync).
 */
#include "file_io.h"

#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "scheduler.h"
#include "st_config.h"
#include "workers.h"

/* Read by every file operation as it starts: a change applies to the calls that follow. */
static atomic_int file_io_mode = ST_FILE_IO_DEFAULT;

int st_set_file_io(int mode)
{
    switch (mode) {
    case ST_FILE_IO_DEFAULT:
    case ST_FILE_IO_BLOCKING:
    case ST_FILE_IO_WORKERS:
        break;
    case ST_FILE_IO_URING:
        if (!ST__HAVE_IO_URING) {
            errno = ENOTSUP;
            return -1;
        }
        break;
    default:
        errno = EINVAL;
        return -1;
    }
    atomic_store_explicit(&file_io_mode, mode, memory_order_relaxed);
    return 0;
}

int st_get_file_io(void)
{
    return atomic_load_explicit(&file_io_mode, memory_order_relaxed);
}

ssize_t st__file_op_run(int osfd, const struct st__io_req *req)
{
    const struct iovec *iov = req->buf;
    int count = (int)req->len;
    bool here = req->offset < 0; /* at the file position */
    ssize_t n;
    do {
        switch (req->kind) {
        case ST__IO_READ:
            n = here ? read(osfd, req->buf, req->len) : pread(osfd, req->buf, req->len, req->offset);
            break;
        case ST__IO_WRITE:
            n = here ? write(osfd, req->buf, req->len)
                     : pwrite(osfd, req->buf, req->len, req->offset);
            break;
        case ST__IO_READV:
            n = here ? readv(osfd, iov, count) : preadv(osfd, iov, count, req->offset);
            break;
        case ST__IO_WRITEV:
            n = here ? writev(osfd, iov, count) : pwritev(osfd, iov, count, req->offset);
            break;
        case ST__IO_FSYNC:
            n = (req->flags & ST__IO_DATASYNC) != 0 ? fdatasync(osfd) : fsync(osfd);
            break;
        default:
            errno = EINVAL; /* a socket operation has no business here */
            return -1;
        }
    } while (n < 0 && errno == EINTR);
    return n;
}

/* How one call is carried out. */
enum st__file_way { ST__FILE_IN_PLACE, ST__FILE_URING, ST__FILE_WORKERS };

static enum st__file_way file_way(const struct st__sched *sched, st_utime_t timeout)
{
    /* A file is always "ready": a call that must not wait runs at once, as in State Threads. */
    if (sched == NULL || timeout == 0) {
        return ST__FILE_IN_PLACE;
    }
    switch (atomic_load_explicit(&file_io_mode, memory_order_relaxed)) {
    case ST_FILE_IO_BLOCKING:
        return ST__FILE_IN_PLACE;
    case ST_FILE_IO_WORKERS:
        return ST__FILE_WORKERS;
    default: /* DEFAULT and URING: io_uring where this pthread runs it, else the workers */
        return sched->submits_io ? ST__FILE_URING : ST__FILE_WORKERS;
    }
}

/* On the worker pool. In flight, the operation counts as a user of the netfd: st_netfd_close says EBUSY. */
static ssize_t on_workers(struct st__sched *sched, st_netfd_t fd, const struct st__io_req *req,
                          st_utime_t timeout)
{
    st__netfd_enter(fd);
    ssize_t n = st__workers_run(sched, fd->osfd, req, timeout);
    bool freed = !fd->inuse; /* st_netfd_free() while it was in flight */
    st__netfd_leave(sched, fd);
    if (freed && n < 0) {
        errno = EBADF;
    }
    return n;
}

/* As an operation of the io_uring backend; one it does not take goes to the workers. */
static ssize_t on_uring(struct st__sched *sched, st_netfd_t fd, const struct st__io_req *req,
                        st_utime_t timeout)
{
    ssize_t n = st__io_submit(fd, req, timeout);
    if (n != ST__IO_NOT_SUBMITTED) {
        return n;
    }
    if (!st__netfd_usable(fd)) {
        return -1;
    }
    return on_workers(sched, fd, req, timeout);
}

/* Does `req` read or write at the file position? */
static bool at_position(const struct st__io_req *req)
{
    return req->offset < 0 && req->kind != ST__IO_FSYNC;
}

/*
 * An io_uring operation at the file position, when no other one of the
 * netfd is in flight. read(2) and write(2) hold the file's position lock
 * from reading the position to moving it; io_uring reads it when the
 * operation starts and moves it when it ends, with no lock, so two at once
 * would read or write the same bytes. Waiting for the turn is a wait like
 * any other: up to `timeout`, ended by an interrupt (ETIME, EINTR, nothing
 * done), and a user of the netfd, so that it is neither closed nor
 * recycled under the turn.
 */
static ssize_t on_uring_in_turn(struct st__sched *sched, st_netfd_t fd,
                                const struct st__io_req *req, st_utime_t timeout)
{
    st__netfd_enter(fd);
    int rc = 0;
    while (rc == 0 && fd->position_busy && fd->inuse) {
        rc = st_cond_timedwait(&fd->position_turn, timeout);
    }
    ssize_t n = -1;
    if (!fd->inuse) {
        errno = EBADF; /* st_netfd_free() while it waited */
    } else if (rc == 0) {
        fd->position_busy = true;
        n = on_uring(sched, fd, req, timeout);
        fd->position_busy = false;
        if (st__cond_has_waiters(&fd->position_turn)) {
            (void)st_cond_signal(&fd->position_turn);
        }
    }
    int err = errno;
    st__netfd_leave(sched, fd);
    errno = err;
    return n;
}

ssize_t st__file_io(st_netfd_t fd, const struct st__io_req *req, st_utime_t timeout)
{
    if (!st__netfd_usable(fd)) {
        return -1;
    }
    struct st__sched *sched = st__sched_peek();
    if (sched != NULL && !sched->initialized) {
        sched = NULL; /* a netfd kept past st_destroy: nothing to wait with */
    }
    switch (file_way(sched, timeout)) {
    case ST__FILE_IN_PLACE:
        return st__file_op_run(fd->osfd, req);
    case ST__FILE_URING:
        return at_position(req) ? on_uring_in_turn(sched, fd, req, timeout)
                                : on_uring(sched, fd, req, timeout);
    case ST__FILE_WORKERS:
    default:
        return on_workers(sched, fd, req, timeout);
    }
}

/* st_pread and friends on a pipe, socket or tty: the system call, which does not wait there. */
static ssize_t not_a_file(st_netfd_t fd, const struct st__io_req *req)
{
    return st__file_op_run(fd->osfd, req);
}

static ssize_t file_call(st_netfd_t fd, const struct st__io_req *req, st_utime_t timeout)
{
    if (!st__netfd_usable(fd)) {
        return -1;
    }
    if (req->kind != ST__IO_FSYNC && req->offset < 0) {
        errno = EINVAL; /* as pread(2) says; -1 would mean the file position here */
        return -1;
    }
    return fd->is_file ? st__file_io(fd, req, timeout) : not_a_file(fd, req);
}

ssize_t st_pread(st_netfd_t fd, void *buf, size_t nbyte, off_t offset, st_utime_t timeout)
{
    struct st__io_req req = {.kind = ST__IO_READ, .buf = buf, .len = nbyte, .offset = offset};
    return file_call(fd, &req, timeout);
}

ssize_t st_pwrite(st_netfd_t fd, const void *buf, size_t nbyte, off_t offset, st_utime_t timeout)
{
    struct st__io_req req = {.kind = ST__IO_WRITE, .len = nbyte, .offset = offset};
    memcpy(&req.buf, &buf, sizeof(req.buf)); /* only read from: the request has no const member */
    return file_call(fd, &req, timeout);
}

int st_fsync(st_netfd_t fd, st_utime_t timeout)
{
    struct st__io_req req = {.kind = ST__IO_FSYNC, .offset = -1};
    return (int)file_call(fd, &req, timeout);
}

int st_fdatasync(st_netfd_t fd, st_utime_t timeout)
{
    struct st__io_req req = {.kind = ST__IO_FSYNC, .flags = ST__IO_DATASYNC, .offset = -1};
    return (int)file_call(fd, &req, timeout);
}
