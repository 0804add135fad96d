/*
 * Condition variables from inside: a waiter that is woken leaves the wait
 * queue at once, whatever woke it (signal, broadcast, deadline, interrupt),
 * so the next signal finds the next waiter first in line instead of walking
 * past every woken waiter that has not run yet.
 */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <time.h>

#include "scheduler.h"
#include "st.h"

enum { WAITERS = 8 };

static int woken_count;

static void *wait_on(void *cvar)
{
    if (st_cond_timedwait(cvar, 1000000) == 0) {
        woken_count++;
    }
    return NULL;
}

static size_t queue_length(st_cond_t cvar)
{
    size_t n = 0;
    for (const struct st__list *l = cvar->wait_q.next; l != &cvar->wait_q; l = l->next) {
        n++;
    }
    return n;
}

/* WAITERS coroutines waiting on a new cond, joinable, in `threads`. */
static st_cond_t start_waiters(st_thread_t *threads)
{
    cr_assert_eq(st_init(), 0);
    st_cond_t cvar = st_cond_new();
    cr_assert_not_null(cvar);
    for (int i = 0; i < WAITERS; i++) {
        threads[i] = st_thread_create(wait_on, cvar, 1, 0);
        cr_assert_not_null(threads[i]);
    }
    cr_assert_eq(st_usleep(1000), 0);
    cr_assert_eq(queue_length(cvar), WAITERS);
    return cvar;
}

static void join_all(st_thread_t *threads, st_cond_t cvar)
{
    for (int i = 0; i < WAITERS; i++) {
        cr_assert_eq(st_thread_join(threads[i], NULL), 0);
    }
    cr_assert_eq(queue_length(cvar), 0);
    cr_assert_eq(st_cond_destroy(cvar), 0);
}

Test(sync, a_signalled_waiter_leaves_the_queue_before_it_runs)
{
    st_thread_t threads[WAITERS];
    st_cond_t cvar = start_waiters(threads);

    for (int k = 1; k <= WAITERS; k++) {
        cr_assert_eq(st_cond_signal(cvar), 0);
        cr_assert_eq(queue_length(cvar), (size_t)(WAITERS - k), "after %d signals", k);
        /* Woken but not run yet: the cond is still in use. */
        cr_assert_eq(st_cond_destroy(cvar), -1);
        cr_assert_eq(errno, EBUSY);
    }
    join_all(threads, cvar);
    cr_assert_eq(woken_count, WAITERS);
}

Test(sync, broadcast_empties_the_queue)
{
    st_thread_t threads[WAITERS];
    st_cond_t cvar = start_waiters(threads);

    cr_assert_eq(st_cond_broadcast(cvar), 0);
    cr_assert_eq(queue_length(cvar), 0);
    join_all(threads, cvar);
    cr_assert_eq(woken_count, WAITERS);
}

Test(sync, interrupted_and_timed_out_waiters_leave_the_queue)
{
    st_thread_t threads[WAITERS];
    st_cond_t cvar = start_waiters(threads);

    st_thread_interrupt(threads[2]);
    cr_assert_eq(queue_length(cvar), WAITERS - 1);
    /* The others' deadlines (1 s) pass while the scheduler does not run. */
    struct timespec pause = {.tv_sec = 1, .tv_nsec = 100000000};
    cr_assert_eq(nanosleep(&pause, NULL), 0);
    st_thread_yield();
    cr_assert_eq(queue_length(cvar), 0);
    join_all(threads, cvar);
    cr_assert_eq(woken_count, 0);
}
