/* verify: st_thread_interrupt wakes every kind of wait with EINTR. */
#include "verify.h"

#include <errno.h>
#include <poll.h>
#include <string.h>

enum { MS = 1000 };

static void *sleep_forever(void *arg)
{
    (void)arg;
    errno = 0;
    VF_CO_CHECK(st_usleep(ST_UTIME_NO_TIMEOUT) == -1 && errno == EINTR);
    errno = 0;
    VF_CO_CHECK(st_sleep(-1) == -1 && errno == EINTR);
    return NULL;
}

static void *sleep_long(void *arg)
{
    st_utime_t start = st_utime();
    (void)arg;
    errno = 0;
    VF_CO_CHECK(st_usleep(VF_LONG_US) == -1 && errno == EINTR);
    VF_CO_CHECK(vf_elapsed(start) < VF_LONG_US);
    /* The old timer must be gone: this sleep lasts its full length. */
    start = st_utime_last_clock();
    VF_CO_CHECK(st_usleep(20 * MS) == 0);
    VF_CO_CHECK(vf_elapsed(start) >= 20 * MS);
    return NULL;
}

/* Interrupt a coroutine twice, letting it reach its next wait in between. */
static int interrupt_twice(st_thread_t thread)
{
    VF_CHECK(thread != NULL);
    vf_settle();
    st_thread_interrupt(thread);
    vf_settle();
    st_thread_interrupt(thread);
    return vf_join_ok(thread);
}

static int check_interrupt_sleep(void)
{
    st_thread_t thread = vf_spawn(sleep_long, NULL);
    VF_CHECK(thread != NULL);
    vf_settle();
    st_thread_interrupt(thread);
    VF_CHECK(vf_join_ok(thread) == 0);
    VF_CHECK(interrupt_twice(vf_spawn(sleep_forever, NULL)) == 0);
    return 0;
}

/* An interrupt that arrives before the wait is kept until the next wait. */
static void *sleep_twice(void *arg)
{
    (void)arg;
    errno = 0;
    VF_CO_CHECK(st_usleep(MS) == -1 && errno == EINTR);
    VF_CO_CHECK(st_usleep(MS) == 0);
    return NULL;
}

static int check_interrupt_sticky(void)
{
    st_thread_t thread = vf_spawn(sleep_twice, NULL);
    VF_CHECK(thread != NULL);
    st_thread_interrupt(thread); /* not started yet */
    VF_CHECK(vf_join_ok(thread) == 0);
    return 0;
}

static void *wait_cond(void *arg)
{
    errno = 0;
    VF_CO_CHECK(st_cond_wait((st_cond_t)arg) == -1 && errno == EINTR);
    errno = 0;
    VF_CO_CHECK(st_cond_timedwait((st_cond_t)arg, VF_LONG_US) == -1 && errno == EINTR);
    return NULL;
}

static int check_interrupt_cond(void)
{
    st_cond_t cond = st_cond_new();
    VF_CHECK(cond != NULL);
    VF_CHECK(interrupt_twice(vf_spawn(wait_cond, cond)) == 0);
    VF_CHECK(st_cond_destroy(cond) == 0); /* the waiter left the queue */
    return 0;
}

static void *wait_mutex(void *arg)
{
    errno = 0;
    VF_CO_CHECK(st_mutex_lock((st_mutex_t)arg) == -1 && errno == EINTR);
    return NULL;
}

static int check_interrupt_mutex(void)
{
    st_mutex_t lock = st_mutex_new();
    st_thread_t thread = NULL;
    VF_CHECK(lock != NULL);
    VF_CHECK(st_mutex_lock(lock) == 0);
    thread = vf_spawn(wait_mutex, lock);
    VF_CHECK(thread != NULL);
    vf_settle();
    st_thread_interrupt(thread);
    VF_CHECK(vf_join_ok(thread) == 0);
    VF_CHECK(st_mutex_unlock(lock) == 0);
    VF_CHECK(st_mutex_trylock(lock) == 0); /* the interrupted waiter did not get it */
    VF_CHECK(st_mutex_unlock(lock) == 0);
    VF_CHECK(st_mutex_destroy(lock) == 0);
    return 0;
}

static void *wait_read(void *arg)
{
    char c = 0;
    errno = 0;
    VF_CO_CHECK(st_read((st_netfd_t)arg, &c, 1, ST_UTIME_NO_TIMEOUT) == -1 && errno == EINTR);
    errno = 0;
    VF_CO_CHECK(st_read((st_netfd_t)arg, &c, 1, VF_LONG_US) == -1 && errno == EINTR);
    return NULL;
}

static void *wait_poll(void *arg)
{
    struct pollfd pd = {st_netfd_fileno((st_netfd_t)arg), POLLIN, 0};
    errno = 0;
    VF_CO_CHECK(st_poll(&pd, 1, ST_UTIME_NO_TIMEOUT) == -1 && errno == EINTR);
    errno = 0;
    VF_CO_CHECK(st_netfd_poll((st_netfd_t)arg, POLLIN, VF_LONG_US) == -1 && errno == EINTR);
    return NULL;
}

static int check_interrupt_io(void)
{
    st_netfd_t pair[2];
    VF_CHECK(vf_socketpair(pair) == 0);
    VF_CHECK(interrupt_twice(vf_spawn(wait_read, pair[0])) == 0);
    VF_CHECK(interrupt_twice(vf_spawn(wait_poll, pair[0])) == 0);
    /* Nobody waits on the fd any more, so it closes. */
    VF_CHECK(st_netfd_close(pair[0]) == 0);
    pair[0] = NULL;
    vf_close_pair(pair);
    return 0;
}

static void *join_forever_sleeper(void *arg)
{
    errno = 0;
    VF_CO_CHECK(st_thread_join((st_thread_t)arg, NULL) == -1 && errno == EINTR);
    return NULL;
}

static void *sleep_until_interrupted(void *arg)
{
    (void)arg;
    VF_CO_CHECK(st_usleep(ST_UTIME_NO_TIMEOUT) == -1 && errno == EINTR);
    return NULL;
}

static int check_interrupt_join(void)
{
    st_thread_t sleeper = vf_spawn(sleep_until_interrupted, NULL);
    st_thread_t joiner = vf_spawn(join_forever_sleeper, sleeper);
    VF_CHECK(sleeper != NULL && joiner != NULL);
    vf_settle();
    st_thread_interrupt(joiner);
    VF_CHECK(vf_join_ok(joiner) == 0);
    st_thread_interrupt(sleeper);
    VF_CHECK(vf_join_ok(sleeper) == 0);
    return 0;
}

const struct vf_check vf_checks_interrupt[] = {
    {"interrupt_sleep", check_interrupt_sleep, VF_AFTER_INIT},
    {"interrupt_sticky", check_interrupt_sticky, VF_AFTER_INIT},
    {"interrupt_cond", check_interrupt_cond, VF_AFTER_INIT},
    {"interrupt_mutex", check_interrupt_mutex, VF_AFTER_INIT},
    {"interrupt_io", check_interrupt_io, VF_AFTER_INIT},
    {"interrupt_join", check_interrupt_join, VF_AFTER_INIT},
    {NULL, NULL, VF_AFTER_INIT},
};
