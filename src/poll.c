/*
 * st_poll(): the one wait primitive every I/O function is built on. The
 * waiting coroutine puts a pollq entry (on its own stack) on the io_q and,
 * with a timeout, its deadline on the sleep heap; whichever fires first wakes
 * it. pq.on_ioq tells the two apart when it resumes.
 */
#include <errno.h>

#include "backend.h"
#include "sched.h"

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

int st_poll(struct pollfd *pds, int npds, st_utime_t timeout)
{
    struct st__sched *sched = st__sched_running();
    if (sched == NULL || validate(pds, npds) != 0) {
        return -1;
    }
    struct _st_thread *me = sched->current;
    if ((me->flags & ST__FL_INTERRUPT) != 0) {
        me->flags &= ~ST__FL_INTERRUPT;
        errno = EINTR;
        return -1;
    }
    if (sched->backend->pollset_add(sched, pds, npds) != 0) {
        return -1;
    }

    struct st__pollq pq = {.pds = pds, .npds = npds, .thread = me, .on_ioq = true};
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
        sched->backend->pollset_del(sched, pds, npds);
    } else {
        for (int i = 0; i < npds; i++) {
            ready += pds[i].revents != 0;
        }
    }
    if ((me->flags & ST__FL_INTERRUPT) != 0) {
        me->flags &= ~ST__FL_INTERRUPT;
        errno = EINTR;
        return -1;
    }
    return ready;
}

void st__pollq_ready(struct st__sched *sched, struct st__pollq *pq)
{
    st__list_remove(&pq->link);
    pq->on_ioq = false;
    sched->backend->pollset_del(sched, pq->pds, pq->npds);
    struct _st_thread *thread = pq->thread;
    if (thread->state == ST__IO_WAIT) {
        st__sched_sleep_del(sched, thread);
        st__sched_make_runnable(sched, thread);
    }
}
