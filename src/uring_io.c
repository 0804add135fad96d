/*
 * The io_uring backend's operation engine: socket reads and writes as
 * requests (IORING_OP_RECV, SEND, RECVMSG, SENDMSG), accepts and connects
 * (IORING_OP_ACCEPT, CONNECT), and the reads, writes and fsyncs of files
 * (IORING_OP_READ, WRITE, READV, WRITEV, FSYNC), queued
 * in the ring by the coroutine that asks and submitted by the next
 * dispatch, in the same io_uring_enter() that waits. In steady state an
 * operation costs no system call of its own: the kernel receives or sends
 * when the socket is ready (it arms its own poll, for non-blocking sockets
 * too), reads or writes a file at once or on one of its worker threads
 * (io-wq) when that would block, and posts the result, which wakes the
 * coroutine, in completion order. Every operation completes through the
 * event loop: the caller always gives up the CPU, other coroutines run
 * while a file is read or synced.
 *
 * The coroutine waits the ST way: state IO_WAIT, waiting_on its
 * struct st__uring_op, a deadline on the sleep heap when it has a timeout.
 * When the deadline passes or st_thread_interrupt() comes first, the
 * operation is cancelled (IORING_OP_ASYNC_CANCEL) and the coroutine waits,
 * uninterruptibly, for the operation's completion and for those of its
 * cancellations: once the call returns, the kernel writes nothing into the
 * caller's buffer and no completion names the coroutine's frame. If the
 * operation completed all the same (data arrived while the cancellation
 * was on its way), its result is returned rather than lost; an interrupt
 * then stays pending for the coroutine's next blocking call. A cancellation
 * that misses (-ENOENT, -EALREADY, or no room in the ring) is tried again
 * a millisecond later until the operation completes.
 *
 * An accept's result is a descriptor: one the kernel accepted while the
 * cancellation was on its way is returned like data (the connection is not
 * lost), and one whose completion comes while st_destroy() tears the ring
 * down, with nobody to take it, is closed. The accepted socket is made as
 * the readiness path's accept4(2) makes it: non-blocking, not close-on-exec.
 *
 * A connect that is cancelled (deadline, interrupt) leaves the socket as
 * the readiness path leaves it: the kernel's attempt goes on (the request
 * only waited for it), and a later connect finds it in progress (EALREADY)
 * or done. One that completes after the attempt went on in the background
 * was finished by a connect(2) the kernel made, which the readiness path
 * (wait for writability, SO_ERROR) leaves to the program's next call: io.c
 * turns that call's EISCONN into the success it would have been, once. A
 * failed attempt leaves the socket unconnected where the readiness path
 * leaves it "connecting" until the next connect(2) reports ECONNABORTED;
 * POSIX leaves a socket's state after a failed connect unspecified.
 *
 * st_recvmmsg() and st_sendmmsg() have no io_uring operation: they stay on
 * the readiness path.
 *
 * For a file, a deadline or an interrupt cuts short only an
 * operation no worker has started yet (or one that waits, as a read from a
 * pipe does): a read, write or fsync a worker already runs cannot be
 * stopped (-EALREADY), and the call returns when it is done, with its
 * result (a write is then done, whatever the deadline said), however long
 * the disk takes. st_destroy() likewise waits for such operations to end
 * before the stacks they write into are unmapped.
 *
 * Accepts, connects and file operations are submitted only if the kernel
 * has their kinds, as the probe of the ring (io_uring_get_probe_ring)
 * says. For files, offset -1, the file position, needs
 * IORING_FEAT_RW_CUR_POS. Their results are those of pread(2), pwrite(2),
 * preadv(2), pwritev(2) and fsync(2) (a negative offset other than -1 is
 * EINVAL, a write on a descriptor opened for reading EBADF), except that
 * -EAGAIN and -EINTR, which did nothing, are submitted again until the
 * deadline. The kernel takes no lock on the file position for them, as it
 * does for read(2) and write(2): file_io.c submits one operation at the
 * position of a netfd at a time. A descriptor with no
 * netfd of this backend gets a record (its struct st__uring_watch) for
 * its operations in flight, so that st_netfd_close() refuses (EBUSY) and
 * st_netfd_free() cancels them whatever their kind.
 *
 * What the engine does not take goes back to the caller (ST__IO_NOT_SUBMITTED),
 * having done nothing: a wait of 0 (a poll), a pending interrupt (the
 * call is tried first, as on the other event systems), a ring without room
 * whose submission fails, an operation the kernel lacks, or no memory
 * for a descriptor's record; for sockets, a kernel without
 * IORING_FEAT_FAST_POLL (socket operations would each block a kernel
 * thread), a descriptor that is no socket (-ENOTSOCK, remembered until the
 * netfd is replaced), and the operations that report -EAGAIN, -EINTR,
 * -EINVAL or -EOPNOTSUPP, which did nothing and are left to the system
 * call to do or to refuse (of a CONNECT, -EINTR comes only from a
 * blocking connect in a kernel worker, which sockets do not need: the
 * system call would find that attempt in progress, EALREADY). io.c then
 * tries the system call and waits for readiness; a file's caller does the
 * call on a thread of its own.
 */
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "backend_uring.h"
#include "st_config.h"
#if ST__HAVE_VALGRIND
#include <valgrind/memcheck.h>
#endif

/* How long a missed cancellation waits before it is tried again. */
#define CANCEL_RETRY_USEC 1000
/* How long teardown waits for completions at a time, and how many times for sockets'. */
#define DRAIN_WAIT_NSEC 10000000LL
#define DRAIN_ROUNDS 100
/* The most one file read or write moves, as read(2) and write(2) (Linux's MAX_RW_COUNT). */
#define FILE_IO_MAX 0x7ffff000U

static uint64_t op_udata(const struct st__uring_op *op, unsigned tag)
{
    return (uint64_t)(uintptr_t)op | tag;
}

/* The address the request was tagged with (copied: the kernel hands back the number). */
static struct st__uring_op *op_from_udata(uint64_t data)
{
    uintptr_t address = (uintptr_t)(data & ~(uint64_t)ST__URING_TAG_MASK);
    void *op = NULL;
    memcpy(&op, &address, sizeof(op));
    return op;
}

void st__uring_op_complete(struct st__uring_state *st, uint64_t data, int res)
{
    struct st__uring_op *op = op_from_udata(data);
    if ((data & ST__URING_TAG_MASK) == ST__URING_TAG_OP) {
        op->done = true;
        op->res = res;
        st->ops_in_flight--;
        if (st->sched != NULL) {
            st__sched_wake_io(st->sched, op->thread);
        } else if (op->accept && res >= 0) {
            (void)close(res); /* teardown: its coroutine goes without returning it */
        }
        return;
    }
    op->cancels--;
    if (res == 0) {
        op->cancel_hit = true; /* -ECANCELED (or the result, if it won the race) follows */
    } else if (!op->done) {
        op->cancel_missed = true;
    }
    if (op->draining && st->sched != NULL) {
        st__sched_wake_io(st->sched, op->thread);
    }
}

/* Queue a cancellation of `op`: false if the ring has no room for it. */
static bool queue_cancel(struct st__uring_state *st, struct st__uring_op *op)
{
    if (!st__uring_sq_room(st, 1)) {
        return false;
    }
    struct io_uring_sqe *sqe = io_uring_get_sqe(&st->ring);
    io_uring_prep_cancel64(sqe, op_udata(op, ST__URING_TAG_OP), 0);
    io_uring_sqe_set_data64(sqe, op_udata(op, ST__URING_TAG_CANCEL));
    op->cancels++;
    op->cancel_missed = false;
    return true;
}

/* Queue a cancellation of `op` unless it completed or one is in flight or found it. */
static void cancel_pending(struct st__uring_state *st, struct st__uring_op *op)
{
    if (!op->done && op->cancels == 0 && !op->cancel_hit) {
        (void)queue_cancel(st, op); /* no room: the operation runs its course */
    }
}

static struct st__uring_op *op_from_link(struct st__list *link)
{
    return ST__CONTAINER_OF(link, struct st__uring_op, link);
}

void st__uring_cancel_ops(struct st__uring_state *st, struct st__uring_watch *w)
{
    st__list_for_each(link, &w->ops) {
        struct st__uring_op *op = op_from_link(link);
        op->fd_freed = true;
        cancel_pending(st, op);
    }
}

/*
 * After the coroutine's wait ended: wait until the operation completed
 * (cancelling it if it has not) and no cancellation of it is in flight.
 * Interrupts only make the loop go round once more.
 */
static void drain(struct st__sched *sched, struct st__uring_state *st, struct _st_thread *me,
                  struct st__uring_op *op)
{
    op->draining = true;
    while (!op->done || op->cancels > 0) {
        if (!op->done && op->cancels == 0 && !op->cancel_hit) {
            if (op->cancel_missed || !queue_cancel(st, op)) {
                op->cancel_missed = false;
                st__sched_sleep_add(sched, me, CANCEL_RETRY_USEC);
            }
        }
        me->state = ST__IO_WAIT;
        st__sched_switch(sched, me);
        st__sched_sleep_del(sched, me);
    }
}

/* A submission slot for an operation; NULL if the ring has no room. Then op_queued(). */
static inline struct io_uring_sqe *op_sqe(struct st__uring_state *st)
{
    if (!st__uring_sq_room(st, 1)) {
        return NULL;
    }
    return io_uring_get_sqe(&st->ring);
}

/* `sqe`, prepared, is the request of `op`. */
static inline void op_queued(struct st__uring_state *st, struct io_uring_sqe *sqe,
                             struct st__uring_op *op)
{
    io_uring_sqe_set_data64(sqe, op_udata(op, ST__URING_TAG_OP));
    st->ops_in_flight++;
}

/* Queue the request for `req`, a socket operation; false if the ring has no room. */
static inline __attribute__((always_inline)) bool queue_op(struct st__uring_state *st, int osfd,
                                                           const struct st__io_req *req,
                                                           struct st__uring_op *op)
{
    struct io_uring_sqe *sqe = op_sqe(st);
    if (sqe == NULL) {
        return false;
    }
    switch (req->kind) {
    case ST__IO_RECV:
        io_uring_prep_recv(sqe, osfd, req->buf, req->len, req->flags);
        break;
    case ST__IO_SEND:
        io_uring_prep_send(sqe, osfd, req->buf, req->len, req->flags);
        break;
    case ST__IO_RECVMSG:
        io_uring_prep_recvmsg(sqe, osfd, req->msg, (unsigned)req->flags);
        break;
    case ST__IO_SENDMSG:
        io_uring_prep_sendmsg(sqe, osfd, req->msg, (unsigned)req->flags);
        break;
    case ST__IO_ACCEPT:
        /* Non-blocking, not close-on-exec: as accept4(2) makes it on the readiness path. */
        io_uring_prep_accept(sqe, osfd, req->buf, req->addrlen, SOCK_NONBLOCK);
        op->accept = true;
        break;
    case ST__IO_CONNECT:
    default:
        io_uring_prep_connect(sqe, osfd, req->peer, (socklen_t)req->len);
        break;
    }
    op_queued(st, sqe, op);
    return true;
}

/*
 * Wait up to `timeout` for `op`, queued, then drain it; it is on `w`'s
 * list meanwhile. true: it completed, op->res is its result (also when the
 * wait gave up, if the operation completed all the same: data must not be
 * lost); false: the wait gave up and the operation did nothing, errno is
 * ETIME or EINTR (the interrupt is consumed).
 */
static inline __attribute__((always_inline)) bool
await_op(struct st__sched *sched, struct st__uring_state *st, struct _st_thread *me,
         struct st__uring_watch *w, struct st__uring_op *op, st_utime_t timeout)
{
    st__list_insert_tail(&w->ops, &op->link);
    if (timeout != ST_UTIME_NO_TIMEOUT) {
        st__sched_sleep_add(sched, me, timeout);
    }
    me->state = ST__IO_WAIT;
    me->waiting_on = op;
    me->flags |= ST__FL_WAIT_URING_OP;
    st__sched_switch(sched, me);

    /* Not done: the deadline passed or an interrupt came. */
    bool gave_up = !op->done;
    bool interrupted = gave_up && (me->flags & ST__FL_INTERRUPT) != 0;
    if (gave_up || op->cancels > 0) {
        drain(sched, st, me, op);
    }
    me->waiting_on = NULL;
    me->flags &= ~ST__FL_WAIT_URING_OP;
    st__list_remove(&op->link);

    if (op->res >= 0 || !gave_up) {
        return true; /* even when given up: the data must not be lost */
    }
    if (!interrupted || !st__thread_take_interrupt(me)) {
        errno = ETIME;
    }
    return false;
}

#if ST__HAVE_VALGRIND
/* The first `n` bytes scattered over `iov` were written. */
static void define_scattered(const struct iovec *iov, size_t count, size_t n)
{
    for (size_t i = 0; i < count && n > 0; i++) {
        size_t part = iov[i].iov_len < n ? iov[i].iov_len : n;
        (void)VALGRIND_MAKE_MEM_DEFINED(iov[i].iov_base, part);
        n -= part;
    }
}

/*
 * The kernel wrote a completed operation's data into the caller's memory
 * behind valgrind's back (no system call of the program did): what the
 * result says was written is defined, or memcheck takes it for
 * uninitialised.
 */
static __attribute__((noinline, cold)) void define_for_valgrind(const struct st__io_req *req,
                                                                size_t n)
{
    switch (req->kind) {
    case ST__IO_RECV:
    case ST__IO_READ:
        (void)VALGRIND_MAKE_MEM_DEFINED(req->buf, n);
        break;
    case ST__IO_READV:
        define_scattered(req->buf, req->len, n);
        break;
    case ST__IO_RECVMSG: {
        struct msghdr *msg = req->msg;
        define_scattered(msg->msg_iov, msg->msg_iovlen, n);
        (void)VALGRIND_MAKE_MEM_DEFINED(&msg->msg_namelen, sizeof(msg->msg_namelen));
        (void)VALGRIND_MAKE_MEM_DEFINED(&msg->msg_controllen, sizeof(msg->msg_controllen));
        (void)VALGRIND_MAKE_MEM_DEFINED(&msg->msg_flags, sizeof(msg->msg_flags));
        if (msg->msg_name != NULL) {
            (void)VALGRIND_MAKE_MEM_DEFINED(msg->msg_name, msg->msg_namelen);
        }
        if (msg->msg_control != NULL) {
            (void)VALGRIND_MAKE_MEM_DEFINED(msg->msg_control, msg->msg_controllen);
        }
        break;
    }
    case ST__IO_ACCEPT:
        if (req->addrlen != NULL) {
            /* len is the room the caller gave; a longer address was cut to it. */
            (void)VALGRIND_MAKE_MEM_DEFINED(req->addrlen, sizeof(*req->addrlen));
            size_t room = *req->addrlen < req->len ? *req->addrlen : req->len;
            (void)VALGRIND_MAKE_MEM_DEFINED(req->buf, room);
        }
        break;
    default:
        break;
    }
}
#endif

/* A completed operation wrote what its result says (valgrind must be told). */
static inline void op_wrote(const struct st__uring_state *st, const struct st__io_req *req,
                            int res)
{
#if ST__HAVE_VALGRIND
    if (__builtin_expect(st->under_valgrind, 0)) {
        define_for_valgrind(req, (size_t)res);
    }
#else
    (void)st;
    (void)req;
    (void)res;
#endif
}

/* Results that mean the request did nothing the system call should not do instead. */
static bool left_to_the_system_call(int res)
{
    return res == -EAGAIN || res == -EINTR || res == -EINVAL || res == -EOPNOTSUPP ||
           res == -ENOTSOCK;
}

/* A socket operation: its result, -1 with errno, or ST__IO_NOT_SUBMITTED. */
static inline __attribute__((always_inline)) ssize_t
submit_socket(struct st__sched *sched, int osfd, const struct st__io_req *req, st_utime_t timeout)
{
    struct st__uring_state *st = sched->backend_state;
    struct _st_thread *me = sched->current;
    struct st__fdwatch *common = st__fdwatch_find(&st->watches, osfd);
    if (!st->ops_enabled || (me->flags & ST__FL_INTERRUPT) != 0 || common == NULL) {
        return ST__IO_NOT_SUBMITTED;
    }
    struct st__uring_watch *w = ST__CONTAINER_OF(common, struct st__uring_watch, common);
    if (w->not_socket) {
        return ST__IO_NOT_SUBMITTED;
    }
    struct st__uring_op op = {.thread = me, .fd = osfd, .kind = req->kind};
    if (!queue_op(st, osfd, req, &op)) {
        return ST__IO_NOT_SUBMITTED;
    }
    if (!await_op(sched, st, me, w, &op, timeout)) {
        return -1;
    }
    if (op.res >= 0) {
        op_wrote(st, req, op.res);
        return op.res;
    }
    if (left_to_the_system_call(op.res)) {
        w->not_socket = w->not_socket || op.res == -ENOTSOCK;
        return ST__IO_NOT_SUBMITTED;
    }
    errno = -op.res;
    return -1;
}

static ssize_t submit_file(struct st__sched *sched, int osfd, const struct st__io_req *req,
                           st_utime_t timeout);

/* An accept, a connect (if the kernel has its opcode) or a file operation. */
static __attribute__((noinline)) ssize_t submit_rare(struct st__sched *sched, int osfd,
                                                     const struct st__io_req *req,
                                                     st_utime_t timeout)
{
    if (req->kind >= ST__IO_READ) {
        return submit_file(sched, osfd, req, timeout);
    }
    struct st__uring_state *st = sched->backend_state;
    if ((st->socket_kinds & (1U << req->kind)) == 0) {
        return ST__IO_NOT_SUBMITTED;
    }
    return submit_socket(sched, osfd, req, timeout);
}

ssize_t st__uring_submit_io(struct st__sched *sched, int osfd, const struct st__io_req *req,
                            st_utime_t timeout)
{
    if (req->kind >= ST__IO_ACCEPT) {
        return submit_rare(sched, osfd, req, timeout);
    }
    return submit_socket(sched, osfd, req, timeout);
}

/* ---- files -------------------------------------------------------------------------- */

void st__uring_probe_ops(struct st__uring_state *st)
{
    /* Without the kernel's own polling, every socket operation would hold a kernel thread. */
    st->ops_enabled = (st->ring.features & IORING_FEAT_FAST_POLL) != 0;
    st->file_position = (st->ring.features & IORING_FEAT_RW_CUR_POS) != 0;
    st->socket_kinds = 0;
    st->file_kinds = 0;
    /* NULL before 5.6, which has no probe: accepts, connects and file operations are left out. */
    struct io_uring_probe *probe = st__uring_lib.get_probe_ring(&st->ring);
    if (probe == NULL) {
        return;
    }
    static const struct {
        enum st__io_kind kind;
        int opcode;
    } probed_ops[] = {
        {ST__IO_ACCEPT, IORING_OP_ACCEPT}, {ST__IO_CONNECT, IORING_OP_CONNECT},
        {ST__IO_READ, IORING_OP_READ},     {ST__IO_WRITE, IORING_OP_WRITE},
        {ST__IO_READV, IORING_OP_READV},   {ST__IO_WRITEV, IORING_OP_WRITEV},
        {ST__IO_FSYNC, IORING_OP_FSYNC},
    };
    for (size_t i = 0; i < sizeof(probed_ops) / sizeof(probed_ops[0]); i++) {
        if (io_uring_opcode_supported(probe, probed_ops[i].opcode)) {
            enum st__io_kind kind = probed_ops[i].kind;
            unsigned *kinds = kind >= ST__IO_READ ? &st->file_kinds : &st->socket_kinds;
            *kinds |= 1U << kind;
        }
    }
    st__uring_lib.free_probe(probe);
}

/* Can this kernel carry `req`, a file operation, out as it is asked? */
static bool file_op_supported(const struct st__uring_state *st, const struct st__io_req *req)
{
    if ((st->file_kinds & (1U << req->kind)) == 0) {
        return false;
    }
    return req->kind == ST__IO_FSYNC || req->offset != -1 || st->file_position;
}

static void prep_file_op(struct io_uring_sqe *sqe, int osfd, const struct st__io_req *req)
{
    /* A longer transfer moves what read(2) and write(2) would: the request's length is 32 bits. */
    unsigned len = req->len < FILE_IO_MAX ? (unsigned)req->len : FILE_IO_MAX;
    __u64 offset = (__u64)req->offset; /* -1: the file position */
    switch (req->kind) {
    case ST__IO_READ:
        io_uring_prep_read(sqe, osfd, req->buf, len, offset);
        break;
    case ST__IO_WRITE:
        io_uring_prep_write(sqe, osfd, req->buf, len, offset);
        break;
    case ST__IO_READV:
        io_uring_prep_readv(sqe, osfd, req->buf, len, offset);
        break;
    case ST__IO_WRITEV:
        io_uring_prep_writev(sqe, osfd, req->buf, len, offset);
        break;
    case ST__IO_FSYNC:
    default:
        io_uring_prep_fsync(sqe, osfd,
                            (req->flags & ST__IO_DATASYNC) != 0 ? IORING_FSYNC_DATASYNC : 0);
        break;
    }
}

/* The time when a wait of `timeout` from now ends. */
static st_utime_t deadline(const struct st__sched *sched, st_utime_t timeout)
{
    if (timeout == ST_UTIME_NO_TIMEOUT) {
        return ST_UTIME_NO_TIMEOUT;
    }
    st_utime_t now = st__utime(sched);
    return now + timeout < now ? ST_UTIME_NO_TIMEOUT - 1 : now + timeout;
}

/* What is left until `due`: 0 if it has passed. */
static st_utime_t time_left(const struct st__sched *sched, st_utime_t due)
{
    if (due == ST_UTIME_NO_TIMEOUT) {
        return ST_UTIME_NO_TIMEOUT;
    }
    st_utime_t now = st__utime(sched);
    return due > now ? due - now : 0;
}

/* A file operation's result that did nothing and is submitted again. */
static bool file_op_again(int res)
{
    return res == -EAGAIN || res == -EINTR;
}

/*
 * A file operation: the same protocol as the sockets', without readiness
 * to fall back to, on a record made for the descriptor if it has none.
 */
static __attribute__((noinline)) ssize_t submit_file(struct st__sched *sched, int osfd,
                                                     const struct st__io_req *req,
                                                     st_utime_t timeout)
{
    struct st__uring_state *st = sched->backend_state;
    struct _st_thread *me = sched->current;
    if (timeout == 0 || (me->flags & ST__FL_INTERRUPT) != 0 || !file_op_supported(st, req)) {
        return ST__IO_NOT_SUBMITTED;
    }
    if (osfd < 0) {
        errno = EBADF;
        return -1;
    }
    if ((req->kind == ST__IO_READV || req->kind == ST__IO_WRITEV) && req->len > IOV_MAX) {
        errno = EINVAL; /* as readv(2) and writev(2) say; the request's count is 32 bits */
        return -1;
    }
    if (st__fdtable_reserve(&st->watches, osfd) != 0) {
        return ST__IO_NOT_SUBMITTED; /* no memory for the record: the caller needs none */
    }
    struct st__uring_watch *w =
        ST__CONTAINER_OF(st__fdwatch_at(&st->watches, osfd), struct st__uring_watch, common);
    st_utime_t due = deadline(sched, timeout);
    for (;;) {
        struct st__uring_op op = {.thread = me, .fd = osfd, .kind = req->kind, .file = true};
        struct io_uring_sqe *sqe = op_sqe(st);
        if (sqe == NULL) {
            return ST__IO_NOT_SUBMITTED; /* what was submitted before did nothing either */
        }
        prep_file_op(sqe, osfd, req);
        op_queued(st, sqe, &op);
        if (!await_op(sched, st, me, w, &op, timeout)) {
            return -1;
        }
        if (op.res >= 0) {
            op_wrote(st, req, op.res);
            return op.res;
        }
        if (!file_op_again(op.res) || op.fd_freed) {
            /* Not again on a descriptor the netfd let go of: the number may be another file's. */
            errno = file_op_again(op.res) ? ECANCELED : -op.res;
            return -1;
        }
        if (st__thread_take_interrupt(me)) {
            return -1;
        }
        timeout = time_left(sched, due);
        if (timeout == 0) {
            errno = ETIME;
            return -1;
        }
    }
}

/* ---- teardown ----------------------------------------------------------------------- */

/* Cancel the file operations still in flight (again); false if there are none. */
static bool cancel_file_ops(struct st__uring_state *st)
{
    bool any = false;
    int end = st->watches.nchunks * ST__FDTABLE_CHUNK;
    for (int fd = 0; fd < end; fd++) {
        struct st__fdwatch *common = st__fdwatch_find(&st->watches, fd);
        if (common == NULL) {
            fd |= ST__FDTABLE_CHUNK - 1; /* a chunk never allocated */
            continue;
        }
        struct st__uring_watch *w = ST__CONTAINER_OF(common, struct st__uring_watch, common);
        st__list_for_each(link, &w->ops) {
            struct st__uring_op *op = op_from_link(link);
            if (op->file && !op->done) {
                any = true;
                cancel_pending(st, op);
            }
        }
    }
    return any;
}

void st__uring_drain_ops(struct st__uring_state *st)
{
    if (st->ops_in_flight == 0) {
        return;
    }
    st->sched = NULL; /* the coroutines are not woken: they go with the scheduler */
    struct io_uring_sqe *sqe = NULL;
    if (st__uring_sq_room(st, 1)) {
        sqe = io_uring_get_sqe(&st->ring);
        io_uring_prep_cancel64(sqe, 0, IORING_ASYNC_CANCEL_ANY | IORING_ASYNC_CANCEL_ALL);
        io_uring_sqe_set_data64(sqe, ST__URING_UDATA_IGNORED);
    }
    /*
     * A bounded wait for sockets' operations: a kernel before 5.19 takes no
     * CANCEL_ANY, and the ring's exit cancels them too. None for files': one
     * a kernel worker runs cannot be cancelled, and the ring's exit would
     * not wait for it to stop writing into a stack that goes next.
     */
    for (int round = 0; st->ops_in_flight > 0; round++) {
        if (round >= DRAIN_ROUNDS && !cancel_file_ops(st)) {
            break;
        }
        struct __kernel_timespec ts = {.tv_sec = 0, .tv_nsec = DRAIN_WAIT_NSEC};
        struct io_uring_cqe *cqe = NULL;
        (void)st__uring_lib.submit_and_wait_timeout(&st->ring, &cqe, 1, &ts, NULL);
        unsigned n;
        while ((n = st__uring_lib.peek_batch_cqe(&st->ring, st->cqes, ST__URING_CQE_BATCH)) > 0) {
            for (unsigned i = 0; i < n; i++) {
                uint64_t data = io_uring_cqe_get_data64(st->cqes[i]);
                if (data != ST__URING_UDATA_IGNORED && !st__uring_udata_is_poll(data)) {
                    st__uring_op_complete(st, data, st->cqes[i]->res);
                }
            }
            io_uring_cq_advance(&st->ring, n);
        }
    }
}
