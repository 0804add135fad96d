/*
 * Shared by the fault-injection tests (test_faults*.c): the switchboard
 * entry their wrappers consult, and what they check after a failure (the
 * descriptors the process holds, that a call failed with the expected
 * value and errno, and that the scheduler still works).
 */
#ifndef ST_TEST_FAULT_CHECKS_H
#define ST_TEST_FAULT_CHECKS_H

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <stdbool.h>
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

/*
 * One entry of a fault switchboard: a wrapped function passes calls through
 * until it is armed, then fails the nth next call and `times` calls in all.
 */
struct fault {
    int nth;       /* > 0: the nth next call fails */
    int times;     /* how many consecutive calls fail from there */
    int err;
    bool after;    /* let the call happen, then report the failure */
    int op_filter; /* a function with an operation argument: only this one counts (-1: any) */
    int calls;     /* calls seen since it was armed */
};

static inline void fault_arm(struct fault *x, int nth, int err, int times)
{
    *x = (struct fault){.nth = nth, .times = times, .err = err, .op_filter = -1};
}

static inline void fault_disarm(struct fault *x)
{
    x->nth = 0;
    x->times = 0;
}

/* Count a call; true when this one is to fail. */
static inline bool fault_trip(struct fault *x)
{
    x->calls++;
    if (x->nth <= 0) {
        return false;
    }
    if (x->nth > 1) {
        x->nth--;
        return false;
    }
    if (--x->times <= 0) {
        x->nth = 0;
    }
    return true;
}

#endif /* ST_TEST_FAULT_CHECKS_H */
