/*
 * The backends through their vtable: selection, timeout conversion, waiter
 * bookkeeping (fd_close refuses while someone waits) and dispatch mapping
 * readiness back onto the waiters' pollfds.
 */
#include <criterion/criterion.h>
#include <limits.h>
#include <fcntl.h>
#include <string.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <unistd.h>

#include "backend.h"
#include "sched.h"

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
    cr_assert_eq(st_set_eventsys(eventsys), 0);
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

static void check_waiter_bookkeeping(int eventsys)
{
    struct fixture f;
    start(&f, eventsys);
    st_thread_t owner = st_thread_create(idle_start, NULL, 0, 0);
    cr_assert_not_null(owner);
    struct pollfd pd = {.fd = f.sv[0], .events = POLLIN};
    struct st__pollq pq;
    make_pq(&pq, &pd, 1, owner);
    cr_assert_eq(f.ops->pollset_add(f.sched, &pq), 0);
    st__list_insert_tail(&f.sched->io_q, &pq.link);
    errno = 0;
    cr_expect_eq(f.ops->fd_close(f.sched, f.sv[0]), -1, "%s: close while waited on", f.ops->name);
    cr_expect_eq(errno, EBUSY);
    cr_expect_eq(f.ops->fd_close(f.sched, f.sv[1]), 0, "%s: other fds are free", f.ops->name);
    st__list_remove(&pq.link);
    f.ops->pollset_del(f.sched, &pq);
    cr_expect_eq(f.ops->fd_close(f.sched, f.sv[0]), 0, "%s: free after the last waiter", f.ops->name);
}

Test(backend, epoll_tracks_waiters) { check_waiter_bookkeeping(ST_EVENTSYS_ALT); }
Test(backend, poll_tracks_waiters) { check_waiter_bookkeeping(ST_EVENTSYS_POLL); }
Test(backend, select_tracks_waiters) { check_waiter_bookkeeping(ST_EVENTSYS_SELECT); }

/* A fake waiter on the io_q, owned by a coroutine that never runs. */
static void check_dispatch(int eventsys)
{
    struct fixture f;
    start(&f, eventsys);
    st_thread_t owner = st_thread_create(idle_start, NULL, 0, 0);
    cr_assert_not_null(owner);
    struct pollfd pds[2] = {{.fd = f.sv[0], .events = POLLIN}, {.fd = f.sv[0], .events = POLLOUT}};
    struct st__pollq pq;
    make_pq(&pq, pds, 2, owner);
    cr_assert_eq(f.ops->pollset_add(f.sched, &pq), 0);
    st__list_insert_tail(&f.sched->io_q, &pq.link);

    f.ops->dispatch(f.sched, 0);
    cr_expect_not(pq.on_ioq, "%s: a writable socket wakes its waiter", f.ops->name);
    cr_expect_eq(pds[0].revents, 0, "%s: nothing to read yet", f.ops->name);
    cr_expect_eq(pds[1].revents & POLLOUT, POLLOUT);
    cr_expect_eq(f.ops->fd_close(f.sched, f.sv[0]), 0, "%s: waking unregisters", f.ops->name);

    struct pollfd rd = {.fd = f.sv[0], .events = POLLIN};
    struct st__pollq pq2;
    make_pq(&pq2, &rd, 1, owner);
    cr_assert_eq(f.ops->pollset_add(f.sched, &pq2), 0);
    st__list_insert_tail(&f.sched->io_q, &pq2.link);
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

Test(backend, select_reports_closed_fds_as_pollnval)
{
    struct fixture f;
    start(&f, ST_EVENTSYS_SELECT);
    st_thread_t owner = st_thread_create(idle_start, NULL, 0, 0);
    cr_assert_not_null(owner);
    struct pollfd pd = {.fd = f.sv[0], .events = POLLIN};
    struct st__pollq pq;
    make_pq(&pq, &pd, 1, owner);
    cr_assert_eq(f.ops->pollset_add(f.sched, &pq), 0);
    st__list_insert_tail(&f.sched->io_q, &pq.link);
    cr_assert_eq(close(f.sv[0]), 0);
    f.ops->dispatch(f.sched, 1000);
    cr_expect_not(pq.on_ioq);
    cr_expect_eq(pd.revents, POLLNVAL);
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
