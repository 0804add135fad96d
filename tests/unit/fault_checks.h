/*
 * Shared by the fault-injection tests (test_faults*.c): the switchboard
 * entry their wrappers consult, and what they check after a failure (the
 * descriptors the process holds, and that a call failed with the expected
 * value and errno).
 */
#ifndef ST_TEST_FAULT_CHECKS_H
#define ST_TEST_FAULT_CHECKS_H

#include <criterion/criterion.h>
#include <dirent.h>
#include <stdbool.h>
#include <errno.h>
#include <string.h>

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
