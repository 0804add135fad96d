/*
 * verify: the conformance runner shared declarations.
 *
 * Every check is a function that runs in a process of its own (forked by the
 * runner) with the scheduler already initialised for the backend under test,
 * unless the check asks to run before st_init. A check returns 0 when it
 * passed; on failure it records why with VF_CHECK (or vf_fail) and returns
 * non-zero. Coroutines started by a check report failures the same way with
 * VF_CO_CHECK; the runner fails the check if any failure was recorded, even
 * when the check function itself returned 0.
 *
 * Only libc and st are used, so the runner works under qemu-user on every CPU.
 */
#ifndef VF_VERIFY_H
#define VF_VERIFY_H

#include <stddef.h>

#include "st.h"

enum vf_flags {
    VF_AFTER_INIT = 0,  /* the runner calls st_set_eventsys + st_init first */
    VF_BEFORE_INIT = 1, /* the check selects the backend and initialises itself */
};

struct vf_check {
    const char *name;
    int (*run)(void);
    enum vf_flags flags;
};

/* The backend the current process tests. */
struct vf_backend {
    const char *name; /* "epoll", "poll", "select" */
    int eventsys;     /* the ST_EVENTSYS_* value that selects it */
};

const struct vf_backend *vf_current_backend(void);
/* Was st built with this backend (by name)? */
int vf_backend_compiled(const char *name);
void vf_set_current_backend(const struct vf_backend *backend);

/* Check tables, each terminated by an entry whose name is NULL. */
extern const struct vf_check vf_checks_init[];
extern const struct vf_check vf_checks_thread[];
extern const struct vf_check vf_checks_context[];
extern const struct vf_check vf_checks_time[];
extern const struct vf_check vf_checks_sync[];
extern const struct vf_check vf_checks_interrupt[];
extern const struct vf_check vf_checks_key[];
extern const struct vf_check vf_checks_io[];
extern const struct vf_check vf_checks_net[];
extern const struct vf_check vf_checks_regs[];

/* ---- failure reporting ------------------------------------------------- */

/* Record the first failure of this process (later ones are ignored). */
int vf_fail_at(const char *file, int line, const char *what);
/* Record a formatted failure reason. Always returns -1. */
int vf_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The first recorded failure, or NULL. */
const char *vf_first_failure(void);

/* A coroutine's return value that says "I recorded a failure". */
extern char vf_co_failed_marker;
#define VF_CO_FAILED ((void *)&vf_co_failed_marker)

/* Fail the check (return from the calling check function) unless cond. */
#define VF_CHECK(cond)                                                                            \
    do {                                                                                          \
        if (!(cond)) {                                                                            \
            return vf_fail_at(__FILE__, __LINE__, #cond);                                         \
        }                                                                                         \
    } while (0)

/* The same inside a coroutine start function (returns VF_CO_FAILED). */
#define VF_CO_CHECK(cond)                                                                         \
    do {                                                                                          \
        if (!(cond)) {                                                                            \
            (void)vf_fail_at(__FILE__, __LINE__, #cond);                                          \
            return VF_CO_FAILED;                                                                  \
        }                                                                                         \
    } while (0)

/* ---- helpers ----------------------------------------------------------- */

/* Start a joinable coroutine with the default stack; NULL on failure. */
st_thread_t vf_spawn(void *(*start)(void *), void *arg);
/* Join and return 0 iff the coroutine returned neither an error nor VF_CO_FAILED. */
int vf_join_ok(st_thread_t thread);
/* Let every runnable coroutine run until none is left (a few yields). */
void vf_settle(void);

/* Microseconds since `since` on st's clock. */
st_utime_t vf_elapsed(st_utime_t since);

/* A connected AF_UNIX stream socket pair, both ends wrapped; 0 on success. */
int vf_socketpair(st_netfd_t pair[2]);
void vf_close_pair(st_netfd_t pair[2]);

/* A bound (and, for SOCK_STREAM, listening) 127.0.0.1 socket with port 0. */
st_netfd_t vf_loopback_socket(int type, unsigned short *port);
/* Fill in a 127.0.0.1:port address. */
void vf_loopback_addr(void *sin, unsigned short port);

/* Fill buf with a pattern derived from seed; check it again later. */
void vf_fill(void *buf, size_t len, unsigned seed);
int vf_matches(const void *buf, size_t len, unsigned seed);

/* Timeouts used throughout: short enough to keep the run fast. */
enum {
    VF_SHORT_US = 20000,       /* a timeout that is expected to expire */
    VF_LONG_US = 5000000,      /* a timeout that must not expire */
    VF_SLACK_US = 2000000,     /* how late a wake-up may be on a loaded machine */
};

#endif /* VF_VERIFY_H */
