/*
 * File I/O off the scheduler. A regular file or a block device ignores
 * O_NONBLOCK: its reads and writes are never "not ready", they just take as
 * long as the disk does, and in place they would block the pthread and
 * every coroutine on it. On a file netfd (struct _st_netfd.is_file) the I/O
 * functions hand their operation to st__file_io(), which carries it out as
 * the process-wide mode (st_set_file_io) says: in place (BLOCKING, or a
 * wait of 0), as an operation of the io_uring backend, or on the worker
 * pool (workers.h), while the coroutine waits.
 */
#ifndef ST__FILE_IO_H
#define ST__FILE_IO_H

#include <sys/types.h>

#include "backend.h"
#include "netfd.h"
#include "st.h"

/* Is it a file netfd (freed or not: st__file_io says EBADF for a freed one)? */
static inline bool st__netfd_file(const struct _st_netfd *fd)
{
    return fd != NULL && fd->is_file;
}

/*
 * Carry out the file operation `req` (ST__IO_READ..ST__IO_FSYNC) on `fd`,
 * the current coroutine waiting up to `timeout`: its result, or -1 with
 * errno (EBADF for a netfd not in use or freed meanwhile; ETIME, EINTR as
 * st__workers_run says).
 */
ssize_t st__file_io(st_netfd_t fd, const struct st__io_req *req, st_utime_t timeout);

/* The system call of a file operation, in the calling pthread, retried on EINTR. */
ssize_t st__file_op_run(int osfd, const struct st__io_req *req);

/*
 * io.c: `req` as an operation of the backend, if it submits operations and
 * `timeout` is not 0: its result, -1 with errno, or ST__IO_NOT_SUBMITTED.
 */
ssize_t st__io_submit(st_netfd_t fd, const struct st__io_req *req, st_utime_t timeout);

#endif /* ST__FILE_IO_H */
