/*
 * The backends through their vtable: selection, timeout conversion, waiter
 * bookkeeping (fd_close refuses while someone waits) and dispatch mapping
 * readiness back onto the waiters' pollfds.
 */
#include <criterion/criterion.h>
#include <limits.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <unistd.h>

#include "backend.h"
#include "scheduler.h"
#include "st_config.h"

Test(backend, eventsys_values_map_to_backends)
{
    const struct st__backend_ops *b = st__backend_find(ST_EVENTSYS_DEFAULT);
    cr_assert_not_null(b);
    cr_expect_str_eq(b->name, "select");
    cr_expect_eq(b->id, ST_EVENTSYS_SELECT);
    b = st__backend_find(ST_EVENTSYS_ALT);
    cr_assert_not_null(b);
    cr_expect_str_eq(b->name, "epoll");
    b = st__backend_find(ST_EVENTSYS_POLL);
    cr_assert_not_null(b);
    cr_expect_str_eq(b->name, "poll");
    errno = 0;
    cr_expect_null(st__backend_find(42));
    cr_expect_eq(errno, EINVAL);
    cr_expect_null(st__backend_find(-1));
    errno = 0;
    b = st__backend_find(ST_EVENTSYS_IO_URING);
#if ST__HAVE_IO_URING
    if (b != NULL) {
        cr_expect_str_eq(b->name, "io_uring");
        cr_expect_eq(b->id, ST_EVENTSYS_IO_URING);
    } else {
        /* Refused by the kernel: the probe's reason, not EINVAL. */
        cr_expect(errno == ENOSYS || errno == EPERM, "errno %d", errno);
    }
#else
    cr_expect_null(b);
    cr_expect_eq(errno, EINVAL);
#endif
}

Test(backend, timeouts_round_up_to_milliseconds)
{
    cr_expect_eq(st__backend_timeout_ms(ST_UTIME_NO_TIMEOUT), -1);
    cr_expect_eq(st__backend_timeout_ms(0), 0);
    cr_expect_eq(st__backend_timeout_ms(1), 1);
    cr_expect_eq(st__backend_timeout_ms(1000), 1);
    cr_expect_eq(st__backend_timeout_ms(1001), 2);
    cr_expect_eq(st__backend_timeout_ms(ST_UTIME_NO_TIMEOUT - 1), INT_MAX);
}

struct fixture {
    struct st__sched *sched;
    const struct st__backend_ops *ops;
    int sv[2];
};

static void start(struct fixture *f, int eventsys)
{
#if ST__HAVE_IO_URING
    if (eventsys == ST_EVENTSYS_IO_URING && st_set_eventsys(eventsys) != 0) {
        cr_assert(errno == ENOSYS || errno == EPERM, "io_uring: %s", strerror(errno));
        cr_skip("io_uring skipped: the kernel refuses io_uring (%s)", strerror(errno));
    }
    if (eventsys != ST_EVENTSYS_IO_URING) {
        cr_assert_eq(st_set_eventsys(eventsys), 0);
    }
#else
    cr_assert_eq(st_set_eventsys(eventsys), 0);
#endif
    cr_assert_eq(st_init(), 0);
    f->sched = st__sched_peek();
    f->ops = f->sched->backend;
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, f->sv), 0);
    cr_assert_eq(f->ops->fd_new(f->sched, f->sv[0]), 0);
}

static void *idle_start(void *arg)
{
    return arg;
}

/* What st_poll() sets up for a wait, for backends driven directly. */
static void make_pq(struct st__pollq *pq, struct pollfd *pds, int npds, st_thread_t owner)
{
    cr_assert_leq(npds, ST__POLLQ_INLINE);
    memset(pq, 0, sizeof(*pq));
    pq->pds = pds;
    pq->npds = npds;
    pq->fds = pq->inline_fds;
    pq->thread = owner;
    pq->on_ioq = true;
    for (int i = 0; i < npds; i++) {
        pq->fds[i].pq = pq;
        pq->fds[i].pd = &pds[i];
        st__list_init(&pq->fds[i].link);
    }
}

/* start() plus a coroutine that never runs, to own the fake waiters. */
static st_thread_t start_owned(struct fixture *f, int eventsys)
{
    start(f, eventsys);
    st_thread_t owner = st_thread_create(idle_start, NULL, 0, 0);
    cr_assert_not_null(owner);
    return owner;
}

/* A waiter as st_poll() leaves it: registered with the backend and on the io_q. */
static void arm(struct fixture *f, struct st__pollq *pq, struct pollfd *pds, int npds,
                st_thread_t owner)
{
    make_pq(pq, pds, npds, owner);
    cr_assert_eq(f->ops->pollset_add(f->sched, pq), 0);
    st__list_insert_tail(&f->sched->io_q, &pq->link);
}

/* A waiter that leaves without its descriptors firing. */
static void disarm(struct fixture *f, struct st__pollq *pq)
{
    st__list_remove(&pq->link);
    f->ops->pollset_del(f->sched, pq);
}

static void check_waiter_bookkeeping(int eventsys)
{
    struct fixture f;
    st_thread_t owner = start_owned(&f, eventsys);
    struct pollfd pd = {.fd = f.sv[0], .events = POLLIN};
    struct st__pollq pq;
    arm(&f, &pq, &pd, 1, owner);
    errno = 0;
    cr_expect_eq(f.ops->fd_close(f.sched, f.sv[0]), -1, "%s: close while waited on", f.ops->name);
    cr_expect_eq(errno, EBUSY);
    cr_expect_eq(f.ops->fd_close(f.sched, f.sv[1]), 0, "%s: other fds are free", f.ops->name);
    disarm(&f, &pq);
    cr_expect_eq(f.ops->fd_close(f.sched, f.sv[0]), 0, "%s: free after the last waiter", f.ops->name);
}

Test(backend, epoll_tracks_waiters) { check_waiter_bookkeeping(ST_EVENTSYS_ALT); }
Test(backend, poll_tracks_waiters) { check_waiter_bookkeeping(ST_EVENTSYS_POLL); }
Test(backend, select_tracks_waiters) { check_waiter_bookkeeping(ST_EVENTSYS_SELECT); }
#if ST__HAVE_IO_URING
Test(backend, io_uring_tracks_waiters) { check_waiter_bookkeeping(ST_EVENTSYS_IO_URING); }
#endif

/* A fake waiter on the io_q, owned by a coroutine that never runs. */
static void check_dispatch(int eventsys)
{
    struct fixture f;
    st_thread_t owner = start_owned(&f, eventsys);
    struct pollfd pds[2] = {{.fd = f.sv[0], .events = POLLIN}, {.fd = f.sv[0], .events = POLLOUT}};
    struct st__pollq pq;
    arm(&f, &pq, pds, 2, owner);

    f.ops->dispatch(f.sched, 0);
    cr_expect_not(pq.on_ioq, "%s: a writable socket wakes its waiter", f.ops->name);
    cr_expect_eq(pds[0].revents, 0, "%s: nothing to read yet", f.ops->name);
    cr_expect_eq(pds[1].revents & POLLOUT, POLLOUT);
    cr_expect_eq(f.ops->fd_close(f.sched, f.sv[0]), 0, "%s: waking unregisters", f.ops->name);

    struct pollfd rd = {.fd = f.sv[0], .events = POLLIN};
    struct st__pollq pq2;
    arm(&f, &pq2, &rd, 1, owner);
    f.ops->dispatch(f.sched, 1000);
    cr_expect(pq2.on_ioq, "%s: no data, so the waiter stays", f.ops->name);
    cr_assert_eq(write(f.sv[1], "x", 1), 1);
    f.ops->dispatch(f.sched, 1000);
    cr_expect_not(pq2.on_ioq, "%s: data wakes the reader", f.ops->name);
    cr_expect_eq(rd.revents & POLLIN, POLLIN);
}

Test(backend, epoll_dispatch_wakes_ready_waiters) { check_dispatch(ST_EVENTSYS_ALT); }
Test(backend, poll_dispatch_wakes_ready_waiters) { check_dispatch(ST_EVENTSYS_POLL); }
Test(backend, select_dispatch_wakes_ready_waiters) { check_dispatch(ST_EVENTSYS_SELECT); }
#if ST__HAVE_IO_URING
Test(backend, io_uring_dispatch_wakes_ready_waiters) { check_dispatch(ST_EVENTSYS_IO_URING); }
#endif

/*
 * A wait that ends without its descriptor firing (timeout) must leave
 * nothing behind that keeps the file open: closing the descriptor right
 * after releases it, so the peer sees end-of-file at once.
 */
static void check_close_after_timeout(int eventsys)
{
    struct fixture f;
    start(&f, eventsys);
    char c;
    int sv[2];

    /* A netfd: st_netfd_close right after a timed-out read. */
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    st_netfd_t nfd = st_netfd_open_socket(sv[0]);
    cr_assert_not_null(nfd);
    cr_assert_eq(st_read(nfd, &c, 1, 2000), -1);
    cr_assert_eq(errno, ETIME);
    cr_assert_eq(st_netfd_close(nfd), 0);
    cr_expect_eq(recv(sv[1], &c, 1, MSG_DONTWAIT), 0, "%s: netfd released: %s", f.ops->name,
                 strerror(errno));
    close(sv[1]);

    /* A plain descriptor: close() right after a timed-out st_poll. */
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    struct pollfd pd = {.fd = sv[0], .events = POLLIN};
    cr_assert_eq(st_poll(&pd, 1, 2000), 0);
    cr_assert_eq(close(sv[0]), 0);
    cr_expect_eq(recv(sv[1], &c, 1, MSG_DONTWAIT), 0, "%s: plain fd released: %s", f.ops->name,
                 strerror(errno));
    close(sv[1]);
}

Test(backend, epoll_close_after_timeout_releases) { check_close_after_timeout(ST_EVENTSYS_ALT); }
Test(backend, poll_close_after_timeout_releases) { check_close_after_timeout(ST_EVENTSYS_POLL); }
Test(backend, select_close_after_timeout_releases) { check_close_after_timeout(ST_EVENTSYS_SELECT); }
#if ST__HAVE_IO_URING
Test(backend, io_uring_close_after_timeout_releases)
{
    check_close_after_timeout(ST_EVENTSYS_IO_URING);
}
#endif

Test(backend, select_refuses_fds_beyond_fd_setsize)
{
    struct fixture f;
    start(&f, ST_EVENTSYS_SELECT);
    cr_expect_eq(f.ops->fd_limit, FD_SETSIZE);
    errno = 0;
    cr_expect_eq(f.ops->fd_new(f.sched, FD_SETSIZE), -1);
    cr_expect_eq(errno, EMFILE);
    struct pollfd pd = {.fd = FD_SETSIZE + 5, .events = POLLIN};
    struct st__pollq pq;
    make_pq(&pq, &pd, 1, NULL);
    errno = 0;
    cr_expect_eq(f.ops->pollset_add(f.sched, &pq), -1);
    cr_expect_eq(errno, EINVAL);
}

/* A descriptor closed behind the library's back while waited on says POLLNVAL, as poll(2). */
static void check_closed_fd_is_pollnval(int eventsys, st_utime_t dispatch_us)
{
    struct fixture f;
    st_thread_t owner = start_owned(&f, eventsys);
    struct pollfd pd = {.fd = f.sv[0], .events = POLLIN};
    struct st__pollq pq;
    arm(&f, &pq, &pd, 1, owner);
    cr_assert_eq(close(f.sv[0]), 0);
    f.ops->dispatch(f.sched, dispatch_us);
    cr_expect_not(pq.on_ioq, "%s: the waiter is woken", f.ops->name);
    cr_expect_eq(pd.revents, POLLNVAL, "%s: revents %#x", f.ops->name, (unsigned)pd.revents);
}

Test(backend, select_reports_closed_fds_as_pollnval)
{
    check_closed_fd_is_pollnval(ST_EVENTSYS_SELECT, 1000);
}

Test(backend, epoll_refuses_what_it_cannot_watch)
{
    struct fixture f;
    start(&f, ST_EVENTSYS_ALT);
    char path[] = "/tmp/st_unit_XXXXXX";
    int file = mkstemp(path);
    cr_assert_geq(file, 0);
    unlink(path);
    struct pollfd pds[2] = {{.fd = f.sv[0], .events = POLLIN}, {.fd = file, .events = POLLIN}};
    struct st__pollq pq;
    make_pq(&pq, pds, 2, NULL);
    errno = 0;
    cr_expect_eq(f.ops->pollset_add(f.sched, &pq), -1, "regular files cannot be polled by epoll");
    cr_expect_eq(errno, EPERM);
    cr_expect_eq(f.ops->fd_close(f.sched, f.sv[0]), 0, "a failed add rolls back the earlier fds");
    close(file);
}

Test(backend, epoll_grows_its_fd_table)
{
    struct fixture f;
    start(&f, ST_EVENTSYS_ALT);
    int high = fcntl(f.sv[0], F_DUPFD, 5000);
    cr_assert_geq(high, 5000);
    cr_expect_eq(f.ops->fd_new(f.sched, high), 0);
    struct pollfd pd = {.fd = high, .events = POLLOUT};
    struct st__pollq pq;
    make_pq(&pq, &pd, 1, NULL);
    cr_expect_eq(f.ops->pollset_add(f.sched, &pq), 0);
    cr_expect_eq(f.ops->fd_close(f.sched, high), -1);
    f.ops->pollset_del(f.sched, &pq);
    close(high);
}

#if ST__HAVE_IO_URING
/*
 * Completions of removed or replaced poll requests are recognised by their
 * generation and wake nobody, even when the descriptor number is reused.
 */
Test(backend, io_uring_drops_stale_completions)
{
    struct fixture f;
    st_thread_t owner = start_owned(&f, ST_EVENTSYS_IO_URING);

    /* A reader is armed in the kernel, then leaves without its poll firing. */
    struct pollfd rd = {.fd = f.sv[0], .events = POLLIN};
    struct st__pollq pq;
    arm(&f, &pq, &rd, 1, owner);
    f.ops->dispatch(f.sched, 1000);
    cr_assert(pq.on_ioq);
    disarm(&f, &pq);

    /* The old request's cancellation, and data, arrive; a new reader must see only the data. */
    cr_assert_eq(write(f.sv[1], "x", 1), 1);
    struct pollfd rd2 = {.fd = f.sv[0], .events = POLLIN};
    struct st__pollq pq2;
    arm(&f, &pq2, &rd2, 1, owner);
    f.ops->dispatch(f.sched, 100000);
    cr_expect_not(pq2.on_ioq, "the new reader is woken");
    cr_expect_eq(rd2.revents, POLLIN);
    cr_expect_eq(rd.revents, 0, "the departed reader is not touched");

    /* The number is closed and reused by another socket after a reader left it. */
    char c;
    cr_assert_eq(read(f.sv[0], &c, 1), 1);
    struct pollfd rd3 = {.fd = f.sv[0], .events = POLLIN};
    struct st__pollq pq3;
    arm(&f, &pq3, &rd3, 1, owner);
    f.ops->dispatch(f.sched, 1000);
    cr_assert(pq3.on_ioq);
    disarm(&f, &pq3);
    f.ops->fd_free(f.sched, f.sv[0]);
    cr_assert_eq(close(f.sv[0]), 0);
    int sv[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    cr_assert_eq(f.ops->fd_new(f.sched, sv[0]), 0);
    struct pollfd rd4 = {.fd = sv[0], .events = POLLIN};
    struct st__pollq pq4;
    arm(&f, &pq4, &rd4, 1, owner);
    f.ops->dispatch(f.sched, 1000);
    cr_expect(pq4.on_ioq, "nothing to read on the new socket");
    cr_expect_eq(rd4.revents, 0);
    cr_assert_eq(write(sv[1], "y", 1), 1);
    f.ops->dispatch(f.sched, 100000);
    cr_expect_not(pq4.on_ioq);
    cr_expect_eq(rd4.revents, POLLIN);
}

/* One st_poll() on a descriptor closed behind the library's back says POLLNVAL, as poll(2). */
Test(backend, io_uring_reports_closed_fds_as_pollnval)
{
    check_closed_fd_is_pollnval(ST_EVENTSYS_IO_URING, 100000);
}

/* More waiting descriptors than the submission queue holds: submitted in several batches. */
Test(backend, io_uring_waits_on_more_fds_than_the_ring_holds)
{
    enum { PAIRS = 1500 };
    struct rlimit rl;
    cr_assert_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
    if (rl.rlim_cur < 2 * PAIRS + 64) {
        if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < 2 * PAIRS + 64) {
            cr_skip("RLIMIT_NOFILE hard limit %llu is too low", (unsigned long long)rl.rlim_max);
        }
        rl.rlim_cur = 2 * PAIRS + 64;
        cr_assert_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
    }
    struct fixture f;
    st_thread_t owner = start_owned(&f, ST_EVENTSYS_IO_URING);
    static int sv[PAIRS][2];
    static struct pollfd pds[PAIRS];
    struct st__pollq *pqs = calloc(PAIRS, sizeof(*pqs));
    cr_assert_not_null(pqs);
    for (int i = 0; i < PAIRS; i++) {
        cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv[i]), 0);
        pds[i] = (struct pollfd){.fd = sv[i][0], .events = POLLIN};
        make_pq(&pqs[i], &pds[i], 1, owner);
        cr_assert_eq(f.ops->pollset_add(f.sched, &pqs[i]), 0);
        st__list_insert_tail(&f.sched->io_q, &pqs[i].link);
    }
    f.ops->dispatch(f.sched, 1000);
    for (int i = 0; i < PAIRS; i += 2) {
        cr_assert_eq(write(sv[i][1], "x", 1), 1);
    }
    int woken = 0;
    for (int round = 0; round < 100 && woken < PAIRS / 2; round++) {
        f.ops->dispatch(f.sched, 100000);
        woken = 0;
        for (int i = 0; i < PAIRS; i++) {
            woken += !pqs[i].on_ioq;
        }
    }
    cr_expect_eq(woken, PAIRS / 2);
    for (int i = 0; i < PAIRS; i++) {
        cr_expect_eq(pqs[i].on_ioq, i % 2 != 0, "pair %d", i);
        cr_expect_eq(pds[i].revents, i % 2 == 0 ? POLLIN : 0, "pair %d", i);
    }
    free(pqs);
}
#endif
