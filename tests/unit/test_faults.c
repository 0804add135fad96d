/*
 * Failure paths: allocations and system calls inside the library fail on
 * demand (the test is linked with -Wl,--wrap for each of them), and every
 * public call must then report the error and leave the scheduler usable.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "fault_checks.h"
#include "st.h"

enum wrapped { W_MALLOC, W_CALLOC, W_REALLOC, W_MMAP, W_MPROTECT, W_EPOLL_CREATE1, W_COUNT };

/* fail_in[f] > 0: the fail_in[f]-th next call of f fails (once). */
static int fail_in[W_COUNT];

static void fail_nth(enum wrapped f, int nth)
{
    fail_in[f] = nth;
}

static bool should_fail(enum wrapped f)
{
    if (fail_in[f] > 0 && --fail_in[f] == 0) {
        errno = ENOMEM;
        return true;
    }
    return false;
}

void *__real_malloc(size_t size);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *ptr, size_t size);
void *__real_mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off);
int __real_mprotect(void *addr, size_t len, int prot);
int __real_epoll_create1(int flags);

void *__wrap_malloc(size_t size);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *ptr, size_t size);
void *__wrap_mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off);
int __wrap_mprotect(void *addr, size_t len, int prot);
int __wrap_epoll_create1(int flags);

void *__wrap_malloc(size_t size)
{
    return should_fail(W_MALLOC) ? NULL : __real_malloc(size);
}

void *__wrap_calloc(size_t n, size_t size)
{
    return should_fail(W_CALLOC) ? NULL : __real_calloc(n, size);
}

void *__wrap_realloc(void *ptr, size_t size)
{
    return should_fail(W_REALLOC) ? NULL : __real_realloc(ptr, size);
}

/* Builds use 64-bit file offsets, so the library calls mmap64. */
void *__wrap_mmap64(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    return should_fail(W_MMAP) ? MAP_FAILED : __real_mmap64(addr, len, prot, flags, fd, off);
}

int __wrap_mprotect(void *addr, size_t len, int prot)
{
    return should_fail(W_MPROTECT) ? -1 : __real_mprotect(addr, len, prot);
}

int __wrap_epoll_create1(int flags)
{
    if (should_fail(W_EPOLL_CREATE1)) {
        errno = EMFILE;
        return -1;
    }
    return __real_epoll_create1(flags);
}

Test(faults, init_fails_cleanly_when_the_scheduler_cannot_be_allocated)
{
    fail_nth(W_CALLOC, 1);
    errno = 0;
    cr_expect_eq(st_init(), -1);
    cr_expect_eq(errno, ENOMEM);
    cr_assert_eq(st_init(), 0, "a later st_init succeeds");
    expect_usable();
}

Test(faults, init_fails_cleanly_at_every_allocation)
{
    /* sched, backend state, primordial; then the idle stack and its heap slot. */
    cr_assert_eq(st_set_eventsys(ST_EVENTSYS_ALT), 0);
    for (int nth = 1; nth <= 2; nth++) {
        fail_nth(W_CALLOC, nth);
        errno = 0;
        cr_expect_eq(st_init(), -1, "calloc #%d", nth);
        cr_expect_eq(errno, ENOMEM);
        fail_in[W_CALLOC] = 0;
    }
    fail_nth(W_REALLOC, 1);
    cr_expect_eq(st_init(), -1, "heap reservation for the idle coroutine");
    fail_nth(W_MMAP, 1);
    cr_expect_eq(st_init(), -1, "idle stack");
    cr_expect_eq(errno, ENOMEM);
    fail_nth(W_EPOLL_CREATE1, 1);
    cr_expect_eq(st_init(), -1, "epoll instance");
    cr_expect_eq(errno, EMFILE);
    int before = open_fd_count();
    cr_assert_eq(st_init(), 0);
    cr_expect_eq(open_fd_count(), before + 1, "failed attempts leaked no epoll fd");
    expect_usable();
}

Test(faults, init_reports_failure_of_the_poll_and_select_state)
{
    cr_assert_eq(st_set_eventsys(ST_EVENTSYS_POLL), 0);
    fail_nth(W_CALLOC, 1);
    cr_expect_eq(st_init(), -1);
    cr_assert_eq(st_init(), 0);
    st_destroy();
    cr_assert_eq(st_set_eventsys(ST_EVENTSYS_SELECT), 0);
    fail_nth(W_CALLOC, 1);
    cr_expect_eq(st_init(), -1);
    cr_assert_eq(st_init(), 0);
    expect_usable();
}

Test(faults, thread_create_reports_enomem)
{
    cr_assert_eq(st_init(), 0);
    fail_nth(W_MMAP, 1);
    errno = 0;
    cr_expect_null(st_thread_create(return_arg, NULL, 0, 0));
    cr_expect_eq(errno, ENOMEM);
    fail_nth(W_MPROTECT, 1);
    errno = 0;
    cr_expect_null(st_thread_create(return_arg, NULL, 0, 0), "guard page refused");
    cr_expect_eq(errno, ENOMEM);
    expect_usable();
}

Test(faults, heap_reservation_failure_fails_creation)
{
    cr_assert_eq(st_init(), 0);
    /* The first reservation holds 64 slots: the 63rd coroutine needs more. */
    st_thread_t threads[80];
    int created = 0;
    fail_nth(W_REALLOC, 1);
    for (int i = 0; i < 80; i++) {
        threads[i] = st_thread_create(return_arg, NULL, 1, 4096);
        if (threads[i] == NULL) {
            cr_expect_eq(errno, ENOMEM);
            break;
        }
        created++;
    }
    cr_expect_lt(created, 80, "a reservation failure must surface");
    for (int i = 0; i < created; i++) {
        cr_expect_eq(st_thread_join(threads[i], NULL), 0);
    }
    expect_usable();
}

Test(faults, cond_and_mutex_allocation_failures)
{
    cr_assert_eq(st_init(), 0);
    fail_nth(W_MALLOC, 1);
    errno = 0;
    cr_expect_null(st_cond_new());
    cr_expect_eq(errno, ENOMEM);
    fail_nth(W_MALLOC, 1);
    errno = 0;
    cr_expect_null(st_mutex_new());
    cr_expect_eq(errno, ENOMEM);
}

Test(faults, netfd_allocation_failure_keeps_the_fd_open)
{
    cr_assert_eq(st_init(), 0);
    int sv[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    fail_nth(W_MALLOC, 1);
    errno = 0;
    cr_expect_null(st_netfd_open_socket(sv[0]));
    cr_expect_eq(errno, ENOMEM);
    cr_expect_geq(fcntl(sv[0], F_GETFD), 0, "the caller still owns the fd");
    st_netfd_t fd = st_netfd_open_socket(sv[0]);
    cr_expect_not_null(fd);
    cr_expect_eq(st_netfd_close(fd), 0);
    close(sv[1]);
}

Test(faults, accept_closes_the_connection_it_cannot_wrap)
{
    cr_assert_eq(st_init(), 0);
    int lsock = socket(AF_UNIX, SOCK_STREAM, 0);
    cr_assert_geq(lsock, 0);
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    snprintf(addr.sun_path, sizeof(addr.sun_path), "/tmp/st_fault_%d", (int)getpid());
    unlink(addr.sun_path);
    cr_assert_eq(bind(lsock, (struct sockaddr *)&addr, sizeof(addr)), 0);
    cr_assert_eq(listen(lsock, 4), 0);
    st_netfd_t listener = st_netfd_open_socket(lsock);
    cr_assert_not_null(listener);
    int client = socket(AF_UNIX, SOCK_STREAM, 0);
    cr_assert_eq(connect(client, (struct sockaddr *)&addr, sizeof(addr)), 0);
    int before = open_fd_count();
    fail_nth(W_MALLOC, 1);
    errno = 0;
    cr_expect_null(st_accept(listener, NULL, NULL, 100000));
    cr_expect_eq(errno, ENOMEM);
    cr_expect_eq(open_fd_count(), before, "the accepted socket was closed, not leaked");
    unlink(addr.sun_path);
    cr_expect_eq(st_netfd_close(listener), 0);
    close(client);
}

Test(faults, backend_growth_failures_fail_the_wait)
{
    cr_assert_eq(st_set_eventsys(ST_EVENTSYS_ALT), 0);
    cr_assert_eq(st_init(), 0);
    int sv[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    int high = fcntl(sv[0], F_DUPFD, 3000);
    cr_assert_geq(high, 3000);
    struct pollfd pd = {.fd = high, .events = POLLIN};
    fail_nth(W_REALLOC, 1);
    errno = 0;
    cr_expect_eq(st_poll(&pd, 1, 1000), -1, "epoll fd table cannot grow");
    cr_expect_eq(errno, ENOMEM);
    cr_expect_eq(st_poll(&pd, 1, 1000), 0, "and works once memory is back");
}

Test(faults, poll_backend_growth_failure_fails_the_wait)
{
    cr_assert_eq(st_set_eventsys(ST_EVENTSYS_POLL), 0);
    cr_assert_eq(st_init(), 0);
    int sv[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    struct pollfd pd = {.fd = sv[0], .events = POLLIN};
    fail_nth(W_REALLOC, 1);
    errno = 0;
    cr_expect_eq(st_poll(&pd, 1, 1000), -1);
    cr_expect_eq(errno, ENOMEM);
    cr_expect_eq(st_poll(&pd, 1, 1000), 0);
}

Test(faults, long_writev_copy_failure)
{
    cr_assert_eq(st_init(), 0);
    int sv[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    st_netfd_t fd = st_netfd_open_socket(sv[0]);
    cr_assert_not_null(fd);
    char byte = 'x';
    struct iovec iov[40];
    for (int i = 0; i < 40; i++) {
        iov[i].iov_base = &byte;
        iov[i].iov_len = 1;
    }
    fail_nth(W_MALLOC, 1);
    errno = 0;
    cr_expect_eq(st_writev(fd, iov, 40, 1000000), -1);
    cr_expect_eq(errno, ENOMEM);
    cr_expect_eq(st_writev(fd, iov, 40, 1000000), 40);
    cr_expect_eq(st_netfd_close(fd), 0);
    close(sv[1]);
}
