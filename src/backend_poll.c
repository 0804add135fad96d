/*
 * poll(2) backend (ST_EVENTSYS_POLL). It keeps no per-fd state: every
 * dispatch gathers the waiters' pollfd arrays into one array, in io_q
 * order, and hands the results back in the same order.
 */
#include <errno.h>
#include <stdlib.h>

#include "backend.h"
#include "scheduler.h"

struct st__poll_state {
    struct pollfd *set;
    size_t capacity;
    size_t count; /* pollfds of all current waiters */
};

static int poll_init(struct st__sched *sched)
{
    struct st__poll_state *st = calloc(1, sizeof(*st));
    if (st == NULL) {
        errno = ENOMEM;
        return -1;
    }
    sched->backend_state = st;
    return 0;
}

static void poll_fini(struct st__sched *sched)
{
    struct st__poll_state *st = sched->backend_state;
    free(st->set);
    free(st);
    sched->backend_state = NULL;
}

/* Growing here, where failure can be reported, keeps dispatch allocation-free. */
static int poll_pollset_add(struct st__sched *sched, struct st__pollq *pq)
{
    struct st__poll_state *st = sched->backend_state;
    size_t need = st->count + (size_t)pq->npds;
    if (need > st->capacity) {
        size_t capacity = st->capacity > 0 ? st->capacity : 64;
        while (capacity < need) {
            capacity *= 2;
        }
        struct pollfd *set = realloc(st->set, capacity * sizeof(*set));
        if (set == NULL) {
            errno = ENOMEM;
            return -1;
        }
        st->set = set;
        st->capacity = capacity;
    }
    st->count = need;
    return 0;
}

static void poll_pollset_del(struct st__sched *sched, struct st__pollq *pq)
{
    struct st__poll_state *st = sched->backend_state;
    st->count -= (size_t)pq->npds;
}

static void poll_dispatch(struct st__sched *sched, st_utime_t timeout)
{
    struct st__poll_state *st = sched->backend_state;
    size_t used = 0;
    st__list_for_each(link, &sched->io_q) {
        const struct st__pollq *pq = st__pollq_from_link(link);
        for (int i = 0; i < pq->npds; i++) {
            st->set[used++] = pq->pds[i];
        }
    }

    int n = poll(st->set, (nfds_t)used, st__backend_timeout_ms(timeout));
    /*
     * EINTR and ENOMEM pass: the idle loop waits again. EINVAL (more
     * pollfds than RLIMIT_NOFILE, possible when many coroutines wait on one
     * descriptor) passes too, since waiters that time out bring the count
     * down. EFAULT means the array is bad, which no retry cures.
     */
    if (n < 0 && errno == EFAULT) {
        st__backend_wait_broken("poll");
    }
    if (n <= 0) {
        return;
    }

    size_t pos = 0;
    /* Safe walk: pq may leave the queue below. */
    st__list_for_each_safe(link, next, &sched->io_q) {
        struct st__pollq *pq = st__pollq_from_link(link);
        int ready = 0;
        for (int i = 0; i < pq->npds; i++) {
            pq->pds[i].revents = st->set[pos++].revents;
            ready += pq->pds[i].revents != 0;
        }
        if (ready > 0) {
            st__pollq_ready(sched, pq);
        }
    }
}

static int poll_fd_new(struct st__sched *sched, int osfd)
{
    (void)sched;
    (void)osfd;
    return 0;
}

static int poll_fd_close(struct st__sched *sched, int osfd)
{
    st__list_for_each(link, &sched->io_q) {
        const struct st__pollq *pq = st__pollq_from_link(link);
        for (int i = 0; i < pq->npds; i++) {
            if (pq->pds[i].fd == osfd) {
                errno = EBUSY;
                return -1;
            }
        }
    }
    return 0;
}

const struct st__backend_ops st__backend_poll = {
    .name = "poll",
    .id = ST_EVENTSYS_POLL,
    .supported = st__backend_always_supported,
    .init = poll_init,
    .fini = poll_fini,
    .dispatch = poll_dispatch,
    .pollset_add = poll_pollset_add,
    .pollset_del = poll_pollset_del,
    .fd_new = poll_fd_new,
    .fd_close = poll_fd_close,
    .fd_free = st__backend_fd_free_nothing,
    .fd_limit = 0,
};
