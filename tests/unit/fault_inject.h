/*
 * The fault switchboard of the fault-injection tests (test_faults_*.c):
 * one arming state for every entry of fault_table.h, the functions that arm
 * it, and the __real_/__wrap_ prototypes of the wrapped functions, whose
 * wrappers are in fault_inject.c.
 *
 * A wrapped function passes calls through until it is armed; then it fails
 * the nth next call, and `times` calls in all from there, with the armed
 * errno: instead of the call, or after letting it happen (arm_after, for
 * calls whose effect takes place even when they report an error, such as
 * close).
 */
#ifndef ST_TEST_FAULT_INJECT_H
#define ST_TEST_FAULT_INJECT_H

#include <dlfcn.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>

/* F_malloc, F_epoll_ctl, F_io_uring_submit...: which entry of the table. */
enum fault_id {
#define FAULT_WRAP(name, type, failure, parameters, arguments) F_##name,
#define FAULT_WRAP_BY_HAND(name, type, parameters) F_##name,
#define FAULT_POINT(name) F_##name,
#include "fault_table.h"
    F_COUNT
};

#define FAULT_WRAP(name, type, failure, parameters, arguments)                                     \
    type __real_##name parameters;                                                                 \
    type __wrap_##name parameters;
#define FAULT_WRAP_BY_HAND(name, type, parameters)                                                 \
    type __real_##name parameters;                                                                 \
    type __wrap_##name parameters;
#include "fault_table.h"

struct fault {
    int nth;       /* > 0: the nth next call fails */
    int times;     /* how many consecutive calls fail from there */
    int err;
    bool after;    /* let the call happen, then report the failure */
    int op_filter; /* a function with an operation argument: only this one counts (-1: any) */
    int calls;     /* calls seen since it was armed */
};

extern struct fault faults[F_COUNT];

static inline void arm_times(enum fault_id f, int nth, int err, int times)
{
    faults[f] = (struct fault){.nth = nth, .times = times, .err = err, .op_filter = -1};
}

static inline void arm(enum fault_id f, int nth, int err)
{
    arm_times(f, nth, err, 1);
}

static inline void arm_after(enum fault_id f, int nth, int err)
{
    arm(f, nth, err);
    faults[f].after = true;
}

/* Fail the next call whose operation argument is `op` (epoll_ctl's EPOLL_CTL_ADD...). */
static inline void arm_op(enum fault_id f, int op, int err)
{
    arm(f, 1, err);
    faults[f].op_filter = op;
}

static inline void disarm(enum fault_id f)
{
    faults[f].nth = 0;
    faults[f].times = 0;
}

/* Did the armed failures all happen? */
static inline bool fired(enum fault_id f)
{
    return faults[f].nth == 0;
}

enum fault_action { FAULT_PASS, FAULT_FAIL_NOW, FAULT_FAIL_AFTER };

/* Count a call of f and say what becomes of it. */
static inline enum fault_action fault_next(enum fault_id f)
{
    struct fault *x = &faults[f];
    x->calls++;
    if (x->nth <= 0) {
        return FAULT_PASS;
    }
    if (x->nth > 1) {
        x->nth--;
        return FAULT_PASS;
    }
    if (--x->times <= 0) {
        x->nth = 0;
    }
    return x->after ? FAULT_FAIL_AFTER : FAULT_FAIL_NOW;
}

/* When set, RLIMIT_NOFILE is played as unlimited: getrlimit says so, setrlimit changes nothing. */
extern bool fault_nofile_unlimited;

/* What st_init asked io_uring_queue_init_params for. */
struct fault_ring_request {
    unsigned entries;
    unsigned flags;
};

/* What the wrapped dl functions and the liburing shims saw. */
struct fault_log {
    void *last_dlopen_handle;
    void *last_dlclose_handle;
    int dlclose_calls;
    const char *last_dlsym_name;
    int unshimmed_lookups; /* liburing symbols looked up that no shim stands in for */
    int rings_made;        /* rings made and torn down: after a failure or st_destroy, */
    int rings_exited;      /* every ring st made is gone */
    struct fault_ring_request ring_requests[8]; /* attempt by attempt */
    int nring_requests;
    int probes_got;   /* probes io_uring_get_probe_ring handed out, */
    int probes_freed; /* and those given back to io_uring_free_probe */
    int op_res_replaced; /* an operation's result before io_uring_op_res rewrote it */
};

extern struct fault_log fault_log;

#endif /* ST_TEST_FAULT_INJECT_H */
