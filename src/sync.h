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
    struct st__list wait_q;   /* coroutines waiting to own it, oldest first */
};

void st__cond_init(struct _st_cond *cvar);

#endif /* ST__SYNC_H */
