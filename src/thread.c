/* Coroutine lifecycle: create, run, exit, join, interrupt, yield. */
#include "thread.h"

#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>

#include "scheduler.h"
#include "st_config.h"

/* Every coroutine starts here, on its own stack. */
static void thread_main(void *arg)
{
    struct _st_thread *me = arg;
    struct st__sched *sched = st__sched_peek();
    st__sched_arrived(sched, me);
    me->flags &= ~(ST__FL_SWITCH_IN_OWN | ST__FL_FRESH);
    if (sched->switch_in_cb != NULL && (me->flags & (ST__FL_IDLE | ST__FL_SYSTEM)) == 0) {
        sched->switch_in_cb();
    }
    st_thread_exit(me->start(me->arg));
}

struct _st_thread *st__thread_new(struct st__sched *sched, void *(*start)(void *arg), void *arg,
                                  int joinable, size_t stack_size)
{
    /* Reserve the sleep-heap slot now, so going to sleep never allocates. */
    if (st__heap_reserve(&sched->sleep_q, sched->thread_count + 1) != 0) {
        return NULL;
    }
    if (stack_size == 0) {
        stack_size = ST__DEFAULT_STACK_SIZE;
    }
    struct st__stack *stack = NULL;
    if (sched->created < ST__STACKS_AT_ONCE) {
        sched->created++;
        stack = st__stack_acquire(&sched->stacks, stack_size);
    } else {
        stack = st__stack_acquire_quick(&sched->stacks, stack_size);
    }
    if (stack == NULL) {
        return NULL;
    }

    /* The coroutine object sits at the top of its stack, cache-line aligned. */
    char *top = stack->top - sizeof(struct _st_thread);
    top -= (uintptr_t)top & 63U;
    struct _st_thread *thread = (struct _st_thread *)(void *)top;
    /*
     * Field by field rather than one memset of the whole object: a reused
     * stack makes this the hot path of create+join, and a large memset is
     * a slow string instruction.
     */
    thread->state = ST__RUNNABLE;
    thread->flags = ST__FL_SWITCH_IN_OWN | ST__FL_FRESH;
    thread->start = start;
    thread->arg = arg;
    thread->retval = NULL;
    thread->stack = stack;
    st__list_init(&thread->links);
    st__list_init(&thread->wait_links);
    thread->cond = NULL;
    st__heap_node_init(&thread->timer);
    thread->term = NULL;
    if (joinable) {
        st__cond_init(&thread->term_cond);
        thread->term = &thread->term_cond;
    }
    thread->keys_set = 0;
    thread->waiting_on = NULL;
    st__ctx_make(&thread->ctx, thread, thread_main, thread);
    st__fiber_init(&thread->fiber, stack->bottom, (size_t)(stack->top - stack->bottom));

    st__list_insert_tail(&sched->threads, &thread->all_links);
    sched->thread_count++;
    return thread;
}

st_thread_t st_thread_create(void *(*start)(void *arg), void *arg, int joinable, int stack_size)
{
    struct st__sched *sched = st__sched_running();
    if (sched == NULL) {
        return NULL;
    }
    if (start == NULL || stack_size < 0) {
        errno = EINVAL;
        return NULL;
    }
    struct _st_thread *thread = st__thread_new(sched, start, arg, joinable, (size_t)stack_size);
    if (thread == NULL) {
        return NULL;
    }
    sched->active_count++;
    ST__STAT_SET(active_count, sched->active_count);
    st__sched_make_runnable(sched, thread);
    return thread;
}

st_thread_t st_thread_self(void)
{
    const struct st__sched *sched = st__sched_peek();
    return sched != NULL ? sched->current : NULL;
}

/*
 * Forget a finished coroutine and give its stack back. Called by the
 * coroutine itself on its way out (non-joinable, or joined with
 * ST__FL_RESUMES_TO_REAP), or by its joiner, which spares the zombie a
 * switch back just to free itself.
 */
static void reap(struct st__sched *sched, struct _st_thread *thread)
{
    /*
     * The object stays readable while its stack is cached, so a second
     * join of the same handle fails (ESRCH) instead of releasing the stack
     * twice; once the stack is reused the handle names the new coroutine.
     */
    thread->flags |= ST__FL_REAPED;
    st__list_remove(&thread->all_links);
    sched->thread_count--;
    if (thread->stack == NULL) {
        return; /* the primordial: the pthread keeps its stack and fiber */
    }
#ifdef ST__TSAN
    if (thread == sched->current) {
        sched->dead_tsan_fiber = thread->fiber.tsan_fiber; /* still running on it */
    } else {
        st__fiber_destroy(&thread->fiber);
    }
#endif
    /* Safe while still on it: in free mode the unmapping is deferred. */
    st__stack_release(&sched->stacks, thread->stack);
}

void st_thread_exit(void *retval)
{
    struct st__sched *sched = st__sched_running();
    if (sched == NULL) {
        return;
    }
    struct _st_thread *me = sched->current;
    me->retval = retval;
    if (me->keys_set > 0) {
        st__keys_run_destructors(sched, me);
    }
    me->flags |= ST__FL_EXITING;
    sched->active_count--;
    ST__STAT_SET(active_count, sched->active_count);

    me->state = ST__ZOMBIE;
    if (me->term != NULL) {
        /* Stay a zombie until the joiner takes the return value and reaps it. */
        st__list_insert_tail(&sched->zombie_q, &me->links);
        (void)st_cond_signal(me->term);
        if (sched->switch_hooked) {
            me->flags |= ST__FL_RESUMES_TO_REAP;
            st__sched_switch(sched, me);
            /* Joined (st_thread_join): release the stack, and go for good. */
            me->state = ST__ZOMBIE;
            me->flags |= ST__FL_DEAD;
            reap(sched, me);
            st__sched_switch(sched, me);
            abort();
        }
    } else {
        reap(sched, me);
    }
    me->flags |= ST__FL_DEAD;
    st__sched_switch(sched, me);
    abort(); /* a finished coroutine is never resumed */
}

int st_thread_join(st_thread_t thread, void **retvalp)
{
    struct st__sched *sched = st__sched_running();
    if (sched == NULL) {
        return -1;
    }
    if (thread == NULL || thread->term == NULL) {
        errno = EINVAL;
        return -1;
    }
    if ((thread->flags & ST__FL_REAPED) != 0) {
        errno = ESRCH; /* joined already */
        return -1;
    }
    if (thread == sched->current) {
        errno = EDEADLK;
        return -1;
    }
    if (st__cond_has_waiters(thread->term)) {
        errno = EINVAL; /* somebody is joining it already */
        return -1;
    }
    while (thread->state != ST__ZOMBIE) {
        if (st_cond_timedwait(thread->term, ST_UTIME_NO_TIMEOUT) != 0) {
            return -1;
        }
    }
    if (retvalp != NULL) {
        *retvalp = thread->retval;
    }
    st__list_remove(&thread->links);
    if ((thread->flags & ST__FL_RESUMES_TO_REAP) != 0) {
        /* It runs once more and reaps itself (st_thread_exit); a second join fails already. */
        thread->flags |= ST__FL_REAPED;
        thread->state = ST__RUNNABLE;
        st__sched_make_runnable(sched, thread);
        return 0;
    }
    reap(sched, thread);
    return 0;
}

void st_thread_interrupt(st_thread_t thread)
{
    if (thread == NULL || thread->state == ST__ZOMBIE) {
        return;
    }
    thread->flags |= ST__FL_INTERRUPT;
    if (thread->state == ST__RUNNING || thread->state == ST__RUNNABLE) {
        return; /* it sees the flag at its next blocking call */
    }
    assert(st__thread_waiting(thread));
    struct st__sched *sched = st__sched_peek();
    if (thread->state == ST__COND_WAIT) {
        st__cond_waiter_woken(thread);
    }
    st__sched_sleep_del(sched, thread);
    st__sched_make_runnable(sched, thread);
}

void st_thread_yield(void)
{
    struct st__sched *sched = st__sched_running();
    if (sched == NULL) {
        return;
    }
    ST__STAT_INC(thread_yield);
    st__sched_tick(sched);
    if (st__list_empty(&sched->run_q)) {
        return;
    }
    ST__STAT_INC(thread_yield2);
    struct _st_thread *me = sched->current;
    st__sched_make_runnable(sched, me);
    st__sched_switch(sched, me);
}

int st_randomize_stacks(int on)
{
    struct st__sched *sched = st__sched_get();
    if (sched == NULL) {
        return -1;
    }
    int was_on = sched->stacks.randomize ? 1 : 0;
    sched->stacks.randomize = on != 0;
    return was_on;
}
