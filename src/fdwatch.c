#include "fdwatch.h"

#include <errno.h>
#include <poll.h>

void st__fdwatch_init(struct st__fdwatch *w, int fd)
{
    st__list_init(&w->waiters);
    w->fd = fd;
}

unsigned st__fdwatch_wanted(const struct st__fdwatch *w)
{
    return (w->readers > 0 ? (unsigned)POLLIN : 0U) | (w->writers > 0 ? (unsigned)POLLOUT : 0U) |
           (w->urgent > 0 ? (unsigned)POLLPRI : 0U);
}

bool st__fdwatch_busy(const struct st__fdtable *table, int fd)
{
    const struct st__fdwatch *w = st__fdwatch_find(table, fd);
    return w != NULL && !st__list_empty(&w->waiters);
}

struct st__fdwatch *st__fdwatch_own(struct st__fdtable *table, int fd)
{
    if (st__fdtable_reserve(table, fd) != 0) {
        return NULL;
    }
    struct st__fdwatch *w = st__fdwatch_at(table, fd);
    w->owned = true;
    return w;
}

struct st__fdwatch *st__fdwatch_disown(const struct st__fdtable *table, int fd)
{
    struct st__fdwatch *w = st__fdwatch_find(table, fd);
    if (w != NULL) {
        w->owned = false;
    }
    return w;
}

static void count_waiter(struct st__fdwatch *w, short events, int delta)
{
    w->readers += (events & POLLIN) != 0 ? delta : 0;
    w->writers += (events & POLLOUT) != 0 ? delta : 0;
    w->urgent += (events & POLLPRI) != 0 ? delta : 0;
}

void st__fdwatch_leave(const struct st__fdtable *table, struct st__pollq *pq,
                       st__fdwatch_left_fn left, void *state)
{
    for (int i = 0; i < pq->npds; i++) {
        if (st__list_empty(&pq->fds[i].link)) {
            continue; /* never joined (a failed join rolling back) */
        }
        struct st__fdwatch *w = st__fdwatch_at(table, pq->pds[i].fd);
        st__list_remove(&pq->fds[i].link);
        count_waiter(w, pq->pds[i].events, -1);
        left(state, w);
    }
}

int st__fdwatch_join(struct st__fdtable *table, struct st__pollq *pq,
                     st__fdwatch_joined_fn joined, st__fdwatch_left_fn left, void *state)
{
    for (int i = 0; i < pq->npds; i++) {
        int fd = pq->pds[i].fd;
        int rc = st__fdtable_reserve(table, fd);
        if (rc == 0) {
            struct st__fdwatch *w = st__fdwatch_at(table, fd);
            count_waiter(w, pq->pds[i].events, +1);
            st__list_insert_tail(&w->waiters, &pq->fds[i].link);
            rc = joined(state, w);
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

void st__fdwatch_collect(struct st__fdwatch *w, short fired, struct st__fdwatch_ready *ready)
{
    st__list_for_each(link, &w->waiters) {
        struct st__pollq_fd *node = st__pollq_fd_from_link(link);
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
}

void st__fdwatch_wake(struct st__sched *sched, struct st__fdwatch_ready *ready)
{
    struct st__pollq *pq = ready->first;
    st__fdwatch_ready_init(ready);
    while (pq != NULL) {
        struct st__pollq *next = pq->next_ready; /* read before the wait may end */
        st__pollq_ready(sched, pq);
        pq = next;
    }
}
