/*
 * Shared by the fault-injection tests (test_faults_*.c; fault_inject.h is
 * their switchboard): what they check after a failure (the descriptors the
 * process holds, that a call failed with the expected value and errno, and
 * that the scheduler still works), and how they set a scheduler up.
 */
#ifndef ST_TEST_FAULT_CHECKS_H
#define ST_TEST_FAULT_CHECKS_H

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>

#include "st.h"

/* Entries of /proc/self/fd: equal before and after means no descriptor leaked. */
static inline int open_fd_count(void)
{
    DIR *dir = opendir("/proc/self/fd");
    cr_assert_not_null(dir);
    int count = 0;
    while (readdir(dir) != NULL) {
        count++;
    }
    closedir(dir);
    return count;
}

static inline void *return_arg(void *arg)
{
    return arg;
}

/* A coroutine that writes "ping" to `fd` after `delay` microseconds. */
struct writer {
    st_netfd_t fd;
    st_utime_t delay;
};

static inline void *write_later(void *arg)
{
    const struct writer *w = arg;
    (void)st_usleep(w->delay);
    return (void *)(intptr_t)st_write(w->fd, "ping", 4, 1000000);
}

/*
 * Whatever failed before, the scheduler still works: a coroutine runs and is
 * joined, and a read that must wait is woken by a write from another one.
 */
static inline void expect_usable(void)
{
    int token;
    st_thread_t t = st_thread_create(return_arg, &token, 1, 0);
    cr_assert_not_null(t, "scheduler cannot create coroutines: %s", strerror(errno));
    void *rv = NULL;
    cr_assert_eq(st_thread_join(t, &rv), 0);
    cr_assert_eq(rv, &token);

    int sv[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    st_netfd_t a = st_netfd_open_socket(sv[0]);
    st_netfd_t b = st_netfd_open_socket(sv[1]);
    cr_assert(a != NULL && b != NULL, "st_netfd_open_socket: %s", strerror(errno));
    struct writer w = {b, 2000};
    t = st_thread_create(write_later, &w, 1, 0);
    cr_assert_not_null(t);
    char buf[8];
    cr_assert_eq(st_read(a, buf, sizeof(buf), 2000000), 4, "a waiting read is woken: %s",
                 strerror(errno));
    cr_assert_eq(st_thread_join(t, &rv), 0);
    cr_assert_eq((intptr_t)rv, 4);
    cr_assert_eq(st_netfd_close(a), 0, "no waiter left behind on the descriptor");
    cr_assert_eq(st_netfd_close(b), 0);
}

/* Both netfds close (no waiter was left on them), and the scheduler still works. */
static inline void close_both_then_expect_usable(st_netfd_t a, st_netfd_t b)
{
    cr_expect_eq(st_netfd_close(a), 0);
    cr_expect_eq(st_netfd_close(b), 0);
    expect_usable();
}

/* Then st_destroy leaves no descriptor behind: the count taken before st_init. */
static inline void expect_usable_then_clean_destroy(int fds_before)
{
    expect_usable();
    st_destroy();
    cr_expect_eq(open_fd_count(), fds_before);
}

/* `expr` returns -1 with errno `want`. */
#define EXPECT_FAIL(expr, want)                                                                    \
    do {                                                                                           \
        errno = 0;                                                                                 \
        long long r_ = (long long)(expr);                                                          \
        int e_ = errno;                                                                            \
        cr_expect_eq(r_, -1, "%s returned %lld", #expr, r_);                                       \
        cr_expect_eq(e_, (want), "%s: errno %d (%s), want %s", #expr, e_, strerror(e_), #want);    \
    } while (0)

/* `expr` returns NULL with errno `want`. */
#define EXPECT_FAIL_NULL(expr, want)                                                               \
    do {                                                                                           \
        errno = 0;                                                                                 \
        const void *p_ = (const void *)(expr);                                                     \
        int e_ = errno;                                                                            \
        cr_expect_null(p_, "%s returned non-NULL", #expr);                                         \
        cr_expect_eq(e_, (want), "%s: errno %d (%s), want %s", #expr, e_, strerror(e_), #want);    \
    } while (0)

/* Choose the backend (eventsys < 0: the default) and start a scheduler. */
static inline void init_with(int eventsys)
{
    if (eventsys >= 0) {
        cr_assert_eq(st_set_eventsys(eventsys), 0, "backend %d", eventsys);
    }
    cr_assert_eq(st_init(), 0, "st_init: %s", strerror(errno));
}

static const int all_backends[] = {ST_EVENTSYS_ALT, ST_EVENTSYS_POLL, ST_EVENTSYS_SELECT};

/* Two connected stream sockets, both netfds. */
static inline void socketpair_netfds(st_netfd_t *a, st_netfd_t *b)
{
    int sv[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    *a = st_netfd_open_socket(sv[0]);
    *b = st_netfd_open_socket(sv[1]);
    cr_assert(*a != NULL && *b != NULL);
}

#endif /* ST_TEST_FAULT_CHECKS_H */
