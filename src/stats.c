/* State Threads' DEBUG_STATS counters (stats.h); nothing unless built with them. */
#include "stats.h"

#include <stddef.h>

#if ST__DEBUG_STATS

#define ST__STAT_DEFINE_COUNTER(name) ST__STAT_STORAGE unsigned long long _st_stat_##name;
#define ST__STAT_DEFINE_GAUGE(name) ST__STAT_STORAGE int _st_##name;
ST__STAT_COUNTERS(ST__STAT_DEFINE_COUNTER)
ST__STAT_GAUGES(ST__STAT_DEFINE_GAUGE)

void st__stat_clock(st_utime_t last, st_utime_t now)
{
    /* State Threads' buckets: the upper bounds, in microseconds, of all but the last. */
    static const st_utime_t upper[] = {10000, 21000, 25000, 30000, 35000, 40000, 80000, 160000};
    unsigned long long *const bucket[] = {
        &_st_stat_sched_15ms, &_st_stat_sched_20ms, &_st_stat_sched_25ms,
        &_st_stat_sched_30ms, &_st_stat_sched_35ms, &_st_stat_sched_40ms,
        &_st_stat_sched_80ms, &_st_stat_sched_160ms, &_st_stat_sched_s,
    };
    _Static_assert(sizeof(bucket) / sizeof(bucket[0]) == sizeof(upper) / sizeof(upper[0]) + 1,
                   "one bucket more than bounds");
    st_utime_t elapsed = now > last ? now - last : 0; /* the clock may step back */
    size_t i = 0;
    while (i < sizeof(upper) / sizeof(upper[0]) && elapsed > upper[i]) {
        i++;
    }
    ++*bucket[i];
}

void st__stat_epoll(st_utime_t timeout)
{
    ST__STAT_INC(epoll);
    /*
     * State Threads truncates the wait to whole milliseconds, so a deadline
     * less than 1 ms away made a 0 ms wait (zero); when it was not yet due
     * (shake), it waits 1 ms instead of spinning. st rounds every wait up
     * (st__backend_timeout_ms), which is the same 1 ms wait.
     */
    if (timeout != ST_UTIME_NO_TIMEOUT && timeout < 1000) {
        ST__STAT_INC(epoll_zero);
        if (timeout > 0) {
            ST__STAT_INC(epoll_shake);
        }
    }
}

#endif /* ST__DEBUG_STATS */
