/* verify: condition variables and mutexes. */
#include "verify.h"

#include <errno.h>
#include <string.h>

enum { WAITERS = 3, MS = 1000 };

struct wait_log {
    int order[WAITERS + 1];
    int count;
};

struct waiter {
    struct wait_log *log;
    st_cond_t cond;
    st_mutex_t lock;
    int id;
    st_utime_t timeout;
};

/* ---- condition variables ------------------------------------------------------- */

static void *cond_waiter(void *arg)
{
    struct waiter *w = arg;
    VF_CO_CHECK(st_cond_timedwait(w->cond, w->timeout) == 0);
    w->log->order[w->log->count++] = w->id;
    return NULL;
}

static int spawn_waiters(struct waiter *w, st_thread_t *threads, struct wait_log *log,
                         st_cond_t cond, st_utime_t timeout)
{
    memset(log, 0, sizeof *log);
    for (int i = 0; i < WAITERS; i++) {
        w[i].log = log;
        w[i].cond = cond;
        w[i].lock = NULL;
        w[i].id = i;
        w[i].timeout = timeout;
        threads[i] = vf_spawn(cond_waiter, &w[i]);
        VF_CHECK(threads[i] != NULL);
    }
    vf_settle();
    VF_CHECK(log->count == 0);
    return 0;
}

/* signal wakes exactly one waiter, first come first served. */
static int check_cond_signal(void)
{
    struct waiter w[WAITERS];
    st_thread_t threads[WAITERS] = {NULL};
    struct wait_log log;
    st_cond_t cond = st_cond_new();

    VF_CHECK(cond != NULL);
    VF_CHECK(st_cond_signal(cond) == 0); /* no waiter: nothing happens */
    VF_CHECK(spawn_waiters(w, threads, &log, cond, ST_UTIME_NO_TIMEOUT) == 0);
    for (int i = 0; i < WAITERS; i++) {
        VF_CHECK(st_cond_signal(cond) == 0);
        vf_settle();
        VF_CHECK(log.count == i + 1);
        VF_CHECK(log.order[i] == i);
    }
    for (int i = 0; i < WAITERS; i++) {
        VF_CHECK(vf_join_ok(threads[i]) == 0);
    }
    VF_CHECK(st_cond_destroy(cond) == 0);
    return 0;
}

/* broadcast wakes every waiter, in the order they started waiting. */
static int check_cond_broadcast(void)
{
    struct waiter w[WAITERS];
    st_thread_t threads[WAITERS] = {NULL};
    struct wait_log log;
    st_cond_t cond = st_cond_new();

    VF_CHECK(cond != NULL);
    VF_CHECK(spawn_waiters(w, threads, &log, cond, VF_LONG_US) == 0);
    VF_CHECK(st_cond_broadcast(cond) == 0);
    for (int i = 0; i < WAITERS; i++) {
        VF_CHECK(vf_join_ok(threads[i]) == 0);
    }
    VF_CHECK(log.count == WAITERS);
    for (int i = 0; i < WAITERS; i++) {
        VF_CHECK(log.order[i] == i);
    }
    VF_CHECK(st_cond_broadcast(cond) == 0);
    VF_CHECK(st_cond_destroy(cond) == 0);
    return 0;
}

static int check_cond_timedwait(void)
{
    st_cond_t cond = st_cond_new();
    st_utime_t start = 0;

    VF_CHECK(cond != NULL);
    start = st_utime_last_clock();
    errno = 0;
    VF_CHECK(st_cond_timedwait(cond, VF_SHORT_US) == -1 && errno == ETIME);
    VF_CHECK(vf_elapsed(start) >= VF_SHORT_US);
    VF_CHECK(vf_elapsed(start) < VF_SHORT_US + VF_SLACK_US);
    errno = 0;
    VF_CHECK(st_cond_timedwait(cond, ST_UTIME_NO_WAIT) == -1 && errno == ETIME);
    VF_CHECK(st_cond_destroy(cond) == 0);
    return 0;
}

/* A signal that comes before the timeout wins, and the timer is gone. */
static void *signal_later(void *arg)
{
    VF_CO_CHECK(st_usleep(5 * MS) == 0);
    VF_CO_CHECK(st_cond_signal((st_cond_t)arg) == 0);
    return NULL;
}

static int check_cond_signal_before_timeout(void)
{
    st_cond_t cond = st_cond_new();
    st_thread_t thread = NULL;
    st_utime_t start = 0;

    VF_CHECK(cond != NULL);
    thread = vf_spawn(signal_later, cond);
    VF_CHECK(thread != NULL);
    start = st_utime();
    VF_CHECK(st_cond_timedwait(cond, 200 * MS) == 0);
    VF_CHECK(vf_elapsed(start) < 200 * MS);
    VF_CHECK(vf_join_ok(thread) == 0);
    /* A timer left over from the first wait would end this one early. */
    start = st_utime_last_clock();
    errno = 0;
    VF_CHECK(st_cond_timedwait(cond, 300 * MS) == -1 && errno == ETIME);
    VF_CHECK(vf_elapsed(start) >= 300 * MS);
    VF_CHECK(st_cond_destroy(cond) == 0);
    return 0;
}

static int check_cond_destroy_busy(void)
{
    struct waiter w[WAITERS];
    st_thread_t threads[WAITERS] = {NULL};
    struct wait_log log;
    st_cond_t cond = st_cond_new();

    VF_CHECK(cond != NULL);
    VF_CHECK(spawn_waiters(w, threads, &log, cond, ST_UTIME_NO_TIMEOUT) == 0);
    errno = 0;
    VF_CHECK(st_cond_destroy(cond) == -1 && errno == EBUSY);
    VF_CHECK(st_cond_broadcast(cond) == 0);
    for (int i = 0; i < WAITERS; i++) {
        VF_CHECK(vf_join_ok(threads[i]) == 0);
    }
    VF_CHECK(st_cond_destroy(cond) == 0);
    return 0;
}

/* ---- mutexes ----------------------------------------------------------------------- */

static void *try_foreign_mutex(void *arg)
{
    st_mutex_t lock = arg;
    errno = 0;
    VF_CO_CHECK(st_mutex_trylock(lock) == -1 && errno == EBUSY);
    errno = 0;
    VF_CO_CHECK(st_mutex_unlock(lock) == -1 && errno == EPERM);
    return NULL;
}

static int check_mutex_errors(void)
{
    st_mutex_t lock = st_mutex_new();
    VF_CHECK(lock != NULL);
    VF_CHECK(st_mutex_lock(lock) == 0);
    errno = 0;
    VF_CHECK(st_mutex_lock(lock) == -1 && errno == EDEADLK);
    errno = 0;
    VF_CHECK(st_mutex_trylock(lock) == -1 && errno == EBUSY);
    VF_CHECK(vf_join_ok(vf_spawn(try_foreign_mutex, lock)) == 0);
    errno = 0;
    VF_CHECK(st_mutex_destroy(lock) == -1 && errno == EBUSY);
    VF_CHECK(st_mutex_unlock(lock) == 0);
    errno = 0;
    VF_CHECK(st_mutex_unlock(lock) == -1 && errno == EPERM);
    VF_CHECK(st_mutex_trylock(lock) == 0);
    VF_CHECK(st_mutex_unlock(lock) == 0);
    VF_CHECK(st_mutex_destroy(lock) == 0);
    return 0;
}

static int holders; /* coroutines inside the critical section */

static void *lock_and_log(void *arg)
{
    struct waiter *w = arg;
    VF_CO_CHECK(st_mutex_lock(w->lock) == 0);
    VF_CO_CHECK(holders == 0);
    holders++;
    w->log->order[w->log->count++] = w->id;
    st_thread_yield(); /* others run, but cannot enter */
    holders--;
    VF_CO_CHECK(st_mutex_unlock(w->lock) == 0);
    return NULL;
}

/* Waiters acquire in FIFO order, and unlock hands the mutex over directly. */
static int check_mutex_handoff(void)
{
    enum { PRIMORDIAL_ID = 99 };
    struct waiter w[WAITERS];
    st_thread_t threads[WAITERS] = {NULL};
    struct wait_log log;
    st_mutex_t lock = st_mutex_new();

    VF_CHECK(lock != NULL);
    memset(&log, 0, sizeof log);
    VF_CHECK(st_mutex_lock(lock) == 0);
    for (int i = 0; i < WAITERS; i++) {
        w[i] = (struct waiter){&log, NULL, lock, i, 0};
        threads[i] = vf_spawn(lock_and_log, &w[i]);
        VF_CHECK(threads[i] != NULL);
    }
    vf_settle();
    VF_CHECK(log.count == 0);
    VF_CHECK(st_mutex_unlock(lock) == 0);
    errno = 0;
    VF_CHECK(st_mutex_trylock(lock) == -1 && errno == EBUSY); /* already the first waiter's */
    VF_CHECK(st_mutex_lock(lock) == 0);                       /* queues behind the others */
    log.order[log.count++] = PRIMORDIAL_ID;
    VF_CHECK(st_mutex_unlock(lock) == 0);
    for (int i = 0; i < WAITERS; i++) {
        VF_CHECK(vf_join_ok(threads[i]) == 0);
    }
    VF_CHECK(log.count == WAITERS + 1);
    for (int i = 0; i < WAITERS; i++) {
        VF_CHECK(log.order[i] == i);
    }
    VF_CHECK(log.order[WAITERS] == PRIMORDIAL_ID);
    VF_CHECK(st_mutex_destroy(lock) == 0);
    return 0;
}

const struct vf_check vf_checks_sync[] = {
    {"cond_signal", check_cond_signal, VF_AFTER_INIT},
    {"cond_broadcast", check_cond_broadcast, VF_AFTER_INIT},
    {"cond_timedwait_etime", check_cond_timedwait, VF_AFTER_INIT},
    {"cond_signal_before_timeout", check_cond_signal_before_timeout, VF_AFTER_INIT},
    {"cond_destroy_busy", check_cond_destroy_busy, VF_AFTER_INIT},
    {"mutex_errors", check_mutex_errors, VF_AFTER_INIT},
    {"mutex_handoff", check_mutex_handoff, VF_AFTER_INIT},
    {NULL, NULL, VF_AFTER_INIT},
};
