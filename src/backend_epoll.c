/*
 * epoll(7) backend (ST_EVENTSYS_ALT on Linux), level-triggered.
 *
 * Each descriptor keeps the list of pollfds waiting on it, so a dispatch
 * wakes exactly the waiters of the descriptors that fired: its cost follows
 * the number of events, not the number of waiting coroutines.
 *
 * Registrations are kept lazily for descriptors owned by a netfd: when the
 * last waiter leaves, the kernel keeps watching, so a connection that waits
 * for input over and over costs no epoll_ctl() after the first. A watched
 * direction nobody waits for any more is dropped only if it fires (a level-
 * triggered event would otherwise repeat), and everything is dropped when
 * the netfd lets go of the descriptor (st_netfd_free/close), because a
 * closed number is soon reused for another file. Descriptors polled without
 * a netfd (plain st_poll) are unregistered as soon as their waiters leave:
 * nothing would tell the backend when they are closed.
 *
 * A registration may still be kept when a new netfd is made for its number:
 * the netfd before was freed while a coroutine waited on it, or its
 * descriptor was closed behind its back. Closing the file dropped the
 * kernel's registration, so a new netfd registers the number afresh.
 *
 * The event buffer always has room for one event per registered descriptor,
 * so one epoll_wait() collects every ready descriptor of the cycle before
 * any deadline of that cycle is judged expired.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "backend.h"
#include "fdtable.h"
#include "scheduler.h"

#define EVENTS_INITIAL 128

struct st__epoll_watch {
    struct st__list waiters; /* struct st__pollq_fd of coroutines waiting on the fd */
    int readers;
    int writers;
    int urgent;              /* POLLPRI waiters */
    unsigned registered;     /* events the kernel watches for it; 0: not registered */
    bool owned;              /* a netfd holds it, so its registration may be kept */
};

struct st__epoll_state {
    int epfd;
    struct st__fdtable watches; /* struct st__epoll_watch per descriptor */
    int registered;             /* descriptors the kernel watches for us */
    int capacity;               /* entries of `events`, never fewer than `registered` */
    struct epoll_event *events;
};

static void watch_init(void *record, int fd)
{
    (void)fd;
    struct st__epoll_watch *w = record;
    st__list_init(&w->waiters);
}

static bool epoll_supported(void)
{
    struct epoll_event ev = {0};
    /* A kernel without epoll says ENOSYS; anything else means it is there. */
    return epoll_ctl(-1, EPOLL_CTL_ADD, -1, &ev) == 0 || errno != ENOSYS;
}

static int epoll_init(struct st__sched *sched)
{
    struct st__epoll_state *st = calloc(1, sizeof(*st));
    if (st == NULL) {
        errno = ENOMEM;
        return -1;
    }
    st->capacity = EVENTS_INITIAL;
    st->events = malloc((size_t)st->capacity * sizeof(*st->events));
    if (st->events == NULL) {
        free(st);
        errno = ENOMEM;
        return -1;
    }
    st->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (st->epfd < 0) {
        free(st->events);
        free(st);
        return -1;
    }
    st__fdtable_init(&st->watches, sizeof(struct st__epoll_watch), watch_init);
    sched->backend_state = st;
    return 0;
}

static void epoll_fini(struct st__sched *sched)
{
    struct st__epoll_state *st = sched->backend_state;
    (void)close(st->epfd);
    st__fdtable_fini(&st->watches);
    free(st->events);
    free(st);
    sched->backend_state = NULL;
}

static struct st__epoll_watch *watch_of(const struct st__epoll_state *st, int fd)
{
    return st__fdtable_at(&st->watches, fd);
}

/* The watch of `fd`, or NULL if it never had one. */
static struct st__epoll_watch *find_watch(const struct st__epoll_state *st, int fd)
{
    return st__fdtable_find(&st->watches, fd);
}

static unsigned wanted_events(const struct st__epoll_watch *w)
{
    return (w->readers > 0 ? EPOLLIN : 0U) | (w->writers > 0 ? EPOLLOUT : 0U) |
           (w->urgent > 0 ? EPOLLPRI : 0U);
}

static void count_waiter(struct st__epoll_watch *w, short events, int delta)
{
    w->readers += (events & POLLIN) != 0 ? delta : 0;
    w->writers += (events & POLLOUT) != 0 ? delta : 0;
    w->urgent += (events & POLLPRI) != 0 ? delta : 0;
}

/* Room in the event buffer for one more registered descriptor. */
static int reserve_event(struct st__epoll_state *st)
{
    if (st->registered < st->capacity) {
        return 0;
    }
    if (st->capacity > INT_MAX / 2) {
        errno = ENOMEM;
        return -1;
    }
    int capacity = st->capacity * 2;
    struct epoll_event *events = realloc(st->events, (size_t)capacity * sizeof(*events));
    if (events == NULL) {
        errno = ENOMEM;
        return -1;
    }
    st->events = events;
    st->capacity = capacity;
    return 0;
}

/* Make the kernel watch exactly `want` for `fd` (0: not at all). */
static int set_registration(struct st__epoll_state *st, int fd, struct st__epoll_watch *w, unsigned want)
{
    if (want == w->registered) {
        return 0;
    }
    if (w->registered == 0 && reserve_event(st) != 0) {
        return -1;
    }
    struct epoll_event ev = {.events = want, .data.fd = fd};
    int op = want == 0 ? EPOLL_CTL_DEL : (w->registered == 0 ? EPOLL_CTL_ADD : EPOLL_CTL_MOD);
    int rc = epoll_ctl(st->epfd, op, fd, &ev);
    if (rc != 0 && op == EPOLL_CTL_ADD && errno == EEXIST) {
        rc = epoll_ctl(st->epfd, EPOLL_CTL_MOD, fd, &ev);
    } else if (rc != 0 && op == EPOLL_CTL_MOD && errno == ENOENT) {
        /* The file was closed behind our back, which dropped the registration. */
        rc = epoll_ctl(st->epfd, EPOLL_CTL_ADD, fd, &ev);
    }
    if (rc != 0 && op != EPOLL_CTL_DEL) {
        return -1;
    }
    /* A failed DEL means the kernel has dropped it already. */
    st->registered += (want != 0) - (w->registered != 0);
    w->registered = want;
    return 0;
}

static void epoll_pollset_del(struct st__sched *sched, struct st__pollq *pq)
{
    struct st__epoll_state *st = sched->backend_state;
    for (int i = 0; i < pq->npds; i++) {
        if (st__list_empty(&pq->fds[i].link)) {
            continue; /* never added (a failed pollset_add rolling back) */
        }
        int fd = pq->pds[i].fd;
        struct st__epoll_watch *w = watch_of(st, fd);
        st__list_remove(&pq->fds[i].link);
        count_waiter(w, pq->pds[i].events, -1);
        if (!w->owned) {
            (void)set_registration(st, fd, w, wanted_events(w));
        }
    }
}

static int epoll_pollset_add(struct st__sched *sched, struct st__pollq *pq)
{
    struct st__epoll_state *st = sched->backend_state;
    for (int i = 0; i < pq->npds; i++) {
        int fd = pq->pds[i].fd;
        if (st__fdtable_reserve(&st->watches, fd) != 0) {
            epoll_pollset_del(sched, pq);
            return -1;
        }
        struct st__epoll_watch *w = watch_of(st, fd);
        count_waiter(w, pq->pds[i].events, +1);
        st__list_insert_tail(&w->waiters, &pq->fds[i].link);
        unsigned want = wanted_events(w);
        /* A kept registration that already covers what is wanted costs nothing. */
        if ((want & ~w->registered) != 0 && set_registration(st, fd, w, want) != 0) {
            int err = errno;
            epoll_pollset_del(sched, pq);
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

/* Give the fired events to this fd's waiters; queue each waiter once on `ready`. */
static void collect(struct st__epoll_watch *w, short fired, struct st__pollq **ready)
{
    st__list_for_each(link, &w->waiters) {
        struct st__pollq_fd *node = st__pollq_fd_from_link(link);
        short revents = (short)(fired & (node->pd->events | POLLERR | POLLHUP));
        if (revents == 0) {
            continue;
        }
        node->pd->revents = (short)(node->pd->revents | revents);
        if (!node->pq->ready) {
            node->pq->ready = true;
            node->pq->next_ready = *ready;
            *ready = node->pq;
        }
    }
}

static void epoll_dispatch(struct st__sched *sched, st_utime_t timeout)
{
    struct st__epoll_state *st = sched->backend_state;
    int n = epoll_wait(st->epfd, st->events, st->capacity, st__backend_timeout_ms(timeout));
    struct st__pollq *ready = NULL;
    for (int i = 0; i < n; i++) {
        int fd = st->events[i].data.fd;
        struct st__epoll_watch *w = watch_of(st, fd);
        short fired = to_poll_events(st->events[i].events);
        if ((fired & (POLLERR | POLLHUP)) != 0) {
            /* As State Threads: an error or hang-up also ends every wait for I/O on the fd. */
            fired = (short)(fired | POLLIN | POLLOUT | POLLPRI);
        }
        collect(w, fired, &ready);
        /* A kept registration fired for what nobody waits for: drop that part. */
        unsigned want = wanted_events(w);
        if (want == 0 || (st->events[i].events & (EPOLLIN | EPOLLOUT | EPOLLPRI) & ~want) != 0) {
            (void)set_registration(st, fd, w, want);
        }
    }
    /* Wake in the order the events came (the list was built backwards). */
    struct st__pollq *in_order = NULL;
    while (ready != NULL) {
        struct st__pollq *next = ready->next_ready;
        ready->next_ready = in_order;
        in_order = ready;
        ready = next;
    }
    while (in_order != NULL) {
        struct st__pollq *next = in_order->next_ready;
        st__pollq_ready(sched, in_order);
        in_order = next;
    }
}

static int epoll_fd_new(struct st__sched *sched, int osfd)
{
    struct st__epoll_state *st = sched->backend_state;
    if (st__fdtable_reserve(&st->watches, osfd) != 0) {
        return -1;
    }
    struct st__epoll_watch *w = watch_of(st, osfd);
    w->owned = true;
    if (w->registered != 0) {
        /*
         * Kept from the number's previous file (see the top of this file):
         * forget it and register what the waiters want on the file there
         * now. A DEL drops what the kernel may still hold for that number
         * (the same file, opened as a netfd once more). A failure leaves it
         * unregistered, like any descriptor the kernel refuses to watch.
         */
        unsigned want = wanted_events(w);
        st->registered--;
        w->registered = 0;
        struct epoll_event ev = {0};
        (void)epoll_ctl(st->epfd, EPOLL_CTL_DEL, osfd, &ev);
        (void)set_registration(st, osfd, w, want);
    }
    return 0;
}

static void epoll_fd_free(struct st__sched *sched, int osfd)
{
    struct st__epoll_state *st = sched->backend_state;
    struct st__epoll_watch *w = find_watch(st, osfd);
    if (w == NULL) {
        return;
    }
    w->owned = false;
    (void)set_registration(st, osfd, w, wanted_events(w));
}

static int epoll_fd_close(struct st__sched *sched, int osfd)
{
    const struct st__epoll_state *st = sched->backend_state;
    const struct st__epoll_watch *w = find_watch(st, osfd);
    if (w != NULL && !st__list_empty(&w->waiters)) {
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
    .fd_free = epoll_fd_free,
    .fd_limit = 0,
};
