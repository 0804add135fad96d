/* The registry of compiled-in backends and what ST_EVENTSYS_* values mean. */
#include "backend.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "scheduler.h"
#include "st_config.h"

extern const struct st__backend_ops st__backend_epoll;
extern const struct st__backend_ops st__backend_poll;
extern const struct st__backend_ops st__backend_select;
extern const struct st__backend_ops st__backend_uring;

/* In order of preference for ST_EVENTSYS_DEFAULT when select is compiled out. */
static const struct st__backend_ops *const compiled[] = {
#if ST__HAVE_SELECT
    &st__backend_select,
#endif
#if ST__HAVE_POLL
    &st__backend_poll,
#endif
#if ST__HAVE_EPOLL
    &st__backend_epoll,
#endif
#if ST__HAVE_IO_URING
    &st__backend_uring, /* only when asked for: never compiled[0] (meson requires another) */
#endif
};

static const struct st__backend_ops *by_id(int id)
{
    for (size_t i = 0; i < sizeof(compiled) / sizeof(compiled[0]); i++) {
        if (compiled[i]->id == id) {
            return compiled[i];
        }
    }
    return NULL;
}

const struct st__backend_ops *st__backend_find(int eventsys)
{
    const struct st__backend_ops *backend = NULL;
    switch (eventsys) {
    case ST_EVENTSYS_DEFAULT:
        /* As in State Threads, the default is select, the most portable. */
        backend = by_id(ST_EVENTSYS_SELECT);
        if (backend == NULL) {
            backend = compiled[0];
        }
        break;
    case ST_EVENTSYS_SELECT:
    case ST_EVENTSYS_POLL:
    case ST_EVENTSYS_ALT:
    case ST_EVENTSYS_IO_URING:
        backend = by_id(eventsys);
        break;
    default:
        break;
    }
    if (backend == NULL) {
        errno = EINVAL;
        return NULL;
    }
    /* A probe that fails says why (io_uring: ENOSYS, EPERM...); keep that. */
    int saved = errno;
    errno = 0;
    if (!backend->supported()) {
        if (errno == 0) {
            errno = EINVAL;
        }
        return NULL;
    }
    errno = saved;
    return backend;
}

_Noreturn void st__backend_wait_broken(const char *call)
{
    int err = errno;
    (void)fprintf(stderr, "st: %s failed: %s (errno %d); no I/O wait can complete\n", call,
                  strerror(err), err);
    abort();
}

static pthread_once_t fork_handler_once = PTHREAD_ONCE_INIT;

static void run_after_fork(void)
{
    /* Only the forking thread lives on in the child: its scheduler, if any. */
    struct st__sched *sched = st__sched_peek();
    if (sched != NULL && sched->backend_state != NULL && sched->backend->after_fork != NULL) {
        sched->backend->after_fork(sched);
    }
}

static void install_fork_handler(void)
{
    (void)pthread_atfork(NULL, NULL, run_after_fork);
}

void st__backend_handle_forks(void)
{
    (void)pthread_once(&fork_handler_once, install_fork_handler);
}

bool st__backend_always_supported(void)
{
    return true;
}

void st__backend_fd_free_nothing(struct st__sched *sched, int osfd)
{
    (void)sched;
    (void)osfd;
}

int st__backend_timeout_ms(st_utime_t timeout)
{
    if (timeout == ST_UTIME_NO_TIMEOUT) {
        return -1;
    }
    /* Round up: waking before the deadline would only spin the idle loop. */
    st_utime_t ms = timeout / 1000 + (timeout % 1000 != 0);
    return ms > (st_utime_t)INT_MAX ? INT_MAX : (int)ms;
}
