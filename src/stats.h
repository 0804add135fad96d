/*
 * State Threads' DEBUG_STATS counters, for programs such as SRS that read
 * them (meson option debug_stats; docs/debugging.md says what each counts).
 *
 * Built with ST__DEBUG_STATS=1 (a compile argument, not a st_config.h entry,
 * so that the test suite can build a second library with the counters from
 * the same sources), the library defines the per-pthread variables State
 * Threads exports under the names it uses, and the macros below keep them.
 * Without it, every macro is nothing (ST__STAT_EAGAIN is its first
 * argument): the default library has neither the symbols nor the cost.
 */
#ifndef ST__STATS_H
#define ST__STATS_H

#include "st.h"

#ifndef ST__DEBUG_STATS
#define ST__DEBUG_STATS 0
#endif

/* Every `unsigned long long _st_stat_NAME`, as X(NAME). */
#define ST__STAT_COUNTERS(X)                                                                       \
    X(recvfrom) X(recvfrom_eagain) X(sendto) X(sendto_eagain) X(read) X(read_eagain) X(readv)      \
    X(readv_eagain) X(writev) X(writev_eagain) X(recvmsg) X(recvmsg_eagain) X(sendmsg)             \
    X(sendmsg_eagain) X(epoll) X(epoll_zero) X(epoll_shake) X(epoll_spin) X(sched_15ms)            \
    X(sched_20ms) X(sched_25ms) X(sched_30ms) X(sched_35ms) X(sched_40ms) X(sched_80ms)            \
    X(sched_160ms) X(sched_s) X(thread_run) X(thread_idle) X(thread_yield) X(thread_yield2)

/* The two `int _st_NAME` gauges, as X(NAME). */
#define ST__STAT_GAUGES(X) X(active_count) X(num_free_stacks)

#if ST__DEBUG_STATS

#include <errno.h>
#include <sys/types.h>

/*
 * Exported although the library is built with hidden visibility; initial-exec
 * like the scheduler pointer, so that a count is one add to thread memory.
 */
#define ST__STAT_STORAGE                                                                           \
    __attribute__((visibility("default"), tls_model("initial-exec"))) _Thread_local

#define ST__STAT_DECLARE_COUNTER(name) extern ST__STAT_STORAGE unsigned long long _st_stat_##name;
#define ST__STAT_DECLARE_GAUGE(name) extern ST__STAT_STORAGE int _st_##name;
ST__STAT_COUNTERS(ST__STAT_DECLARE_COUNTER)
ST__STAT_GAUGES(ST__STAT_DECLARE_GAUGE)

/* Count one more in `_st_stat_NAME`. */
#define ST__STAT_INC(name) ((void)++_st_stat_##name)

/* Set the gauge `_st_NAME` to `value`, or move it by `delta`. */
#define ST__STAT_SET(name, value) ((void)(_st_##name = (value)))
#define ST__STAT_ADD(name, delta) ((void)(_st_##name += (delta)))

/* `n`, the result of one I/O attempt, counted in `_st_stat_NAME` if it was "not ready". */
#define ST__STAT_EAGAIN(n, name) st__stat_eagain((n), &_st_stat_##name)

static inline ssize_t st__stat_eagain(ssize_t n, unsigned long long *counter)
{
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        ++*counter;
    }
    return n;
}

/* A clock check `now`, the one before at `last`: file the gap into a sched bucket. */
#define ST__STAT_CLOCK(last, now) st__stat_clock((last), (now))
void st__stat_clock(st_utime_t last, st_utime_t now);

/* An epoll wait about to be made, for at most `timeout` microseconds. */
#define ST__STAT_EPOLL(timeout) st__stat_epoll(timeout)
void st__stat_epoll(st_utime_t timeout);

#else

#define ST__STAT_INC(name) ((void)0)
#define ST__STAT_SET(name, value) ((void)0)
#define ST__STAT_ADD(name, delta) ((void)0)
#define ST__STAT_EAGAIN(n, name) (n)
#define ST__STAT_CLOCK(last, now) ((void)0)
#define ST__STAT_EPOLL(timeout) ((void)0)

#endif /* ST__DEBUG_STATS */

#endif /* ST__STATS_H */
