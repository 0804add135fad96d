/* State Threads' DEBUG_STATS counters (stats.h); nothing unless built with them. */
#include "stats.h"

#if ST__DEBUG_STATS

#define ST__STAT_DEFINE_COUNTER(name) ST__STAT_STORAGE unsigned long long _st_stat_##name;
#define ST__STAT_DEFINE_GAUGE(name) ST__STAT_STORAGE int _st_##name;
ST__STAT_COUNTERS(ST__STAT_DEFINE_COUNTER)
ST__STAT_GAUGES(ST__STAT_DEFINE_GAUGE)

void st__stat_clock(st_utime_t last, st_utime_t now)
{
    /* State Threads' buckets, upper bounds in microseconds (the clock may step back: 0). */
    st_utime_t elapsed = now > last ? now - last : 0;
    if (elapsed <= 10000) {
        ST__STAT_INC(sched_15ms);
    } else if (elapsed <= 21000) {
        ST__STAT_INC(sched_20ms);
    } else if (elapsed <= 25000) {
        ST__STAT_INC(sched_25ms);
    } else if (elapsed <= 30000) {
        ST__STAT_INC(sched_30ms);
    } else if (elapsed <= 35000) {
        ST__STAT_INC(sched_35ms);
    } else if (elapsed <= 40000) {
        ST__STAT_INC(sched_40ms);
    } else if (elapsed <= 80000) {
        ST__STAT_INC(sched_80ms);
    } else if (elapsed <= 160000) {
        ST__STAT_INC(sched_160ms);
    } else {
        ST__STAT_INC(sched_s);
    }
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
