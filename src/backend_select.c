/*
 * select(2) backend (ST_EVENTSYS_SELECT, the default). Descriptors must be
 * below FD_SETSIZE. Per-fd waiter counts decide which bits are set in the
 * three interest sets; dispatch works on copies, since select() overwrites
 * its arguments.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/select.h>

#include "backend.h"
#include "scheduler.h"

struct st__select_state {
    fd_set interest[3];        /* read, write, exception */
    int waiters[3][FD_SETSIZE];
    int maxfd;                 /* highest fd that may have waiters, or -1 */
};

enum st__select_set { READ_SET, WRITE_SET, EXCEPT_SET };

static const short set_events[3] = {POLLIN, POLLOUT, POLLPRI};

static int select_init(struct st__sched *sched)
{
    struct st__select_state *st = calloc(1, sizeof(*st));
    if (st == NULL) {
        errno = ENOMEM;
        return -1;
    }
    for (int s = 0; s < 3; s++) {
        FD_ZERO(&st->interest[s]);
    }
    st->maxfd = -1;
    sched->backend_state = st;
    return 0;
}

static void select_fini(struct st__sched *sched)
{
    free(sched->backend_state);
    sched->backend_state = NULL;
}

static void count_waiter(struct st__select_state *st, const struct pollfd *pd, int delta)
{
    for (int s = 0; s < 3; s++) {
        if ((pd->events & set_events[s]) == 0) {
            continue;
        }
        st->waiters[s][pd->fd] += delta;
        if (st->waiters[s][pd->fd] > 0) {
            FD_SET(pd->fd, &st->interest[s]);
        } else {
            FD_CLR(pd->fd, &st->interest[s]);
        }
    }
}

static int select_pollset_add(struct st__sched *sched, struct st__pollq *pq)
{
    struct st__select_state *st = sched->backend_state;
    struct pollfd *pds = pq->pds;
    int npds = pq->npds;
    for (int i = 0; i < npds; i++) {
        if (pds[i].fd >= FD_SETSIZE) {
            errno = EINVAL;
            return -1;
        }
    }
    for (int i = 0; i < npds; i++) {
        count_waiter(st, &pds[i], +1);
        if (pds[i].fd > st->maxfd) {
            st->maxfd = pds[i].fd;
        }
    }
    return 0;
}

static void select_pollset_del(struct st__sched *sched, struct st__pollq *pq)
{
    struct st__select_state *st = sched->backend_state;
    for (int i = 0; i < pq->npds; i++) {
        count_waiter(st, &pq->pds[i], -1);
    }
}

static bool has_waiters(const struct st__select_state *st, int fd)
{
    return st->waiters[READ_SET][fd] + st->waiters[WRITE_SET][fd] + st->waiters[EXCEPT_SET][fd] > 0;
}

/* After a select() EBADF: mark every closed descriptor POLLNVAL and wake its waiters. */
static void wake_bad_fds(struct st__sched *sched)
{
    st__list_for_each_safe(link, next, &sched->io_q) {
        struct st__pollq *pq = st__pollq_from_link(link);
        int bad = 0;
        for (int i = 0; i < pq->npds; i++) {
            if (fcntl(pq->pds[i].fd, F_GETFL) < 0 && errno == EBADF) {
                pq->pds[i].revents = POLLNVAL;
                bad++;
            }
        }
        if (bad > 0) {
            st__pollq_ready(sched, pq);
        }
    }
}

static void select_dispatch(struct st__sched *sched, st_utime_t timeout)
{
    struct st__select_state *st = sched->backend_state;
    while (st->maxfd >= 0 && !has_waiters(st, st->maxfd)) {
        st->maxfd--;
    }
    fd_set result[3];
    for (int s = 0; s < 3; s++) {
        result[s] = st->interest[s];
    }
    struct timeval tv;
    struct timeval *tvp = NULL;
    if (timeout != ST_UTIME_NO_TIMEOUT) {
        tv.tv_sec = (time_t)(timeout / 1000000ULL);
        tv.tv_usec = (suseconds_t)(timeout % 1000000ULL);
        tvp = &tv;
    }
    int n = select(st->maxfd + 1, &result[READ_SET], &result[WRITE_SET], &result[EXCEPT_SET], tvp);
    if (n < 0 && errno == EBADF) {
        wake_bad_fds(sched);
        return;
    }
    /*
     * EINTR and ENOMEM pass: the idle loop waits again. EINVAL says the
     * descriptor count or the timeout handed over is invalid, which no retry
     * cures.
     */
    if (n < 0 && errno == EINVAL) {
        st__backend_wait_broken("select");
    }
    if (n <= 0) {
        return;
    }

    /* Safe walk: pq may leave the queue below. */
    st__list_for_each_safe(link, next, &sched->io_q) {
        struct st__pollq *pq = st__pollq_from_link(link);
        int ready = 0;
        for (int i = 0; i < pq->npds; i++) {
            struct pollfd *pd = &pq->pds[i];
            pd->revents = 0;
            for (int s = 0; s < 3; s++) {
                if ((pd->events & set_events[s]) != 0 && FD_ISSET(pd->fd, &result[s])) {
                    pd->revents = (short)(pd->revents | set_events[s]);
                }
            }
            ready += pd->revents != 0;
        }
        if (ready > 0) {
            st__pollq_ready(sched, pq);
        }
    }
}

static int select_fd_new(struct st__sched *sched, int osfd)
{
    (void)sched;
    if (osfd >= FD_SETSIZE) {
        errno = EMFILE; /* select() cannot watch it */
        return -1;
    }
    return 0;
}

static int select_fd_close(struct st__sched *sched, int osfd)
{
    const struct st__select_state *st = sched->backend_state;
    if (osfd < FD_SETSIZE && has_waiters(st, osfd)) {
        errno = EBUSY;
        return -1;
    }
    return 0;
}

const struct st__backend_ops st__backend_select = {
    .name = "select",
    .id = ST_EVENTSYS_SELECT,
    .supported = st__backend_always_supported,
    .init = select_init,
    .fini = select_fini,
    .dispatch = select_dispatch,
    .pollset_add = select_pollset_add,
    .pollset_del = select_pollset_del,
    .fd_new = select_fd_new,
    .fd_close = select_fd_close,
    .fd_free = st__backend_fd_free_nothing,
    .fd_limit = FD_SETSIZE,
};
