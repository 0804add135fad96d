/*
 * epoll(7) backend (ST_EVENTSYS_ALT on Linux), level-triggered.
 *
 * Who waits on each descriptor is kept by the core (fdwatch.h); this file
 * keeps what the kernel watches for it and talks to epoll.
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
 *
 * After fork(2) the child shares the parent's epoll instance: its
 * registrations would change the parent's, and either process could take
 * the other's events. So, as State Threads does, the child makes an
 * instance of its own and registers there what its waiters want: at once,
 * from the fork handler (after_fork). State Threads compares getpid() at
 * every dispatch instead.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "backend.h"
#include "fdtable.h"
#include "fdwatch.h"
#include "scheduler.h"

#define EVENTS_INITIAL 128

/* The core's wanted events (poll's bits) go to epoll as they are, and come back so. */
_Static_assert(EPOLLIN == POLLIN && EPOLLOUT == POLLOUT && EPOLLPRI == POLLPRI &&
                   EPOLLERR == POLLERR && EPOLLHUP == POLLHUP,
               "epoll and poll(2) share the event bits");

struct st__epoll_watch {
    struct st__fdwatch common;
    unsigned registered; /* events the kernel watches for the fd; 0: not registered */
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
    st__fdwatch_init(record, fd);
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
    st__backend_handle_forks();
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

static struct st__epoll_watch *epoll_watch(struct st__fdwatch *w)
{
    return ST__CONTAINER_OF(w, struct st__epoll_watch, common);
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

static int set_registration(struct st__epoll_state *st, struct st__epoll_watch *w, unsigned want);

/*
 * In the child of a fork: an instance of its own, with what the waiters
 * want registered there (see the top of this file).
 */
static void epoll_after_fork(struct st__sched *sched)
{
    struct st__epoll_state *st = sched->backend_state;
    int epfd = epoll_create1(EPOLL_CLOEXEC);
    if (epfd < 0) {
        return; /* out of descriptors or memory in the child: it keeps sharing */
    }
    (void)close(st->epfd); /* the child's reference: the parent keeps its instance */
    st->epfd = epfd;
    st->registered = 0;
    int records = st->watches.nchunks * ST__FDTABLE_CHUNK;
    for (int fd = 0; fd < records; fd++) {
        struct st__fdwatch *w = st__fdwatch_find(&st->watches, fd);
        if (w != NULL) {
            epoll_watch(w)->registered = 0; /* that was the parent's instance */
            (void)set_registration(st, epoll_watch(w), st__fdwatch_wanted(w));
        }
    }
}

/* Make the kernel watch exactly `want` for the fd of `w` (0: not at all). */
static int set_registration(struct st__epoll_state *st, struct st__epoll_watch *w, unsigned want)
{
    int fd = w->common.fd;
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

/* A pollfd left `w`: a descriptor without a netfd is watched no longer than waited on. */
static void left(void *state, struct st__fdwatch *w)
{
    if (!w->owned) {
        (void)set_registration(state, epoll_watch(w), st__fdwatch_wanted(w));
    }
}

/*
 * A pollfd joined `w`: a kept registration that covers its events costs
 * nothing (it covers those of the others already: each join saw to that).
 */
static int joined(void *state, struct st__fdwatch *w, unsigned events)
{
    struct st__epoll_watch *ew = epoll_watch(w);
    if ((events & ~ew->registered) == 0) {
        return 0;
    }
    return set_registration(state, ew, st__fdwatch_wanted(w));
}

static void epoll_pollset_del(struct st__sched *sched, struct st__pollq *pq)
{
    struct st__epoll_state *st = sched->backend_state;
    st__fdwatch_leave(&st->watches, pq, left, st);
}

static int epoll_pollset_add(struct st__sched *sched, struct st__pollq *pq)
{
    struct st__epoll_state *st = sched->backend_state;
    return st__fdwatch_join(&st->watches, pq, joined, left, st);
}

static short to_poll_events(unsigned ev)
{
    return (short)(ev & (EPOLLIN | EPOLLOUT | EPOLLPRI | EPOLLERR | EPOLLHUP));
}

static void epoll_dispatch(struct st__sched *sched, st_utime_t timeout)
{
    struct st__epoll_state *st = sched->backend_state;
    ST__STAT_EPOLL(timeout);
    int n = epoll_wait(st->epfd, st->events, st->capacity, st__backend_timeout_ms(timeout));
    if (n <= 0) {
        ST__STAT_INC(epoll_spin);
    }
    /*
     * Besides EINTR (a signal: the idle loop waits again), epoll_wait fails
     * only with EBADF, EINVAL or EFAULT: the epoll descriptor or the buffer
     * is broken, which no retry cures.
     */
    if (n < 0 && errno != EINTR) {
        st__backend_wait_broken("epoll_wait");
    }
    struct st__fdwatch_ready ready;
    st__fdwatch_ready_init(&ready);
    for (int i = 0; i < n; i++) {
        struct st__fdwatch *w = st__fdwatch_at(&st->watches, st->events[i].data.fd);
        short fired = to_poll_events(st->events[i].events);
        if ((fired & (POLLERR | POLLHUP)) != 0) {
            /* As State Threads: an error or hang-up also ends every wait for I/O on the fd. */
            fired = (short)(fired | POLLIN | POLLOUT | POLLPRI);
        }
        unsigned want = st__fdwatch_collect(w, fired, &ready);
        /* A kept registration fired for what nobody waits for: drop that part. */
        if (want == 0 || (st->events[i].events & (EPOLLIN | EPOLLOUT | EPOLLPRI) & ~want) != 0) {
            (void)set_registration(st, epoll_watch(w), want);
        }
    }
    st__fdwatch_wake(sched, &ready);
}

static int epoll_fd_new(struct st__sched *sched, int osfd)
{
    struct st__epoll_state *st = sched->backend_state;
    struct st__fdwatch *w = st__fdwatch_own(&st->watches, osfd);
    if (w == NULL) {
        return -1;
    }
    struct st__epoll_watch *ew = epoll_watch(w);
    if (ew->registered != 0) {
        /*
         * Kept from the number's previous file (see the top of this file):
         * forget it and register what the waiters want on the file there
         * now. A DEL drops what the kernel may still hold for that number
         * (the same file, opened as a netfd once more). A failure leaves it
         * unregistered, like any descriptor the kernel refuses to watch.
         */
        (void)set_registration(st, ew, 0);
        (void)set_registration(st, ew, st__fdwatch_wanted(w));
    }
    return 0;
}

static void epoll_fd_free(struct st__sched *sched, int osfd)
{
    struct st__epoll_state *st = sched->backend_state;
    struct st__fdwatch *w = st__fdwatch_disown(&st->watches, osfd);
    if (w != NULL) {
        (void)set_registration(st, epoll_watch(w), st__fdwatch_wanted(w));
    }
}

static int epoll_fd_close(struct st__sched *sched, int osfd)
{
    const struct st__epoll_state *st = sched->backend_state;
    if (st__fdwatch_busy(&st->watches, osfd)) {
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
    .after_fork = epoll_after_fork,
    .fd_limit = 0,
};
