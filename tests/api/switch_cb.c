/*
 * Context switch callbacks: st_set_switch_in_cb and st_set_switch_out_cb.
 */
#include "st_test.h"

ST_TEST_SUITE(switch_cb);

#define LOG_MAX 256

struct cb_log {
    st_thread_t who[LOG_MAX];
    int n;
};

static struct cb_log in_log, out_log;

static void log_add(struct cb_log *log)
{
    if (log->n < LOG_MAX) {
        log->who[log->n] = st_thread_self();
    }
    log->n++;
}

static void on_in(void)
{
    log_add(&in_log);
}

static void on_out(void)
{
    log_add(&out_log);
}

static void other_cb(void)
{
}

static int count_of(const struct cb_log *log, st_thread_t t)
{
    int i;
    int c = 0;

    for (i = 0; i < log->n && i < LOG_MAX; i++) {
        if (log->who[i] == t) {
            c++;
        }
    }
    return c;
}

Test(switch_cb, setters_return_previous_callback)
{
    st_test_init();
    cr_assert_null(st_set_switch_in_cb(on_in));
    cr_assert_eq(st_set_switch_in_cb(other_cb), on_in);
    cr_assert_eq(st_set_switch_in_cb(NULL), other_cb);
    cr_assert_null(st_set_switch_in_cb(NULL));

    cr_assert_null(st_set_switch_out_cb(on_out));
    cr_assert_eq(st_set_switch_out_cb(other_cb), on_out);
    cr_assert_eq(st_set_switch_out_cb(NULL), other_cb);
    cr_assert_null(st_set_switch_out_cb(NULL));
}

static int in_count_at_start;
static st_thread_t body_self;

static void *body(void *arg)
{
    (void)arg;
    body_self = st_thread_self();
    in_count_at_start = count_of(&in_log, body_self);
    st_thread_yield();
    st_usleep(500);
    return NULL;
}

Test(switch_cb, called_on_every_switch)
{
    st_thread_t me;
    st_thread_t t;
    int i;

    st_test_init();
    me = st_thread_self();
    st_set_switch_in_cb(on_in);
    st_set_switch_out_cb(on_out);
    t = st_test_spawn(body, NULL);
    cr_assert_eq(in_log.n, 0, "callbacks ran without a switch");
    cr_assert_eq(out_log.n, 0);

    st_thread_yield();
    /* The primordial was switched out, t in (first run), and back. */
    cr_assert_geq(count_of(&out_log, me), 1);
    cr_assert_eq(body_self, t);
    cr_assert_eq(in_count_at_start, 1, "switch-in callback not called for a first run");
    cr_assert_eq(in_log.who[in_log.n - 1], me, "last switch-in was not the primordial");

    st_test_join(t);
    cr_assert_eq(st_usleep(1000), 0);
    /* t was switched out at its yield and its sleep, and in after each. */
    cr_assert_geq(count_of(&out_log, t), 2);
    cr_assert_geq(count_of(&in_log, t), 3);
    cr_assert_geq(count_of(&in_log, me), 3);
    /* Only user coroutines appear: never the idle coroutine. */
    for (i = 0; i < in_log.n && i < LOG_MAX; i++) {
        cr_assert(in_log.who[i] == me || in_log.who[i] == t, "switch-in of a foreign coroutine");
    }
    for (i = 0; i < out_log.n && i < LOG_MAX; i++) {
        cr_assert(out_log.who[i] == me || out_log.who[i] == t, "switch-out of a foreign coroutine");
    }
    /* Every switch-out of a coroutine that is still alive is matched by a switch-in. */
    cr_assert_geq(count_of(&in_log, me), count_of(&out_log, me));
}

Test(switch_cb, null_stops_the_calls)
{
    int in_n;
    int out_n;

    st_test_init();
    st_set_switch_in_cb(on_in);
    st_set_switch_out_cb(on_out);
    cr_assert_eq(st_usleep(500), 0);
    cr_assert_gt(in_log.n, 0);
    cr_assert_gt(out_log.n, 0);
    cr_assert_eq(st_set_switch_in_cb(NULL), on_in);
    cr_assert_eq(st_set_switch_out_cb(NULL), on_out);
    in_n = in_log.n;
    out_n = out_log.n;
    st_test_run(body, NULL);
    cr_assert_eq(st_usleep(500), 0);
    cr_assert_eq(in_log.n, in_n);
    cr_assert_eq(out_log.n, out_n);
}

Test(switch_cb, only_one_direction)
{
    st_test_init();
    st_set_switch_out_cb(on_out);
    cr_assert_eq(st_usleep(500), 0);
    st_thread_yield();
    cr_assert_eq(in_log.n, 0);
    cr_assert_eq(out_log.n, 1);
    cr_assert_eq(out_log.who[0], st_thread_self());
}

static int yield_and_sleep_done;

static void *yield_and_sleep(void *arg)
{
    (void)arg;
    st_thread_yield(); /* a switch only if another coroutine is runnable */
    st_usleep(200);
    yield_and_sleep_done = 1; /* its exit switches out before anyone sees this */
    return NULL;
}

/*
 * A coroutine is switched in at its first run and after each wait, and
 * switched out at each wait and once more as it exits: a profiler that
 * pairs the callbacks sees as many of one as of the other.
 */
Test(switch_cb, a_coroutine_is_switched_out_as_often_as_in_exit_included)
{
    int joinable;

    st_test_init();
    st_set_switch_in_cb(on_in);
    st_set_switch_out_cb(on_out);
    for (joinable = 1; joinable >= 0; joinable--) {
        st_thread_t t;

        in_log.n = 0;
        out_log.n = 0;
        yield_and_sleep_done = 0;
        t = st_thread_create(yield_and_sleep, NULL, joinable, 0);
        cr_assert_not_null(t);
        if (joinable) {
            st_test_join(t);
        } else {
            while (!yield_and_sleep_done) {
                cr_assert_eq(st_usleep(1000), 0);
            }
        }
        cr_assert_lt(in_log.n, LOG_MAX);
        /* In at its first run, out at its sleep, in after it, out as it exits. */
        cr_assert_geq(count_of(&in_log, t), 2, "joinable %d: %d switch-ins", joinable,
                      count_of(&in_log, t));
        cr_assert_eq(count_of(&out_log, t), count_of(&in_log, t),
                     "joinable %d: %d switch-outs for %d switch-ins", joinable,
                     count_of(&out_log, t), count_of(&in_log, t));
    }
}

static void *wait_on_cond(void *arg)
{
    cr_assert_eq(st_cond_wait(arg), 0);
    return NULL;
}

/* A joinable coroutine that has run and waits on a new condition variable, stored in *cond. */
static st_thread_t waiter_on_new_cond(st_cond_t *cond)
{
    st_thread_t waiter;

    *cond = st_cond_new();
    cr_assert_not_null(*cond);
    waiter = st_thread_create(wait_on_cond, *cond, 1, 0);
    cr_assert_not_null(waiter);
    st_thread_yield(); /* it runs and waits */
    return waiter;
}

/*
 * Callbacks set while a coroutine waits are called when it resumes, as
 * State Threads checks for them on every switch-in: a profiler started in
 * the middle of a program sees the slices of the coroutines that were
 * already blocked, not only of those created after it.
 */
Test(switch_cb, a_coroutine_blocked_before_the_callbacks_were_set_is_switched_in)
{
    st_thread_t me;
    st_thread_t waiter;
    st_cond_t cond;

    st_test_init();
    me = st_thread_self();
    waiter = waiter_on_new_cond(&cond); /* no callback set yet */
    st_set_switch_in_cb(on_in);
    st_set_switch_out_cb(on_out);
    cr_assert_eq(st_cond_signal(cond), 0);
    cr_assert_eq(st_usleep(1000), 0);
    /* Out of the primordial, in and out of the waiter (its exit), in of the primordial. */
    cr_assert_eq(count_of(&in_log, waiter), 1, "the waiter's resumption was not reported");
    cr_assert_eq(count_of(&out_log, waiter), 1);
    cr_assert_eq(in_log.n, 2);
    cr_assert_eq(out_log.n, 2);
    cr_assert_eq(in_log.who[0], waiter, "in order: the waiter first");
    cr_assert_eq(in_log.who[1], me);
    st_set_switch_in_cb(NULL);
    st_set_switch_out_cb(NULL);
    st_test_join(waiter);
    cr_assert_eq(st_cond_destroy(cond), 0);
}

/* Both callbacks in one ordered log: 'i' or 'o' and the coroutine. */
static struct {
    char what[LOG_MAX];
    st_thread_t who[LOG_MAX];
    int n;
} events;

static void event_add(char what)
{
    if (events.n < LOG_MAX) {
        events.what[events.n] = what;
        events.who[events.n] = st_thread_self();
        events.n++;
    }
}

static void on_in_event(void)
{
    event_add('i');
}

static void on_out_event(void)
{
    event_add('o');
}

static void expect_events(const char *what, const st_thread_t *who)
{
    int i;

    cr_assert_eq(events.n, (int)strlen(what), "%d switches seen, %d expected", events.n,
                 (int)strlen(what));
    for (i = 0; i < events.n; i++) {
        cr_assert_eq(events.what[i], what[i], "switch %d: '%c', '%c' expected", i, events.what[i],
                     what[i]);
        cr_assert_eq(events.who[i], who[i], "switch %d: another coroutine", i);
    }
}

/*
 * As in State Threads, a joinable coroutine that exits while the callbacks
 * are set is switched out as it exits; once joined, it is switched in once
 * more, to release its stack, and out for good. A profiler sees a slice for
 * that last run, and every switch-in keeps its switch-out.
 */
Test(switch_cb, a_joined_coroutine_runs_once_more_to_release_its_stack)
{
    st_thread_t me;
    st_thread_t w;
    st_cond_t cond;

    st_test_init();
    me = st_thread_self();
    w = waiter_on_new_cond(&cond);
    st_set_switch_in_cb(on_in_event);
    st_set_switch_out_cb(on_out_event);
    events.n = 0;
    cr_assert_eq(st_cond_signal(cond), 0);
    cr_assert_eq(st_thread_join(w, NULL), 0);
    {
        const st_thread_t exited[] = {me, w, w, me};
        expect_events("oioi", exited);
    }
    cr_assert_eq(st_thread_join(w, NULL), -1, "joined twice");
    cr_assert_eq(errno, ESRCH);
    st_thread_yield(); /* w runs to release its stack */
    {
        const st_thread_t released[] = {me, w, w, me, me, w, w, me};
        expect_events("oioioioi", released);
    }
    st_thread_yield(); /* nobody else to run: no switch */
    cr_assert_eq(events.n, 8);
    st_set_switch_in_cb(NULL);
    st_set_switch_out_cb(NULL);
    cr_assert_eq(st_cond_destroy(cond), 0);
}

/* Without callbacks the joiner releases the stack itself: no switch back into the zombie. */
Test(switch_cb, without_callbacks_a_joined_coroutine_is_not_run_again)
{
    st_thread_t w;
    st_thread_t again;
    st_cond_t cond;

    st_test_init();
    w = waiter_on_new_cond(&cond);
    cr_assert_eq(st_cond_signal(cond), 0);
    cr_assert_eq(st_thread_join(w, NULL), 0);
    /* Its stack is back already: the next coroutine of that size takes it. */
    again = st_thread_create(wait_on_cond, cond, 1, 0);
    cr_assert_eq(again, w, "the joined coroutine's stack was not released at the join");
    st_thread_yield();
    cr_assert_eq(st_cond_signal(cond), 0);
    cr_assert_eq(st_thread_join(again, NULL), 0);
    cr_assert_eq(st_cond_destroy(cond), 0);
}

/*
 * A joined coroutine still waiting to run and release its stack when the
 * scheduler is destroyed goes with the other coroutines (its stack is
 * unmapped, and nothing runs on it or touches it after), and the pthread
 * can start again.
 */
Test(switch_cb, st_destroy_releases_a_joined_coroutine_that_has_not_run_again)
{
    st_thread_t w;
    st_cond_t cond;

    st_test_init();
    w = waiter_on_new_cond(&cond);
    st_set_switch_in_cb(on_in);
    cr_assert_eq(st_cond_signal(cond), 0);
    cr_assert_eq(st_thread_join(w, NULL), 0); /* w waits on the run queue */
    st_set_switch_in_cb(NULL);
    st_destroy();
    cr_assert_eq(st_cond_destroy(cond), 0);
    cr_assert_eq(st_init(), 0);
    w = waiter_on_new_cond(&cond);
    cr_assert_eq(st_cond_signal(cond), 0);
    cr_assert_eq(st_thread_join(w, NULL), 0);
    cr_assert_eq(st_cond_destroy(cond), 0);
}
