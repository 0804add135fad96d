/*
 * Mutexes: st_mutex_new, st_mutex_destroy, st_mutex_lock, st_mutex_unlock,
 * st_mutex_trylock.
 */
#include "st_test.h"
#include "st_test_order.h"

ST_TEST_SUITE(mutex);

Test(mutex, lock_unlock)
{
    st_mutex_t m;

    st_test_init();
    m = st_mutex_new();
    cr_assert_not_null(m);
    cr_assert_eq(st_mutex_lock(m), 0);
    cr_assert_eq(st_mutex_unlock(m), 0);
    cr_assert_eq(st_mutex_lock(m), 0);
    cr_assert_eq(st_mutex_unlock(m), 0);
    cr_assert_eq(st_mutex_destroy(m), 0);
}

Test(mutex, relock_by_owner_is_edeadlk)
{
    st_mutex_t m;

    st_test_init();
    m = st_mutex_new();
    cr_assert_not_null(m);
    cr_assert_eq(st_mutex_lock(m), 0);
    ST_ASSERT_FAILS(st_mutex_lock(m), EDEADLK);
    /* Still held exactly once. */
    cr_assert_eq(st_mutex_unlock(m), 0);
    ST_ASSERT_FAILS(st_mutex_unlock(m), EPERM);
    cr_assert_eq(st_mutex_destroy(m), 0);
}

Test(mutex, unlock_unlocked_is_eperm)
{
    st_mutex_t m;

    st_test_init();
    m = st_mutex_new();
    cr_assert_not_null(m);
    ST_ASSERT_FAILS(st_mutex_unlock(m), EPERM);
    cr_assert_eq(st_mutex_destroy(m), 0);
}

struct attempt {
    st_mutex_t m;
    int rc;
    int err;
    int done;
};

static void *try_unlock(void *arg)
{
    struct attempt *a = arg;

    errno = 0;
    a->rc = st_mutex_unlock(a->m);
    a->err = errno;
    a->done = 1;
    return NULL;
}

Test(mutex, unlock_by_non_owner_is_eperm)
{
    struct attempt a = {0};

    st_test_init();
    a.m = st_mutex_new();
    cr_assert_not_null(a.m);
    cr_assert_eq(st_mutex_lock(a.m), 0);
    st_test_run(try_unlock, &a);
    cr_assert_eq(a.rc, -1);
    cr_assert_eq(a.err, EPERM);
    /* The owner still holds it. */
    ST_ASSERT_FAILS(st_mutex_lock(a.m), EDEADLK);
    cr_assert_eq(st_mutex_unlock(a.m), 0);
    cr_assert_eq(st_mutex_destroy(a.m), 0);
}

static void *try_lock(void *arg)
{
    struct attempt *a = arg;

    errno = 0;
    a->rc = st_mutex_trylock(a->m);
    a->err = errno;
    a->done = 1;
    if (a->rc == 0) {
        st_mutex_unlock(a->m);
    }
    return NULL;
}

Test(mutex, trylock)
{
    struct attempt a = {0};
    st_mutex_t m;

    st_test_init();
    m = st_mutex_new();
    cr_assert_not_null(m);
    cr_assert_eq(st_mutex_trylock(m), 0);
    /* Held: even the owner gets EBUSY. */
    ST_ASSERT_FAILS(st_mutex_trylock(m), EBUSY);
    a.m = m;
    st_test_run(try_lock, &a);
    cr_assert_eq(a.rc, -1);
    cr_assert_eq(a.err, EBUSY);
    cr_assert_eq(st_mutex_unlock(m), 0);

    memset(&a, 0, sizeof(a));
    a.m = m;
    st_test_run(try_lock, &a);
    cr_assert_eq(a.rc, 0);
    cr_assert_eq(st_mutex_destroy(m), 0);
}

struct locker {
    st_mutex_t m;
    char letter;
    int rc;
    int err;
    int acquired;
    int hold_us;
};

static void *locker_main(void *arg)
{
    struct locker *l = arg;

    errno = 0;
    l->rc = st_mutex_lock(l->m);
    l->err = errno;
    if (l->rc != 0) {
        return NULL;
    }
    l->acquired = 1;
    order_add(l->letter);
    if (l->hold_us > 0) {
        st_usleep((st_utime_t)l->hold_us);
    }
    cr_expect_eq(st_mutex_unlock(l->m), 0);
    return NULL;
}

static st_thread_t start_locker(struct locker *l, st_mutex_t m, char letter)
{
    st_thread_t t;

    memset(l, 0, sizeof(*l));
    l->m = m;
    l->letter = letter;
    l->rc = 99;
    t = st_test_spawn(locker_main, l);
    return t;
}

Test(mutex, waiters_acquire_fifo_with_direct_handoff)
{
    struct locker l[3];
    st_thread_t t[3];
    st_mutex_t m;
    int i;

    st_test_init();
    order_reset();
    m = st_mutex_new();
    cr_assert_not_null(m);
    cr_assert_eq(st_mutex_lock(m), 0);
    for (i = 0; i < 3; i++) {
        t[i] = start_locker(&l[i], m, (char)('a' + i));
    }
    cr_assert_eq(st_usleep(1000), 0);
    cr_assert_str_eq(order, "", "a waiter got a held mutex");

    cr_assert_eq(st_mutex_unlock(m), 0);
    /* The unlocker keeps running, but the mutex already belongs to a. */
    cr_assert_eq(l[0].acquired, 0);
    ST_ASSERT_FAILS(st_mutex_trylock(m), EBUSY);
    ST_ASSERT_FAILS(st_mutex_unlock(m), EPERM);
    ST_ASSERT_FAILS(st_mutex_destroy(m), EBUSY);

    for (i = 0; i < 3; i++) {
        st_test_join(t[i]);
    }
    cr_assert_str_eq(order, "abc");
    for (i = 0; i < 3; i++) {
        cr_assert_eq(l[i].rc, 0);
    }
    cr_assert_eq(st_mutex_trylock(m), 0);
    cr_assert_eq(st_mutex_unlock(m), 0);
    cr_assert_eq(st_mutex_destroy(m), 0);
}

Test(mutex, late_locker_queues_behind_earlier_waiters)
{
    struct locker l[3];
    st_thread_t t[3];
    st_mutex_t m;
    int i;

    st_test_init();
    order_reset();
    m = st_mutex_new();
    cr_assert_not_null(m);
    cr_assert_eq(st_mutex_lock(m), 0);
    t[0] = start_locker(&l[0], m, 'a');
    t[1] = start_locker(&l[1], m, 'b');
    cr_assert_eq(st_usleep(1000), 0);
    cr_assert_eq(st_mutex_unlock(m), 0);
    /* c asks after the hand-off to a: it must wait behind b. */
    t[2] = start_locker(&l[2], m, 'c');
    for (i = 0; i < 3; i++) {
        st_test_join(t[i]);
    }
    cr_assert_str_eq(order, "abc");
    cr_assert_eq(st_mutex_destroy(m), 0);
}

static int in_section;
static int max_in_section;

static void *critical_worker(void *arg)
{
    st_mutex_t m = arg;
    int i;

    for (i = 0; i < 5; i++) {
        if (st_mutex_lock(m) != 0) {
            return NULL;
        }
        in_section++;
        if (in_section > max_in_section) {
            max_in_section = in_section;
        }
        st_usleep(200);
        st_thread_yield();
        in_section--;
        st_mutex_unlock(m);
        st_thread_yield();
    }
    return (void *)1;
}

Test(mutex, mutual_exclusion_across_sleeps)
{
    st_thread_t t[4];
    st_mutex_t m;
    int i;

    st_test_init();
    m = st_mutex_new();
    cr_assert_not_null(m);
    for (i = 0; i < 4; i++) {
        t[i] = st_test_spawn(critical_worker, m);
    }
    for (i = 0; i < 4; i++) {
        void *ret = NULL;

        cr_assert_eq(st_thread_join(t[i], &ret), 0);
        cr_assert_eq(ret, (void *)1);
    }
    cr_assert_eq(max_in_section, 1);
    cr_assert_eq(in_section, 0);
    cr_assert_eq(st_mutex_destroy(m), 0);
}

Test(mutex, destroy_while_held_is_ebusy)
{
    st_mutex_t m;

    st_test_init();
    m = st_mutex_new();
    cr_assert_not_null(m);
    cr_assert_eq(st_mutex_lock(m), 0);
    ST_ASSERT_FAILS(st_mutex_destroy(m), EBUSY);
    /* Still usable. */
    ST_ASSERT_FAILS(st_mutex_lock(m), EDEADLK);
    cr_assert_eq(st_mutex_unlock(m), 0);
    cr_assert_eq(st_mutex_destroy(m), 0);
}

Test(mutex, destroy_while_waited_is_ebusy)
{
    struct locker l;
    st_thread_t t;
    st_mutex_t m;

    st_test_init();
    m = st_mutex_new();
    cr_assert_not_null(m);
    cr_assert_eq(st_mutex_lock(m), 0);
    t = start_locker(&l, m, 'a');
    st_thread_yield();
    ST_ASSERT_FAILS(st_mutex_destroy(m), EBUSY);
    cr_assert_eq(st_mutex_unlock(m), 0);
    ST_ASSERT_FAILS(st_mutex_destroy(m), EBUSY); /* now held by the waiter */
    st_test_join(t);
    cr_assert_eq(l.rc, 0);
    cr_assert_eq(st_mutex_destroy(m), 0);
}

Test(mutex, interrupt_wakes_waiter_without_the_lock)
{
    struct locker l[2];
    st_thread_t t[2];
    st_mutex_t m;

    st_test_init();
    order_reset();
    m = st_mutex_new();
    cr_assert_not_null(m);
    cr_assert_eq(st_mutex_lock(m), 0);
    t[0] = start_locker(&l[0], m, 'a');
    t[1] = start_locker(&l[1], m, 'b');
    cr_assert_eq(st_usleep(1000), 0);
    st_thread_interrupt(t[0]);
    st_test_join(t[0]);
    cr_assert_eq(l[0].rc, -1);
    cr_assert_eq(l[0].err, EINTR);
    cr_assert_eq(l[0].acquired, 0);
    /* The primordial still owns it; the hand-off now goes to b. */
    ST_ASSERT_FAILS(st_mutex_lock(m), EDEADLK);
    cr_assert_eq(st_mutex_unlock(m), 0);
    st_test_join(t[1]);
    cr_assert_eq(l[1].rc, 0);
    cr_assert_str_eq(order, "b");
    cr_assert_eq(st_mutex_trylock(m), 0);
    cr_assert_eq(st_mutex_unlock(m), 0);
    cr_assert_eq(st_mutex_destroy(m), 0);
}

static void *self_interrupt_lock(void *arg)
{
    struct attempt *a = arg;

    st_thread_interrupt(st_thread_self());
    errno = 0;
    a->rc = st_mutex_lock(a->m);
    a->err = errno;
    /* The flag was consumed: this one succeeds. */
    a->done = st_mutex_lock(a->m);
    if (a->done == 0) {
        st_mutex_unlock(a->m);
    }
    return NULL;
}

Test(mutex, pending_interrupt_fails_uncontended_lock)
{
    struct attempt a = {0};

    st_test_init();
    a.m = st_mutex_new();
    cr_assert_not_null(a.m);
    st_test_run(self_interrupt_lock, &a);
    cr_assert_eq(a.rc, -1);
    cr_assert_eq(a.err, EINTR);
    cr_assert_eq(a.done, 0);
    /* The failed lock did not take the mutex. */
    cr_assert_eq(st_mutex_trylock(a.m), 0);
    cr_assert_eq(st_mutex_unlock(a.m), 0);
    cr_assert_eq(st_mutex_destroy(a.m), 0);
}

Test(mutex, pending_interrupt_fails_contended_lock)
{
    st_mutex_t m;
    struct locker l;
    st_thread_t t;

    st_test_init();
    m = st_mutex_new();
    cr_assert_not_null(m);
    t = start_locker(&l, m, 'a');
    l.hold_us = 5000;
    st_thread_yield(); /* a holds the mutex and sleeps */
    cr_assert_eq(l.acquired, 1);
    st_thread_interrupt(st_thread_self());
    ST_ASSERT_FAILS(st_mutex_lock(m), EINTR);
    cr_assert_eq(st_mutex_lock(m), 0); /* waits for a, then gets it */
    cr_assert_eq(st_mutex_unlock(m), 0);
    st_test_join(t);
    cr_assert_eq(st_mutex_destroy(m), 0);
}

Test(mutex, null_mutex_is_einval)
{
    st_test_init();
    ST_ASSERT_FAILS(st_mutex_lock(NULL), EINVAL);
    ST_ASSERT_FAILS(st_mutex_unlock(NULL), EINVAL);
    ST_ASSERT_FAILS(st_mutex_trylock(NULL), EINVAL);
    ST_ASSERT_FAILS(st_mutex_destroy(NULL), EINVAL);
}
