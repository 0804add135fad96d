/*
 * Bringing a pthread's coroutine world up and down: event-system choice,
 * st_init() and st_destroy(), the idle coroutine, and the settings that may
 * be changed before st_init().
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/resource.h>

#include "backend.h"
#include "netfd.h"
#include "overflow.h"
#include "scheduler.h"
#include "st_config.h"
#include "workers.h"

/* Numbers every st_init() of the process (struct st__sched.generation). */
static atomic_ulong generations;

int st_set_eventsys(int eventsys)
{
    struct st__sched *sched = st__sched_get();
    if (sched == NULL) {
        return -1;
    }
    if (sched->backend != NULL) {
        errno = EBUSY;
        return -1;
    }
    const struct st__backend_ops *backend = st__backend_find(eventsys);
    if (backend == NULL) {
        return -1;
    }
    sched->backend = backend;
    return 0;
}

int st_get_eventsys(void)
{
    const struct st__sched *sched = st__sched_peek();
    return sched != NULL && sched->backend != NULL ? sched->backend->id : -1;
}

const char *st_get_eventsys_name(void)
{
    const struct st__sched *sched = st__sched_peek();
    return sched != NULL && sched->backend != NULL ? sched->backend->name : "";
}

int st_getfdlimit(void)
{
    const struct st__sched *sched = st__sched_peek();
    return sched != NULL ? sched->osfd_limit : -1;
}

static st_switch_cb_t set_switch_cb(bool in, st_switch_cb_t cb)
{
    struct st__sched *sched = st__sched_get();
    if (sched == NULL) {
        return NULL;
    }
    st_switch_cb_t *slot = in ? &sched->switch_in_cb : &sched->switch_out_cb;
    st_switch_cb_t old = *slot;
    *slot = cb;
    sched->switch_hooked = sched->switch_in_cb != NULL || sched->switch_out_cb != NULL;
    return old;
}

st_switch_cb_t st_set_switch_in_cb(st_switch_cb_t cb)
{
    return set_switch_cb(true, cb);
}

st_switch_cb_t st_set_switch_out_cb(st_switch_cb_t cb)
{
    return set_switch_cb(false, cb);
}

/*
 * Where the primordial coroutine's stack is: sanitizers need it to follow
 * switches back to it (otherwise it is learnt at the first switch away).
 */
void st_set_primordial_stack(void *top, void *bottom)
{
    struct st__sched *sched = st__sched_get();
    if (sched == NULL || top == NULL || bottom == NULL) {
        return;
    }
    char *lo = (char *)bottom < (char *)top ? bottom : top;
    char *hi = (char *)bottom < (char *)top ? top : bottom;
    sched->primordial_stack_lo = lo;
    sched->primordial_stack_size = (size_t)(hi - lo);
    if (sched->primordial != NULL) {
        sched->primordial->fiber.stack_lo = lo;
        sched->primordial->fiber.stack_size = sched->primordial_stack_size;
    }
}

/*
 * Process-wide I/O set-up: a write to a closed socket must fail with EPIPE
 * instead of killing the process, and a server wants every fd it may have.
 * A backend that cannot watch every number (select: FD_SETSIZE) lowers the
 * process's limit, soft and hard, to what it can watch, as State Threads
 * does: accept() and socket() then fail with EMFILE where a descriptor the
 * backend cannot watch would come, and a client waits in the listen queue
 * instead of being accepted only to be dropped.
 */
static int io_init(struct st__sched *sched)
{
    struct sigaction sa = {0};
    sa.sa_handler = SIG_IGN;
    if (sigemptyset(&sa.sa_mask) != 0 || sigaction(SIGPIPE, &sa, NULL) != 0) {
        return -1;
    }

    struct rlimit rlim;
    if (getrlimit(RLIMIT_NOFILE, &rlim) != 0) {
        return -1;
    }
    int backend_limit = sched->backend->fd_limit;
    if (backend_limit > 0) {
        rlim_t hard = rlim.rlim_max;
        if (rlim.rlim_max == RLIM_INFINITY || rlim.rlim_max > (rlim_t)backend_limit) {
            rlim.rlim_max = (rlim_t)backend_limit;
        }
        rlim.rlim_cur = rlim.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rlim) != 0) {
            /* Where the hard limit is fixed (valgrind refuses to move it), the soft one does. */
            rlim.rlim_max = hard;
            if (setrlimit(RLIMIT_NOFILE, &rlim) != 0) {
                return -1;
            }
        }
    } else if (rlim.rlim_cur < rlim.rlim_max) {
        rlim.rlim_cur = rlim.rlim_max;
        (void)setrlimit(RLIMIT_NOFILE, &rlim); /* best effort: keep the old limit */
        (void)getrlimit(RLIMIT_NOFILE, &rlim);
    }
    rlim_t limit = rlim.rlim_cur > (rlim_t)INT_MAX ? (rlim_t)INT_MAX : rlim.rlim_cur;
    sched->osfd_limit = (int)limit;
    return 0;
}

/*
 * The idle coroutine runs only when no other coroutine can: it blocks in
 * the backend until I/O is ready or the earliest deadline passes, wakes
 * whoever is due, and hands the CPU on. With nobody left alive, the
 * process is done.
 *
 * While stacks wait to be made or split (scheduler.h, ST__QUIET_US), a
 * wait longer than ST__QUIET_US waits that long first: if nothing at all
 * happened, the process has time to spare, and does a batch of that work;
 * then it only looks for I/O between batches, as long as none comes.
 * Working whenever nothing was ready at that instant would take the CPU
 * from a starved server between the connections of a burst.
 */
static void *idle_main(void *arg)
{
    struct st__sched *sched = arg;
    struct _st_thread *me = sched->idle;
    struct st__stack_pool *stacks = &sched->stacks;
    bool quiet = false;
    while (sched->active_count > 0) {
        st__stack_reclaim(stacks);
        st_utime_t timeout = st__sched_next_timeout(sched);
        bool spare = timeout > ST__QUIET_US &&
                     (st__stack_reserve_short(stacks) || st__stack_unsplit(stacks));
        sched->backend->dispatch(sched, !spare ? timeout : quiet ? 0 : ST__QUIET_US);
        quiet = spare && st__list_empty(&sched->run_q);
        if (quiet) {
            if (st__stack_reserve_short(stacks)) {
                st__stack_prepare(stacks, ST__PREPARES_PER_BATCH);
            } else {
                st__stack_split(stacks, ST__SPLITS_PER_BATCH);
            }
        }
        st__sched_tick(sched);
        me->state = ST__RUNNABLE;
        st__sched_switch(sched, me);
    }
    exit(0);
}

static void release_threads(struct st__sched *sched)
{
    /*
     * First take every coroutine off the wait queues of conds and mutexes:
     * those objects belong to the application and outlive st_destroy, and
     * their queues must not lead into the stacks unmapped below. (All
     * unlinking comes before any unmapping: a neighbour on the same queue
     * may be another coroutine's join condition.)
     */
    st__list_for_each(link, &sched->threads) {
        st__sync_forget_waiter(st__thread_from_all_links(link));
    }
    /* Safe walk: the object, and its link, live on the stack about to go. */
    st__list_for_each_safe(link, next, &sched->threads) {
        struct _st_thread *thread = st__thread_from_all_links(link);
        if (thread->stack != NULL) {
            st__stack_unmap(thread->stack);
        }
    }
    st__list_init(&sched->threads);
    free(sched->primordial);
    sched->primordial = NULL;
    sched->idle = NULL;
    sched->current = NULL;
}

int st_init(void)
{
    struct st__sched *sched = st__sched_get();
    if (sched == NULL) {
        return -1;
    }
    if (sched->initialized) {
        return 0;
    }
    if (sched->backend == NULL) {
        sched->backend = st__backend_find(ST_EVENTSYS_DEFAULT);
        if (sched->backend == NULL) {
            return -1;
        }
    }
    if (io_init(sched) != 0 || sched->backend->init(sched) != 0) {
        return -1;
    }
    sched->last_clock = st__utime(sched);

    struct _st_thread *primordial = calloc(1, sizeof(*primordial));
    if (primordial == NULL) {
        sched->backend->fini(sched);
        errno = ENOMEM;
        return -1;
    }
    primordial->flags = ST__FL_PRIMORDIAL;
    primordial->state = ST__RUNNING;
    st__list_init(&primordial->links);
    st__list_init(&primordial->wait_links);
    primordial->cond = NULL;
    st__heap_node_init(&primordial->timer);
    st__fiber_init_primordial(&primordial->fiber);
    primordial->fiber.stack_lo = sched->primordial_stack_lo;
    primordial->fiber.stack_size = sched->primordial_stack_size;
    st__list_insert_tail(&sched->threads, &primordial->all_links);
    sched->thread_count++;
    sched->primordial = primordial;
    sched->current = primordial;

    struct _st_thread *idle = st__thread_new(sched, idle_main, sched, 0, 0);
    if (idle == NULL) {
        int err = errno;
        release_threads(sched);
        sched->thread_count = 0;
        sched->backend->fini(sched);
        errno = err;
        return -1;
    }
    idle->flags |= ST__FL_IDLE;
    sched->idle = idle;
    sched->generation = atomic_fetch_add(&generations, 1) + 1;
    st__overflow_init(sched);
    sched->active_count = 1;
    ST__STAT_SET(active_count, sched->active_count);
    sched->initialized = true;
    sched->submits_io = sched->backend->submit_io != NULL;
    return 0;
}

void st_destroy(void)
{
    struct st__sched *sched = st__sched_peek();
    if (sched == NULL) {
        return;
    }
    if (sched->initialized) {
        /* Only the primordial runs on a stack that survives the teardown. */
        if (sched->current != sched->primordial) {
            errno = EPERM;
            return;
        }
        sched->backend->fini(sched);
        /* Before the stacks go: workers may be writing into them. */
        st__workers_sched_fini(sched);
        /* The heap's nodes live in the coroutines, on the stacks about to go. */
        st__heap_fini(&sched->sleep_q);
        release_threads(sched);
        st__overflow_fini(sched);
    }
    st__stack_pool_fini(&sched->stacks);
    st__heap_fini(&sched->sleep_q);
    st__netfd_release_all(sched);
    free(sched);
    st__sched_forget();
    ST__STAT_SET(active_count, 0);
}
