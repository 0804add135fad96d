/*
 * The coroutine object (State Threads calls it a thread).
 *
 * A created coroutine's object lives at the top of its own stack, so
 * creating one costs a single stack acquisition; the primordial coroutine
 * (the pthread that called st_init) is heap-allocated and runs on the
 * pthread's own stack.
 */
#ifndef ST__THREAD_H
#define ST__THREAD_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>

#include "context.h"
#include "fiber.h"
#include "heap.h"
#include "list.h"
#include "stack.h"
#include "st.h"
#include "sync.h"

#define ST__KEYS_MAX 16

enum st__thread_state {
    ST__RUNNING,
    ST__RUNNABLE,
    ST__IO_WAIT,
    ST__LOCK_WAIT,
    ST__COND_WAIT,
    ST__SLEEPING,
    ST__ZOMBIE,
    ST__SUSPENDED,
};

enum st__thread_flag {
    ST__FL_PRIMORDIAL = 1U << 0,
    ST__FL_IDLE = 1U << 1,
    ST__FL_INTERRUPT = 1U << 2, /* st_thread_interrupt() not yet consumed */
    ST__FL_TIMEDOUT = 1U << 3,  /* a cond wait's deadline passed */
    ST__FL_EXITING = 1U << 4,   /* inside st_thread_exit() */
    ST__FL_DEAD = 1U << 5,      /* switching away for the last time */
    ST__FL_REAPED = 1U << 6,    /* joined: its stack is back in the pool */
    ST__FL_SYSTEM = 1U << 7,    /* the library's own (file I/O completer): no switch callbacks */
    /*
     * What an IO_WAIT coroutine's waiting_on points to, for debuggers
     * (tools/gdb/st.py): a struct st__uring_op (an operation submitted to
     * io_uring), a struct st__work (a call a file I/O worker carries out),
     * or with neither flag a struct st__pollq (st_poll, every readiness wait).
     */
    ST__FL_WAIT_URING_OP = 1U << 8,
    ST__FL_WAIT_FILE_CALL = 1U << 9,
    /*
     * It calls the switch-in callback itself when it next runs: it has not
     * run yet (thread_main), or it switched away on the hooked path
     * (st__sched_switch_hooked). A coroutine that switched away on the fast
     * path, with no callback set, has its switch-in called by the coroutine
     * that switches to it, so the fast path needs no check on resumption.
     */
    ST__FL_SWITCH_IN_OWN = 1U << 10,
    ST__FL_FRESH = 1U << 11, /* created and not yet run */
    /*
     * Joinable, and exited while a switch callback was set: once joined it
     * runs once more, to release its stack, as State Threads' coroutines
     * do, so that the callbacks see that run (st_thread_exit). Otherwise
     * the joiner releases the stack and spares it the switch.
     */
    ST__FL_RESUMES_TO_REAP = 1U << 12,
};

struct _st_thread {
    /*
     * What every switch and every I/O wake-up touches comes first, in the
     * object's first cache line (a created coroutine's object is cache-line
     * aligned): with thousands of coroutines it is rarely in the cache when
     * they run.
     */
    enum st__thread_state state;
    unsigned flags;
    struct st__list links;       /* on the run queue or the zombie queue */
    struct st__ctx ctx;
    const void *waiting_on;      /* the cond, mutex or pollq blocked on, for debuggers */
    struct st__heap_node timer;  /* on the sleep heap while a deadline is set */

    void *(*start)(void *arg);
    void *arg;
    void *retval;

    struct st__stack *stack;     /* NULL for the primordial coroutine */
    struct st__list wait_links;  /* on a cond's or a mutex's wait queue */
    struct _st_cond *cond;       /* the cond waited on (woken or not), else NULL */
    struct st__list all_links;   /* on the scheduler's list of every coroutine */

    struct _st_cond *term;       /* &term_cond when joinable, else NULL */
    struct _st_cond term_cond;

    /*
     * st_thread_setspecific() values. Only the first `keys_set` slots are
     * written; the others read as NULL. Creating a coroutine then costs no
     * clearing of the whole table, which most coroutines never touch.
     */
    int keys_set;
    void *keys[ST__KEYS_MAX];

    struct st__fiber fiber;      /* what sanitizers need to follow switches */
};

_Static_assert(offsetof(struct _st_thread, start) <= 64,
               "the fields a switch touches must share one cache line");

/* Is it blocked, so that something may wake it? (For invariant checks.) */
static inline bool st__thread_waiting(const struct _st_thread *thread)
{
    return thread->state == ST__IO_WAIT || thread->state == ST__LOCK_WAIT ||
           thread->state == ST__COND_WAIT || thread->state == ST__SLEEPING ||
           thread->state == ST__SUSPENDED;
}

/*
 * A pending st_thread_interrupt() fails the blocking call it reaches: if
 * `thread` has one, consume it, set errno to EINTR and say so.
 */
static inline bool st__thread_take_interrupt(struct _st_thread *thread)
{
    if ((thread->flags & ST__FL_INTERRUPT) == 0) {
        return false;
    }
    thread->flags &= ~ST__FL_INTERRUPT;
    errno = EINTR;
    return true;
}

static inline struct _st_thread *st__thread_from_links(struct st__list *link)
{
    return ST__CONTAINER_OF(link, struct _st_thread, links);
}

static inline struct _st_thread *st__thread_from_wait_links(struct st__list *link)
{
    return ST__CONTAINER_OF(link, struct _st_thread, wait_links);
}

static inline struct _st_thread *st__thread_from_all_links(struct st__list *link)
{
    return ST__CONTAINER_OF(link, struct _st_thread, all_links);
}

static inline struct _st_thread *st__thread_from_timer(struct st__heap_node *node)
{
    return ST__CONTAINER_OF(node, struct _st_thread, timer);
}

struct st__sched;

/*
 * Create a coroutine that is not yet on any queue (the idle coroutine is
 * made this way too). Returns NULL with errno set on failure.
 */
struct _st_thread *st__thread_new(struct st__sched *sched, void *(*start)(void *arg), void *arg,
                                  int joinable, size_t stack_size);

/* Run the key destructors of a coroutine that is exiting. */
void st__keys_run_destructors(struct st__sched *sched, struct _st_thread *thread);

#endif /* ST__THREAD_H */
