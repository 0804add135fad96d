/*
 * epoll(7) backend (ST_EVENTSYS_ALT on Linux), level-triggered.
 *
 * Several coroutines may wait on one fd, so each fd keeps a count of
 * waiters per direction; the epoll registration follows the union of the
 * directions with waiters, and is removed when the last waiter leaves.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "backend.h"
#include "sched.h"

#define EVENT_BATCH 1024

struct fd_watch {
    int readers;
    int writers;
    int urgent;        /* POLLPRI waiters */
    unsigned epoll;    /* events currently registered, 0 when not registered */
    short fired;       /* poll(2)-style events from the current dispatch */
};

struct epoll_state {
    int epfd;
    struct fd_watch *fds;
    int fd_capacity;
    struct epoll_event events[EVENT_BATCH];
};

static bool epoll_supported(void)
{
    struct epoll_event ev = {0};
    /* A kernel without epoll says ENOSYS; anything else means it is there. */
    return epoll_ctl(-1, EPOLL_CTL_ADD, -1, &ev) == 0 || errno != ENOSYS;
}

static int epoll_init(struct st__sched *sched)
{
    struct epoll_state *st = calloc(1, sizeof(*st));
    if (st == NULL) {
        errno = ENOMEM;
        return -1;
    }
    st->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (st->epfd < 0) {
        free(st);
        return -1;
    }
    sched->backend_state = st;
    return 0;
}

static void epoll_fini(struct st__sched *sched)
{
    struct epoll_state *st = sched->backend_state;
    (void)close(st->epfd);
    free(st->fds);
    free(st);
    sched->backend_state = NULL;
}

static int ensure_capacity(struct epoll_state *st, int fd)
{
    if (fd < st->fd_capacity) {
        return 0;
    }
    int capacity = st->fd_capacity > 0 ? st->fd_capacity : 64;
    while (capacity <= fd) {
        capacity = capacity > INT_MAX / 2 ? fd + 1 : capacity * 2;
    }
    struct fd_watch *fds = realloc(st->fds, (size_t)capacity * sizeof(*fds));
    if (fds == NULL) {
        errno = ENOMEM;
        return -1;
    }
    for (int i = st->fd_capacity; i < capacity; i++) {
        fds[i] = (struct fd_watch){0};
    }
    st->fds = fds;
    st->fd_capacity = capacity;
    return 0;
}

static unsigned wanted_events(const struct fd_watch *w)
{
    return (w->readers > 0 ? EPOLLIN : 0U) | (w->writers > 0 ? EPOLLOUT : 0U) |
           (w->urgent > 0 ? EPOLLPRI : 0U);
}

static void count_waiter(struct fd_watch *w, short events, int delta)
{
    w->readers += (events & POLLIN) != 0 ? delta : 0;
    w->writers += (events & POLLOUT) != 0 ? delta : 0;
    w->urgent += (events & POLLPRI) != 0 ? delta : 0;
}

/* Make the kernel's registration of `fd` match its waiters. */
static int sync_registration(struct epoll_state *st, int fd)
{
    struct fd_watch *w = &st->fds[fd];
    unsigned want = wanted_events(w);
    if (want == w->epoll) {
        return 0;
    }
    struct epoll_event ev = {.events = want, .data.fd = fd};
    int op = want == 0 ? EPOLL_CTL_DEL : (w->epoll == 0 ? EPOLL_CTL_ADD : EPOLL_CTL_MOD);
    int rc = epoll_ctl(st->epfd, op, fd, &ev);
    if (rc != 0 && op == EPOLL_CTL_ADD && errno == EEXIST) {
        rc = epoll_ctl(st->epfd, EPOLL_CTL_MOD, fd, &ev);
    }
    if (rc != 0 && op != EPOLL_CTL_DEL) {
        return -1;
    }
    /* A failed DEL means the fd is gone already, which the kernel cleaned up. */
    w->epoll = want;
    return 0;
}

static void epoll_pollset_del(struct st__sched *sched, struct pollfd *pds, int npds)
{
    struct epoll_state *st = sched->backend_state;
    for (int i = 0; i < npds; i++) {
        count_waiter(&st->fds[pds[i].fd], pds[i].events, -1);
        (void)sync_registration(st, pds[i].fd);
    }
}

static int epoll_pollset_add(struct st__sched *sched, struct pollfd *pds, int npds)
{
    struct epoll_state *st = sched->backend_state;
    for (int i = 0; i < npds; i++) {
        if (ensure_capacity(st, pds[i].fd) != 0) {
            epoll_pollset_del(sched, pds, i);
            return -1;
        }
        count_waiter(&st->fds[pds[i].fd], pds[i].events, +1);
        if (sync_registration(st, pds[i].fd) != 0) {
            int err = errno;
            epoll_pollset_del(sched, pds, i + 1);
            errno = err;
            return -1;
        }
    }
    return 0;
}

static short to_poll_events(unsigned ev)
{
    short out = 0;
    out |= (ev & EPOLLIN) != 0 ? POLLIN : 0;
    out |= (ev & EPOLLOUT) != 0 ? POLLOUT : 0;
    out |= (ev & EPOLLPRI) != 0 ? POLLPRI : 0;
    out |= (ev & EPOLLERR) != 0 ? POLLERR : 0;
    out |= (ev & EPOLLHUP) != 0 ? POLLHUP : 0;
    return out;
}

static void epoll_dispatch(struct st__sched *sched, st_utime_t timeout)
{
    struct epoll_state *st = sched->backend_state;
    int n = epoll_wait(st->epfd, st->events, EVENT_BATCH, st__backend_timeout_ms(timeout));
    if (n <= 0) {
        return; /* timeout, or EINTR from a signal: the caller loops */
    }
    for (int i = 0; i < n; i++) {
        st->fds[st->events[i].data.fd].fired = to_poll_events(st->events[i].events);
    }

    struct st__list *link = sched->io_q.next;
    while (link != &sched->io_q) {
        struct st__pollq *pq = st__pollq_from_link(link);
        link = link->next; /* pq may leave the queue below */
        int ready = 0;
        for (int i = 0; i < pq->npds; i++) {
            struct pollfd *pd = &pq->pds[i];
            pd->revents = (short)(st->fds[pd->fd].fired & (pd->events | POLLERR | POLLHUP));
            ready += pd->revents != 0;
        }
        if (ready > 0) {
            st__pollq_ready(sched, pq);
        }
    }

    for (int i = 0; i < n; i++) {
        st->fds[st->events[i].data.fd].fired = 0;
    }
}

static int epoll_fd_new(struct st__sched *sched, int osfd)
{
    return ensure_capacity(sched->backend_state, osfd);
}

static int epoll_fd_close(struct st__sched *sched, int osfd)
{
    const struct epoll_state *st = sched->backend_state;
    if (osfd < st->fd_capacity && wanted_events(&st->fds[osfd]) != 0) {
        errno = EBUSY;
        return -1;
    }
    return 0;
}

const struct st__backend_ops st__backend_epoll = {
    .name = "epoll",
    .id = ST_EVENTSYS_ALT,
    .supported = epoll_supported,
    .init = epoll_init,
    .fini = epoll_fini,
    .dispatch = epoll_dispatch,
    .pollset_add = epoll_pollset_add,
    .pollset_del = epoll_pollset_del,
    .fd_new = epoll_fd_new,
    .fd_close = epoll_fd_close,
    .fd_limit = 0,
};
