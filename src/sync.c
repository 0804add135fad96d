/*
 * Condition variables and mutexes.
 *
 * Scheduling is cooperative, so nothing here needs atomics: a check and the
 * assignment after it can never be separated by another coroutine.
 *
 * A cond's wait queue holds only the waiters not yet woken, so a signal
 * wakes its first entry in constant time however many woken waiters have
 * not run yet; those are counted in `woken` until they do. A mutex waiter
 * stays on the queue until it runs and unlinks itself; an unlock skips the
 * ones an interrupt has woken (rare, unlike a burst of signals).
 */
#include "sync.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>

#include "scheduler.h"

void st__cond_waiter_woken(struct _st_thread *thread)
{
    st__list_remove(&thread->wait_links);
    thread->cond->woken++;
}

void st__sync_forget_waiter(struct _st_thread *thread)
{
    if (thread->cond != NULL && st__list_empty(&thread->wait_links)) {
        thread->cond->woken--; /* woken, and now it never runs */
    }
    thread->cond = NULL;
    st__list_remove(&thread->wait_links);
}

/* The running scheduler, for an operation on `object`: NULL with errno if either is missing. */
static struct st__sched *running_for(const void *object)
{
    struct st__sched *sched = st__sched_running();
    if (sched != NULL && object == NULL) {
        errno = EINVAL;
        return NULL;
    }
    return sched;
}

st_cond_t st_cond_new(void)
{
    struct _st_cond *cvar = malloc(sizeof(*cvar));
    if (cvar == NULL) {
        errno = ENOMEM;
        return NULL;
    }
    st__cond_init(cvar);
    return cvar;
}

int st_cond_destroy(st_cond_t cvar)
{
    if (cvar == NULL) {
        errno = EINVAL;
        return -1;
    }
    if (st__cond_has_waiters(cvar)) {
        errno = EBUSY;
        return -1;
    }
    free(cvar);
    return 0;
}

/*
 * How a cond wait ended when a flag says it did not simply get signalled:
 * the deadline passed (ETIME) or the coroutine was interrupted (EINTR,
 * which wins, as in State Threads). Out of line: the fast path of a wait
 * then needs fewer registers.
 */
static __attribute__((noinline, cold)) int cond_wait_flagged(struct _st_thread *me)
{
    int rv = 0;
    if ((me->flags & ST__FL_TIMEDOUT) != 0) {
        me->flags &= ~ST__FL_TIMEDOUT;
        errno = ETIME;
        rv = -1;
    }
    if (st__thread_take_interrupt(me)) {
        rv = -1;
    }
    return rv;
}

/* A wait that cannot start: no running scheduler or no cond (EINVAL), or an interrupt pending. */
static __attribute__((noinline, cold)) int cond_wait_refused(st_cond_t cvar)
{
    struct st__sched *sched = running_for(cvar);
    if (sched != NULL) {
        (void)st__thread_take_interrupt(sched->current);
    }
    return -1;
}

/* The wait of st_cond_timedwait and st_cond_wait, inline in each. */
static inline int cond_wait(st_cond_t cvar, st_utime_t timeout)
{
    struct st__sched *sched = st__this_sched;
    if (__builtin_expect(sched == NULL || !sched->initialized || cvar == NULL, 0)) {
        return cond_wait_refused(cvar);
    }
    struct _st_thread *me = sched->current;
    if (__builtin_expect((me->flags & ST__FL_INTERRUPT) != 0, 0)) {
        return cond_wait_refused(cvar);
    }

    me->state = ST__COND_WAIT;
    me->waiting_on = cvar;
    me->cond = cvar;
    st__list_insert_tail(&cvar->wait_q, &me->wait_links);
    if (timeout != ST_UTIME_NO_TIMEOUT) {
        st__sched_sleep_add(sched, me, timeout);
    }
    st__sched_switch(sched, me);
    /* Whatever woke it took it off the queue. */
    cvar->woken--;
    me->cond = NULL;
    me->waiting_on = NULL;
    if (__builtin_expect((me->flags & (ST__FL_TIMEDOUT | ST__FL_INTERRUPT)) != 0, 0)) {
        return cond_wait_flagged(me);
    }
    return 0;
}

int st_cond_timedwait(st_cond_t cvar, st_utime_t timeout)
{
    return cond_wait(cvar, timeout);
}

/* Its own copy without the deadline: waits without one are the common case. */
int st_cond_wait(st_cond_t cvar)
{
    return cond_wait(cvar, ST_UTIME_NO_TIMEOUT);
}

/* A woken waiter that had a deadline: it no longer has one, and runs. */
static __attribute__((noinline)) int wake_timed(struct st__sched *sched, struct _st_thread *thread)
{
    st__heap_remove(&sched->sleep_q, &thread->timer);
    st__sched_make_runnable(sched, thread);
    return 0;
}

/*
 * Wake the first waiter of a non-empty queue: it leaves the queue now,
 * before it runs. Returns 0. The rare cases are tail calls, so that the
 * common one (no deadline) needs no stack frame.
 */
static inline int wake_first(struct st__sched *sched, st_cond_t cvar)
{
    struct st__list *link = cvar->wait_q.next;
    struct _st_thread *thread = st__thread_from_wait_links(link);
    assert(thread->state == ST__COND_WAIT && thread->cond == cvar);
    st__list_remove(link);
    cvar->woken++; /* as st__cond_waiter_woken(): thread->cond is cvar */
    if (st__heap_node_queued(&thread->timer)) {
        return wake_timed(sched, thread);
    }
    st__sched_make_runnable(sched, thread);
    return 0;
}

static __attribute__((noinline, cold)) int no_cond(void)
{
    errno = EINVAL;
    return -1;
}

int st_cond_signal(st_cond_t cvar)
{
    if (cvar == NULL) {
        return no_cond();
    }
    if (st__list_empty(&cvar->wait_q)) {
        return 0;
    }
    return wake_first(st__sched_peek(), cvar);
}

int st_cond_broadcast(st_cond_t cvar)
{
    if (cvar == NULL) {
        return no_cond();
    }
    struct st__sched *sched = st__sched_peek();
    while (!st__list_empty(&cvar->wait_q)) {
        (void)wake_first(sched, cvar);
    }
    return 0;
}

/*
 * The coroutine that holds `lock`, or NULL (see owner_generation). A
 * scheduler not initialised has generation 0, which no owner carries.
 */
static struct _st_thread *owner_of(const struct _st_mutex *lock, const struct st__sched *sched)
{
    if (lock->owner == NULL || sched == NULL || lock->owner_generation != sched->generation) {
        return NULL;
    }
    return lock->owner;
}

static void set_owner(struct _st_mutex *lock, struct _st_thread *owner,
                      const struct st__sched *sched)
{
    lock->owner = owner;
    lock->owner_generation = sched->generation;
}

st_mutex_t st_mutex_new(void)
{
    struct _st_mutex *lock = malloc(sizeof(*lock));
    if (lock == NULL) {
        errno = ENOMEM;
        return NULL;
    }
    lock->owner = NULL;
    lock->owner_generation = 0;
    st__list_init(&lock->wait_q);
    return lock;
}

int st_mutex_destroy(st_mutex_t lock)
{
    if (lock == NULL) {
        errno = EINVAL;
        return -1;
    }
    if (owner_of(lock, st__sched_peek()) != NULL || !st__list_empty(&lock->wait_q)) {
        errno = EBUSY;
        return -1;
    }
    free(lock);
    return 0;
}

int st_mutex_lock(st_mutex_t lock)
{
    struct st__sched *sched = running_for(lock);
    if (sched == NULL) {
        return -1;
    }
    struct _st_thread *me = sched->current;
    if (st__thread_take_interrupt(me)) {
        return -1;
    }
    struct _st_thread *owner = owner_of(lock, sched);
    if (owner == NULL) {
        set_owner(lock, me, sched);
        return 0;
    }
    if (owner == me) {
        errno = EDEADLK;
        return -1;
    }

    me->state = ST__LOCK_WAIT;
    me->waiting_on = lock;
    st__list_insert_tail(&lock->wait_q, &me->wait_links);
    st__sched_switch(sched, me);
    st__list_remove(&me->wait_links);
    me->waiting_on = NULL;

    /* Ownership handed over wins over an interrupt that came at the same time. */
    assert(lock->owner == me || (me->flags & ST__FL_INTERRUPT) != 0);
    if (lock->owner != me && st__thread_take_interrupt(me)) {
        return -1;
    }
    return 0;
}

int st_mutex_unlock(st_mutex_t lock)
{
    if (lock == NULL) {
        errno = EINVAL;
        return -1;
    }
    struct st__sched *sched = st__sched_peek();
    if (sched == NULL || owner_of(lock, sched) != sched->current) {
        errno = EPERM;
        return -1;
    }
    st__list_for_each(link, &lock->wait_q) {
        struct _st_thread *thread = st__thread_from_wait_links(link);
        if (thread->state == ST__LOCK_WAIT) {
            assert(thread != sched->current);
            /* Direct hand-off: nobody can take the lock before the waiter runs. */
            set_owner(lock, thread, sched);
            st__sched_make_runnable(sched, thread);
            return 0;
        }
    }
    lock->owner = NULL;
    return 0;
}

int st_mutex_trylock(st_mutex_t lock)
{
    struct st__sched *sched = running_for(lock);
    if (sched == NULL) {
        return -1;
    }
    if (owner_of(lock, sched) != NULL) {
        errno = EBUSY;
        return -1;
    }
    set_owner(lock, sched->current, sched);
    return 0;
}
