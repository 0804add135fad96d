/* Condition variables and mutexes: wait queues of coroutines. */
#ifndef ST__SYNC_H
#define ST__SYNC_H

#include <stdbool.h>

#include "list.h"

struct _st_thread;

struct _st_cond {
    struct st__list wait_q; /* coroutines waiting and not yet woken, oldest first */
    /*
     * Waiters already woken (signal, deadline, interrupt) that have not run
     * yet. They leave wait_q when woken, so a signal takes the first entry
     * without walking past them, but they still count as waiting: the
     * condition cannot be destroyed under them, and a coroutine being joined
     * has its joiner.
     */
    int woken;
};

struct _st_mutex {
    struct _st_thread *owner; /* NULL when unlocked */
    /*
     * The scheduler generation (st__sched.generation) the owner belongs to.
     * A mutex outlives st_destroy(), its owner does not: an owner from an
     * ended generation is no owner.
     */
    unsigned long owner_generation;
    struct st__list wait_q;   /* coroutines waiting to own it, oldest first */
};

static inline void st__cond_init(struct _st_cond *cvar)
{
    st__list_init(&cvar->wait_q);
    cvar->woken = 0;
}

/* Does anybody wait on `cvar`, woken or not? */
static inline bool st__cond_has_waiters(const struct _st_cond *cvar)
{
    return !st__list_empty(&cvar->wait_q) || cvar->woken > 0;
}

/* A coroutine in ST__COND_WAIT is woken (deadline, interrupt): off its condition's queue. */
void st__cond_waiter_woken(struct _st_thread *thread);

/* st_destroy: a coroutine that will never run again stops waiting on any cond or mutex. */
void st__sync_forget_waiter(struct _st_thread *thread);

#endif /* ST__SYNC_H */
