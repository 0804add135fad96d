/*
 * Initialisation, event system selection and teardown (st_init,
 * st_set_eventsys, st_get_eventsys, st_get_eventsys_name, st_getfdlimit,
 * st_destroy, st_set_primordial_stack).
 */
#include "st_test.h"

#include <sys/select.h>

ST_TEST_SUITE(init_eventsys);

Test(init_eventsys, nothing_selected_before_init)
{
    const char *name = st_get_eventsys_name();

    cr_assert_eq(st_get_eventsys(), -1);
    cr_assert_not_null(name);
    cr_assert_str_eq(name, "");
    cr_assert_null(st_thread_self());
}

Test(init_eventsys, unknown_value_is_einval)
{
    ST_ASSERT_FAILS(st_set_eventsys(99), EINVAL);
    ST_ASSERT_FAILS(st_set_eventsys(-1), EINVAL);
    ST_ASSERT_FAILS(st_set_eventsys(1000000), EINVAL);
    /* A rejected value does not lock the choice. */
    cr_assert_eq(st_get_eventsys(), -1);
    cr_assert_eq(st_set_eventsys(ST_EVENTSYS_SELECT), 0);
    cr_assert_eq(st_init(), 0);
    cr_assert_eq(st_get_eventsys(), ST_EVENTSYS_SELECT);
}

Test(init_eventsys, second_set_before_init_is_ebusy)
{
    cr_assert_eq(st_set_eventsys(ST_EVENTSYS_SELECT), 0);
    ST_ASSERT_FAILS(st_set_eventsys(ST_EVENTSYS_SELECT), EBUSY);
    ST_ASSERT_FAILS(st_set_eventsys(ST_EVENTSYS_DEFAULT), EBUSY);
#ifdef ST_TEST_HAVE_POLL
    ST_ASSERT_FAILS(st_set_eventsys(ST_EVENTSYS_POLL), EBUSY);
#endif
    cr_assert_eq(st_init(), 0);
    /* The first choice stands. */
    cr_assert_eq(st_get_eventsys(), ST_EVENTSYS_SELECT);
    cr_assert_str_eq(st_get_eventsys_name(), "select");
}

#ifdef ST_TEST_HAVE_POLL
Test(init_eventsys, first_choice_wins_over_later_ones)
{
    cr_assert_eq(st_set_eventsys(ST_EVENTSYS_POLL), 0);
    ST_ASSERT_FAILS(st_set_eventsys(ST_EVENTSYS_SELECT), EBUSY);
    cr_assert_eq(st_init(), 0);
    cr_assert_eq(st_get_eventsys(), ST_EVENTSYS_POLL);
    cr_assert_str_eq(st_get_eventsys_name(), "poll");
}
#endif

Test(init_eventsys, set_after_init_is_ebusy)
{
    cr_assert_eq(st_init(), 0);
    ST_ASSERT_FAILS(st_set_eventsys(ST_EVENTSYS_SELECT), EBUSY);
    ST_ASSERT_FAILS(st_set_eventsys(ST_EVENTSYS_DEFAULT), EBUSY);
#ifdef ST_TEST_HAVE_POLL
    ST_ASSERT_FAILS(st_set_eventsys(ST_EVENTSYS_POLL), EBUSY);
#endif
#ifdef ST_TEST_HAVE_EPOLL
    ST_ASSERT_FAILS(st_set_eventsys(ST_EVENTSYS_ALT), EBUSY);
#endif
    cr_assert_eq(st_get_eventsys(), ST_EVENTSYS_SELECT);
}

#ifdef ST_TEST_HAVE_SELECT
Test(init_eventsys, init_without_set_uses_select)
{
    cr_assert_eq(st_init(), 0);
    cr_assert_eq(st_get_eventsys(), ST_EVENTSYS_SELECT);
    cr_assert_str_eq(st_get_eventsys_name(), "select");
    cr_assert_gt(st_getfdlimit(), 0);
    cr_assert_leq(st_getfdlimit(), FD_SETSIZE);
}

Test(init_eventsys, default_means_select)
{
    cr_assert_eq(st_set_eventsys(ST_EVENTSYS_DEFAULT), 0);
    cr_assert_eq(st_init(), 0);
    cr_assert_eq(st_get_eventsys(), ST_EVENTSYS_SELECT);
    cr_assert_str_eq(st_get_eventsys_name(), "select");
}

Test(init_eventsys, select_selected)
{
    cr_assert_eq(st_set_eventsys(ST_EVENTSYS_SELECT), 0);
    cr_assert_eq(st_init(), 0);
    cr_assert_eq(st_get_eventsys(), ST_EVENTSYS_SELECT);
    cr_assert_str_eq(st_get_eventsys_name(), "select");
    cr_assert_gt(st_getfdlimit(), 0);
    cr_assert_leq(st_getfdlimit(), FD_SETSIZE);
}
#endif

#ifdef ST_TEST_HAVE_POLL
Test(init_eventsys, poll_selected)
{
    cr_assert_eq(st_set_eventsys(ST_EVENTSYS_POLL), 0);
    cr_assert_eq(st_init(), 0);
    cr_assert_eq(st_get_eventsys(), ST_EVENTSYS_POLL);
    cr_assert_str_eq(st_get_eventsys_name(), "poll");
    cr_assert_gt(st_getfdlimit(), 0);
}
#endif

#ifdef ST_TEST_HAVE_EPOLL
Test(init_eventsys, alt_selects_epoll)
{
    cr_assert_eq(st_set_eventsys(ST_EVENTSYS_ALT), 0);
    cr_assert_eq(st_init(), 0);
    cr_assert_eq(st_get_eventsys(), ST_EVENTSYS_ALT);
    cr_assert_str_eq(st_get_eventsys_name(), "epoll");
    cr_assert_gt(st_getfdlimit(), 0);
}
#endif

Test(init_eventsys, init_twice_is_harmless)
{
    st_thread_t self;

    cr_assert_eq(st_init(), 0);
    self = st_thread_self();
    cr_assert_not_null(self);
    cr_assert_eq(st_init(), 0);
    cr_assert_eq(st_thread_self(), self);
    cr_assert_eq(st_get_eventsys(), ST_EVENTSYS_SELECT);
    /* The scheduler still works. */
    cr_assert_eq(st_usleep(1000), 0);
}

static int touched;

static void *touch(void *arg)
{
    (void)arg;
    touched++;
    cr_expect_eq(st_usleep(500), 0);
    touched++;
    return (void *)(intptr_t)7;
}

/* Runs coroutines and a socket round trip on the current scheduler. */
static void exercise_scheduler(void)
{
    void *ret = NULL;
    st_netfd_t a;
    st_netfd_t b;
    char buf[4] = {0};
    st_thread_t t;

    touched = 0;
    t = st_test_spawn(touch, NULL);
    cr_assert_not_null(st_thread_create(touch, NULL, 0, 0));
    cr_assert_eq(st_thread_join(t, &ret), 0);
    cr_assert_eq(ret, (void *)(intptr_t)7);
    cr_assert_eq(st_usleep(2000), 0);
    cr_assert_eq(touched, 4);

    st_test_socketpair(&a, &b);
    cr_assert_eq(st_write(a, "abc", 3, ST_UTIME_NO_TIMEOUT), 3);
    cr_assert_eq(st_read(b, buf, sizeof(buf), 1000000), 3);
    cr_assert_str_eq(buf, "abc");
    cr_assert_eq(st_netfd_close(a), 0);
    cr_assert_eq(st_netfd_close(b), 0);
}

static void destroy_and_check(void)
{
    st_destroy();
    cr_assert_eq(st_get_eventsys(), -1);
    cr_assert_str_eq(st_get_eventsys_name(), "");
}

Test(init_eventsys, destroy_then_init_again)
{
    cr_assert_eq(st_init(), 0);
    exercise_scheduler();
    destroy_and_check();

    /* A fresh choice is accepted again after st_destroy(). */
#ifdef ST_TEST_HAVE_POLL
    cr_assert_eq(st_set_eventsys(ST_EVENTSYS_POLL), 0);
    cr_assert_eq(st_init(), 0);
    cr_assert_eq(st_get_eventsys(), ST_EVENTSYS_POLL);
    exercise_scheduler();
    destroy_and_check();
#endif
#ifdef ST_TEST_HAVE_EPOLL
    cr_assert_eq(st_set_eventsys(ST_EVENTSYS_ALT), 0);
    cr_assert_eq(st_init(), 0);
    cr_assert_eq(st_get_eventsys(), ST_EVENTSYS_ALT);
    exercise_scheduler();
    destroy_and_check();
#endif

    /* Without a choice the next st_init() falls back to the default again. */
    cr_assert_eq(st_init(), 0);
    cr_assert_eq(st_get_eventsys(), ST_EVENTSYS_SELECT);
    exercise_scheduler();
    destroy_and_check();
}

Test(init_eventsys, destroy_after_many_coroutines)
{
    int round;

    for (round = 0; round < 3; round++) {
        int i;

        cr_assert_eq(st_init(), 0);
        for (i = 0; i < 50; i++) {
            cr_assert_not_null(st_thread_create(touch, NULL, 0, 0));
        }
        cr_assert_eq(st_usleep(5000), 0);
        st_destroy();
        cr_assert_eq(st_get_eventsys(), -1);
    }
}

Test(init_eventsys, primordial_stack_bounds_are_accepted)
{
    static char region[65536];
    void *ret = NULL;
    st_thread_t t;

    cr_assert_eq(st_init(), 0);
    st_set_primordial_stack(region + sizeof(region), region);
    t = st_test_spawn(touch, NULL);
    cr_assert_eq(st_thread_join(t, &ret), 0);
    cr_assert_eq(ret, (void *)(intptr_t)7);
    cr_assert_eq(st_usleep(1000), 0);
}

static void *never_runs(void *arg)
{
    (void)arg;
    cr_expect_fail("a coroutine created before st_init ran");
    return NULL;
}

Test(init_eventsys, calls_before_init_fail_cleanly)
{
    void *ret = NULL;
    st_thread_t t;

    /* Nothing that needs a scheduler works yet, and nothing crashes. */
    ST_ASSERT_FAILS_NULL(st_thread_create(never_runs, NULL, 1, 0), EINVAL);
    ST_ASSERT_FAILS(st_usleep(1000), EINVAL);
    ST_ASSERT_FAILS(st_thread_join(NULL, NULL), EINVAL);
    ST_ASSERT_FAILS(st_poll(NULL, 0, 1000), EINVAL);
    ST_ASSERT_FAILS_NULL(st_netfd_open(0), EINVAL);
    ST_ASSERT_FAILS_NULL(st_open("/dev/null", O_RDONLY, 0), EINVAL);
    st_thread_exit(NULL); /* returns: there is no coroutine to end */
    st_thread_yield();
    st_thread_interrupt(NULL);
    st_destroy();
    cr_assert_eq(st_get_eventsys(), -1);

    cr_assert_eq(st_init(), 0);
    cr_assert_eq(st_get_eventsys(), ST_EVENTSYS_SELECT);
    t = st_test_spawn(touch, NULL);
    cr_assert_eq(st_thread_join(t, &ret), 0);
    cr_assert_eq(ret, (void *)(intptr_t)7);
}

static void *destroy_from_coroutine(void *arg)
{
    (void)arg;
    st_destroy();
    return (void *)(intptr_t)st_get_eventsys();
}

Test(init_eventsys, destroy_outside_the_primordial_is_refused)
{
    void *ret = NULL;
    st_thread_t t;

    cr_assert_eq(st_init(), 0);
    t = st_test_spawn(destroy_from_coroutine, NULL);
    cr_assert_eq(st_thread_join(t, &ret), 0);
    /* The scheduler survived and still works. */
    cr_assert_eq((intptr_t)ret, ST_EVENTSYS_SELECT);
    cr_assert_eq(st_get_eventsys(), ST_EVENTSYS_SELECT);
    exercise_scheduler();
    destroy_and_check();
}
