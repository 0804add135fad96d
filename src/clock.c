/* Time: the scheduler's clock, the st_time() cache, and sleeping. */
#include <errno.h>
#include <time.h>

#include "scheduler.h"

/*
 * Monotonic microseconds, as State Threads reads on Linux: deadlines must
 * not move when the wall clock is stepped. Its epoch is arbitrary (boot).
 */
static st_utime_t default_utime(void)
{
    struct timespec ts;
    (void)clock_gettime(CLOCK_MONOTONIC, &ts);
    return (st_utime_t)ts.tv_sec * 1000000ULL + (st_utime_t)ts.tv_nsec / 1000ULL;
}

st_utime_t st__utime(const struct st__sched *sched)
{
    if (sched != NULL && sched->utime_fn != NULL) {
        return sched->utime_fn();
    }
    return default_utime();
}

/*
 * A reading taken while a tick's own reading is still put off (scheduler.h,
 * st__sched_tick) becomes the scheduler's: State Threads read the clock in
 * that tick, so its last clock is never later than a reading taken after it.
 */
st_utime_t st_utime(void)
{
    struct st__sched *sched = st__sched_peek();
    if (sched != NULL && sched->clock_stale) {
        return st__sched_last_clock(sched);
    }
    return st__utime(sched);
}

int st_set_utime_function(st_utime_t (*func)(void))
{
    struct st__sched *sched = st__sched_get();
    if (sched == NULL) {
        return -1;
    }
    if (sched->initialized) {
        errno = EINVAL; /* deadlines already set would mix two clocks */
        return -1;
    }
    sched->utime_fn = func;
    return 0;
}

st_utime_t st_utime_last_clock(void)
{
    struct st__sched *sched = st__sched_peek();
    return sched != NULL ? st__sched_last_clock(sched) : 0;
}

int st_timecache_set(int on)
{
    struct st__sched *sched = st__sched_get();
    if (sched == NULL) {
        return -1;
    }
    int was_on = sched->cached_time != 0 ? 1 : 0;
    if (on) {
        sched->cached_time = time(NULL);
        sched->cached_time_at = st__utime(sched);
    } else {
        sched->cached_time = 0;
    }
    return was_on;
}

void st__time_cache_tick(struct st__sched *sched, st_utime_t now)
{
    /* As State Threads: refreshed once more than 999 ms have passed. */
    if (sched->cached_time != 0 && now - sched->cached_time_at > 999000ULL) {
        sched->cached_time = time(NULL);
        sched->cached_time_at = now;
    }
}

time_t st_time(void)
{
    const struct st__sched *sched = st__sched_peek();
    if (sched != NULL && sched->cached_time != 0) {
        return sched->cached_time;
    }
    return time(NULL);
}

int st_usleep(st_utime_t usecs)
{
    struct st__sched *sched = st__sched_running();
    if (sched == NULL) {
        return -1;
    }
    struct _st_thread *me = sched->current;
    if ((me->flags & ST__FL_INTERRUPT) == 0) {
        if (usecs != ST_UTIME_NO_TIMEOUT) {
            me->state = ST__SLEEPING;
            st__sched_sleep_add(sched, me, usecs);
        } else {
            me->state = ST__SUSPENDED; /* only an interrupt wakes it */
        }
        st__sched_switch(sched, me);
    }
    if (st__thread_take_interrupt(me)) {
        return -1;
    }
    return 0;
}

int st_sleep(int secs)
{
    return st_usleep(secs >= 0 ? (st_utime_t)secs * 1000000ULL : ST_UTIME_NO_TIMEOUT);
}
