/*
 * The scheduler: one per pthread (State Threads' "virtual processor").
 *
 * It owns the run queue, the I/O wait queue, the zombie queue, the sleep
 * heap, the idle coroutine, the clock, the stack pool, the netfd free list,
 * the key table and the chosen event backend. Nothing else in the library
 * is global: a pthread finds its scheduler through one thread-local pointer.
 */
#ifndef ST__SCHEDULER_H
#define ST__SCHEDULER_H

#include <assert.h>
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <time.h>

#include "heap.h"
#include "list.h"
#include "st.h"
#include "stack.h"
#include "stats.h"
#include "thread.h"

struct st__backend_ops;

struct st__sched {
    struct _st_thread *current;
    struct _st_thread *idle;
    struct _st_thread *primordial;
    bool initialized;
    bool switch_hooked;       /* a switch callback is set (st__sched_switch) */
    bool submits_io;          /* initialized, and the backend submits I/O (submit_io) */
    unsigned long generation; /* unique per st_init() in the process; 0 before it */

    struct st__list run_q;    /* runnable coroutines, in the order they run */
    struct st__list io_q;     /* struct st__pollq of coroutines waiting for I/O */
    struct st__list zombie_q; /* finished joinable coroutines not yet joined */
    struct st__list threads;  /* every coroutine, for debuggers and st_destroy */
    struct st__heap sleep_q;  /* coroutines with a deadline */
    int active_count;         /* coroutines that keep the process alive */
    size_t thread_count;
    unsigned created;         /* coroutines created, counted up to ST__STACKS_AT_ONCE */

    st_utime_t last_clock;    /* clock at the last scheduler cycle or yield */
    bool clock_stale;         /* a tick skipped reading the clock: last_clock is behind */
    st_utime_t (*utime_fn)(void);
    time_t cached_time;       /* st_time() value while the time cache is on, else 0 */
    st_utime_t cached_time_at;

    const struct st__backend_ops *backend;
    void *backend_state;
    int osfd_limit;

    st_switch_cb_t switch_in_cb;
    st_switch_cb_t switch_out_cb;

    struct st__stack_pool stacks;
    struct st__list netfd_freelist;   /* netfds to hand out again */
    struct st__list netfds;           /* netfds handed out and not yet on the free list */

    int key_count;
    void (*key_destructors[ST__KEYS_MAX])(void *value);

    const void *primordial_stack_lo;  /* st_set_primordial_stack() before st_init */
    size_t primordial_stack_size;
    void *alt_stack;                  /* signal stack for overflow reports, if ours */
    struct _st_thread *switched_from; /* the coroutine the last switch left (sanitizer builds) */
    struct _st_thread *iterating;     /* the coroutine showing every stack (debug_api.c) */
    void *dead_tsan_fiber;            /* a finished coroutine's TSan fiber, to destroy */
};

struct st__pollq;

/*
 * One pollfd of a waiting coroutine, linked into the waiter list of its
 * descriptor (fdwatch.h) by the backends that wake exactly the waiters of
 * the fds that fired instead of scanning every waiter (epoll, io_uring).
 */
struct st__pollq_fd {
    struct st__list link; /* on its descriptor's list of waiters (struct st__fdwatch) */
    struct st__pollq *pq;
    struct pollfd *pd;
};

/* How many pollfds a wait can have before st_poll() allocates their links. */
#define ST__POLLQ_INLINE 4

/* A coroutine's wait in st_poll(): lives on that coroutine's stack. */
struct st__pollq {
    struct st__list link; /* on the scheduler's io_q */
    struct pollfd *pds;
    int npds;
    struct st__pollq_fd *fds; /* npds entries: `inline_fds` or allocated */
    struct _st_thread *thread;
    bool on_ioq;          /* cleared when I/O readiness woke the coroutine */
    bool ready;           /* a backend's dispatch has queued it for waking */
    struct st__pollq *next_ready;
    struct st__pollq_fd inline_fds[ST__POLLQ_INLINE];
};

static inline struct st__pollq *st__pollq_from_link(struct st__list *link)
{
    return ST__CONTAINER_OF(link, struct st__pollq, link);
}

static inline struct st__pollq_fd *st__pollq_fd_from_link(struct st__list *link)
{
    return ST__CONTAINER_OF(link, struct st__pollq_fd, link);
}

extern _Thread_local struct st__sched *st__this_sched __attribute__((tls_model("initial-exec")));

/* This pthread's scheduler, or NULL if it has none yet. */
static inline struct st__sched *st__sched_peek(void)
{
    return st__this_sched;
}

/* This pthread's scheduler, created (not initialised) on first use; NULL + ENOMEM. */
struct st__sched *st__sched_get(void);

/* Detach the freed scheduler from this pthread (st_destroy). */
void st__sched_forget(void);

/* The scheduler of an st_init()ed pthread, or NULL with errno EINVAL. */
static inline struct st__sched *st__sched_running(void)
{
    struct st__sched *sched = st__this_sched;
    if (sched == NULL || !sched->initialized) {
        errno = EINVAL;
        return NULL;
    }
    return sched;
}

/* Make `thread` runnable at the tail of the run queue. */
static inline void st__sched_make_runnable(struct st__sched *sched, struct _st_thread *thread)
{
    assert(st__list_empty(&thread->links)); /* not on the run queue or the zombie queue */
    assert(thread->state != ST__ZOMBIE);
    thread->state = ST__RUNNABLE;
    st__list_insert_tail(&sched->run_q, &thread->links);
}

/* Give a coroutine a deadline `timeout` after the scheduler's last clock. */
void st__sched_sleep_add(struct st__sched *sched, struct _st_thread *thread, st_utime_t timeout);

/* Drop a coroutine's deadline, if it has one. */
static inline void st__sched_sleep_del(struct st__sched *sched, struct _st_thread *thread)
{
    if (st__heap_node_queued(&thread->timer)) {
        st__heap_remove(&sched->sleep_q, &thread->timer);
    }
}

/*
 * A switch does more than move registers when switch callbacks are set
 * (sched->switch_hooked) or, in builds with ASan or TSan, always: those
 * tools must be told about every change of stack (fiber.h). So it does in
 * builds with State Threads' DEBUG functions (debug_api.h), where every
 * resumption may have to show its stack.
 */
#ifndef ST__DEBUG_API
#define ST__DEBUG_API 0
#endif
#if defined(ST__ASAN) || defined(ST__TSAN) || ST__DEBUG_API
#define ST__SWITCH_TOOLS 1
#else
#define ST__SWITCH_TOOLS 0
#endif

/* The switch with callbacks and sanitizer bookkeeping (scheduler.c). */
void st__sched_switch_hooked(struct st__sched *sched, struct _st_thread *me);

/* Take the next coroutine to run off the run queue: the idle one when it is empty. */
static inline struct _st_thread *st__sched_pick(struct st__sched *sched)
{
    struct st__list *first = sched->run_q.next;
    if (first == &sched->run_q) {
        ST__STAT_INC(thread_idle);
        return sched->idle;
    }
    ST__STAT_INC(thread_run);
    st__list_remove(first);
    return st__thread_from_links(first);
}

/*
 * Suspend the current coroutine `me` (already placed on whatever queue
 * will wake it, with its state set) and run the next one. Returns when `me`
 * is resumed. Inline: it is most of every blocking call's cost, and the
 * common case is a handful of instructions around the register switch.
 */
static inline void st__sched_switch(struct st__sched *sched, struct _st_thread *me)
{
    assert(me == sched->current);
    /* It has left RUNNING for the state that says what wakes it (RUNNABLE: a yield). */
    assert(me->state != ST__RUNNING);
    if (ST__SWITCH_TOOLS || __builtin_expect(sched->switch_hooked, 0)) {
        st__sched_switch_hooked(sched, me);
        return;
    }
    struct _st_thread *next = st__sched_pick(sched);
    assert(next->state == ST__RUNNABLE || next == sched->idle);
    next->state = ST__RUNNING;
    sched->current = next;
    if (next != me) {
        st__ctx_switch(&me->ctx, &next->ctx);
    }
}

/* Sanitizer bookkeeping on arriving in `me` after a switch (scheduler.c). */
void st__sched_arrived_tools(struct st__sched *sched, struct _st_thread *me);

/* Bookkeeping on arriving in `me` after a switch (or at its first run): none without sanitizers. */
static inline void st__sched_arrived(struct st__sched *sched, struct _st_thread *me)
{
#if ST__SWITCH_TOOLS
    st__sched_arrived_tools(sched, me);
#else
    (void)sched;
    (void)me;
#endif
}

/* The clock used for deadlines (st_utime()). */
st_utime_t st__utime(const struct st__sched *sched);

/* Read the clock, then move every coroutine whose deadline passed to the run queue. */
void st__sched_check_clock(struct st__sched *sched);

/*
 * A scheduler cycle or a yield: expire the deadlines that passed. Timers can
 * only expire if there are any: without sleepers (and without the st_time()
 * cache to refresh) reading the clock, most of the cost, is put off until
 * somebody asks for it (a new deadline, st_utime(), st_utime_last_clock()),
 * which then sees a clock as current as State Threads', which reads it
 * every time. A library built with State Threads' statistics (stats.h)
 * reads it every time too, so that its clock buckets count the checks
 * State Threads' count.
 */
static inline void st__sched_tick(struct st__sched *sched)
{
    if (ST__DEBUG_STATS || st__heap_size(&sched->sleep_q) > 0 || sched->cached_time != 0) {
        st__sched_check_clock(sched);
    } else {
        sched->clock_stale = true;
    }
}

/* The clock as of the last cycle or yield (read now if a tick put that off). */
static inline st_utime_t st__sched_last_clock(struct st__sched *sched)
{
    if (sched->clock_stale) {
        sched->clock_stale = false;
        sched->last_clock = st__utime(sched);
    }
    return sched->last_clock;
}

/*
 * The first coroutines of a scheduler (those a program starts with: its
 * listeners, its workers) get guarded stacks with mappings of their own at
 * once. Later ones, those a server creates per connection, take quick
 * stacks that get their mappings (stack.h) once the scheduler has time to
 * spare, and so is the stack reserve made (stack.h): when nothing at all
 * happened for ST__QUIET_US, the idle loop does a batch of that work
 * (ST__PREPARES_PER_BATCH stacks of the reserve, about 3 us each, or else
 * ST__SPLITS_PER_BATCH splits, about 4 us each), then looks at the event
 * system without waiting and does another while nothing is ready, so that
 * I/O arriving meanwhile waits for one batch at most.
 */
#define ST__STACKS_AT_ONCE 16U
#define ST__QUIET_US 10000U
#define ST__PREPARES_PER_BATCH 16
#define ST__SPLITS_PER_BATCH 32

/* Microseconds until the earliest deadline, or ST_UTIME_NO_TIMEOUT. */
st_utime_t st__sched_next_timeout(const struct st__sched *sched);

/* st_poll() on one pollfd, without its loops: the wait of every netfd I/O function. */
int st__poll_one(struct pollfd *pd, st_utime_t timeout);

/* A waiter's I/O is ready: take it off the io_q and make it runnable. */
void st__pollq_ready(struct st__sched *sched, struct st__pollq *pq);


/* Refresh the st_time() cache when it is on and a second has passed. */
void st__time_cache_tick(struct st__sched *sched, st_utime_t now);

/*
 * A coroutine blocked waiting for I/O (a poll, a submitted operation, a
 * worker's call) can go on: off the sleep heap and runnable, once; one
 * woken already (deadline, interrupt) is left as it is.
 */
static inline void st__sched_wake_io(struct st__sched *sched, struct _st_thread *thread)
{
    if (thread->state == ST__IO_WAIT) {
        st__sched_sleep_del(sched, thread);
        st__sched_make_runnable(sched, thread);
    }
}

#endif /* ST__SCHEDULER_H */
