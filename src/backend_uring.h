/*
 * What the io_uring backend (backend_uring.c: readiness, the ring, the
 * dispatch) shares with its operation engine (uring_io.c: socket and file
 * reads and writes, accepts, connects and fsyncs, as submitted requests).
 *
 * Every request carries a user_data whose two low bits say what completes:
 * a poll of a descriptor (fd << 32 | generation << 1: bit 0 clear), an
 * operation (the address of its struct st__uring_op, 8-byte aligned, | 1)
 * or the cancellation of one (that address | 3). UINT64_MAX marks requests
 * whose completion says nothing (POLL_REMOVE, liburing's own timeouts); it
 * is tested first.
 */
#ifndef ST__BACKEND_URING_H
#define ST__BACKEND_URING_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "backend.h"
#include "fdtable.h"
#include "fdwatch.h"
#include "liburing_api.h"
#include "list.h"
#include "scheduler.h"

#define ST__URING_CQE_BATCH 256U

/* user_data of requests whose own completion says nothing. */
#define ST__URING_UDATA_IGNORED UINT64_MAX
#define ST__URING_TAG_MASK 3U
#define ST__URING_TAG_OP 1U
#define ST__URING_TAG_CANCEL 3U

/* Is `data` a poll's user_data? (Else an operation's, a cancellation's, or ignored.) */
static inline bool st__uring_udata_is_poll(uint64_t data)
{
    return (data & 1U) == 0;
}

/* Is `data` the user_data of a cancellation? */
static inline bool st__uring_udata_is_cancel(uint64_t data)
{
    return data != ST__URING_UDATA_IGNORED && (data & ST__URING_TAG_MASK) == ST__URING_TAG_CANCEL;
}

/* common.owned: its removals may wait for the next dispatch. */
struct st__uring_watch {
    struct st__fdwatch common;
    struct st__list dirty; /* on st__uring_state.dirty while its request must change */
    struct st__list ops;   /* struct st__uring_op in flight on the descriptor */
    unsigned armed;        /* events of the poll request in flight; 0: none */
    uint32_t gen;          /* generation of that request */
    bool unremoved;        /* request `gen` was disowned (armed = 0) before its removal was queued */
    bool not_socket;       /* the netfd's file refused a socket operation: readiness only */
};

/*
 * One operation of a coroutine in flight, on that coroutine's stack. It
 * stays there until its completion and those of all its cancellations were
 * reaped: the kernel writes nothing the caller can see after it returned,
 * and no completion names a frame that is gone.
 */
struct st__uring_op {
    struct st__list link;        /* on its watch's ops */
    struct _st_thread *thread;
    int fd;                      /* the descriptor and */
    unsigned char kind;          /* the enum st__io_kind of the request, for debuggers */
    int res;                     /* the completion's result, once done */
    unsigned cancels;            /* cancellations in flight */
    bool done;                   /* its completion was reaped */
    bool draining;               /* its coroutine waits for the completions, whatever comes */
    bool cancel_hit;             /* a cancellation found it: its completion follows */
    bool cancel_missed;          /* a cancellation did not find it: try again later */
    bool file;                   /* a file operation (teardown waits for it without bound) */
    bool accept;                 /* an accept: teardown closes the socket it may yet return */
    bool fd_freed;               /* the netfd let go of the descriptor: never submitted again */
};

struct st__uring_state {
    struct io_uring ring;
    bool forked;           /* this is a child forked since the ring was made (after_fork) */
    struct st__sched *sched;
    struct st__fdtable watches; /* struct st__uring_watch per descriptor */
    struct st__list dirty; /* struct st__uring_watch whose request must be armed or replaced */
    size_t ops_in_flight;  /* operations whose completion was not reaped yet */
    bool ops_enabled;      /* the kernel runs socket operations without a thread each */
    bool file_position;    /* file operations take offset -1 for the file position */
    unsigned socket_kinds; /* 1U << ST__IO_ACCEPT, ST__IO_CONNECT if the kernel has them */
    unsigned file_kinds;   /* 1U << ST__IO_READ... for the file operations the kernel has */
    bool in_dispatch;
    bool under_valgrind;  /* waits in poll (uring_dispatch), memcheck is told what the kernel writes (uring_io.c) */
    bool removals_queued; /* by a wake in dispatch, for descriptors without a netfd */
    struct io_uring_cqe *cqes[ST__URING_CQE_BATCH];
};

/* liburing's out-of-line functions, loaded by the backend. */
extern struct st__liburing_api st__uring_lib;

/* Room for `need` SQEs, submitting what is queued if the ring is full. */
bool st__uring_sq_room(struct st__uring_state *st, unsigned need);

/* What the engine can submit on this ring's kernel (uring_init, once the ring is made). */
void st__uring_probe_ops(struct st__uring_state *st);

/* The backend's submit_io (uring_io.c). */
ssize_t st__uring_submit_io(struct st__sched *sched, int osfd, const struct st__io_req *req,
                            st_utime_t timeout);

/* The completion of an operation or of a cancellation (tagged user_data `data`). */
void st__uring_op_complete(struct st__uring_state *st, uint64_t data, int res);

/*
 * Queue the cancellation of every operation in flight on `w` (st_netfd_free):
 * none of them is submitted again.
 */
void st__uring_cancel_ops(struct st__uring_state *st, struct st__uring_watch *w);

/* Teardown: cancel every operation in flight and reap their completions. */
void st__uring_drain_ops(struct st__uring_state *st);

#endif /* ST__BACKEND_URING_H */
