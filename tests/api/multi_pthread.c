/*
 * One independent scheduler per pthread: every pthread that calls st_init()
 * runs its own coroutines, timers and I/O without interfering with others.
 */
#include "st_test.h"

#include <pthread.h>

ST_TEST_SUITE(multi_pthread);

#define WORKERS 3
#define ROUNDS 50

struct world {
    st_thread_t primordial;
    st_thread_t seen_self_before_init;
    int index;
    int init_rc;
    int eventsys;
    int pingpong_ok;
    int cond_ok;
    int sleep_ok;
    int yield_steps;
    int key;
    int key_ok;
    int errors;
};

struct cv_pair {
    st_cond_t cv;
    int value;
    int seen;
};

static void *cond_waiter(void *arg)
{
    struct cv_pair *c = arg;

    while (c->value == 0) {
        if (st_cond_wait(c->cv) != 0) {
            return NULL;
        }
    }
    c->seen = c->value;
    return NULL;
}

static void *yielder(void *arg)
{
    struct world *w = arg;
    int i;

    for (i = 0; i < ROUNDS; i++) {
        w->yield_steps++;
        st_thread_yield();
    }
    return NULL;
}

static void *key_user(void *arg)
{
    struct world *w = arg;
    int local = w->index;

    if (st_thread_getspecific(w->key) != NULL) {
        return NULL;
    }
    if (st_thread_setspecific(w->key, &local) != 0) {
        return NULL;
    }
    st_usleep(1000);
    return st_thread_getspecific(w->key) == &local ? (void *)1 : NULL;
}

static void run_world(struct world *w)
{
    struct st_test_echo pp = {.rounds = ROUNDS};
    struct cv_pair cvp = {0};
    st_netfd_t a;
    st_netfd_t b;
    st_thread_t t[4];
    int sv[2];
    int i;
    st_utime_t before;
    void *ret = NULL;

    w->seen_self_before_init = st_thread_self();
    w->init_rc = st_test_try_init();
    if (w->init_rc != 0) {
        return;
    }
    w->eventsys = st_get_eventsys();
    w->primordial = st_thread_self();

    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0 || !(a = st_netfd_open_socket(sv[0])) ||
        !(b = st_netfd_open_socket(sv[1]))) {
        w->errors++;
        return;
    }
    pp.nfd = b;
    cvp.cv = st_cond_new();
    if (st_key_create(&w->key, NULL) != 0) {
        w->errors++;
    }
    t[0] = st_thread_create(st_test_echo_main, &pp, 1, 0);
    t[1] = st_thread_create(cond_waiter, &cvp, 1, 0);
    t[2] = st_thread_create(yielder, w, 1, 0);
    t[3] = st_thread_create(key_user, w, 1, 0);
    for (i = 0; i < 4; i++) {
        if (t[i] == NULL) {
            w->errors++;
        }
    }
    if (w->errors) {
        return;
    }

    for (i = 0; i < ROUNDS; i++) {
        char msg[16];
        char buf[16];
        int len = snprintf(msg, sizeof(msg), "w%d r%d", w->index, i);

        if (st_write(a, msg, (size_t)len, 5000000) != len ||
            st_read_fully(a, buf, (size_t)len, 5000000) != len || memcmp(buf, msg, (size_t)len) != 0) {
            w->errors++;
        }
        if (i % 10 == 0) {
            st_usleep(100);
        }
    }

    /* Deadlines count from the scheduler's last clock reading. */
    before = st_utime_last_clock();
    if (st_usleep(5000) == 0 && st_utime() >= before + 5000) {
        w->sleep_ok = 1;
    }

    cvp.value = 100 + w->index;
    st_cond_signal(cvp.cv);

    for (i = 0; i < 3; i++) {
        if (st_thread_join(t[i], NULL) != 0) {
            w->errors++;
        }
    }
    if (st_thread_join(t[3], &ret) != 0) {
        w->errors++;
    }
    w->key_ok = ret == (void *)1;
    w->pingpong_ok = pp.echoed == ROUNDS;
    w->cond_ok = cvp.seen == 100 + w->index;
    if (st_thread_self() != w->primordial) {
        w->errors++;
    }
    st_cond_destroy(cvp.cv);
    st_netfd_close(a);
    st_netfd_close(b);
}

static void *pthread_main(void *arg)
{
    run_world(arg);
    return NULL;
}

static void check_world(const struct world *w)
{
    cr_assert_null(w->seen_self_before_init, "pthread %d saw a scheduler before st_init", w->index);
    cr_assert_eq(w->init_rc, 0, "pthread %d: st_init failed", w->index);
    cr_assert_eq(w->eventsys, st_test_expected_eventsys(), "pthread %d", w->index);
    cr_assert_eq(w->errors, 0, "pthread %d: %d errors", w->index, w->errors);
    cr_assert(w->pingpong_ok, "pthread %d: socket ping-pong failed", w->index);
    cr_assert(w->cond_ok, "pthread %d: cond signal failed", w->index);
    cr_assert(w->sleep_ok, "pthread %d: sleep failed", w->index);
    cr_assert_eq(w->yield_steps, ROUNDS, "pthread %d", w->index);
    cr_assert(w->key_ok, "pthread %d: key data failed", w->index);
    /* Each pthread numbers its keys from 0 like a fresh process. */
    cr_assert_eq(w->key, 0, "pthread %d got key %d", w->index, w->key);
}

Test(multi_pthread, independent_schedulers)
{
    struct world w[WORKERS + 1];
    pthread_t tid[WORKERS];
    int i;
    int j;

    memset(w, 0, sizeof(w));
    for (i = 0; i < WORKERS; i++) {
        w[i].index = i;
        cr_assert_eq(pthread_create(&tid[i], NULL, pthread_main, &w[i]), 0);
    }
    /* The test's own thread runs a scheduler at the same time. */
    w[WORKERS].index = WORKERS;
    run_world(&w[WORKERS]);
    for (i = 0; i < WORKERS; i++) {
        cr_assert_eq(pthread_join(tid[i], NULL), 0);
    }
    for (i = 0; i <= WORKERS; i++) {
        check_world(&w[i]);
    }
    for (i = 0; i <= WORKERS; i++) {
        for (j = i + 1; j <= WORKERS; j++) {
            cr_assert_neq(w[i].primordial, w[j].primordial);
        }
    }
}

static void *sleep_long_in_pthread(void *arg)
{
    int *rc = arg;

    if (st_test_try_init() != 0) {
        *rc = -2;
        return NULL;
    }
    *rc = st_usleep(300000);
    return NULL;
}

static void *return_self(void *arg)
{
    (void)arg;
    return st_thread_self();
}

Test(multi_pthread, a_sleeping_pthread_does_not_block_another)
{
    pthread_t tid;
    int other_rc = 99;
    long long start;
    st_thread_t t;
    void *ret = NULL;

    cr_assert_eq(pthread_create(&tid, NULL, sleep_long_in_pthread, &other_rc), 0);
    st_test_init();
    start = st_test_now_us();
    t = st_test_spawn(return_self, NULL);
    cr_assert_eq(st_thread_join(t, &ret), 0);
    cr_assert_eq(ret, t);
    cr_assert_eq(st_usleep(2000), 0);
    cr_assert_lt(st_test_now_us() - start, 250000, "this scheduler waited for the other pthread");
    cr_assert_eq(pthread_join(tid, NULL), 0);
    cr_assert_eq(other_rc, 0);
}
