/*
 * Failure injection, system calls (docs/reliability.md keeps the site ->
 * test table): st_init's signal and descriptor-limit calls, the thread-exit
 * key, the backends' registrations and waits (epoll_ctl, epoll_wait, poll,
 * select), netfd creation and closing, accept, connect, and every read,
 * write and datagram call fail here on demand, through the wrappers of
 * fault_table.h.
 *
 * Every test checks three things: the public call reports the error
 * (errno from the failing call, or the mapping the library documents), the
 * scheduler stays usable (coroutines still run, I/O waits still wake), and
 * no descriptor leaks (/proc/self/fd is counted). ASan and valgrind, which
 * run the unit suite in CI, check that no memory leaks.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include "fault_checks.h"
#include "fault_inject.h"
#include "st.h"

/* ---- scheduler creation and st_init ---------------------------------------------- */

Test(faults_syscalls, sigpipe_disposition_failure_fails_init)
{
    arm(F_sigaction, 1, EINVAL);
    EXPECT_FAIL(st_init(), EINVAL);
    init_with(-1);
    expect_usable();
}

Test(faults_syscalls, rlimit_query_failure_fails_init)
{
    arm(F_getrlimit64, 1, EPERM);
    EXPECT_FAIL(st_init(), EPERM);
    init_with(-1);
    expect_usable();
}

/* RLIMIT_NOFILE; the calling test skips where its hard limit is below `min`. */
static struct rlimit nofile_limit_or_skip(rlim_t min)
{
    struct rlimit rl;
    cr_assert_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
    if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < min) {
        cr_skip_test("RLIMIT_NOFILE hard limit %llu is below the %llu this test needs",
                     (unsigned long long)rl.rlim_max, (unsigned long long)min);
    }
    return rl;
}

Test(faults_syscalls, rlimit_raise_failure_keeps_the_soft_limit)
{
    struct rlimit rl = nofile_limit_or_skip(512);
    rl.rlim_cur = 256;
    cr_assert_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
    arm(F_setrlimit64, 1, EPERM);
    init_with(ST_EVENTSYS_POLL);
    cr_expect_eq(faults[F_setrlimit64].calls, 1, "st_init tried to raise the limit");
    cr_expect_eq(st_getfdlimit(), 256, "the old limit is reported");
    expect_usable();
}

/*
 * select lowers the descriptor limit to FD_SETSIZE, hard and soft; where the
 * hard limit cannot be moved the soft one is lowered alone, and where
 * neither can, st_init fails as State Threads' does.
 */
Test(faults_syscalls, select_limit_lowering_falls_back_to_the_soft_limit)
{
    struct rlimit rl = nofile_limit_or_skip(FD_SETSIZE + 1);
    arm(F_setrlimit64, 1, EPERM);
    init_with(ST_EVENTSYS_SELECT);
    cr_expect_eq(faults[F_setrlimit64].calls, 2, "one try with the hard limit, one without");
    struct rlimit after;
    cr_assert_eq(getrlimit(RLIMIT_NOFILE, &after), 0);
    cr_expect_eq(after.rlim_cur, (rlim_t)FD_SETSIZE);
    cr_expect_eq(after.rlim_max, rl.rlim_max, "the hard limit is left as it was");
    cr_expect_eq(st_getfdlimit(), FD_SETSIZE);
    expect_usable();
}

Test(faults_syscalls, select_limit_failure_fails_init)
{
    struct rlimit rl = nofile_limit_or_skip(FD_SETSIZE + 1);
    arm_times(F_setrlimit64, 1, EPERM, 2);
    cr_assert_eq(st_set_eventsys(ST_EVENTSYS_SELECT), 0);
    EXPECT_FAIL(st_init(), EPERM);
    struct rlimit after;
    cr_assert_eq(getrlimit(RLIMIT_NOFILE, &after), 0);
    cr_expect_eq(after.rlim_cur, rl.rlim_cur, "nothing changed");
    /* Nothing was left half set up: the next st_init works. */
    init_with(-1);
    cr_expect_eq(st_getfdlimit(), FD_SETSIZE);
    expect_usable();
}

Test(faults_syscalls, unlimited_descriptors_are_capped)
{
    fault_nofile_unlimited = true;
    init_with(ST_EVENTSYS_POLL);
    cr_expect_eq(st_getfdlimit(), INT_MAX);
    st_destroy();
    init_with(ST_EVENTSYS_SELECT);
    cr_expect_eq(st_getfdlimit(), FD_SETSIZE);
    fault_nofile_unlimited = false;
    expect_usable();
}

/* The overflow handler's set-up is best effort: st_init succeeds without it. */
/* Sanitizer runtimes install a signal stack of their own: start without one. */
static void drop_signal_stack(void)
{
    stack_t off = {.ss_sp = NULL, .ss_size = 0, .ss_flags = SS_DISABLE};
    cr_assert_eq(sigaltstack(&off, NULL), 0);
}

Test(faults_syscalls, overflow_handler_setup_is_best_effort)
{
    drop_signal_stack();
    arm(F_sigaction, 2, EINVAL); /* 1: SIGPIPE, 2: the SIGSEGV handler */
    init_with(-1);
    expect_usable();
    st_destroy();

    arm(F_malloc, 1, ENOMEM); /* the signal stack */
    init_with(-1);
    stack_t ss;
    cr_assert_eq(sigaltstack(NULL, &ss), 0);
    cr_expect_neq(ss.ss_flags & SS_DISABLE, 0, "no signal stack without memory for one");
    expect_usable();
    st_destroy();

    arm(F_sigaltstack, 2, ENOMEM); /* 1: the query, 2: installing ours */
    init_with(-1);
    cr_assert_eq(sigaltstack(NULL, &ss), 0);
    cr_expect_neq(ss.ss_flags & SS_DISABLE, 0, "the refused stack was freed, not kept");
    expect_usable();
    st_destroy();

    arm(F_sigaltstack, 1, EINVAL); /* the query fails: st installs its own */
    init_with(-1);
    cr_assert_eq(sigaltstack(NULL, &ss), 0);
    cr_expect_eq(ss.ss_flags & SS_DISABLE, 0);
    expect_usable();
    st_destroy();
    cr_assert_eq(sigaltstack(NULL, &ss), 0);
    cr_expect_neq(ss.ss_flags & SS_DISABLE, 0, "st_destroy removed its signal stack");
}

Test(faults_syscalls, an_existing_signal_stack_is_kept)
{
    static char mine[64 * 1024];
    drop_signal_stack();
    stack_t ss = {.ss_sp = mine, .ss_size = sizeof(mine), .ss_flags = 0};
    cr_assert_eq(sigaltstack(&ss, NULL), 0);
    init_with(-1);
    expect_usable();
    st_destroy();
    stack_t now;
    cr_assert_eq(sigaltstack(NULL, &now), 0);
    cr_expect_eq(now.ss_sp, (void *)mine, "st neither replaced nor removed the caller's stack");
    stack_t off = {.ss_sp = NULL, .ss_size = 0, .ss_flags = SS_DISABLE};
    cr_assert_eq(sigaltstack(&off, NULL), 0);
}

static void *init_in_pthread(void *arg)
{
    (void)arg;
    if (st_init() != 0) {
        return (void *)(intptr_t)-1;
    }
    st_thread_t t = st_thread_create(return_arg, NULL, 1, 0);
    int rc = t != NULL && st_thread_join(t, NULL) == 0 ? 0 : -1;
    st_destroy(); /* without the exit key nothing would free it at pthread exit */
    return (void *)(intptr_t)rc;
}

Test(faults_syscalls, thread_exit_key_failures_are_tolerated)
{
    /* pthread_key_create runs once per process: at the first scheduler. */
    arm(F_pthread_key_create, 1, EAGAIN);
    init_with(-1);
    cr_expect_eq(faults[F_pthread_key_create].calls, 1);
    expect_usable();
    st_destroy();
    pthread_t th;
    void *rv = NULL;
    cr_assert_eq(pthread_create(&th, NULL, init_in_pthread, NULL), 0);
    cr_assert_eq(pthread_join(th, &rv), 0);
    cr_expect_eq((intptr_t)rv, 0);
    init_with(-1);
    expect_usable();
}

Test(faults_syscalls, thread_exit_registration_failure_is_tolerated)
{
    arm(F_pthread_setspecific, 1, ENOMEM);
    init_with(-1);
    expect_usable();
    st_destroy();
    init_with(-1);
    expect_usable();
}

/* ---- epoll_ctl ---------------------------------------------------------------------- */

Test(faults_syscalls, epoll_registration_failure_fails_the_wait_with_its_errno)
{
    init_with(ST_EVENTSYS_ALT);
    st_netfd_t a;
    st_netfd_t b;
    socketpair_netfds(&a, &b);
    char c;
    arm(F_epoll_ctl, 1, ENOSPC); /* the kernel's max_user_watches */
    EXPECT_FAIL(st_read(a, &c, 1, 100000), ENOSPC);
    arm(F_epoll_ctl, 1, ENOMEM);
    EXPECT_FAIL(st_netfd_poll(a, POLLIN, 100000), ENOMEM);
    /* A two-fd wait whose second registration fails leaves neither behind. */
    st_netfd_t c1;
    st_netfd_t c2;
    socketpair_netfds(&c1, &c2);
    struct pollfd pds[2] = {{.fd = st_netfd_fileno(b), .events = POLLIN},
                            {.fd = st_netfd_fileno(c1), .events = POLLIN}};
    arm(F_epoll_ctl, 2, ENOMEM);
    EXPECT_FAIL(st_poll(pds, 2, 100000), ENOMEM);
    cr_expect_eq(st_netfd_close(b), 0);
    cr_expect_eq(st_netfd_close(c1), 0);
    close_both_then_expect_usable(c2, a);
}

Test(faults_syscalls, epoll_add_of_an_already_registered_fd_falls_back_to_mod)
{
    init_with(ST_EVENTSYS_ALT);
    st_netfd_t a;
    st_netfd_t b;
    socketpair_netfds(&a, &b);
    arm_op(F_epoll_ctl, EPOLL_CTL_ADD, EEXIST);
    faults[F_epoll_ctl].after = true;
    cr_expect_eq(st_netfd_poll(a, POLLOUT, 100000), 0, "ADD said EEXIST, MOD made it: %s",
                 strerror(errno));
    cr_expect_geq(faults[F_epoll_ctl].calls, 1);
    close_both_then_expect_usable(a, b);
}

Test(faults_syscalls, epoll_mod_of_a_dropped_registration_falls_back_to_add)
{
    /* Replacing the file under a netfd (dup2) drops the kernel's registration. */
    init_with(ST_EVENTSYS_ALT);
    st_netfd_t a;
    st_netfd_t b;
    socketpair_netfds(&a, &b);
    char c;
    EXPECT_FAIL(st_read(a, &c, 1, 1000), ETIME); /* a is now registered for POLLIN */
    int sv[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv), 0);
    cr_assert_eq(dup2(sv[0], st_netfd_fileno(a)), st_netfd_fileno(a));
    close(sv[0]);
    /* POLLOUT: MOD (ENOENT, the old file is gone) and then ADD. */
    cr_expect_eq(st_netfd_poll(a, POLLOUT, 100000), 0, "%s", strerror(errno));
    cr_assert_eq(write(sv[1], "x", 1), 1);
    cr_expect_eq(st_read(a, &c, 1, 100000), 1);
    close(sv[1]);
    close_both_then_expect_usable(a, b);
}

Test(faults_syscalls, epoll_mod_failure_fails_the_wait_and_keeps_the_registration)
{
    init_with(ST_EVENTSYS_ALT);
    st_netfd_t a;
    st_netfd_t b;
    socketpair_netfds(&a, &b);
    char c;
    EXPECT_FAIL(st_read(a, &c, 1, 1000), ETIME); /* kept registration: POLLIN */
    arm_op(F_epoll_ctl, EPOLL_CTL_MOD, ENOMEM);
    EXPECT_FAIL(st_netfd_poll(a, POLLOUT, 100000), ENOMEM);
    cr_expect_eq(st_netfd_poll(a, POLLOUT, 100000), 0);
    cr_assert_eq(st_write(b, "y", 1, 100000), 1);
    cr_expect_eq(st_read(a, &c, 1, 100000), 1, "reads still wake");
    close_both_then_expect_usable(a, b);
}

Test(faults_syscalls, epoll_unregistration_failures_are_ignored)
{
    init_with(ST_EVENTSYS_ALT);
    int sv[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    /* A plain st_poll fd is unregistered when its waiter leaves. */
    struct pollfd pd = {.fd = sv[0], .events = POLLIN};
    arm_op(F_epoll_ctl, EPOLL_CTL_DEL, EBADF);
    cr_expect_eq(st_poll(&pd, 1, 1000), 0);
    cr_expect_eq(faults[F_epoll_ctl].calls, 1, "DEL was attempted");
    cr_expect_eq(st_poll(&pd, 1, 1000), 0, "and the fd can be waited on again");
    /* A netfd's kept registration is dropped when it is closed. */
    st_netfd_t a = st_netfd_open_socket(sv[0]);
    cr_assert_not_null(a);
    char c;
    EXPECT_FAIL(st_read(a, &c, 1, 1000), ETIME);
    arm_op(F_epoll_ctl, EPOLL_CTL_DEL, EBADF);
    cr_expect_eq(st_netfd_close(a), 0);
    cr_expect_eq(faults[F_epoll_ctl].calls, 1);
    close(sv[1]);
    expect_usable();
}

/* ---- the backends' waits: EINTR, EBADF ------------------------------------------- */

/* A scheduler on `eventsys`, a socketpair r/w, and a coroutine that writes to w in 20 ms. */
static st_thread_t init_with_a_write_coming(int eventsys, st_netfd_t *r, st_netfd_t *w,
                                            struct writer *wr)
{
    init_with(eventsys);
    socketpair_netfds(r, w);
    *wr = (struct writer){*w, 20000};
    st_thread_t t = st_thread_create(write_later, wr, 1, 0);
    cr_assert_not_null(t);
    return t;
}

static const enum fault_id wait_fn[] = {F_epoll_wait, F_poll, F_select};

Test(faults_syscalls, an_interrupted_dispatch_loses_no_waiter)
{
    for (size_t b = 0; b < 3; b++) {
        st_netfd_t r;
        st_netfd_t w;
        struct writer wr;
        st_thread_t t = init_with_a_write_coming(all_backends[b], &r, &w, &wr);
        arm_times(wait_fn[b], 1, EINTR, 3);
        char buf[8];
        cr_expect_eq(st_read(r, buf, sizeof(buf), 2000000), 4, "%s: %s", st_get_eventsys_name(),
                     strerror(errno));
        cr_expect_geq(faults[wait_fn[b]].calls, 4, "the failed waits were retried");
        cr_assert_eq(st_thread_join(t, NULL), 0);
        close_both_then_expect_usable(r, w);
        st_destroy();
    }
}

Test(faults_syscalls, select_ebadf_without_a_closed_fd_wakes_nobody)
{
    st_netfd_t r;
    st_netfd_t w;
    struct writer wr;
    st_thread_t t = init_with_a_write_coming(ST_EVENTSYS_SELECT, &r, &w, &wr);
    arm(F_select, 1, EBADF);
    char buf[8];
    cr_expect_eq(st_read(r, buf, sizeof(buf), 2000000), 4, "the reader waited for real data");
    cr_expect_geq(faults[F_select].calls, 2);
    cr_assert_eq(st_thread_join(t, NULL), 0);
    close_both_then_expect_usable(r, w);
}

struct poll_one {
    int fd;
    int rc;
    short revents;
};

static void *poll_one(void *arg)
{
    struct poll_one *p = arg;
    struct pollfd pd = {.fd = p->fd, .events = POLLIN};
    p->rc = st_poll(&pd, 1, 5000000);
    p->revents = pd.revents;
    return NULL;
}

Test(faults_syscalls, select_ebadf_wakes_only_the_waiters_of_closed_fds)
{
    init_with(ST_EVENTSYS_SELECT);
    int bad[2];
    int good[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, bad), 0);
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, good), 0);
    struct poll_one pb = {bad[0], -2, 0};
    struct poll_one pg = {good[0], -2, 0};
    st_thread_t tb = st_thread_create(poll_one, &pb, 1, 0);
    st_thread_t tg = st_thread_create(poll_one, &pg, 1, 0);
    cr_assert(tb != NULL && tg != NULL);
    cr_assert_eq(st_usleep(1000), 0); /* both wait now */
    close(bad[0]);                    /* behind the library's back */
    cr_assert_eq(st_thread_join(tb, NULL), 0);
    cr_expect_eq(pb.rc, 1);
    cr_expect_eq(pb.revents, POLLNVAL);
    cr_expect_eq(pg.rc, -2, "the other waiter still waits");
    cr_assert_eq(write(good[1], "z", 1), 1);
    cr_assert_eq(st_thread_join(tg, NULL), 0);
    cr_expect_eq(pg.rc, 1);
    cr_expect_eq(pg.revents, POLLIN);
    close(bad[1]);
    close(good[0]);
    close(good[1]);
    expect_usable();
}

/* ---- netfd creation and closing ----------------------------------------------------- */

Test(faults_syscalls, nonblocking_switch_failure_fails_netfd_creation)
{
    init_with(-1);
    int sv[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    arm(F_ioctl, 1, ENOTTY);
    EXPECT_FAIL_NULL(st_netfd_open(sv[0]), ENOTTY);
    cr_expect_eq(fcntl(sv[0], F_GETFL) & O_NONBLOCK, 0, "the descriptor is left as it was");
    arm(F_ioctl, 1, ENOTTY);
    EXPECT_FAIL_NULL(st_netfd_open_socket(sv[0]), ENOTTY);
    st_netfd_t fd = st_netfd_open_socket(sv[0]);
    cr_assert_not_null(fd);
    cr_expect_eq(st_netfd_close(fd), 0);
    close(sv[1]);
    expect_usable();
}

Test(faults_syscalls, close_failure_is_reported_and_the_netfd_is_released)
{
    init_with(-1);
    int before = open_fd_count();
    st_netfd_t a;
    st_netfd_t b;
    socketpair_netfds(&a, &b);
    arm_after(F_close, 1, EIO); /* Linux frees the number even when close fails */
    EXPECT_FAIL(st_netfd_close(a), EIO);
    /* The handle is released either way (it is on the free list, so looking is safe here). */
    EXPECT_FAIL(st_netfd_fileno(a), EBADF);
    cr_expect_eq(st_netfd_close(b), 0);
    cr_expect_eq(open_fd_count(), before);
    expect_usable();
}

/* st_destroy() closes the epoll descriptor; a failing close() changes nothing. */
Test(faults_syscalls, a_failing_close_of_the_epoll_fd_at_st_destroy_is_survived)
{
    int before = open_fd_count();
    init_with(ST_EVENTSYS_ALT);
    cr_expect_eq(open_fd_count(), before + 1, "the epoll descriptor");
    arm_after(F_close, 1, EIO); /* Linux frees the number even when close fails */
    st_destroy();
    cr_expect(fired(F_close), "st_destroy closed the epoll descriptor");
    cr_expect_eq(open_fd_count(), before);
    init_with(ST_EVENTSYS_ALT);
    expect_usable();
}

Test(faults_syscalls, st_open_retries_eintr_and_closes_what_it_cannot_wrap)
{
    init_with(-1);
    int before = open_fd_count();
    /* First, while the netfd free list is empty, so that a netfd is malloc'ed. */
    arm(F_malloc, 1, ENOMEM);
    EXPECT_FAIL_NULL(st_open("/dev/null", O_RDONLY, 0), ENOMEM);
    cr_expect_eq(open_fd_count(), before, "the opened file was closed again");
    arm(F_open64, 1, EMFILE);
    EXPECT_FAIL_NULL(st_open("/dev/null", O_RDONLY, 0), EMFILE);
    arm_times(F_open64, 1, EINTR, 2);
    st_netfd_t fd = st_open("/dev/null", O_RDONLY, 0);
    cr_assert_not_null(fd, "%s", strerror(errno));
    cr_expect_eq(faults[F_open64].calls, 3);
    cr_expect_eq(st_netfd_close(fd), 0);
    cr_expect_eq(open_fd_count(), before);
    expect_usable();
}

/* ---- accept ---------------------------------------------------------------------- */

static st_netfd_t tcp_listener(struct sockaddr_in *sin, int backlog)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert_geq(s, 0);
    memset(sin, 0, sizeof(*sin));
    sin->sin_family = AF_INET;
    sin->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    cr_assert_eq(bind(s, (struct sockaddr *)sin, sizeof(*sin)), 0);
    socklen_t len = sizeof(*sin);
    cr_assert_eq(getsockname(s, (struct sockaddr *)sin, &len), 0);
    cr_assert_eq(listen(s, backlog), 0);
    st_netfd_t l = st_netfd_open_socket(s);
    cr_assert_not_null(l);
    return l;
}

static int tcp_client(const struct sockaddr_in *sin)
{
    int c = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert_geq(c, 0);
    cr_assert_eq(connect(c, (const struct sockaddr *)sin, sizeof(*sin)), 0, "%s", strerror(errno));
    return c;
}

Test(faults_syscalls, accept_retries_eintr_and_reports_other_errors)
{
    init_with(-1);
    struct sockaddr_in sin;
    st_netfd_t l = tcp_listener(&sin, 8);
    int c1 = tcp_client(&sin);
    arm(F_accept4, 1, EINTR);
    st_netfd_t s = st_accept(l, NULL, NULL, 1000000);
    cr_assert_not_null(s, "EINTR is retried: %s", strerror(errno));
    cr_expect_eq(faults[F_accept4].calls, 2);
    cr_expect_eq(st_netfd_close(s), 0);
    int c2 = tcp_client(&sin);
    arm(F_accept4, 1, ECONNABORTED);
    EXPECT_FAIL_NULL(st_accept(l, NULL, NULL, 1000000), ECONNABORTED);
    arm(F_accept4, 1, EMFILE);
    EXPECT_FAIL_NULL(st_accept(l, NULL, NULL, 1000000), EMFILE);
    s = st_accept(l, NULL, NULL, 1000000);
    cr_assert_not_null(s, "the listener still works");
    cr_expect_eq(st_netfd_close(s), 0);
    close(c1);
    close(c2);
    cr_expect_eq(st_netfd_close(l), 0);
    expect_usable();
}

/*
 * Real EMFILE: the descriptor limit is lowered under a burst of queued
 * connections. The kernel leaves a connection it cannot give a descriptor
 * for in the queue; valgrind, which checks new descriptors against its own
 * copy of the limit, closes it instead, so under valgrind up to one
 * connection per EMFILE is lost.
 */
#define EMFILE_CLIENTS 40
#define EMFILE_ACCEPTORS 4

static struct {
    st_netfd_t listener;
    st_netfd_t accepted[EMFILE_CLIENTS];
    int naccepted;
    int emfile;
    int other_errors;
    bool restored;
} burst;

static void *acceptor(void *arg)
{
    (void)arg;
    while (burst.naccepted < EMFILE_CLIENTS) {
        st_netfd_t s = st_accept(burst.listener, NULL, NULL, 200000);
        if (s != NULL) {
            burst.accepted[burst.naccepted++] = s;
        } else if (errno == EMFILE) {
            burst.emfile++;
            (void)st_usleep(1000); /* as a server would: back off, then retry */
        } else if (errno != ETIME) {
            burst.other_errors++;
            break;
        } else if (burst.restored) {
            break; /* the queue is empty */
        }
    }
    return NULL;
}

static bool under_valgrind(void)
{
    const char *preload = getenv("LD_PRELOAD");
    return preload != NULL && strstr(preload, "vgpreload") != NULL;
}

Test(faults_syscalls, accept_emfile_under_load_keeps_the_listener_usable)
{
    init_with(ST_EVENTSYS_POLL);
    struct sockaddr_in sin;
    burst.listener = tcp_listener(&sin, EMFILE_CLIENTS);
    int clients[EMFILE_CLIENTS];
    int highest = 0;
    for (int i = 0; i < EMFILE_CLIENTS; i++) {
        clients[i] = tcp_client(&sin); /* queued in the backlog */
        highest = clients[i] > highest ? clients[i] : highest;
    }
    struct rlimit saved;
    cr_assert_eq(getrlimit(RLIMIT_NOFILE, &saved), 0);
    /* Room for about ten more descriptors. */
    struct rlimit low = {.rlim_cur = (rlim_t)highest + 11, .rlim_max = saved.rlim_max};
    cr_assert_eq(setrlimit(RLIMIT_NOFILE, &low), 0);
    st_thread_t t[EMFILE_ACCEPTORS];
    for (int i = 0; i < EMFILE_ACCEPTORS; i++) {
        t[i] = st_thread_create(acceptor, NULL, 1, 0);
        cr_assert_not_null(t[i]);
    }
    for (int i = 0; i < 2000 && burst.emfile < 8; i++) {
        cr_assert_eq(st_usleep(1000), 0);
    }
    cr_expect_geq(burst.emfile, 8, "the limit was hit, and hit again by the retries");
    cr_expect_lt(burst.naccepted, EMFILE_CLIENTS);
    /* Descriptors are available again: the acceptors take the rest of the queue. */
    cr_assert_eq(setrlimit(RLIMIT_NOFILE, &saved), 0);
    burst.restored = true;
    for (int i = 0; i < EMFILE_ACCEPTORS; i++) {
        cr_assert_eq(st_thread_join(t[i], NULL), 0);
    }
    cr_expect_eq(burst.other_errors, 0);
    if (under_valgrind()) {
        cr_expect_geq(burst.naccepted + burst.emfile, EMFILE_CLIENTS);
    } else {
        cr_expect_eq(burst.naccepted, EMFILE_CLIENTS, "every queued connection was accepted");
    }
    for (int i = 0; i < burst.naccepted; i++) {
        cr_expect_eq(st_netfd_close(burst.accepted[i]), 0);
    }
    for (int i = 0; i < EMFILE_CLIENTS; i++) {
        close(clients[i]);
    }
    cr_expect_eq(st_netfd_close(burst.listener), 0);
    expect_usable();
}

/* ---- connect -------------------------------------------------------------------- */

Test(faults_syscalls, connect_paths)
{
    init_with(-1);
    struct sockaddr_in sin;
    st_netfd_t l = tcp_listener(&sin, 8);

    /* Interrupted before the call: retried, and the handshake completes. */
    int s = socket(AF_INET, SOCK_STREAM, 0);
    st_netfd_t c = st_netfd_open_socket(s);
    cr_assert_not_null(c);
    arm(F_connect, 1, EINTR);
    cr_expect_eq(st_connect(c, (struct sockaddr *)&sin, sizeof(sin), 1000000), 0, "%s",
                 strerror(errno));
    cr_expect_geq(faults[F_connect].calls, 2);
    cr_expect_eq(st_netfd_close(c), 0);

    /* In progress: the outcome is read with getsockopt(SO_ERROR)... */
    c = st_netfd_open_socket(socket(AF_INET, SOCK_STREAM, 0));
    cr_assert_not_null(c);
    arm_after(F_connect, 1, EINPROGRESS);
    cr_expect_eq(st_connect(c, (struct sockaddr *)&sin, sizeof(sin), 1000000), 0, "%s",
                 strerror(errno));
    cr_expect_eq(st_netfd_close(c), 0);

    /* ...and a failing getsockopt is reported. */
    c = st_netfd_open_socket(socket(AF_INET, SOCK_STREAM, 0));
    cr_assert_not_null(c);
    arm_after(F_connect, 1, EINPROGRESS);
    arm(F_getsockopt, 1, ENOBUFS);
    EXPECT_FAIL(st_connect(c, (struct sockaddr *)&sin, sizeof(sin), 1000000), ENOBUFS);
    cr_expect_eq(st_netfd_close(c), 0);

    for (int i = 0; i < 3; i++) {
        st_netfd_t a = st_accept(l, NULL, NULL, 1000000);
        cr_assert_not_null(a);
        cr_expect_eq(st_netfd_close(a), 0);
    }
    cr_expect_eq(st_netfd_close(l), 0);
    expect_usable();
}

/*
 * A connect() that completed but reported EINTR (a signal at the very end):
 * the retry says EISCONN, which is success. An AF_UNIX connect completes
 * inside the call, so the retry is sure to see it.
 */
Test(faults_syscalls, connect_completed_under_an_interruption_succeeds)
{
    init_with(-1);
    struct sockaddr_un sun = {.sun_family = AF_UNIX};
    (void)snprintf(sun.sun_path + 1, sizeof(sun.sun_path) - 1, "st-faults2-%d", (int)getpid());
    socklen_t len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 +
                                strlen(sun.sun_path + 1));
    int lfd = socket(AF_UNIX, SOCK_STREAM, 0);
    cr_assert_geq(lfd, 0);
    cr_assert_eq(bind(lfd, (struct sockaddr *)&sun, len), 0, "%s", strerror(errno));
    cr_assert_eq(listen(lfd, 4), 0);
    st_netfd_t l = st_netfd_open_socket(lfd);
    cr_assert_not_null(l);

    st_netfd_t c = st_netfd_open_socket(socket(AF_UNIX, SOCK_STREAM, 0));
    cr_assert_not_null(c);
    arm_after(F_connect, 1, EINTR);
    cr_expect_eq(st_connect(c, (struct sockaddr *)&sun, (int)len, 1000000), 0, "%s",
                 strerror(errno));
    cr_expect_eq(faults[F_connect].calls, 2, "the retry is the second call");
    st_netfd_t a = st_accept(l, NULL, NULL, 1000000);
    cr_assert_not_null(a);
    cr_expect_eq(st_write(c, "ok", 2, 1000000), 2);
    char buf[2];
    cr_expect_eq(st_read_fully(a, buf, 2, 1000000), 2);
    cr_expect_eq(st_netfd_close(a), 0);
    close_both_then_expect_usable(c, l);
}

/* ---- data transfer --------------------------------------------------------------- */

Test(faults_syscalls, transfers_retry_eintr_and_report_hard_errors)
{
    init_with(-1);
    st_netfd_t a;
    st_netfd_t b;
    socketpair_netfds(&a, &b);
    char buf[16];
    struct iovec iov1[1] = {{buf, 4}};
    struct iovec iov2[2] = {{buf, 2}, {buf + 2, 2}};
    struct iovec *cursor;
    int count;
    size_t resid;

    /* write/read: st_write, st_read, st_read_fully, st_write_resid, st_read_resid */
    arm(F_write, 1, EINTR);
    cr_expect_eq(st_write(a, "abcd", 4, 100000), 4);
    arm(F_read, 1, EINTR);
    cr_expect_eq(st_read(b, buf, 4, 100000), 4);
    arm(F_write, 1, EIO);
    EXPECT_FAIL(st_write(a, "abcd", 4, 100000), EIO);
    resid = 4;
    arm(F_write, 1, EIO);
    EXPECT_FAIL(st_write_resid(a, "abcd", &resid, 100000), EIO);
    cr_expect_eq(resid, 4U);
    arm(F_read, 1, EIO);
    EXPECT_FAIL(st_read(b, buf, 4, 100000), EIO);
    cr_assert_eq(st_write(a, "abcd", 4, 100000), 4);
    arm(F_read, 1, EIO);
    EXPECT_FAIL(st_read_fully(b, buf, 4, 100000), EIO);
    arm(F_read, 1, EINTR);
    cr_expect_eq(st_read_fully(b, buf, 4, 100000), 4);

    /* readv/writev, single and multiple entries (one iovec uses read/write). */
    arm(F_writev, 1, EINTR);
    cr_expect_eq(st_writev(a, iov2, 2, 100000), 4);
    arm(F_readv, 1, EINTR);
    cr_expect_eq(st_readv(b, iov2, 2, 100000), 4);
    arm(F_writev, 1, EIO);
    EXPECT_FAIL(st_writev(a, iov2, 2, 100000), EIO);
    cr_assert_eq(st_writev(a, iov1, 1, 100000), 4);
    arm(F_readv, 1, EIO);
    EXPECT_FAIL(st_readv(b, iov2, 2, 100000), EIO);
    cursor = iov2;
    count = 2;
    iov2[0] = (struct iovec){buf, 2};
    iov2[1] = (struct iovec){buf + 2, 2};
    arm(F_readv, 1, EINTR);
    cr_expect_eq(st_readv_resid(b, &cursor, &count, 100000), 0);
    cr_expect_eq(count, 0);
    cursor = iov2;
    count = 2;
    iov2[0] = (struct iovec){buf, 2};
    iov2[1] = (struct iovec){buf + 2, 2};
    arm(F_writev, 1, EIO);
    EXPECT_FAIL(st_writev_resid(a, &cursor, &count, 100000), EIO);
    cr_expect_eq(count, 2, "nothing was written");

    close_both_then_expect_usable(a, b);
}

Test(faults_syscalls, datagram_calls_retry_eintr_and_report_hard_errors)
{
    init_with(-1);
    int sv[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_DGRAM, 0, sv), 0);
    st_netfd_t a = st_netfd_open_socket(sv[0]);
    st_netfd_t b = st_netfd_open_socket(sv[1]);
    cr_assert(a != NULL && b != NULL);
    char buf[16] = "datagram";
    struct iovec iov = {buf, 8};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
    struct mmsghdr mm = {.msg_hdr = msg};

    arm(F_sendto, 1, EINTR);
    cr_expect_eq(st_sendto(a, buf, 8, NULL, 0, 100000), 8);
    arm(F_recvfrom, 1, EINTR);
    cr_expect_eq(st_recvfrom(b, buf, sizeof(buf), NULL, NULL, 100000), 8);
    arm(F_sendto, 1, ENOBUFS);
    EXPECT_FAIL(st_sendto(a, buf, 8, NULL, 0, 100000), ENOBUFS);
    arm(F_recvfrom, 1, EIO);
    EXPECT_FAIL(st_recvfrom(b, buf, sizeof(buf), NULL, NULL, 100000), EIO);

    arm(F_sendmsg, 1, EINTR);
    cr_expect_eq(st_sendmsg(a, &msg, 0, 100000), 8);
    arm(F_recvmsg, 1, EINTR);
    cr_expect_eq(st_recvmsg(b, &msg, 0, 100000), 8);
    arm(F_sendmsg, 1, ENOBUFS);
    EXPECT_FAIL(st_sendmsg(a, &msg, 0, 100000), ENOBUFS);
    arm(F_recvmsg, 1, EIO);
    EXPECT_FAIL(st_recvmsg(b, &msg, 0, 100000), EIO);

    arm(F_sendmmsg, 1, EINTR);
    cr_expect_eq(st_sendmmsg(a, &mm, 1, 0, 100000), 1);
    arm(F_recvmmsg, 1, EINTR);
    cr_expect_eq(st_recvmmsg(b, &mm, 1, 0, 100000), 1);
    arm(F_sendmmsg, 1, ENOBUFS);
    EXPECT_FAIL(st_sendmmsg(a, &mm, 1, 0, 100000), ENOBUFS);
    arm(F_recvmmsg, 1, EIO);
    EXPECT_FAIL(st_recvmmsg(b, &mm, 1, 0, 100000), EIO);

    close_both_then_expect_usable(a, b);
}

/* ---- file I/O off the scheduler ------------------------------------------------------ */

/* A netfd on an empty, already unlinked regular file. */
static st_netfd_t temp_file_netfd(void)
{
    char path[] = "/tmp/st_faults_file_XXXXXX";
    int osfd = mkstemp(path);
    cr_assert_geq(osfd, 0, "mkstemp: %s", strerror(errno));
    cr_assert_eq(unlink(path), 0);
    st_netfd_t fd = st_netfd_open(osfd);
    cr_assert_not_null(fd, "%s", strerror(errno));
    return fd;
}

/* A scheduler in WORKERS file I/O mode and a file netfd for it. */
static st_netfd_t workers_and_a_file(void)
{
    init_with(-1);
    cr_assert_eq(st_set_file_io(ST_FILE_IO_WORKERS), 0);
    return temp_file_netfd();
}

/* Nothing was written by the failed calls; the pool works now. */
static void expect_untouched_then_working(st_netfd_t fd)
{
    struct stat sb;
    cr_assert_eq(fstat(st_netfd_fileno(fd), &sb), 0);
    cr_expect_eq(sb.st_size, 0, "nothing was written");
    cr_expect_eq(st_pwrite(fd, "x", 1, 0, ST_UTIME_NO_TIMEOUT), 1);
    cr_expect_eq(st_netfd_close(fd), 0);
    expect_usable();
}

Test(faults_syscalls, fstat_failure_fails_netfd_creation_but_accept_does_not_ask)
{
    init_with(-1);
    int before = open_fd_count();
    arm(F_fstat64, 1, EIO);
    EXPECT_FAIL_NULL(st_open("/dev/null", O_RDONLY, 0), EIO);
    cr_expect_eq(open_fd_count(), before, "the opened file was closed again");
    int sv[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    arm(F_fstat64, 1, EIO);
    EXPECT_FAIL_NULL(st_netfd_open(sv[0]), EIO);
    arm(F_fstat64, 1, EIO);
    EXPECT_FAIL_NULL(st_netfd_open_socket(sv[0]), EIO);
    close(sv[0]);
    close(sv[1]);

    /* An accepted connection is a socket: no fstat on that path. */
    struct sockaddr_in sin;
    st_netfd_t lfd = tcp_listener(&sin, 4);
    int client = tcp_client(&sin);
    arm(F_fstat64, 1, EIO);
    st_netfd_t conn = st_accept(lfd, NULL, NULL, 1000000);
    cr_assert_not_null(conn, "%s", strerror(errno));
    cr_expect_eq(faults[F_fstat64].calls, 0);
    disarm(F_fstat64);
    cr_expect_eq(st_netfd_close(conn), 0);
    cr_expect_eq(st_netfd_close(lfd), 0);
    close(client);
    cr_expect_eq(open_fd_count(), before);
    expect_usable();
}

Test(faults_syscalls, eventfd_failure_fails_the_call_and_leaks_nothing)
{
    st_netfd_t fd = workers_and_a_file();
    int before = open_fd_count();
    arm(F_eventfd, 1, EMFILE);
    EXPECT_FAIL(st_pwrite(fd, "x", 1, 0, ST_UTIME_NO_TIMEOUT), EMFILE);
    cr_expect_eq(open_fd_count(), before);
    expect_untouched_then_working(fd);
}

Test(faults_syscalls, no_worker_pthread_fails_the_call_with_eagain)
{
    st_netfd_t fd = workers_and_a_file();
    arm(F_pthread_create, 1, EAGAIN);
    EXPECT_FAIL(st_pwrite(fd, "x", 1, 0, ST_UTIME_NO_TIMEOUT), EAGAIN);
    arm(F_pthread_create, 1, EPERM);
    EXPECT_FAIL(st_fsync(fd, ST_UTIME_NO_TIMEOUT), EAGAIN);
    expect_untouched_then_working(fd);
}

Test(faults_syscalls, a_failing_read_of_the_completion_eventfd_loses_no_completion)
{
    st_netfd_t fd = workers_and_a_file();
    cr_expect_eq(st_fsync(fd, ST_UTIME_NO_TIMEOUT), 0);
    /* An fsync makes no read(2) of its own: the one read is the completer's. */
    arm(F_read, 1, EIO);
    cr_expect_eq(st_fdatasync(fd, ST_UTIME_NO_TIMEOUT), 0);
    cr_expect(fired(F_read));
    cr_expect_eq(st_fsync(fd, ST_UTIME_NO_TIMEOUT), 0);
    cr_expect_eq(st_netfd_close(fd), 0);
    expect_usable();
}

/* A worker that cannot signal its completion would strand the waiter: the library says so and aborts. */
Test(faults_syscalls, a_failing_write_of_the_completion_eventfd_aborts, .signal = SIGABRT)
{
    st_netfd_t fd = workers_and_a_file();
    arm(F_write, 1, EBADF);
    (void)st_fsync(fd, ST_UTIME_NO_TIMEOUT);
    cr_assert_fail("the failed wake-up went unnoticed");
}
