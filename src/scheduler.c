#include "scheduler.h"

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>

#include "backend.h"
#include "context.h"
#include "debug_api.h"
#include "st_config.h"

_Thread_local struct st__sched *st__this_sched __attribute__((tls_model("initial-exec")));

/*
 * A pthread that ends without st_destroy() would leak its scheduler: a
 * pthread key's destructor tears it down when the pthread exits.
 */
static pthread_key_t exit_key;
static pthread_once_t exit_key_once = PTHREAD_ONCE_INIT;
static bool exit_key_ok;

static void destroy_at_thread_exit(void *sched)
{
    if (st__this_sched == sched) {
        st_destroy();
    }
}

static void create_exit_key(void)
{
    exit_key_ok = pthread_key_create(&exit_key, destroy_at_thread_exit) == 0;
}

void st__sched_forget(void)
{
    if (exit_key_ok) {
        (void)pthread_setspecific(exit_key, NULL);
    }
    st__this_sched = NULL;
}

struct st__sched *st__sched_get(void)
{
    struct st__sched *sched = st__this_sched;
    if (sched != NULL) {
        return sched;
    }
    sched = calloc(1, sizeof(*sched));
    if (sched == NULL) {
        errno = ENOMEM;
        return NULL;
    }
    st__list_init(&sched->run_q);
    st__list_init(&sched->io_q);
    st__list_init(&sched->zombie_q);
    st__list_init(&sched->threads);
    st__list_init(&sched->netfds);
    st__list_init(&sched->netfd_freelist);
    st__heap_init(&sched->sleep_q);
    st__stack_pool_init(&sched->stacks, ST__STACK_MODE_FREE ? ST__STACK_FREE : ST__STACK_CACHE,
                        ST__GUARD_PAGES);
    sched->osfd_limit = -1;
    st__this_sched = sched;
    (void)pthread_once(&exit_key_once, create_exit_key);
    if (exit_key_ok) {
        (void)pthread_setspecific(exit_key, sched);
    }
    return sched;
}



void st__sched_sleep_add(struct st__sched *sched, struct _st_thread *thread, st_utime_t timeout)
{
    /*
     * With nobody sleeping, the last cycle may be long past (a start-up, a
     * long computation): the first deadline counts from a fresh clock, so
     * that it is not due before the scheduler has even waited.
     */
    if (st__heap_size(&sched->sleep_q) == 0) {
        sched->clock_stale = true;
    }
    st_utime_t now = st__sched_last_clock(sched);
    assert(!st__heap_node_queued(&thread->timer)); /* one deadline at a time */
    st_utime_t due = now + timeout;
    if (due < now) {
        due = ST_UTIME_NO_TIMEOUT - 1; /* saturate instead of wrapping into the past */
    }
    st__heap_insert(&sched->sleep_q, &thread->timer, due);
}


/*
 * Callbacks are for application coroutines, not the idle one nor the
 * library's own (ST__FL_SYSTEM). A coroutine
 * switched out for the last time, as it exits, gets its switch-out too, so
 * every switch-in is matched by one switch-out, as in State Threads.
 */
static bool wants_switch_cb(const struct _st_thread *thread)
{
    return (thread->flags & (ST__FL_IDLE | ST__FL_SYSTEM)) == 0;
}

void st__sched_switch_hooked(struct st__sched *sched, struct _st_thread *me)
{
    if (sched->switch_out_cb != NULL && wants_switch_cb(me)) {
        sched->switch_out_cb();
    }

    struct _st_thread *next = st__sched_pick(sched);
    assert(next->state == ST__RUNNABLE || next == sched->idle);
    next->state = ST__RUNNING;
    sched->current = next;
    if (next != me) {
        /*
         * One that left on the fast path, before a callback was set, does
         * not look for one when it resumes: its switch-in is called here,
         * as it becomes the current coroutine.
         */
        if ((next->flags & ST__FL_SWITCH_IN_OWN) == 0 && sched->switch_in_cb != NULL &&
            wants_switch_cb(next)) {
            sched->switch_in_cb();
        }
        sched->switched_from = me;
        me->flags |= ST__FL_SWITCH_IN_OWN;
        st__fiber_leave(&me->fiber, &next->fiber, (me->flags & ST__FL_DEAD) != 0);
        st__ctx_switch(&me->ctx, &next->ctx);
        me->flags &= ~ST__FL_SWITCH_IN_OWN;
        st__sched_arrived(sched, me);
#if ST__DEBUG_API
        st__debug_resumed(sched, me);
#endif
    }

    if (sched->switch_in_cb != NULL && wants_switch_cb(me)) {
        sched->switch_in_cb();
    }
}

void st__sched_arrived_tools(struct st__sched *sched, struct _st_thread *me)
{
    struct _st_thread *prev = sched->switched_from;
    st__fiber_arrive(&me->fiber, prev != NULL ? &prev->fiber : NULL);
    if (sched->dead_tsan_fiber != NULL) {
        struct st__fiber dead = {.tsan_fiber = sched->dead_tsan_fiber};
        sched->dead_tsan_fiber = NULL;
        st__fiber_destroy(&dead);
    }
}

void st__sched_check_clock(struct st__sched *sched)
{
    st_utime_t now = st__utime(sched);
    ST__STAT_CLOCK(sched->last_clock, now);
    sched->last_clock = now;
    sched->clock_stale = false;
    st__time_cache_tick(sched, now);

    /*
     * Expired coroutines run before those already runnable (a deadline is
     * a priority), and among themselves in deadline order.
     */
    struct st__list expired;
    st__list_init(&expired);
    struct st__heap_node *node;
    while ((node = st__heap_min(&sched->sleep_q)) != NULL && node->due <= now) {
        st__heap_remove(&sched->sleep_q, node);
        struct _st_thread *thread = st__thread_from_timer(node);
        assert(st__thread_waiting(thread) && st__list_empty(&thread->links));
        if (thread->state == ST__COND_WAIT) {
            thread->flags |= ST__FL_TIMEDOUT;
            st__cond_waiter_woken(thread);
        }
        thread->state = ST__RUNNABLE;
        st__list_insert_tail(&expired, &thread->links);
    }
    st__list_splice_head(&sched->run_q, &expired);
}

st_utime_t st__sched_next_timeout(const struct st__sched *sched)
{
    const struct st__heap_node *node = st__heap_min(&sched->sleep_q);
    if (node == NULL) {
        return ST_UTIME_NO_TIMEOUT;
    }
    return node->due > sched->last_clock ? node->due - sched->last_clock : 0;
}
