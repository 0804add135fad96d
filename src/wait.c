/*
 * st_poll(): the one wait primitive every I/O function is built on. The
 * waiting coroutine puts a pollq entry (on its own stack) on the io_q and,
 * with a timeout, its deadline on the sleep heap; whichever fires first wakes
 * it. pq.on_ioq tells the two apart when it resumes.
 */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>

#include "backend.h"
#include "scheduler.h"

#define ST__POLL_EVENTS (POLLIN | POLLOUT | POLLPRI)

static int validate(struct pollfd *pds, int npds)
{
    if (npds < 0 || (npds > 0 && pds == NULL)) {
        errno = EINVAL;
        return -1;
    }
    for (int i = 0; i < npds; i++) {
        if (pds[i].fd < 0 || pds[i].events == 0 || (pds[i].events & ~ST__POLL_EVENTS) != 0) {
            errno = EINVAL;
            return -1;
        }
        pds[i].revents = 0;
    }
    return 0;
}

/* Give every pollfd its backend link; only long pollfd arrays allocate. */
static int pollq_init(struct st__pollq *pq, struct pollfd *pds, int npds, struct _st_thread *me)
{
    pq->pds = pds;
    pq->npds = npds;
    pq->thread = me;
    pq->on_ioq = true;
    pq->ready = false;
    pq->next_ready = NULL;
    pq->fds = pq->inline_fds;
    if (npds > ST__POLLQ_INLINE) {
        pq->fds = malloc((size_t)npds * sizeof(*pq->fds));
        if (pq->fds == NULL) {
            errno = ENOMEM;
            return -1;
        }
    }
    for (int i = 0; i < npds; i++) {
        pq->fds[i].pq = pq;
        pq->fds[i].pd = &pds[i];
        st__list_init(&pq->fds[i].link);
    }
    return 0;
}

static void pollq_fini(struct st__pollq *pq, int npds)
{
    /*
     * By the caller's count, not the pointer nor pq->npds (the backend saw
     * pq, so that is read again): st__poll_one's constant 1 drops the test.
     */
    if (npds > ST__POLLQ_INLINE) {
        free(pq->fds);
    }
}

/*
 * The wait of a running scheduler's current coroutine on validated pollfds.
 * Inline, so that st__poll_one (one pollfd, the wait of every netfd I/O
 * function) gets a copy without loops or allocation.
 */
static inline int wait_for(struct st__sched *sched, struct pollfd *pds, int npds,
                           st_utime_t timeout)
{
    struct _st_thread *me = sched->current;
    if (st__thread_take_interrupt(me)) {
        return -1;
    }
    struct st__pollq pq;
    if (pollq_init(&pq, pds, npds, me) != 0) {
        return -1;
    }
    if (sched->backend->pollset_add(sched, &pq) != 0) {
        pollq_fini(&pq, npds);
        return -1;
    }

    st__list_insert_tail(&sched->io_q, &pq.link);
    if (timeout != ST_UTIME_NO_TIMEOUT) {
        st__sched_sleep_add(sched, me, timeout);
    }
    me->state = ST__IO_WAIT;
    me->waiting_on = &pq;
    st__sched_switch(sched, me);
    me->waiting_on = NULL;

    int ready = 0;
    if (pq.on_ioq) {
        /* Woken by the deadline or an interrupt, not by I/O. */
        st__list_remove(&pq.link);
        sched->backend->pollset_del(sched, &pq);
    } else {
        for (int i = 0; i < npds; i++) {
            ready += pds[i].revents != 0;
        }
    }
    pollq_fini(&pq, npds);
    if (st__thread_take_interrupt(me)) {
        return -1;
    }
    return ready;
}

int st_poll(struct pollfd *pds, int npds, st_utime_t timeout)
{
    struct st__sched *sched = st__sched_running();
    if (sched == NULL || validate(pds, npds) != 0) {
        return -1;
    }
    return wait_for(sched, pds, npds, timeout);
}

int st__poll_one(struct pollfd *pd, st_utime_t timeout)
{
    struct st__sched *sched = st__sched_running();
    if (sched == NULL || validate(pd, 1) != 0) {
        return -1;
    }
    return wait_for(sched, pd, 1, timeout);
}

void st__pollq_ready(struct st__sched *sched, struct st__pollq *pq)
{
    assert(pq->on_ioq && !st__list_empty(&pq->link)); /* readied once, from the io_q */
    st__list_remove(&pq->link);
    pq->on_ioq = false;
    sched->backend->pollset_del(sched, pq);
    st__sched_wake_io(sched, pq->thread);
}
