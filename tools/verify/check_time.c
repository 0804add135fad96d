/* verify: sleeping: wake-up order, durations, st_sleep. */
#include "verify.h"

#include <errno.h>
#include <string.h>

enum { SLEEPERS = 6, MS = 1000 };

struct wake_log {
    int order[SLEEPERS];
    int count;
};

struct sleeper {
    struct wake_log *log;
    int id;
    st_utime_t usecs;
    st_utime_t slept; /* measured from the scheduler clock at the call */
};

static void *sleep_and_log(void *arg)
{
    struct sleeper *s = arg;
    st_utime_t start = st_utime_last_clock();
    VF_CO_CHECK(st_usleep(s->usecs) == 0);
    s->slept = vf_elapsed(start);
    s->log->order[s->log->count++] = s->id;
    return NULL;
}

static int run_sleepers(const st_utime_t *usecs, struct sleeper *sleepers, struct wake_log *log)
{
    st_thread_t threads[SLEEPERS] = {NULL};
    memset(log, 0, sizeof *log);
    for (int i = 0; i < SLEEPERS; i++) {
        sleepers[i].log = log;
        sleepers[i].id = i;
        sleepers[i].usecs = usecs[i];
        sleepers[i].slept = 0;
        threads[i] = vf_spawn(sleep_and_log, &sleepers[i]);
        VF_CHECK(threads[i] != NULL);
    }
    for (int i = 0; i < SLEEPERS; i++) {
        VF_CHECK(vf_join_ok(threads[i]) == 0);
    }
    VF_CHECK(log->count == SLEEPERS);
    return 0;
}

/* Different deadlines wake earliest first, whatever the creation order. */
static int check_sleep_order(void)
{
    static const st_utime_t usecs[SLEEPERS] = {50 * MS, 10 * MS, 40 * MS, 20 * MS, 60 * MS, 30 * MS};
    static const int expected[SLEEPERS] = {1, 3, 5, 2, 0, 4};
    struct sleeper sleepers[SLEEPERS];
    struct wake_log log;

    VF_CHECK(run_sleepers(usecs, sleepers, &log) == 0);
    for (int i = 0; i < SLEEPERS; i++) {
        if (log.order[i] != expected[i]) {
            return vf_fail("wake-up #%d was sleeper %d (%llu us), expected sleeper %d (%llu us)", i,
                           log.order[i], usecs[log.order[i]], expected[i], usecs[expected[i]]);
        }
    }
    for (int i = 0; i < SLEEPERS; i++) {
        VF_CHECK(sleepers[i].slept >= sleepers[i].usecs);
        VF_CHECK(sleepers[i].slept < sleepers[i].usecs + VF_SLACK_US);
    }
    return 0;
}

/* Equal deadlines wake in the order the coroutines went to sleep. */
static int check_sleep_equal(void)
{
    static const st_utime_t usecs[SLEEPERS] = {15 * MS, 15 * MS, 15 * MS, 15 * MS, 15 * MS, 15 * MS};
    struct sleeper sleepers[SLEEPERS];
    struct wake_log log;

    VF_CHECK(run_sleepers(usecs, sleepers, &log) == 0);
    for (int i = 0; i < SLEEPERS; i++) {
        if (log.order[i] != i) {
            return vf_fail("equal deadlines: wake-up #%d was sleeper %d", i, log.order[i]);
        }
    }
    return 0;
}

static int check_sleep_duration(void)
{
    st_utime_t start = st_utime_last_clock();
    VF_CHECK(st_usleep(30 * MS) == 0);
    VF_CHECK(vf_elapsed(start) >= 30 * MS);
    VF_CHECK(vf_elapsed(start) < 30 * MS + VF_SLACK_US);
    start = st_utime_last_clock();
    VF_CHECK(st_usleep(0) == 0);
    VF_CHECK(vf_elapsed(start) < VF_SLACK_US);
    start = st_utime_last_clock();
    VF_CHECK(st_sleep(0) == 0);
    VF_CHECK(vf_elapsed(start) < VF_SLACK_US);
    return 0;
}

/* A sleeping coroutine does not stop others from running. */
static void *count_while_sleeping(void *arg)
{
    int *ticks = arg;
    for (int i = 0; i < 5; i++) {
        (*ticks)++;
        VF_CO_CHECK(st_usleep(MS) == 0);
    }
    return NULL;
}

static int check_sleep_concurrent(void)
{
    int ticks = 0;
    st_thread_t thread = vf_spawn(count_while_sleeping, &ticks);
    VF_CHECK(thread != NULL);
    VF_CHECK(st_usleep(100 * MS) == 0);
    VF_CHECK(ticks == 5);
    VF_CHECK(vf_join_ok(thread) == 0);
    return 0;
}

/* st_sleep(1) sleeps a whole second. */
static int check_st_sleep(void)
{
    st_utime_t start = st_utime_last_clock();
    VF_CHECK(st_sleep(1) == 0);
    VF_CHECK(vf_elapsed(start) >= 1000 * MS);
    VF_CHECK(vf_elapsed(start) < 1000 * MS + VF_SLACK_US);
    return 0;
}

const struct vf_check vf_checks_time[] = {
    {"sleep_order", check_sleep_order, VF_AFTER_INIT},
    {"sleep_equal_deadlines", check_sleep_equal, VF_AFTER_INIT},
    {"sleep_duration", check_sleep_duration, VF_AFTER_INIT},
    {"sleep_concurrent", check_sleep_concurrent, VF_AFTER_INIT},
    {"st_sleep", check_st_sleep, VF_AFTER_INIT},
    {NULL, NULL, VF_AFTER_INIT},
};
