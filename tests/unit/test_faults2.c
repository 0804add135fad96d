/*
 * Failure paths, continued (docs/reliability.md keeps the site -> test
 * table): every allocation and system call the library makes can be made to
 * fail here. The executable is linked with -Wl,--wrap for each function
 * below; a wrapper passes the call through until it is armed, then fails
 * the n-th next call, either instead of the call ("now") or after letting it
 * happen ("after", for calls whose effect must take place, such as close).
 *
 * Every test checks three things: the public call reports the error
 * (errno from the failing call, or the mapping the library documents), the
 * scheduler stays usable (coroutines still run, I/O waits still wake), and
 * no descriptor leaks (/proc/self/fd is counted). ASan and valgrind, which
 * run the unit suite in CI, check that no memory leaks.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#include "fault_checks.h"
#include "heap.h"
#include "scheduler.h"
#include "st.h"
#include "stack.h"

/* ---- the fault switchboard ------------------------------------------------ */

enum fn {
    F_MALLOC,
    F_CALLOC,
    F_REALLOC,
    F_MMAP,
    F_MPROTECT,
    F_MUNMAP,
    F_MADVISE,
    F_EPOLL_CREATE1,
    F_EPOLL_CTL,
    F_EPOLL_WAIT,
    F_POLL,
    F_SELECT,
    F_SIGACTION,
    F_SIGALTSTACK,
    F_GETRLIMIT,
    F_SETRLIMIT,
    F_IOCTL,
    F_ACCEPT4,
    F_PTHREAD_KEY_CREATE,
    F_PTHREAD_SETSPECIFIC,
    F_CLOSE,
    F_GETSOCKOPT,
    F_CONNECT,
    F_OPEN,
    F_READ,
    F_WRITE,
    F_READV,
    F_WRITEV,
    F_RECVFROM,
    F_SENDTO,
    F_RECVMSG,
    F_SENDMSG,
    F_RECVMMSG,
    F_SENDMMSG,
    F_COUNT
};

enum trip { PASS, FAIL_NOW, FAIL_AFTER };

static struct fault faults[F_COUNT];

static void arm_times(enum fn f, int nth, int err, int times)
{
    fault_arm(&faults[f], nth, err, times);
}

static void arm(enum fn f, int nth, int err)
{
    arm_times(f, nth, err, 1);
}

static void arm_after(enum fn f, int nth, int err)
{
    arm(f, nth, err);
    faults[f].after = true;
}

static void disarm(enum fn f)
{
    fault_disarm(&faults[f]);
}

static enum trip trip(enum fn f)
{
    if (!fault_trip(&faults[f])) {
        return PASS;
    }
    return faults[f].after ? FAIL_AFTER : FAIL_NOW;
}

/* ---- the wrappers ------------------------------------------------------------ */

void *__real_malloc(size_t size);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *ptr, size_t size);
void *__real_mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off);
int __real_mprotect(void *addr, size_t len, int prot);
int __real_munmap(void *addr, size_t len);
int __real_madvise(void *addr, size_t len, int advice);
int __real_epoll_create1(int flags);
int __real_epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev);
int __real_epoll_wait(int epfd, struct epoll_event *ev, int max, int timeout);
int __real_poll(struct pollfd *fds, nfds_t n, int timeout);
int __real_select(int n, fd_set *r, fd_set *w, fd_set *e, struct timeval *tv);
int __real_sigaction(int sig, const struct sigaction *sa, struct sigaction *old);
int __real_sigaltstack(const stack_t *ss, stack_t *old);
int __real_getrlimit64(int resource, struct rlimit *rl);
int __real_setrlimit64(int resource, const struct rlimit *rl);
int __real_ioctl(int fd, unsigned long request, ...);
int __real_accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags);
int __real_pthread_key_create(pthread_key_t *key, void (*destructor)(void *));
int __real_pthread_setspecific(pthread_key_t key, const void *value);
int __real_close(int fd);
int __real_getsockopt(int fd, int level, int name, void *value, socklen_t *len);
int __real_connect(int fd, const struct sockaddr *addr, socklen_t len);
int __real_open64(const char *path, int flags, ...);
ssize_t __real_read(int fd, void *buf, size_t n);
ssize_t __real_write(int fd, const void *buf, size_t n);
ssize_t __real_readv(int fd, const struct iovec *iov, int n);
ssize_t __real_writev(int fd, const struct iovec *iov, int n);
ssize_t __real_recvfrom(int fd, void *buf, size_t n, int flags, struct sockaddr *a, socklen_t *l);
ssize_t __real_sendto(int fd, const void *buf, size_t n, int flags, const struct sockaddr *a,
                      socklen_t l);
ssize_t __real_recvmsg(int fd, struct msghdr *msg, int flags);
ssize_t __real_sendmsg(int fd, const struct msghdr *msg, int flags);
int __real_recvmmsg(int fd, struct mmsghdr *v, unsigned int n, int flags, struct timespec *t);
int __real_sendmmsg(int fd, struct mmsghdr *v, unsigned int n, int flags);

void *__wrap_malloc(size_t size);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *ptr, size_t size);
void *__wrap_mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off);
int __wrap_mprotect(void *addr, size_t len, int prot);
int __wrap_munmap(void *addr, size_t len);
int __wrap_madvise(void *addr, size_t len, int advice);
int __wrap_epoll_create1(int flags);
int __wrap_epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev);
int __wrap_epoll_wait(int epfd, struct epoll_event *ev, int max, int timeout);
int __wrap_poll(struct pollfd *fds, nfds_t n, int timeout);
int __wrap_select(int n, fd_set *r, fd_set *w, fd_set *e, struct timeval *tv);
int __wrap_sigaction(int sig, const struct sigaction *sa, struct sigaction *old);
int __wrap_sigaltstack(const stack_t *ss, stack_t *old);
int __wrap_getrlimit64(int resource, struct rlimit *rl);
int __wrap_setrlimit64(int resource, const struct rlimit *rl);
int __wrap_ioctl(int fd, unsigned long request, ...);
int __wrap_accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags);
int __wrap_pthread_key_create(pthread_key_t *key, void (*destructor)(void *));
int __wrap_pthread_setspecific(pthread_key_t key, const void *value);
int __wrap_close(int fd);
int __wrap_getsockopt(int fd, int level, int name, void *value, socklen_t *len);
int __wrap_connect(int fd, const struct sockaddr *addr, socklen_t len);
int __wrap_open64(const char *path, int flags, ...);
ssize_t __wrap_read(int fd, void *buf, size_t n);
ssize_t __wrap_write(int fd, const void *buf, size_t n);
ssize_t __wrap_readv(int fd, const struct iovec *iov, int n);
ssize_t __wrap_writev(int fd, const struct iovec *iov, int n);
ssize_t __wrap_recvfrom(int fd, void *buf, size_t n, int flags, struct sockaddr *a, socklen_t *l);
ssize_t __wrap_sendto(int fd, const void *buf, size_t n, int flags, const struct sockaddr *a,
                      socklen_t l);
ssize_t __wrap_recvmsg(int fd, struct msghdr *msg, int flags);
ssize_t __wrap_sendmsg(int fd, const struct msghdr *msg, int flags);
int __wrap_recvmmsg(int fd, struct mmsghdr *v, unsigned int n, int flags, struct timespec *t);
int __wrap_sendmmsg(int fd, struct mmsghdr *v, unsigned int n, int flags);

/*
 * One wrapper body: fail instead of the call, or after it, with the armed
 * errno and the function's failure value.
 */
#define WRAP(f, failval, call)                                                                     \
    do {                                                                                           \
        enum trip t_ = trip(f);                                                                    \
        if (t_ == FAIL_NOW) {                                                                      \
            errno = faults[f].err;                                                                 \
            return failval;                                                                        \
        }                                                                                          \
        __typeof__(call) r_ = call;                                                                \
        if (t_ == FAIL_AFTER) {                                                                    \
            errno = faults[f].err;                                                                 \
            return failval;                                                                        \
        }                                                                                          \
        return r_;                                                                                 \
    } while (0)

void *__wrap_malloc(size_t size)
{
    WRAP(F_MALLOC, NULL, __real_malloc(size));
}

void *__wrap_calloc(size_t n, size_t size)
{
    WRAP(F_CALLOC, NULL, __real_calloc(n, size));
}

void *__wrap_realloc(void *ptr, size_t size)
{
    WRAP(F_REALLOC, NULL, __real_realloc(ptr, size));
}

/* Builds use 64-bit file offsets, so the library calls mmap64, open64... */
void *__wrap_mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    WRAP(F_MMAP, MAP_FAILED, __real_mmap64(addr, len, prot, flags, fd, off));
}

int __wrap_mprotect(void *addr, size_t len, int prot)
{
    WRAP(F_MPROTECT, -1, __real_mprotect(addr, len, prot));
}

int __wrap_munmap(void *addr, size_t len)
{
    WRAP(F_MUNMAP, -1, __real_munmap(addr, len));
}

int __wrap_madvise(void *addr, size_t len, int advice)
{
    WRAP(F_MADVISE, -1, __real_madvise(addr, len, advice));
}

int __wrap_epoll_create1(int flags)
{
    WRAP(F_EPOLL_CREATE1, -1, __real_epoll_create1(flags));
}

int __wrap_epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
    if (faults[F_EPOLL_CTL].op_filter >= 0 && faults[F_EPOLL_CTL].op_filter != op) {
        return __real_epoll_ctl(epfd, op, fd, ev);
    }
    WRAP(F_EPOLL_CTL, -1, __real_epoll_ctl(epfd, op, fd, ev));
}

int __wrap_epoll_wait(int epfd, struct epoll_event *ev, int max, int timeout)
{
    WRAP(F_EPOLL_WAIT, -1, __real_epoll_wait(epfd, ev, max, timeout));
}

int __wrap_poll(struct pollfd *fds, nfds_t n, int timeout)
{
    WRAP(F_POLL, -1, __real_poll(fds, n, timeout));
}

int __wrap_select(int n, fd_set *r, fd_set *w, fd_set *e, struct timeval *tv)
{
    WRAP(F_SELECT, -1, __real_select(n, r, w, e, tv));
}

int __wrap_sigaction(int sig, const struct sigaction *sa, struct sigaction *old)
{
    WRAP(F_SIGACTION, -1, __real_sigaction(sig, sa, old));
}

int __wrap_sigaltstack(const stack_t *ss, stack_t *old)
{
    WRAP(F_SIGALTSTACK, -1, __real_sigaltstack(ss, old));
}

/* When set, getrlimit reports RLIMIT_NOFILE as unlimited. */
static bool nofile_infinite;

int __wrap_getrlimit64(int resource, struct rlimit *rl)
{
    if (nofile_infinite && resource == RLIMIT_NOFILE) {
        rl->rlim_cur = RLIM_INFINITY;
        rl->rlim_max = RLIM_INFINITY;
        return 0;
    }
    WRAP(F_GETRLIMIT, -1, __real_getrlimit64(resource, rl));
}

int __wrap_setrlimit64(int resource, const struct rlimit *rl)
{
    WRAP(F_SETRLIMIT, -1, __real_setrlimit64(resource, rl));
}

int __wrap_ioctl(int fd, unsigned long request, ...)
{
    va_list ap;
    va_start(ap, request);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    WRAP(F_IOCTL, -1, __real_ioctl(fd, request, arg));
}

int __wrap_accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
    WRAP(F_ACCEPT4, -1, __real_accept4(fd, addr, len, flags));
}

int __wrap_pthread_key_create(pthread_key_t *key, void (*destructor)(void *))
{
    enum trip t = trip(F_PTHREAD_KEY_CREATE);
    /* pthread functions return the error instead of setting errno. */
    return t == PASS ? __real_pthread_key_create(key, destructor) : faults[F_PTHREAD_KEY_CREATE].err;
}

int __wrap_pthread_setspecific(pthread_key_t key, const void *value)
{
    enum trip t = trip(F_PTHREAD_SETSPECIFIC);
    return t == PASS ? __real_pthread_setspecific(key, value) : faults[F_PTHREAD_SETSPECIFIC].err;
}

int __wrap_close(int fd)
{
    WRAP(F_CLOSE, -1, __real_close(fd));
}

int __wrap_getsockopt(int fd, int level, int name, void *value, socklen_t *len)
{
    WRAP(F_GETSOCKOPT, -1, __real_getsockopt(fd, level, name, value, len));
}

int __wrap_connect(int fd, const struct sockaddr *addr, socklen_t len)
{
    WRAP(F_CONNECT, -1, __real_connect(fd, addr, len));
}

int __wrap_open64(const char *path, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    mode_t mode = (mode_t)va_arg(ap, int);
    va_end(ap);
    WRAP(F_OPEN, -1, __real_open64(path, flags, mode));
}

ssize_t __wrap_read(int fd, void *buf, size_t n)
{
    WRAP(F_READ, -1, __real_read(fd, buf, n));
}

ssize_t __wrap_write(int fd, const void *buf, size_t n)
{
    WRAP(F_WRITE, -1, __real_write(fd, buf, n));
}

ssize_t __wrap_readv(int fd, const struct iovec *iov, int n)
{
    WRAP(F_READV, -1, __real_readv(fd, iov, n));
}

ssize_t __wrap_writev(int fd, const struct iovec *iov, int n)
{
    WRAP(F_WRITEV, -1, __real_writev(fd, iov, n));
}

ssize_t __wrap_recvfrom(int fd, void *buf, size_t n, int flags, struct sockaddr *a, socklen_t *l)
{
    WRAP(F_RECVFROM, -1, __real_recvfrom(fd, buf, n, flags, a, l));
}

ssize_t __wrap_sendto(int fd, const void *buf, size_t n, int flags, const struct sockaddr *a,
                      socklen_t l)
{
    WRAP(F_SENDTO, -1, __real_sendto(fd, buf, n, flags, a, l));
}

ssize_t __wrap_recvmsg(int fd, struct msghdr *msg, int flags)
{
    WRAP(F_RECVMSG, -1, __real_recvmsg(fd, msg, flags));
}

ssize_t __wrap_sendmsg(int fd, const struct msghdr *msg, int flags)
{
    WRAP(F_SENDMSG, -1, __real_sendmsg(fd, msg, flags));
}

int __wrap_recvmmsg(int fd, struct mmsghdr *v, unsigned int n, int flags, struct timespec *t)
{
    WRAP(F_RECVMMSG, -1, __real_recvmmsg(fd, v, n, flags, t));
}

int __wrap_sendmmsg(int fd, struct mmsghdr *v, unsigned int n, int flags)
{
    WRAP(F_SENDMMSG, -1, __real_sendmmsg(fd, v, n, flags));
}

/* ---- helpers --------------------------------------------------------------------- */

static void init_with(int eventsys)
{
    if (eventsys >= 0) {
        cr_assert_eq(st_set_eventsys(eventsys), 0, "backend %d", eventsys);
    }
    cr_assert_eq(st_init(), 0, "st_init: %s", strerror(errno));
}

static void socketpair_netfds(st_netfd_t *a, st_netfd_t *b)
{
    int sv[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    *a = st_netfd_open_socket(sv[0]);
    *b = st_netfd_open_socket(sv[1]);
    cr_assert(*a != NULL && *b != NULL);
}

static const int all_backends[] = {ST_EVENTSYS_ALT, ST_EVENTSYS_POLL, ST_EVENTSYS_SELECT};

/* ---- scheduler creation and st_init ---------------------------------------------- */

static void noop_cb(void)
{
}

Test(faults2, every_setter_reports_enomem_when_the_scheduler_cannot_be_allocated)
{
    int key = -1;
    arm(F_CALLOC, 1, ENOMEM);
    EXPECT_FAIL(st_set_eventsys(ST_EVENTSYS_POLL), ENOMEM);
    arm(F_CALLOC, 1, ENOMEM);
    EXPECT_FAIL(st_key_create(&key, NULL), ENOMEM);
    arm(F_CALLOC, 1, ENOMEM);
    EXPECT_FAIL(st_set_utime_function(NULL), ENOMEM);
    arm(F_CALLOC, 1, ENOMEM);
    EXPECT_FAIL(st_timecache_set(1), ENOMEM);
    arm(F_CALLOC, 1, ENOMEM);
    EXPECT_FAIL(st_randomize_stacks(1), ENOMEM);
    arm(F_CALLOC, 1, ENOMEM);
    EXPECT_FAIL_NULL(st_set_switch_in_cb(noop_cb), ENOMEM);
    arm(F_CALLOC, 1, ENOMEM);
    EXPECT_FAIL_NULL(st_set_switch_out_cb(noop_cb), ENOMEM);
    arm(F_CALLOC, 1, ENOMEM);
    int here;
    st_set_primordial_stack(&here, &here); /* nothing to report, nothing to crash */
    arm(F_CALLOC, 1, ENOMEM);
    EXPECT_FAIL(st_init(), ENOMEM);
    cr_expect_eq(key, -1);
    cr_expect_eq(st_get_eventsys(), -1, "no scheduler was left half made");
    init_with(ST_EVENTSYS_POLL);
    expect_usable();
}

Test(faults2, idle_coroutine_failures_leave_no_epoll_fd_behind)
{
    int before = open_fd_count();
    cr_assert_eq(st_set_eventsys(ST_EVENTSYS_ALT), 0);
    arm(F_MPROTECT, 1, ENOMEM);
    EXPECT_FAIL(st_init(), ENOMEM); /* the idle coroutine's guard page */
    arm(F_CALLOC, 2, ENOMEM);
    EXPECT_FAIL(st_init(), ENOMEM); /* the primordial coroutine, after the epoll fd */
    cr_expect_eq(open_fd_count(), before, "failed st_init calls closed their epoll fd");
    init_with(-1);
    expect_usable_then_clean_destroy(before);
}

Test(faults2, sigpipe_disposition_failure_fails_init)
{
    arm(F_SIGACTION, 1, EINVAL);
    EXPECT_FAIL(st_init(), EINVAL);
    init_with(-1);
    expect_usable();
}

Test(faults2, rlimit_query_failure_fails_init)
{
    arm(F_GETRLIMIT, 1, EPERM);
    EXPECT_FAIL(st_init(), EPERM);
    init_with(-1);
    expect_usable();
}

Test(faults2, rlimit_raise_failure_keeps_the_soft_limit)
{
    struct rlimit rl;
    cr_assert_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
    if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max < 512) {
        cr_skip_test("RLIMIT_NOFILE hard limit too low");
    }
    rl.rlim_cur = 256;
    cr_assert_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
    arm(F_SETRLIMIT, 1, EPERM);
    init_with(ST_EVENTSYS_POLL);
    cr_expect_eq(faults[F_SETRLIMIT].calls, 1, "st_init tried to raise the limit");
    cr_expect_eq(st_getfdlimit(), 256, "the old limit is reported");
    expect_usable();
}

/*
 * select lowers the descriptor limit to FD_SETSIZE, hard and soft; where the
 * hard limit cannot be moved the soft one is lowered alone, and where
 * neither can, st_init fails as State Threads' does.
 */
Test(faults2, select_limit_lowering_falls_back_to_the_soft_limit)
{
    struct rlimit rl;
    cr_assert_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
    if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max <= FD_SETSIZE) {
        cr_skip_test("RLIMIT_NOFILE hard limit %llu is not above FD_SETSIZE",
                     (unsigned long long)rl.rlim_max);
    }
    arm(F_SETRLIMIT, 1, EPERM);
    init_with(ST_EVENTSYS_SELECT);
    cr_expect_eq(faults[F_SETRLIMIT].calls, 2, "one try with the hard limit, one without");
    struct rlimit after;
    cr_assert_eq(getrlimit(RLIMIT_NOFILE, &after), 0);
    cr_expect_eq(after.rlim_cur, (rlim_t)FD_SETSIZE);
    cr_expect_eq(after.rlim_max, rl.rlim_max, "the hard limit is left as it was");
    cr_expect_eq(st_getfdlimit(), FD_SETSIZE);
    expect_usable();
}

Test(faults2, select_limit_failure_fails_init)
{
    struct rlimit rl;
    cr_assert_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
    if (rl.rlim_max != RLIM_INFINITY && rl.rlim_max <= FD_SETSIZE) {
        cr_skip_test("RLIMIT_NOFILE hard limit %llu is not above FD_SETSIZE",
                     (unsigned long long)rl.rlim_max);
    }
    arm_times(F_SETRLIMIT, 1, EPERM, 2);
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

/*
 * epoll's event buffer grows with the registered descriptors (every ready one
 * fits in one epoll_wait): a growth that fails refuses the wait that needed
 * it, with ENOMEM and every registration of that wait rolled back.
 */
Test(faults2, epoll_event_buffer_growth_failure_refuses_the_wait)
{
    enum { NFDS = 300 };
    static struct pollfd pds[NFDS];
    int sv[2];
    init_with(ST_EVENTSYS_ALT);
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    for (int i = 0; i < NFDS; i++) {
        pds[i] = (struct pollfd){.fd = dup(sv[0]), .events = POLLIN};
        cr_assert_geq(pds[i].fd, 0);
    }
    arm(F_REALLOC, 1, ENOMEM);
    EXPECT_FAIL(st_poll(pds, NFDS, 0), ENOMEM);
    cr_expect_eq(faults[F_REALLOC].calls, 1);
    disarm(F_REALLOC);
    cr_expect_eq(st_poll(pds, NFDS, 0), 0, "the same wait works once memory is there");
    cr_assert_eq(write(sv[1], "x", 1), 1);
    cr_expect_eq(st_poll(pds, NFDS, 1000000), NFDS);
    for (int i = 0; i < NFDS; i++) {
        close(pds[i].fd);
    }
    close(sv[0]);
    close(sv[1]);
    expect_usable();
}

Test(faults2, unlimited_descriptors_are_capped)
{
    nofile_infinite = true;
    init_with(ST_EVENTSYS_POLL);
    cr_expect_eq(st_getfdlimit(), INT_MAX);
    st_destroy();
    init_with(ST_EVENTSYS_SELECT);
    cr_expect_eq(st_getfdlimit(), FD_SETSIZE);
    nofile_infinite = false;
    expect_usable();
}

/* The overflow handler's set-up is best effort: st_init succeeds without it. */
/* Sanitizer runtimes install a signal stack of their own: start without one. */
static void drop_signal_stack(void)
{
    stack_t off = {.ss_sp = NULL, .ss_size = 0, .ss_flags = SS_DISABLE};
    cr_assert_eq(sigaltstack(&off, NULL), 0);
}

Test(faults2, overflow_handler_setup_is_best_effort)
{
    drop_signal_stack();
    arm(F_SIGACTION, 2, EINVAL); /* 1: SIGPIPE, 2: the SIGSEGV handler */
    init_with(-1);
    expect_usable();
    st_destroy();

    arm(F_MALLOC, 1, ENOMEM); /* the signal stack */
    init_with(-1);
    stack_t ss;
    cr_assert_eq(sigaltstack(NULL, &ss), 0);
    cr_expect_neq(ss.ss_flags & SS_DISABLE, 0, "no signal stack without memory for one");
    expect_usable();
    st_destroy();

    arm(F_SIGALTSTACK, 2, ENOMEM); /* 1: the query, 2: installing ours */
    init_with(-1);
    cr_assert_eq(sigaltstack(NULL, &ss), 0);
    cr_expect_neq(ss.ss_flags & SS_DISABLE, 0, "the refused stack was freed, not kept");
    expect_usable();
    st_destroy();

    arm(F_SIGALTSTACK, 1, EINVAL); /* the query fails: st installs its own */
    init_with(-1);
    cr_assert_eq(sigaltstack(NULL, &ss), 0);
    cr_expect_eq(ss.ss_flags & SS_DISABLE, 0);
    expect_usable();
    st_destroy();
    cr_assert_eq(sigaltstack(NULL, &ss), 0);
    cr_expect_neq(ss.ss_flags & SS_DISABLE, 0, "st_destroy removed its signal stack");
}

Test(faults2, an_existing_signal_stack_is_kept)
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

Test(faults2, thread_exit_key_failures_are_tolerated)
{
    /* pthread_key_create runs once per process: at the first scheduler. */
    arm(F_PTHREAD_KEY_CREATE, 1, EAGAIN);
    init_with(-1);
    cr_expect_eq(faults[F_PTHREAD_KEY_CREATE].calls, 1);
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

Test(faults2, thread_exit_registration_failure_is_tolerated)
{
    arm(F_PTHREAD_SETSPECIFIC, 1, ENOMEM);
    init_with(-1);
    expect_usable();
    st_destroy();
    init_with(-1);
    expect_usable();
}

/* ---- stacks -------------------------------------------------------------------- */

Test(faults2, guard_page_failure_unmaps_and_a_failed_unmap_is_survived)
{
    init_with(-1);
    arm(F_MPROTECT, 1, ENOMEM);
    arm(F_MUNMAP, 1, EINVAL); /* the clean-up of the half-made stack fails too */
    EXPECT_FAIL_NULL(st_thread_create(return_arg, NULL, 1, 0), ENOMEM);
    cr_expect_eq(faults[F_MUNMAP].calls, 1);
    expect_usable();
    /* Teardown with every unmap failing: nothing crashes, st_destroy completes. */
    arm_times(F_MUNMAP, 1, EINVAL, 1000);
    st_destroy();
    disarm(F_MUNMAP);
    cr_expect_eq(st_get_eventsys(), -1);
    init_with(-1);
    expect_usable();
}

/* Skips the calling test, saying why, on a kernel without guard markers. */
static void require_guard_markers(void)
{
    if (!st__stack_guard_markers_supported()) {
        cr_skip_test("this kernel has no page-table guard markers (MADV_GUARD_INSTALL, Linux 6.13)");
    }
}

Test(faults2, guard_marker_failure_reports_enomem_and_gives_the_range_back)
{
    require_guard_markers();
    init_with(-1);
    struct st__stack_pool *pool = &st__sched_peek()->stacks;
    st__stacks_alone_max = 0; /* from slabs at once */
    st_thread_t first = st_thread_create(return_arg, NULL, 1, 0);
    cr_assert_not_null(first);
    char *next = pool->carve_next;
    arm(F_MADVISE, 1, ENOMEM);
    EXPECT_FAIL_NULL(st_thread_create(return_arg, NULL, 1, 0), ENOMEM);
    cr_expect_eq(pool->carve_next, next, "the slab range of the failed stack is free again");
    cr_assert_eq(st_thread_join(first, NULL), 0);
    expect_usable();
}

Test(faults2, slab_failures_report_enomem_and_free_the_slab_record)
{
    struct st__stack_pool pool;
    st__stack_pool_init(&pool, ST__STACK_CACHE, false);
    arm(F_MALLOC, 1, ENOMEM);
    EXPECT_FAIL_NULL(st__stack_acquire(&pool, 16384), ENOMEM);
    arm(F_MMAP, 1, ENOMEM);
    EXPECT_FAIL_NULL(st__stack_acquire(&pool, 16384), ENOMEM);
    struct st__stack *stack = st__stack_acquire(&pool, 16384);
    cr_assert_not_null(stack, "the pool works once memory is back");
    st__stack_release(&pool, stack);
    st__stack_pool_fini(&pool);
}

Test(faults2, failed_madvise_on_a_released_slab_stack_keeps_the_pool_consistent)
{
    struct st__stack_pool pool;
    st__stack_pool_init(&pool, ST__STACK_FREE, false);
    struct st__stack *stack = st__stack_acquire(&pool, 16384);
    cr_assert_not_null(stack);
    char *bottom = stack->bottom;
    st__stack_release(&pool, stack);
    arm(F_MADVISE, 1, EINVAL);
    st__stack_reclaim(&pool);
    cr_expect_eq(faults[F_MADVISE].calls, 1);
    struct st__stack *again = st__stack_acquire(&pool, 16384);
    cr_assert_not_null(again);
    cr_expect_eq(again->bottom, bottom, "the range is reused all the same");
    st__stack_release(&pool, again);
    st__stack_pool_fini(&pool);
}

Test(faults2, heap_growth_refuses_absurd_counts)
{
    struct st__heap heap;
    st__heap_init(&heap);
    EXPECT_FAIL(st__heap_grow(&heap, SIZE_MAX), ENOMEM);
    EXPECT_FAIL(st__heap_grow(&heap, SIZE_MAX / 2), ENOMEM);
    cr_expect_eq(heap.capacity, 0U);
    st__heap_fini(&heap);
}

/* ---- waits: pollset links, backend state -------------------------------------- */

Test(faults2, long_pollfd_arrays_report_enomem_on_every_backend)
{
    for (size_t b = 0; b < sizeof(all_backends) / sizeof(all_backends[0]); b++) {
        init_with(all_backends[b]);
        int before = open_fd_count();
        st_netfd_t ends[10];
        struct pollfd pds[5];
        for (int i = 0; i < 5; i++) {
            socketpair_netfds(&ends[2 * i], &ends[2 * i + 1]);
            pds[i].fd = st_netfd_fileno(ends[2 * i]);
            pds[i].events = POLLOUT;
        }
        arm(F_MALLOC, 1, ENOMEM);
        EXPECT_FAIL(st_poll(pds, 5, 100000), ENOMEM);
        cr_expect_eq(st_poll(pds, 5, 100000), 5, "%s: works once memory is back",
                     st_get_eventsys_name());
        for (int i = 0; i < 10; i++) {
            cr_expect_eq(st_netfd_close(ends[i]), 0, "no waiter was left registered");
        }
        cr_expect_eq(open_fd_count(), before);
        expect_usable();
        st_destroy();
    }
}

Test(faults2, epoll_chunk_failures_roll_back_the_whole_wait)
{
    init_with(ST_EVENTSYS_ALT);
    st_netfd_t low;
    st_netfd_t peer;
    socketpair_netfds(&low, &peer);
    int high = fcntl(st_netfd_fileno(peer), F_DUPFD, 300); /* the second chunk of 256 */
    cr_assert_geq(high, 300);
    struct pollfd pds[2] = {{.fd = st_netfd_fileno(low), .events = POLLIN},
                            {.fd = high, .events = POLLIN}};
    arm(F_CALLOC, 1, ENOMEM);
    EXPECT_FAIL(st_poll(pds, 2, 1000), ENOMEM);
    cr_expect_eq(st_netfd_close(low), 0, "the first pollfd was unregistered again");
    arm(F_CALLOC, 1, ENOMEM);
    EXPECT_FAIL_NULL(st_netfd_open_socket(high), ENOMEM);
    cr_expect_neq(fcntl(high, F_GETFD), -1, "the caller keeps its descriptor");
    st_netfd_t h = st_netfd_open_socket(high);
    cr_assert_not_null(h);
    cr_expect_eq(st_netfd_close(h), 0);
    cr_expect_eq(st_netfd_close(peer), 0);
    expect_usable();
}

Test(faults2, epoll_table_growth_failure_rolls_back_earlier_pollfds)
{
    init_with(ST_EVENTSYS_ALT);
    st_netfd_t low;
    st_netfd_t peer;
    socketpair_netfds(&low, &peer);
    int high = fcntl(st_netfd_fileno(peer), F_DUPFD, 3000); /* beyond the first table */
    cr_assert_geq(high, 3000);
    struct pollfd pds[2] = {{.fd = st_netfd_fileno(low), .events = POLLIN},
                            {.fd = high, .events = POLLIN}};
    arm(F_REALLOC, 1, ENOMEM);
    EXPECT_FAIL(st_poll(pds, 2, 1000), ENOMEM);
    cr_expect_eq(st_netfd_close(low), 0);
    close(high);
    cr_expect_eq(st_netfd_close(peer), 0);
    expect_usable();
}

/* ---- epoll_ctl ---------------------------------------------------------------------- */

Test(faults2, epoll_registration_failure_fails_the_wait_with_its_errno)
{
    init_with(ST_EVENTSYS_ALT);
    st_netfd_t a;
    st_netfd_t b;
    socketpair_netfds(&a, &b);
    char c;
    arm(F_EPOLL_CTL, 1, ENOSPC); /* the kernel's max_user_watches */
    EXPECT_FAIL(st_read(a, &c, 1, 100000), ENOSPC);
    arm(F_EPOLL_CTL, 1, ENOMEM);
    EXPECT_FAIL(st_netfd_poll(a, POLLIN, 100000), ENOMEM);
    /* A two-fd wait whose second registration fails leaves neither behind. */
    st_netfd_t c1;
    st_netfd_t c2;
    socketpair_netfds(&c1, &c2);
    struct pollfd pds[2] = {{.fd = st_netfd_fileno(b), .events = POLLIN},
                            {.fd = st_netfd_fileno(c1), .events = POLLIN}};
    arm(F_EPOLL_CTL, 2, ENOMEM);
    EXPECT_FAIL(st_poll(pds, 2, 100000), ENOMEM);
    cr_expect_eq(st_netfd_close(b), 0);
    cr_expect_eq(st_netfd_close(c1), 0);
    cr_expect_eq(st_netfd_close(c2), 0);
    cr_expect_eq(st_netfd_close(a), 0);
    expect_usable();
}

Test(faults2, epoll_add_of_an_already_registered_fd_falls_back_to_mod)
{
    init_with(ST_EVENTSYS_ALT);
    st_netfd_t a;
    st_netfd_t b;
    socketpair_netfds(&a, &b);
    faults[F_EPOLL_CTL] = (struct fault){.nth = 1, .times = 1, .err = EEXIST, .after = true,
                                         .op_filter = EPOLL_CTL_ADD};
    cr_expect_eq(st_netfd_poll(a, POLLOUT, 100000), 0, "ADD said EEXIST, MOD made it: %s",
                 strerror(errno));
    cr_expect_geq(faults[F_EPOLL_CTL].calls, 1);
    cr_expect_eq(st_netfd_close(a), 0);
    cr_expect_eq(st_netfd_close(b), 0);
    expect_usable();
}

Test(faults2, epoll_mod_of_a_dropped_registration_falls_back_to_add)
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
    cr_expect_eq(st_netfd_close(a), 0);
    cr_expect_eq(st_netfd_close(b), 0);
    expect_usable();
}

Test(faults2, epoll_mod_failure_fails_the_wait_and_keeps_the_registration)
{
    init_with(ST_EVENTSYS_ALT);
    st_netfd_t a;
    st_netfd_t b;
    socketpair_netfds(&a, &b);
    char c;
    EXPECT_FAIL(st_read(a, &c, 1, 1000), ETIME); /* kept registration: POLLIN */
    faults[F_EPOLL_CTL] = (struct fault){.nth = 1, .times = 1, .err = ENOMEM, .op_filter = EPOLL_CTL_MOD};
    EXPECT_FAIL(st_netfd_poll(a, POLLOUT, 100000), ENOMEM);
    cr_expect_eq(st_netfd_poll(a, POLLOUT, 100000), 0);
    cr_assert_eq(st_write(b, "y", 1, 100000), 1);
    cr_expect_eq(st_read(a, &c, 1, 100000), 1, "reads still wake");
    cr_expect_eq(st_netfd_close(a), 0);
    cr_expect_eq(st_netfd_close(b), 0);
    expect_usable();
}

Test(faults2, epoll_unregistration_failures_are_ignored)
{
    init_with(ST_EVENTSYS_ALT);
    int sv[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    /* A plain st_poll fd is unregistered when its waiter leaves. */
    struct pollfd pd = {.fd = sv[0], .events = POLLIN};
    faults[F_EPOLL_CTL] = (struct fault){.nth = 1, .times = 1, .err = EBADF, .op_filter = EPOLL_CTL_DEL};
    cr_expect_eq(st_poll(&pd, 1, 1000), 0);
    cr_expect_eq(faults[F_EPOLL_CTL].calls, 1, "DEL was attempted");
    cr_expect_eq(st_poll(&pd, 1, 1000), 0, "and the fd can be waited on again");
    /* A netfd's kept registration is dropped when it is closed. */
    st_netfd_t a = st_netfd_open_socket(sv[0]);
    cr_assert_not_null(a);
    char c;
    EXPECT_FAIL(st_read(a, &c, 1, 1000), ETIME);
    faults[F_EPOLL_CTL] = (struct fault){.nth = 1, .times = 1, .err = EBADF, .op_filter = EPOLL_CTL_DEL};
    cr_expect_eq(st_netfd_close(a), 0);
    cr_expect_eq(faults[F_EPOLL_CTL].calls, 1);
    close(sv[1]);
    expect_usable();
}

/* ---- the backends' waits: EINTR, EBADF ------------------------------------------- */

static const enum fn wait_fn[] = {F_EPOLL_WAIT, F_POLL, F_SELECT};

Test(faults2, an_interrupted_dispatch_loses_no_waiter)
{
    for (size_t b = 0; b < 3; b++) {
        init_with(all_backends[b]);
        st_netfd_t r;
        st_netfd_t w;
        socketpair_netfds(&r, &w);
        struct writer wr = {w, 20000};
        st_thread_t t = st_thread_create(write_later, &wr, 1, 0);
        cr_assert_not_null(t);
        arm_times(wait_fn[b], 1, EINTR, 3);
        char buf[8];
        cr_expect_eq(st_read(r, buf, sizeof(buf), 2000000), 4, "%s: %s", st_get_eventsys_name(),
                     strerror(errno));
        cr_expect_geq(faults[wait_fn[b]].calls, 4, "the failed waits were retried");
        cr_assert_eq(st_thread_join(t, NULL), 0);
        cr_expect_eq(st_netfd_close(r), 0);
        cr_expect_eq(st_netfd_close(w), 0);
        expect_usable();
        st_destroy();
    }
}

Test(faults2, select_ebadf_without_a_closed_fd_wakes_nobody)
{
    init_with(ST_EVENTSYS_SELECT);
    st_netfd_t r;
    st_netfd_t w;
    socketpair_netfds(&r, &w);
    struct writer wr = {w, 20000};
    st_thread_t t = st_thread_create(write_later, &wr, 1, 0);
    cr_assert_not_null(t);
    arm(F_SELECT, 1, EBADF);
    char buf[8];
    cr_expect_eq(st_read(r, buf, sizeof(buf), 2000000), 4, "the reader waited for real data");
    cr_expect_geq(faults[F_SELECT].calls, 2);
    cr_assert_eq(st_thread_join(t, NULL), 0);
    cr_expect_eq(st_netfd_close(r), 0);
    cr_expect_eq(st_netfd_close(w), 0);
    expect_usable();
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

Test(faults2, select_ebadf_wakes_only_the_waiters_of_closed_fds)
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

Test(faults2, nonblocking_switch_failure_fails_netfd_creation)
{
    init_with(-1);
    int sv[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    arm(F_IOCTL, 1, ENOTTY);
    EXPECT_FAIL_NULL(st_netfd_open(sv[0]), ENOTTY);
    cr_expect_eq(fcntl(sv[0], F_GETFL) & O_NONBLOCK, 0, "the descriptor is left as it was");
    arm(F_IOCTL, 1, ENOTTY);
    EXPECT_FAIL_NULL(st_netfd_open_socket(sv[0]), ENOTTY);
    st_netfd_t fd = st_netfd_open_socket(sv[0]);
    cr_assert_not_null(fd);
    cr_expect_eq(st_netfd_close(fd), 0);
    close(sv[1]);
    expect_usable();
}

Test(faults2, close_failure_is_reported_and_the_netfd_is_released)
{
    init_with(-1);
    int before = open_fd_count();
    st_netfd_t a;
    st_netfd_t b;
    socketpair_netfds(&a, &b);
    arm_after(F_CLOSE, 1, EIO); /* Linux frees the number even when close fails */
    EXPECT_FAIL(st_netfd_close(a), EIO);
    /* The handle is released either way (it is on the free list, so looking is safe here). */
    EXPECT_FAIL(st_netfd_fileno(a), EBADF);
    cr_expect_eq(st_netfd_close(b), 0);
    cr_expect_eq(open_fd_count(), before);
    expect_usable();
}

/* st_destroy() closes the epoll descriptor; a failing close() changes nothing. */
Test(faults2, a_failing_close_of_the_epoll_fd_at_st_destroy_is_survived)
{
    int before = open_fd_count();
    init_with(ST_EVENTSYS_ALT);
    cr_expect_eq(open_fd_count(), before + 1, "the epoll descriptor");
    arm_after(F_CLOSE, 1, EIO); /* Linux frees the number even when close fails */
    st_destroy();
    cr_expect(faults[F_CLOSE].nth == 0, "st_destroy closed the epoll descriptor");
    cr_expect_eq(open_fd_count(), before);
    init_with(ST_EVENTSYS_ALT);
    expect_usable();
}

Test(faults2, st_open_retries_eintr_and_closes_what_it_cannot_wrap)
{
    init_with(-1);
    int before = open_fd_count();
    /* First, while the netfd free list is empty, so that a netfd is malloc'ed. */
    arm(F_MALLOC, 1, ENOMEM);
    EXPECT_FAIL_NULL(st_open("/dev/null", O_RDONLY, 0), ENOMEM);
    cr_expect_eq(open_fd_count(), before, "the opened file was closed again");
    arm(F_OPEN, 1, EMFILE);
    EXPECT_FAIL_NULL(st_open("/dev/null", O_RDONLY, 0), EMFILE);
    arm_times(F_OPEN, 1, EINTR, 2);
    st_netfd_t fd = st_open("/dev/null", O_RDONLY, 0);
    cr_assert_not_null(fd, "%s", strerror(errno));
    cr_expect_eq(faults[F_OPEN].calls, 3);
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

Test(faults2, accept_retries_eintr_and_reports_other_errors)
{
    init_with(-1);
    struct sockaddr_in sin;
    st_netfd_t l = tcp_listener(&sin, 8);
    int c1 = tcp_client(&sin);
    arm(F_ACCEPT4, 1, EINTR);
    st_netfd_t s = st_accept(l, NULL, NULL, 1000000);
    cr_assert_not_null(s, "EINTR is retried: %s", strerror(errno));
    cr_expect_eq(faults[F_ACCEPT4].calls, 2);
    cr_expect_eq(st_netfd_close(s), 0);
    int c2 = tcp_client(&sin);
    arm(F_ACCEPT4, 1, ECONNABORTED);
    EXPECT_FAIL_NULL(st_accept(l, NULL, NULL, 1000000), ECONNABORTED);
    arm(F_ACCEPT4, 1, EMFILE);
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

Test(faults2, accept_emfile_under_load_keeps_the_listener_usable)
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

Test(faults2, connect_paths)
{
    init_with(-1);
    struct sockaddr_in sin;
    st_netfd_t l = tcp_listener(&sin, 8);

    /* Interrupted before the call: retried, and the handshake completes. */
    int s = socket(AF_INET, SOCK_STREAM, 0);
    st_netfd_t c = st_netfd_open_socket(s);
    cr_assert_not_null(c);
    arm(F_CONNECT, 1, EINTR);
    cr_expect_eq(st_connect(c, (struct sockaddr *)&sin, sizeof(sin), 1000000), 0, "%s",
                 strerror(errno));
    cr_expect_geq(faults[F_CONNECT].calls, 2);
    cr_expect_eq(st_netfd_close(c), 0);

    /* In progress: the outcome is read with getsockopt(SO_ERROR)... */
    c = st_netfd_open_socket(socket(AF_INET, SOCK_STREAM, 0));
    cr_assert_not_null(c);
    arm_after(F_CONNECT, 1, EINPROGRESS);
    cr_expect_eq(st_connect(c, (struct sockaddr *)&sin, sizeof(sin), 1000000), 0, "%s",
                 strerror(errno));
    cr_expect_eq(st_netfd_close(c), 0);

    /* ...and a failing getsockopt is reported. */
    c = st_netfd_open_socket(socket(AF_INET, SOCK_STREAM, 0));
    cr_assert_not_null(c);
    arm_after(F_CONNECT, 1, EINPROGRESS);
    arm(F_GETSOCKOPT, 1, ENOBUFS);
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
Test(faults2, connect_completed_under_an_interruption_succeeds)
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
    arm_after(F_CONNECT, 1, EINTR);
    cr_expect_eq(st_connect(c, (struct sockaddr *)&sun, (int)len, 1000000), 0, "%s",
                 strerror(errno));
    cr_expect_eq(faults[F_CONNECT].calls, 2, "the retry is the second call");
    st_netfd_t a = st_accept(l, NULL, NULL, 1000000);
    cr_assert_not_null(a);
    cr_expect_eq(st_write(c, "ok", 2, 1000000), 2);
    char buf[2];
    cr_expect_eq(st_read_fully(a, buf, 2, 1000000), 2);
    cr_expect_eq(st_netfd_close(a), 0);
    cr_expect_eq(st_netfd_close(c), 0);
    cr_expect_eq(st_netfd_close(l), 0);
    expect_usable();
}

/* ---- data transfer --------------------------------------------------------------- */

Test(faults2, transfers_retry_eintr_and_report_hard_errors)
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
    arm(F_WRITE, 1, EINTR);
    cr_expect_eq(st_write(a, "abcd", 4, 100000), 4);
    arm(F_READ, 1, EINTR);
    cr_expect_eq(st_read(b, buf, 4, 100000), 4);
    arm(F_WRITE, 1, EIO);
    EXPECT_FAIL(st_write(a, "abcd", 4, 100000), EIO);
    resid = 4;
    arm(F_WRITE, 1, EIO);
    EXPECT_FAIL(st_write_resid(a, "abcd", &resid, 100000), EIO);
    cr_expect_eq(resid, 4U);
    arm(F_READ, 1, EIO);
    EXPECT_FAIL(st_read(b, buf, 4, 100000), EIO);
    cr_assert_eq(st_write(a, "abcd", 4, 100000), 4);
    arm(F_READ, 1, EIO);
    EXPECT_FAIL(st_read_fully(b, buf, 4, 100000), EIO);
    arm(F_READ, 1, EINTR);
    cr_expect_eq(st_read_fully(b, buf, 4, 100000), 4);

    /* readv/writev, single and multiple entries (one iovec uses read/write). */
    arm(F_WRITEV, 1, EINTR);
    cr_expect_eq(st_writev(a, iov2, 2, 100000), 4);
    arm(F_READV, 1, EINTR);
    cr_expect_eq(st_readv(b, iov2, 2, 100000), 4);
    arm(F_WRITEV, 1, EIO);
    EXPECT_FAIL(st_writev(a, iov2, 2, 100000), EIO);
    cr_assert_eq(st_writev(a, iov1, 1, 100000), 4);
    arm(F_READV, 1, EIO);
    EXPECT_FAIL(st_readv(b, iov2, 2, 100000), EIO);
    cursor = iov2;
    count = 2;
    iov2[0] = (struct iovec){buf, 2};
    iov2[1] = (struct iovec){buf + 2, 2};
    arm(F_READV, 1, EINTR);
    cr_expect_eq(st_readv_resid(b, &cursor, &count, 100000), 0);
    cr_expect_eq(count, 0);
    cursor = iov2;
    count = 2;
    iov2[0] = (struct iovec){buf, 2};
    iov2[1] = (struct iovec){buf + 2, 2};
    arm(F_WRITEV, 1, EIO);
    EXPECT_FAIL(st_writev_resid(a, &cursor, &count, 100000), EIO);
    cr_expect_eq(count, 2, "nothing was written");

    cr_expect_eq(st_netfd_close(a), 0);
    cr_expect_eq(st_netfd_close(b), 0);
    expect_usable();
}

Test(faults2, datagram_calls_retry_eintr_and_report_hard_errors)
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

    arm(F_SENDTO, 1, EINTR);
    cr_expect_eq(st_sendto(a, buf, 8, NULL, 0, 100000), 8);
    arm(F_RECVFROM, 1, EINTR);
    cr_expect_eq(st_recvfrom(b, buf, sizeof(buf), NULL, NULL, 100000), 8);
    arm(F_SENDTO, 1, ENOBUFS);
    EXPECT_FAIL(st_sendto(a, buf, 8, NULL, 0, 100000), ENOBUFS);
    arm(F_RECVFROM, 1, EIO);
    EXPECT_FAIL(st_recvfrom(b, buf, sizeof(buf), NULL, NULL, 100000), EIO);

    arm(F_SENDMSG, 1, EINTR);
    cr_expect_eq(st_sendmsg(a, &msg, 0, 100000), 8);
    arm(F_RECVMSG, 1, EINTR);
    cr_expect_eq(st_recvmsg(b, &msg, 0, 100000), 8);
    arm(F_SENDMSG, 1, ENOBUFS);
    EXPECT_FAIL(st_sendmsg(a, &msg, 0, 100000), ENOBUFS);
    arm(F_RECVMSG, 1, EIO);
    EXPECT_FAIL(st_recvmsg(b, &msg, 0, 100000), EIO);

    arm(F_SENDMMSG, 1, EINTR);
    cr_expect_eq(st_sendmmsg(a, &mm, 1, 0, 100000), 1);
    arm(F_RECVMMSG, 1, EINTR);
    cr_expect_eq(st_recvmmsg(b, &mm, 1, 0, 100000), 1);
    arm(F_SENDMMSG, 1, ENOBUFS);
    EXPECT_FAIL(st_sendmmsg(a, &mm, 1, 0, 100000), ENOBUFS);
    arm(F_RECVMMSG, 1, EIO);
    EXPECT_FAIL(st_recvmmsg(b, &mm, 1, 0, 100000), EIO);

    cr_expect_eq(st_netfd_close(a), 0);
    cr_expect_eq(st_netfd_close(b), 0);
    expect_usable();
}
