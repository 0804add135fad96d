/*
 * Who waits on each descriptor, for the backends that keep per-fd state
 * (epoll, io_uring).
 *
 * The core keeps, for every descriptor, the list of pollfds waiting on it,
 * so that a dispatch wakes exactly the waiters of the descriptors that
 * fired: its cost follows the number of events, not the number of waiting
 * coroutines. What the waiters want together is not kept but gathered from
 * the list when a backend needs it, which is rarely: a descriptor has one
 * waiter or two, a join only has to ask whether its own events are
 * watched, and a dispatch gathers it while it hands out the events. The
 * backend keeps only what concerns the kernel (what it watches for the
 * fd), in a record of its own that begins with struct st__fdwatch; the
 * records live in an st__fdtable, which never moves them, since waiter
 * lists point into them.
 */
#ifndef ST__FDWATCH_H
#define ST__FDWATCH_H

#include <errno.h>
#include <poll.h>
#include <stdbool.h>

#include "fdtable.h"
#include "list.h"
#include "scheduler.h"

struct st__fdwatch {
    struct st__list waiters; /* struct st__pollq_fd of coroutines waiting on the fd */
    int fd;
    bool owned;              /* a netfd holds the fd: the backend may keep its registration */
};

/* Initialise the common part of a new record (call from the table's record_init). */
void st__fdwatch_init(struct st__fdwatch *w, int fd);

/* The watch of a descriptor known to have one. */
static inline struct st__fdwatch *st__fdwatch_at(const struct st__fdtable *table, int fd)
{
    return st__fdtable_at(table, fd);
}

/* The watch of `fd`, or NULL if it never had one. */
static inline struct st__fdwatch *st__fdwatch_find(const struct st__fdtable *table, int fd)
{
    return st__fdtable_find(table, fd);
}

/* What the waiters of `w` wait for: POLLIN, POLLOUT, POLLPRI (0: nobody waits). */
static inline unsigned st__fdwatch_wanted(const struct st__fdwatch *w)
{
    unsigned want = 0;
    st__list_for_each(link, &w->waiters) {
        want |= (unsigned short)st__pollq_fd_from_link(link)->pd->events;
    }
    return want;
}

/* Does a coroutine wait on `fd`? (An fd must not be closed while one does.) */
bool st__fdwatch_busy(const struct st__fdtable *table, int fd);

/* A netfd takes `fd`: its watch, marked owned; NULL with errno ENOMEM. */
struct st__fdwatch *st__fdwatch_own(struct st__fdtable *table, int fd);

/* The netfd lets go of `fd`: its watch, no longer owned; NULL if it never had one. */
struct st__fdwatch *st__fdwatch_disown(const struct st__fdtable *table, int fd);

/*
 * The backend's part of a wait. joined: a pollfd waiting for `events` has
 * just joined `w` (it is on the list); 0, or -1 with errno to fail the wait.
 * left: a pollfd has just left `w`.
 */
typedef int (*st__fdwatch_joined_fn)(void *state, struct st__fdwatch *w, unsigned events);
typedef void (*st__fdwatch_left_fn)(void *state, struct st__fdwatch *w);

/* Every pollfd of `pq` that joined leaves its watch. */
static inline void st__fdwatch_leave(const struct st__fdtable *table, struct st__pollq *pq,
                                     st__fdwatch_left_fn left, void *state)
{
    for (int i = 0; i < pq->npds; i++) {
        if (st__list_empty(&pq->fds[i].link)) {
            continue; /* never joined (a failed join rolling back) */
        }
        struct st__fdwatch *w = st__fdwatch_at(table, pq->pds[i].fd);
        st__list_remove(&pq->fds[i].link);
        left(state, w);
    }
}

/*
 * Every pollfd of `pq` joins the watch of its descriptor. On failure, those
 * that joined leave again (through `left`) and -1 is returned with the
 * errno of the failure.
 */
static inline int st__fdwatch_join(struct st__fdtable *table, struct st__pollq *pq,
                                   st__fdwatch_joined_fn joined, st__fdwatch_left_fn left,
                                   void *state)
{
    for (int i = 0; i < pq->npds; i++) {
        int fd = pq->pds[i].fd;
        int rc = st__fdtable_reserve(table, fd);
        if (rc == 0) {
            struct st__fdwatch *w = st__fdwatch_at(table, fd);
            st__list_insert_tail(&w->waiters, &pq->fds[i].link);
            rc = joined(state, w, (unsigned short)pq->pds[i].events);
        }
        if (rc != 0) {
            int err = errno;
            st__fdwatch_leave(table, pq, left, state);
            errno = err;
            return -1;
        }
    }
    return 0;
}

/* The waits a dispatch found ready, in the order their events came. */
struct st__fdwatch_ready {
    struct st__pollq *first;
    struct st__pollq **last;
};

static inline void st__fdwatch_ready_init(struct st__fdwatch_ready *ready)
{
    ready->first = NULL;
    ready->last = &ready->first;
}

/*
 * `fired` happened on the descriptor of `w`: give each waiter the events it
 * asked for and the error conditions (POLLERR, POLLHUP, POLLNVAL, which
 * poll(2) reports unasked), and queue every wait that got one on `ready`,
 * once. Returns what the waiters wanted, as st__fdwatch_wanted (those
 * just made ready leave when they are woken).
 */
static inline unsigned st__fdwatch_collect(struct st__fdwatch *w, short fired,
                                           struct st__fdwatch_ready *ready)
{
    unsigned want = 0;
    st__list_for_each(link, &w->waiters) {
        struct st__pollq_fd *node = st__pollq_fd_from_link(link);
        want |= (unsigned short)node->pd->events;
        short revents = (short)(fired & (node->pd->events | POLLERR | POLLHUP | POLLNVAL));
        if (revents == 0) {
            continue;
        }
        node->pd->revents = (short)(node->pd->revents | revents);
        if (!node->pq->ready) {
            node->pq->ready = true;
            node->pq->next_ready = NULL;
            *ready->last = node->pq;
            ready->last = &node->pq->next_ready;
        }
    }
    return want;
}

/* Wake the queued waits, in order; `ready` ends empty. */
static inline void st__fdwatch_wake(struct st__sched *sched, struct st__fdwatch_ready *ready)
{
    struct st__pollq *pq = ready->first;
    st__fdwatch_ready_init(ready);
    while (pq != NULL) {
        struct st__pollq *next = pq->next_ready; /* read before the wait may end */
        st__pollq_ready(sched, pq);
        pq = next;
    }
}

#endif /* ST__FDWATCH_H */
