/*
 * io_uring(7) backend (ST_EVENTSYS_IO_URING). Socket reads and writes,
 * accepts and connects, and the reads, writes and fsyncs of files, are
 * requests the kernel carries out, submitted with the dispatch's wait
 * (submit_io, the engine in uring_io.c); everything else (st_poll,
 * st_netfd_poll, st_recvmmsg, st_sendmmsg, what the engine does not take,
 * descriptors that are neither sockets nor files) waits for readiness
 * through one-shot IORING_OP_POLL_ADD requests, and the I/O functions then
 * try the system call, as on the other event systems.
 *
 * Scheduling order differs from epoll's: a submitted read completes at the
 * next dispatch even when its data is already there, so the caller always
 * gives up the CPU, and coroutines are made runnable in the order of their
 * completions.
 *
 * The rest of this comment is about readiness.
 *
 * Who waits on each descriptor is kept by the core (fdwatch.h). Each
 * descriptor has at most one poll request in the kernel: for the union of
 * what its waiters want. Waiting only marks the descriptor dirty;
 * the next dispatch queues the POLL_ADDs of all dirty descriptors and
 * submits them in the same io_uring_enter() that waits, so a wait costs no
 * system call of its own. Arming a poll checks the current state of the
 * file, so readiness is level-triggered like poll(2).
 *
 * A poll is identified by user_data = fd << 32 | generation << 1 (bit 0
 * clear; operations set it, backend_uring.h). Every new
 * request of a descriptor takes the next generation, and a completion
 * counts only if its descriptor has a request in flight of that very
 * generation: completions of cancelled or replaced requests, of closed and
 * reused descriptor numbers, are recognised and dropped without touching
 * any waiter (the waiters are never named in user_data).
 *
 * When the last waiter leaves before its poll fired (timeout, interrupt,
 * another descriptor of its st_poll() fired), the request is removed with
 * IORING_OP_POLL_REMOVE. A pending poll holds a reference to the file, so
 * a close() would not release the file (a socket would not send its FIN)
 * until the removal reaches the kernel: removals for descriptors without a
 * netfd are submitted at once, since the caller may close them as soon as
 * st_poll() returns; those for netfds are queued and submitted by the next
 * dispatch, or by fd_free() when the netfd lets go of the descriptor.
 *
 * A netfd that lets go of its descriptor while coroutines still wait on it
 * (st_netfd_free) has its request removed at once all the same, and armed
 * again by the next dispatch: the caller may close the descriptor, and a
 * poll still in flight would keep that file open and, once the number is
 * reused, leave the new file's waiters counting on a request that watches
 * the old one. A new netfd likewise replaces whatever request is in flight
 * for its number.
 */
#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend_uring.h"
#include "st_config.h"
#if ST__HAVE_VALGRIND
#include <valgrind/valgrind.h>
#endif

#define SQ_ENTRIES 1024U
#define CQ_ENTRIES 4096U
#define SMALL_ENTRIES 64U /* when locked memory (kernels before 5.12) is short */
#define CQE_BATCH ST__URING_CQE_BATCH
#define UDATA_IGNORED ST__URING_UDATA_IGNORED

/* liburing's out-of-line functions (see liburing_api.h), loaded on first use. */
struct st__liburing_api st__uring_lib;
static bool lib_loaded;
/* Not pthread_once: a load that failed (dlopen short of memory...) is tried again next time. */
static pthread_mutex_t lib_lock = PTHREAD_MUTEX_INITIALIZER;

/* Store dlsym's object pointer into a function pointer (POSIX guarantees it fits). */
static bool bind_symbol(void *handle, const char *name, void *fn_slot, size_t fn_size)
{
    void *symbol = dlsym(handle, name);
    if (symbol == NULL || fn_size != sizeof(symbol)) {
        return false;
    }
    memcpy(fn_slot, &symbol, sizeof(symbol));
    return true;
}

static void load_liburing(void)
{
    void *h = dlopen("liburing.so.2", RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        return;
    }
    lib_loaded = bind_symbol(h, "io_uring_queue_init", &st__uring_lib.queue_init, sizeof(st__uring_lib.queue_init)) &&
                 bind_symbol(h, "io_uring_queue_init_params", &st__uring_lib.queue_init_params,
                      sizeof(st__uring_lib.queue_init_params)) &&
                 bind_symbol(h, "io_uring_queue_exit", &st__uring_lib.queue_exit, sizeof(st__uring_lib.queue_exit)) &&
                 bind_symbol(h, "io_uring_submit", &st__uring_lib.submit, sizeof(st__uring_lib.submit)) &&
                 bind_symbol(h, "io_uring_submit_and_wait_timeout", &st__uring_lib.submit_and_wait_timeout,
                      sizeof(st__uring_lib.submit_and_wait_timeout)) &&
                 bind_symbol(h, "io_uring_peek_batch_cqe", &st__uring_lib.peek_batch_cqe,
                      sizeof(st__uring_lib.peek_batch_cqe)) &&
                 bind_symbol(h, "io_uring_get_probe_ring", &st__uring_lib.get_probe_ring,
                      sizeof(st__uring_lib.get_probe_ring)) &&
                 bind_symbol(h, "io_uring_free_probe", &st__uring_lib.free_probe,
                      sizeof(st__uring_lib.free_probe));
    if (!lib_loaded) {
        (void)dlclose(h); /* unusable without every function; a retry opens it again */
    }
}


static void watch_init(void *record, int fd)
{
    struct st__uring_watch *w = record;
    st__fdwatch_init(&w->common, fd);
    st__list_init(&w->dirty);
    st__list_init(&w->ops);
}

static int init_ring(struct io_uring *ring, unsigned entries, unsigned flags, unsigned cq_entries)
{
    struct io_uring_params params;
    memset(&params, 0, sizeof(params));
    params.flags = flags;
    params.cq_entries = cq_entries;
    return st__uring_lib.queue_init_params(entries, ring, &params);
}

/* io_uring_queue_init's result as errno; the strongest setup this kernel takes. */
static int create_ring(struct io_uring *ring)
{
    /* SUBMIT_ALL (5.18): a failing request does not stop the rest of the batch. */
    /* COOP_TASKRUN (5.19): completions wait for our next system call, no IPI. */
    /*
     * SINGLE_ISSUER (6.0): only this pthread submits (one ring per
     * scheduler), which spares the kernel its locking. Not DEFER_TASKRUN
     * (6.1): its completions run only inside io_uring_enter(GETEVENTS),
     * and at most a score of them per call on recent kernels, so after a
     * wait a read whose data had arrived may still have its completion
     * deferred. The scheduler then finds the reader's deadline passed and
     * cancels the read; the cancellation marks the request cancelled, and
     * the deferred completion ends it with -ECANCELED without receiving:
     * the reader gets ETIME with its data in the socket. Taking it would
     * need every deferred completion run (an io_uring_enter asking for as
     * many events as are in flight, without waiting) before a timed-out
     * operation is cancelled.
     */
    const unsigned sized = IORING_SETUP_CQSIZE | IORING_SETUP_CLAMP;
    const unsigned coop = sized | IORING_SETUP_SUBMIT_ALL | IORING_SETUP_COOP_TASKRUN;
    int rc = init_ring(ring, SQ_ENTRIES,
                       coop | IORING_SETUP_SINGLE_ISSUER, CQ_ENTRIES);
    if (rc == -EINVAL) {
        rc = init_ring(ring, SQ_ENTRIES, coop, CQ_ENTRIES);
    }
    if (rc == -EINVAL) {
        rc = init_ring(ring, SQ_ENTRIES, sized, CQ_ENTRIES);
    }
    if (rc == -EINVAL) {
        rc = init_ring(ring, SQ_ENTRIES, 0, 0);
    }
    if (rc == -ENOMEM) {
        rc = init_ring(ring, SMALL_ENTRIES, 0, 0);
    }
    return rc;
}

/* Probed at selection: seccomp or io_uring_disabled say ENOSYS or EPERM here. */
static bool uring_supported(void)
{
    (void)pthread_mutex_lock(&lib_lock);
    if (!lib_loaded) {
        load_liburing();
    }
    bool loaded = lib_loaded;
    (void)pthread_mutex_unlock(&lib_lock);
    if (!loaded) {
        errno = ENOSYS; /* liburing.so.2 is not installed */
        return false;
    }
    struct io_uring ring;
    int rc = st__uring_lib.queue_init(2, &ring, 0);
    if (rc < 0) {
        errno = -rc;
        return false;
    }
    st__uring_lib.queue_exit(&ring);
    return true;
}

static int uring_init(struct st__sched *sched)
{
    struct st__uring_state *st = calloc(1, sizeof(*st));
    if (st == NULL) {
        errno = ENOMEM;
        return -1;
    }
    st__backend_handle_forks();
    int rc = create_ring(&st->ring);
    if (rc < 0) {
        free(st);
        errno = -rc;
        return -1;
    }
    st__list_init(&st->dirty);
    st__fdtable_init(&st->watches, sizeof(struct st__uring_watch), watch_init);
    st->sched = sched;
    st__uring_probe_ops(st);
#if ST__HAVE_VALGRIND
    st->under_valgrind = RUNNING_ON_VALGRIND != 0;
#endif
    sched->backend_state = st;
    return 0;
}

/* In the child of a fork: the ring is the parent's (see refuse_after_fork). */
static void uring_after_fork(struct st__sched *sched)
{
    struct st__uring_state *st = sched->backend_state;
    st->forked = true;
}

/*
 * A child forked after st_init() shares the parent's ring: its memory is
 * mapped shared, so anything the child queued there the parent would
 * submit, and the kernel refuses the child's submissions to a ring made
 * with SINGLE_ISSUER, so it would wait for ever at full speed. It must
 * call st_destroy() and st_init() (docs/reference.md); before that, its
 * first use of the ring says so and stops.
 */
static void refuse_after_fork(const struct st__uring_state *st)
{
    if (__builtin_expect(st->forked, 0)) {
        errno = ECHILD;
        st__backend_wait_broken("io_uring in a child forked after st_init (call st_destroy and "
                                "st_init after fork)");
    }
}

static void uring_fini(struct st__sched *sched)
{
    struct st__uring_state *st = sched->backend_state;
    /*
     * Operations write into coroutine stacks that go next: let none be left
     * running. A forked child's copies are the parent's operations, in the
     * parent's memory: the child leaves the shared ring alone.
     */
    if (!st->forked) {
        st__uring_drain_ops(st);
    }
    /* Tearing the ring down cancels every request still in flight. */
    st__uring_lib.queue_exit(&st->ring);
    st__fdtable_fini(&st->watches);
    free(st);
    sched->backend_state = NULL;
}

static struct st__uring_watch *uring_watch(struct st__fdwatch *w)
{
    return ST__CONTAINER_OF(w, struct st__uring_watch, common);
}

static unsigned wanted_events(const struct st__uring_watch *w)
{
    return st__fdwatch_wanted(&w->common);
}

static void mark_dirty(struct st__uring_state *st, struct st__uring_watch *w)
{
    if (st__list_empty(&w->dirty)) {
        st__list_insert_tail(&st->dirty, &w->dirty);
    }
}

/* Bit 0 clear: a poll (backend_uring.h). */
static uint64_t udata(const struct st__uring_watch *w)
{
    return (uint64_t)(uint32_t)w->common.fd << 32 | (uint32_t)(w->gen << 1);
}

bool st__uring_sq_room(struct st__uring_state *st, unsigned need)
{
    refuse_after_fork(st);
    if (io_uring_sq_space_left(&st->ring) >= need) {
        return true;
    }
    (void)st__uring_lib.submit(&st->ring);
    return io_uring_sq_space_left(&st->ring) >= need;
}

/* Queue the removal of request `gen` (room checked by the caller). */
static void queue_removal(struct st__uring_state *st, struct st__uring_watch *w)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(&st->ring);
    io_uring_prep_poll_remove(sqe, udata(w));
    io_uring_sqe_set_data64(sqe, UDATA_IGNORED);
    w->unremoved = false;
}

/*
 * What a poll request asks the kernel for. io_uring's wake-up filter leaves
 * POLLPRI out (it adds it to polls of its own), so a request for POLLPRI
 * alone is never woken: TCP urgent data that comes after it is armed goes
 * unnoticed. POLLRDBAND, which a socket's wake-up for new data carries with
 * POLLPRI, lets the wake-up through; but the completion then reports the
 * wake-up's events: POLLPRI for in-band data too, and POLLIN for urgent
 * data alone. So a completion that reports POLLPRI has both checked
 * (input_and_urgent_now); only sockets with urgent data in play pay for it.
 */
static unsigned poll_mask(unsigned want)
{
    return (want & POLLPRI) != 0 ? want | POLLRDBAND : want;
}

/* The events a socket's wake-up names for in-band and urgent data alike. */
#define INPUT_AND_URGENT ((short)(POLLIN | POLLPRI))

/* Of INPUT_AND_URGENT, those `fd` has now, as poll(2) sees them. */
static short input_and_urgent_now(int fd)
{
    struct pollfd pd = {.fd = fd, .events = INPUT_AND_URGENT};
    if (poll(&pd, 1, 0) != 1) {
        return 0;
    }
    return (short)(pd.revents & INPUT_AND_URGENT);
}

/*
 * Bring the kernel's request for `w` in line with its waiters: remove it if
 * nobody waits or it lacks events somebody waits for, arm one for what is
 * wanted. A request for more than is wanted is left to fire. false: no room
 * in the ring, nothing was changed.
 */
static bool sync_watch(struct st__uring_state *st, struct st__uring_watch *w)
{
    unsigned want = wanted_events(w);
    bool remove = w->unremoved || (w->armed != 0 && (want == 0 || (want & ~w->armed) != 0));
    bool arm = want != 0 && (w->armed == 0 || remove);
    if (!st__uring_sq_room(st, (remove ? 1U : 0U) + (arm ? 1U : 0U))) {
        return false;
    }
    if (remove) {
        queue_removal(st, w);
        w->armed = 0;
    }
    if (arm) {
        w->gen++;
        struct io_uring_sqe *sqe = io_uring_get_sqe(&st->ring);
        io_uring_prep_poll_add(sqe, w->common.fd, poll_mask(want));
        io_uring_sqe_set_data64(sqe, udata(w));
        w->armed = want;
    }
    return true;
}

/* One completion: if it is the fd's current request, hand its events out. */
static void complete(struct st__uring_state *st, uint64_t data, int res,
                     struct st__fdwatch_ready *ready)
{
    if (data == UDATA_IGNORED) {
        return; /* a POLL_REMOVE, or liburing's own timeout on old kernels */
    }
    if (!st__uring_udata_is_poll(data)) {
        st__uring_op_complete(st, data, res);
        return;
    }
    struct st__fdwatch *common = st__fdwatch_find(&st->watches, (int)(uint32_t)(data >> 32));
    if (common == NULL) {
        return;
    }
    struct st__uring_watch *w = uring_watch(common);
    if (w->armed == 0 || (uint32_t)(w->gen << 1) != (uint32_t)data) {
        return; /* removed or replaced since: stale */
    }
    w->armed = 0;
    if (res == -ECANCELED) {
        /* Not our removal (that would have changed the state): arm again. */
        mark_dirty(st, w);
        return;
    }
    short fired = POLLERR;
    if (res >= 0) {
        fired = (short)(res & ~POLLRDBAND);
        if ((fired & POLLPRI) != 0) {
            fired = (short)((fired & ~INPUT_AND_URGENT) |
                            (fired & input_and_urgent_now(w->common.fd)));
        }
    } else if (res == -EBADF) {
        fired = POLLNVAL; /* closed before the poll reached the kernel, as poll(2) says */
    }
    (void)st__fdwatch_collect(common, fired, ready);
    /* Waiters for what did not fire need a new request. */
    mark_dirty(st, w);
}

static void reap(struct st__uring_state *st, struct st__fdwatch_ready *ready)
{
    for (;;) {
        unsigned n = st__uring_lib.peek_batch_cqe(&st->ring, st->cqes, CQE_BATCH);
        if (n == 0) {
            return;
        }
        for (unsigned i = 0; i < n; i++) {
            complete(st, io_uring_cqe_get_data64(st->cqes[i]), st->cqes[i]->res, ready);
        }
        io_uring_cq_advance(&st->ring, n);
    }
}

/* Queue the requests of every dirty watch. false: some are left for later. */
static bool flush_dirty(struct st__uring_state *st, struct st__fdwatch_ready *ready)
{
    bool reaped = false;
    struct st__list *l;
    while ((l = st__list_first(&st->dirty)) != NULL) {
        struct st__uring_watch *w = ST__CONTAINER_OF(l, struct st__uring_watch, dirty);
        if (!sync_watch(st, w)) {
            if (reaped) {
                return false;
            }
            /* The kernel refused more: make room in the completion queue once. */
            reap(st, ready);
            reaped = true;
            continue;
        }
        st__list_remove(&w->dirty);
    }
    return true;
}

/*
 * The descriptor may be closed or stand for another file from now on: take
 * its request out of the kernel (submitted now) and let the next dispatch
 * arm a new one if coroutines still wait on the number.
 */
static void replace_request(struct st__uring_state *st, struct st__uring_watch *w)
{
    if (w->armed == 0) {
        return;
    }
    w->armed = 0;
    if (st__uring_sq_room(st, 1)) {
        queue_removal(st, w);
    } else {
        w->unremoved = true; /* sent by the next dispatch */
    }
    if (w->unremoved || wanted_events(w) != 0) {
        mark_dirty(st, w);
    }
}

/* The last waiter of a descriptor that has a request in flight may have left. */
static void leave(struct st__uring_state *st, struct st__uring_watch *w)
{
    if (w->armed == 0 || !st__list_empty(&w->common.waiters)) {
        return; /* a request for more than is wanted is left to fire */
    }
    /*
     * Disowned at once even when the ring has no room for the removal: the
     * caller may close the descriptor and its number come back for another
     * file, whose waiters must get a request of their own.
     */
    replace_request(st, w);
    if (w->unremoved || w->common.owned) {
        return; /* submitted with the next dispatch, or by fd_free */
    }
    if (st->in_dispatch) {
        st->removals_queued = true;
    } else {
        (void)st__uring_lib.submit(&st->ring);
    }
}

static void left(void *state, struct st__fdwatch *w)
{
    leave(state, uring_watch(w));
}

/*
 * A pollfd joined `w`: its request goes to the kernel with the next
 * dispatch, unless the one in flight asks for its events already.
 */
static int joined(void *state, struct st__fdwatch *w, unsigned events)
{
    struct st__uring_watch *uw = uring_watch(w);
    if ((events & ~uw->armed) != 0) {
        mark_dirty(state, uw);
    }
    return 0;
}

static void uring_pollset_del(struct st__sched *sched, struct st__pollq *pq)
{
    struct st__uring_state *st = sched->backend_state;
    st__fdwatch_leave(&st->watches, pq, left, st);
}

static int uring_pollset_add(struct st__sched *sched, struct st__pollq *pq)
{
    struct st__uring_state *st = sched->backend_state;
    return st__fdwatch_join(&st->watches, pq, joined, left, st);
}

/*
 * Under valgrind, wait for completions in poll(2) on the ring first, at
 * most UNDER_VALGRIND_WAIT_MS at a time. Valgrind runs one thread at a time
 * and lets the others run only while it is in a system call it knows may
 * block, which io_uring_enter is not for it (3.19): a scheduler waiting
 * there for a completion that another pthread brings (a worker's eventfd,
 * a pipe it writes to) would wait for ever. The bound covers completions
 * the kernel defers to io_uring_enter, which poll may not see.
 */
#define UNDER_VALGRIND_WAIT_MS 10

static void wait_for_valgrind(struct st__uring_state *st, st_utime_t timeout)
{
    (void)st__uring_lib.submit(&st->ring);
    if (io_uring_cq_ready(&st->ring) > 0) {
        return;
    }
    int ms = UNDER_VALGRIND_WAIT_MS;
    if (timeout != ST_UTIME_NO_TIMEOUT && timeout < (st_utime_t)ms * 1000) {
        ms = (int)((timeout + 999) / 1000);
    }
    struct pollfd pfd = {.fd = st->ring.ring_fd, .events = POLLIN};
    (void)poll(&pfd, 1, ms);
}

static void uring_dispatch(struct st__sched *sched, st_utime_t timeout)
{
    struct st__uring_state *st = sched->backend_state;
    /* Its completion queue is the parent's too: a child reaping it would take theirs. */
    refuse_after_fork(st);
    struct st__fdwatch_ready ready;
    st__fdwatch_ready_init(&ready);
    if (!flush_dirty(st, &ready) && (timeout == ST_UTIME_NO_TIMEOUT || timeout > 1000)) {
        timeout = 1000; /* requests still wait for room: come back soon */
    }
    if (ready.first != NULL) {
        timeout = 0; /* completions are at hand: do not sleep */
    }
    if (__builtin_expect(st->under_valgrind, 0) && timeout != 0) {
        wait_for_valgrind(st, timeout);
        timeout = 0; /* then reap what came */
    }
    struct __kernel_timespec ts = {0};
    struct __kernel_timespec *tsp = NULL;
    if (timeout != ST_UTIME_NO_TIMEOUT) {
        ts.tv_sec = (long long)(timeout / 1000000);
        ts.tv_nsec = (long long)(timeout % 1000000) * 1000;
        tsp = &ts;
    }
    struct io_uring_cqe *cqe = NULL;
    /* Submit and wait in one system call (one more on kernels before 5.11). */
    (void)st__uring_lib.submit_and_wait_timeout(&st->ring, &cqe, 1, tsp, NULL);
    if (io_uring_sq_ready(&st->ring) > 0) {
        (void)st__uring_lib.submit(&st->ring); /* a batch cut short by a failing request */
    }
    reap(st, &ready);

    st->in_dispatch = true;
    st__fdwatch_wake(sched, &ready);
    st->in_dispatch = false;
    if (st->removals_queued) {
        st->removals_queued = false;
        (void)st__uring_lib.submit(&st->ring);
    }
}

static int uring_fd_new(struct st__sched *sched, int osfd)
{
    struct st__uring_state *st = sched->backend_state;
    struct st__fdwatch *w = st__fdwatch_own(&st->watches, osfd);
    if (w == NULL) {
        return -1;
    }
    struct st__uring_watch *uw = uring_watch(w);
    replace_request(st, uw); /* one in flight watches the number's previous file */
    uw->not_socket = false;
    return 0;
}

static void uring_fd_free(struct st__sched *sched, int osfd)
{
    struct st__uring_state *st = sched->backend_state;
    struct st__fdwatch *w = st__fdwatch_disown(&st->watches, osfd);
    if (w == NULL) {
        return;
    }
    replace_request(st, uring_watch(w));
    /* Operations in flight hold the file open too: cancel them (their callers get EBADF). */
    st__uring_cancel_ops(st, uring_watch(w));
    /* Queued removals and cancellations reach the kernel now: the descriptor may be closed next. */
    if (io_uring_sq_ready(&st->ring) > 0) {
        (void)st__uring_lib.submit(&st->ring);
    }
}

static int uring_fd_close(struct st__sched *sched, int osfd)
{
    const struct st__uring_state *st = sched->backend_state;
    struct st__fdwatch *w = st__fdwatch_find(&st->watches, osfd);
    /* Waited on, or an operation in flight (submitted by a caller that did not enter the netfd). */
    if (w != NULL && (!st__list_empty(&w->waiters) || !st__list_empty(&uring_watch(w)->ops))) {
        errno = EBUSY;
        return -1;
    }
    return 0;
}

const struct st__backend_ops st__backend_uring = {
    .name = "io_uring",
    .id = ST_EVENTSYS_IO_URING,
    .supported = uring_supported,
    .init = uring_init,
    .fini = uring_fini,
    .dispatch = uring_dispatch,
    .pollset_add = uring_pollset_add,
    .pollset_del = uring_pollset_del,
    .fd_new = uring_fd_new,
    .fd_close = uring_fd_close,
    .fd_free = uring_fd_free,
    .after_fork = uring_after_fork,
    .submit_io = st__uring_submit_io,
    .fd_limit = 0,
};
