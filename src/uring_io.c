/*
 * The io_uring backend's operation engine: socket reads and writes as
 * requests (IORING_OP_RECV, SEND, RECVMSG, SENDMSG) queued in the ring by
 * the coroutine that asks and submitted by the next dispatch, in the same
 * io_uring_enter() that waits. In steady state an operation costs no
 * system call of its own: the kernel receives or sends when the socket is
 * ready (it arms its own poll, for non-blocking sockets too) and posts the
 * result, which wakes the coroutine, in completion order.
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
 * What the engine does not take goes back to io.c's try-first path
 * (ST__IO_NOT_SUBMITTED): a wait of 0 (a poll), a pending interrupt (the
 * call is tried first, as on the other event systems), a ring without room
 * whose submission fails, a kernel without IORING_FEAT_FAST_POLL (socket
 * operations would each block a kernel thread), a descriptor that is no
 * socket (-ENOTSOCK, remembered until the netfd is replaced), and the
 * operations that report -EAGAIN, -EINTR, -EINVAL or -EOPNOTSUPP, which did
 * nothing and are left to the system call to do or to refuse.
 */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "backend_uring.h"

/* How long a missed cancellation waits before it is tried again. */
#define CANCEL_RETRY_USEC 1000
/* How long teardown waits for completions at a time (100 rounds at most). */
#define DRAIN_WAIT_NSEC 10000000LL

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

/* A coroutine blocked in an operation can go on: make it runnable, once. */
static void op_wake(struct st__sched *sched, struct st__uring_op *op)
{
    struct _st_thread *thread = op->thread;
    if (thread->state == ST__IO_WAIT) {
        st__sched_sleep_del(sched, thread);
        st__sched_make_runnable(sched, thread);
    }
}

void st__uring_op_complete(struct st__uring_state *st, uint64_t data, int res)
{
    struct st__uring_op *op = op_from_udata(data);
    if ((data & ST__URING_TAG_MASK) == ST__URING_TAG_OP) {
        op->done = true;
        op->res = res;
        st->ops_in_flight--;
        if (st->sched != NULL) {
            op_wake(st->sched, op);
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
        op_wake(st->sched, op);
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

void st__uring_cancel_ops(struct st__uring_state *st, struct st__uring_watch *w)
{
    st__list_for_each(link, &w->ops) {
        struct st__uring_op *op = ST__CONTAINER_OF(link, struct st__uring_op, link);
        if (!op->done && op->cancels == 0 && !op->cancel_hit) {
            (void)queue_cancel(st, op); /* no room: the operation runs its course */
        }
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

/* Queue the request for `req`; false if the ring has no room. */
static bool queue_op(struct st__uring_state *st, int osfd, const struct st__io_req *req,
                     struct st__uring_op *op)
{
    if (!st__uring_sq_room(st, 1)) {
        return false;
    }
    struct io_uring_sqe *sqe = io_uring_get_sqe(&st->ring);
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
    default:
        io_uring_prep_sendmsg(sqe, osfd, req->msg, (unsigned)req->flags);
        break;
    }
    io_uring_sqe_set_data64(sqe, op_udata(op, ST__URING_TAG_OP));
    st->ops_in_flight++;
    return true;
}

/* Results that mean the request did nothing the system call should not do instead. */
static bool left_to_the_system_call(int res)
{
    return res == -EAGAIN || res == -EINTR || res == -EINVAL || res == -EOPNOTSUPP ||
           res == -ENOTSOCK;
}

ssize_t st__uring_submit_io(struct st__sched *sched, int osfd, const struct st__io_req *req,
                            st_utime_t timeout)
{
    /* File operations are not carried out here yet: file_io.c runs them on its workers. */
    if (req->kind >= ST__IO_READ) {
        return ST__IO_NOT_SUBMITTED;
    }
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
    struct st__uring_op op = {.thread = me};
    if (!queue_op(st, osfd, req, &op)) {
        return ST__IO_NOT_SUBMITTED;
    }
    st__list_insert_tail(&w->ops, &op.link);
    if (timeout != ST_UTIME_NO_TIMEOUT) {
        st__sched_sleep_add(sched, me, timeout);
    }
    me->state = ST__IO_WAIT;
    me->waiting_on = &op;
    st__sched_switch(sched, me);

    /* Not done: the deadline passed or an interrupt came. */
    bool gave_up = !op.done;
    bool interrupted = gave_up && (me->flags & ST__FL_INTERRUPT) != 0;
    drain(sched, st, me, &op);
    me->waiting_on = NULL;
    st__list_remove(&op.link);

    if (op.res >= 0) {
        return op.res; /* even when given up: the data must not be lost */
    }
    if (gave_up) {
        if (interrupted) {
            me->flags &= ~ST__FL_INTERRUPT;
        }
        errno = interrupted ? EINTR : ETIME;
        return -1;
    }
    if (left_to_the_system_call(op.res)) {
        w->not_socket = w->not_socket || op.res == -ENOTSOCK;
        return ST__IO_NOT_SUBMITTED;
    }
    errno = -op.res;
    return -1;
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
    /* A bounded wait: a kernel before 5.19 takes no CANCEL_ANY, and the ring's exit cancels too. */
    for (int round = 0; round < 100 && st->ops_in_flight > 0; round++) {
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
