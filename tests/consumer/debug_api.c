/*
 * A program built with DEBUG against State Threads' DEBUG-build functions,
 * which a library built by the make interface's *-debug targets has:
 * _st_show_thread_stack, _st_iterate_threads, and the flag a debugger sets.
 * Two coroutines block (a cond wait, a sleep), a third is created and has
 * not run; the program then iterates directly and at a resumption, and
 * exits 0, printing "ok", when both iterations ran and cleared the flag,
 * and the switch callbacks, set before them, saw the waiting coroutine
 * switched in and out once each until it was joined: an iteration runs no
 * callback. (Once joined, it runs once more to release its stack.)
 * tools/ci/make_check.sh also runs it under gdb, stopping in
 * _st_show_thread_stack, to see each blocked coroutine's own stack there
 * and no stop for the one that never ran.
 */
#include <st.h>

#include <stdio.h>

extern int _st_iterate_threads_flag; /* set from a debugger in State Threads' sessions */

static void *blocked_in_cond_wait(void *arg)
{
    return (void *)(long)st_cond_timedwait(arg, 10 * 1000 * 1000);
}

static void *sleeping_in_usleep(void *arg)
{
    (void)arg;
    st_usleep(100 * 1000);
    return NULL;
}

static void *never_ran_before_the_first_iteration(void *arg)
{
    return arg;
}

static st_thread_t watched;
static int watched_in, watched_out;

static void count_in(void)
{
    watched_in += st_thread_self() == watched;
}

static void count_out(void)
{
    watched_out += st_thread_self() == watched;
}

static int failed(const char *what)
{
    printf("FAIL: %s\n", what);
    return 1;
}

int main(void)
{
    if (st_set_eventsys(ST_EVENTSYS_ALT) != 0 || st_init() != 0) {
        return failed("st_init");
    }
    st_cond_t cond = st_cond_new();
    st_thread_t blocked = st_thread_create(blocked_in_cond_wait, cond, 1, 0);
    st_thread_t sleeper = st_thread_create(sleeping_in_usleep, NULL, 1, 0);
    if (cond == NULL || blocked == NULL || sleeper == NULL || st_usleep(1000) != 0) {
        return failed("the coroutines did not start");
    }
    st_thread_t fresh = st_thread_create(never_ran_before_the_first_iteration, NULL, 1, 0);
    if (fresh == NULL) {
        return failed("st_thread_create");
    }

    watched = blocked;
    st_set_switch_in_cb(count_in);
    st_set_switch_out_cb(count_out);
    _st_show_thread_stack(blocked, "a message"); /* a breakpoint place, nothing more */
    _st_iterate_threads();                       /* the flag is clear: nothing */
    _st_iterate_threads_flag = 1;
    _st_iterate_threads(); /* every stack once, from here */
    if (_st_iterate_threads_flag != 0) {
        return failed("the iteration did not clear the flag");
    }
    _st_iterate_threads_flag = 1;
    if (st_usleep(1000) != 0) { /* every stack once, from main's resumption */
        return failed("st_usleep");
    }
    if (_st_iterate_threads_flag != 0) {
        return failed("the flag set before a switch was not taken by its resumption");
    }

    if (st_cond_signal(cond) != 0 || st_thread_join(blocked, NULL) != 0) {
        return failed("the waiting coroutine did not finish");
    }
    if (watched_in != 1 || watched_out != 1) {
        printf("FAIL: the waiting coroutine was switched in %d and out %d times, not once each\n",
               watched_in, watched_out);
        return 1;
    }
    if (st_thread_join(sleeper, NULL) != 0 || st_thread_join(fresh, NULL) != 0 ||
        st_cond_destroy(cond) != 0) {
        return failed("the coroutines did not finish");
    }
    st_set_switch_in_cb(NULL);
    st_set_switch_out_cb(NULL);
    printf("ok: two iterations, each clearing _st_iterate_threads_flag\n");
    return 0;
}
