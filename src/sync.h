/* Condition variables and mutexes: wait queues of coroutines. */
#ifndef ST__SYNC_H
#define ST__SYNC_H

#include "list.h"

struct _st_thread;

struct _st_cond {
    struct st__list wait_q; /* waiting coroutines, oldest first */
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

void st__cond_init(struct _st_cond *cvar);

#endif /* ST__SYNC_H */
