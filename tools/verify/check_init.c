/* verify: initialisation, event system selection, clock, callbacks, lifetime. */
#include "verify.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum { NO_SUCH_EVENTSYS = 12345 };

/* Before st_init: nothing selected; bad values refused; selection locks. */
static int check_eventsys(void)
{
    const struct vf_backend *backend = vf_current_backend();
    const char *name = NULL;

    VF_CHECK(st_get_eventsys() == -1);
    name = st_get_eventsys_name();
    VF_CHECK(name != NULL && name[0] == '\0');
    errno = 0;
    VF_CHECK(st_set_eventsys(NO_SUCH_EVENTSYS) == -1 && errno == EINVAL);
    VF_CHECK(st_set_eventsys(backend->eventsys) == 0);
    errno = 0;
    VF_CHECK(st_set_eventsys(backend->eventsys) == -1 && errno == EBUSY);
    VF_CHECK(st_init() == 0);
    VF_CHECK(st_get_eventsys() == backend->eventsys);
    name = st_get_eventsys_name();
    VF_CHECK(name != NULL && strcmp(name, backend->name) == 0);
    errno = 0;
    VF_CHECK(st_set_eventsys(ST_EVENTSYS_DEFAULT) == -1 && errno == EBUSY);
    VF_CHECK(st_init() == 0); /* a second st_init is harmless */
    VF_CHECK(st_thread_self() != NULL);
    VF_CHECK(st_getfdlimit() > 0);
    return 0;
}

/* ST_EVENTSYS_DEFAULT selects select(2) when st has it. */
static int check_eventsys_default(void)
{
    VF_CHECK(st_set_eventsys(ST_EVENTSYS_DEFAULT) == 0);
    VF_CHECK(st_init() == 0);
    if (vf_backend_compiled("select")) {
        VF_CHECK(st_get_eventsys() == ST_EVENTSYS_SELECT);
        VF_CHECK(strcmp(st_get_eventsys_name(), "select") == 0);
    } else {
        VF_CHECK(st_get_eventsys() > 0);
    }
    return 0;
}

/* ---- a user clock ---------------------------------------------------- */

static unsigned long user_clock_calls;

static st_utime_t user_clock(void)
{
    struct timespec ts;
    user_clock_calls++;
    (void)clock_gettime(CLOCK_MONOTONIC, &ts);
    return (st_utime_t)ts.tv_sec * 1000000U + (st_utime_t)ts.tv_nsec / 1000U;
}

static int check_utime_function(void)
{
    const struct vf_backend *backend = vf_current_backend();
    unsigned long before = 0;
    st_utime_t start = 0;

    VF_CHECK(st_set_utime_function(user_clock) == 0);
    VF_CHECK(st_set_eventsys(backend->eventsys) == 0);
    VF_CHECK(st_init() == 0);
    before = user_clock_calls;
    start = st_utime();
    VF_CHECK(user_clock_calls > before);
    VF_CHECK(st_usleep(10000) == 0);
    VF_CHECK(vf_elapsed(start) >= 5000);
    VF_CHECK(st_utime_last_clock() <= st_utime());
    errno = 0;
    VF_CHECK(st_set_utime_function(user_clock) == -1 && errno == EINVAL);
    return 0;
}

static int check_time_functions(void)
{
    st_utime_t a = st_utime();
    st_utime_t b = st_utime();
    time_t now = time(NULL);
    time_t st_now = st_time();

    VF_CHECK(b >= a);
    VF_CHECK(st_utime_last_clock() <= b);
    VF_CHECK(st_now >= now - 1 && st_now <= now + 1);
    VF_CHECK(st_timecache_set(1) == 0);
    VF_CHECK(st_timecache_set(1) == 1);
    st_now = st_time();
    VF_CHECK(st_now >= now - 1 && st_now <= now + 2);
    VF_CHECK(st_timecache_set(0) == 1);
    return 0;
}

/* ---- switch callbacks -------------------------------------------------- */

static int switched_in;
static int switched_out;

static void on_switch_in(void)
{
    switched_in++;
}

static void on_switch_out(void)
{
    switched_out++;
}

static void *yield_three_times(void *arg)
{
    (void)arg;
    for (int i = 0; i < 3; i++) {
        st_thread_yield();
    }
    return NULL;
}

/* Two coroutines that yield to each other switch in and out several times. */
static int run_yielders(void)
{
    st_thread_t a = vf_spawn(yield_three_times, NULL);
    st_thread_t b = vf_spawn(yield_three_times, NULL);
    VF_CHECK(a != NULL && b != NULL);
    VF_CHECK(vf_join_ok(a) == 0 && vf_join_ok(b) == 0);
    return 0;
}

static int check_switch_callbacks(void)
{
    int in_before = 0;
    int out_before = 0;
    VF_CHECK(st_set_switch_in_cb(on_switch_in) == NULL);
    VF_CHECK(st_set_switch_out_cb(on_switch_out) == NULL);
    VF_CHECK(run_yielders() == 0);
    VF_CHECK(switched_in >= 3);
    VF_CHECK(switched_out >= 3);
    VF_CHECK(st_set_switch_in_cb(NULL) == on_switch_in);
    VF_CHECK(st_set_switch_out_cb(NULL) == on_switch_out);
    in_before = switched_in;
    out_before = switched_out;
    VF_CHECK(run_yielders() == 0);
    VF_CHECK(switched_in == in_before && switched_out == out_before);
    return 0;
}

/* ---- randomised stacks ------------------------------------------------- */

static void *note_stack_address(void *arg)
{
    volatile char here = 0;
    *(uintptr_t *)arg = (uintptr_t)&here;
    st_thread_yield();
    return NULL;
}

static int check_randomize_stacks(void)
{
    enum { N = 8 };
    uintptr_t where[N];
    st_thread_t threads[N] = {NULL};

    VF_CHECK(st_randomize_stacks(1) == 0);
    VF_CHECK(st_randomize_stacks(1) == 1);
    for (int i = 0; i < N; i++) {
        where[i] = 0;
        threads[i] = vf_spawn(note_stack_address, &where[i]);
        VF_CHECK(threads[i] != NULL);
    }
    for (int i = 0; i < N; i++) {
        VF_CHECK(vf_join_ok(threads[i]) == 0);
        VF_CHECK(where[i] != 0);
    }
    for (int i = 1; i < N; i++) {
        VF_CHECK(where[i] != where[0]);
    }
    VF_CHECK(st_randomize_stacks(0) == 1);
    return 0;
}

/* ---- the process outlives its primordial coroutine ---------------------- */

static void *late_writer(void *arg)
{
    const int *fd = arg;
    if (st_usleep(VF_SHORT_US) == 0) {
        (void)write(*fd, "late", 4);
    }
    return NULL;
}

static void primordial_exit_child(int fd)
{
    static int write_fd;
    write_fd = fd;
    (void)alarm(5);
    if (st_set_eventsys(vf_current_backend()->eventsys) != 0 || st_init() != 0) {
        _exit(3);
    }
    if (st_thread_create(late_writer, &write_fd, 0, 0) == NULL) {
        _exit(4);
    }
    st_thread_exit(NULL);
    (void)write(fd, "BAD", 3); /* never reached */
    _exit(5);
}

static int check_primordial_exit(void)
{
    char buf[16] = {0};
    int fds[2];
    int status = 0;
    pid_t pid = 0;

    VF_CHECK(pipe(fds) == 0);
    pid = fork();
    VF_CHECK(pid >= 0);
    if (pid == 0) {
        (void)close(fds[0]);
        primordial_exit_child(fds[1]);
    }
    (void)close(fds[1]);
    VF_CHECK(waitpid(pid, &status, 0) == pid);
    VF_CHECK(read(fds[0], buf, sizeof buf - 1) == 4);
    (void)close(fds[0]);
    VF_CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    VF_CHECK(strcmp(buf, "late") == 0);
    return 0;
}

/* ---- one scheduler per pthread ------------------------------------------- */

struct pthread_job {
    int eventsys;
    int woke;
    st_thread_t self;
    int rc;
    pthread_barrier_t *both_started;
};

static void *count_wakeup(void *arg)
{
    struct pthread_job *job = arg;
    if (st_usleep(5000) == 0) {
        job->woke++;
    }
    return NULL;
}

static void *pthread_body(void *arg)
{
    enum { N = 4 };
    struct pthread_job *job = arg;
    st_thread_t threads[N] = {NULL};
    job->rc = -1;
    int init_rc = st_set_eventsys(job->eventsys) == 0 ? st_init() : -1;
    job->self = st_thread_self();
    /*
     * Both schedulers must be alive when their coroutines are compared: a
     * pthread's scheduler is freed when it exits, and its memory reused.
     */
    (void)pthread_barrier_wait(job->both_started);
    if (init_rc != 0) {
        return NULL;
    }
    for (int i = 0; i < N; i++) {
        threads[i] = st_thread_create(count_wakeup, job, 1, 0);
    }
    for (int i = 0; i < N; i++) {
        if (threads[i] == NULL || st_thread_join(threads[i], NULL) != 0) {
            return NULL;
        }
    }
    job->rc = 0;
    return NULL;
}

static int check_pthread_schedulers(void)
{
    enum { N = 2 };
    struct pthread_job jobs[N];
    pthread_t ids[N];
    pthread_barrier_t both_started;
    VF_CHECK(pthread_barrier_init(&both_started, NULL, N) == 0);

    for (int i = 0; i < N; i++) {
        memset(&jobs[i], 0, sizeof jobs[i]);
        jobs[i].eventsys = vf_current_backend()->eventsys;
        jobs[i].both_started = &both_started;
        VF_CHECK(pthread_create(&ids[i], NULL, pthread_body, &jobs[i]) == 0);
    }
    for (int i = 0; i < N; i++) {
        VF_CHECK(pthread_join(ids[i], NULL) == 0);
        VF_CHECK(jobs[i].rc == 0);
        VF_CHECK(jobs[i].woke == 4);
    }
    (void)pthread_barrier_destroy(&both_started);
    VF_CHECK(jobs[0].self != jobs[1].self);
    return 0;
}

const struct vf_check vf_checks_init[] = {
    {"init_eventsys", check_eventsys, VF_BEFORE_INIT},
    {"eventsys_default", check_eventsys_default, VF_BEFORE_INIT},
    {"utime_function", check_utime_function, VF_BEFORE_INIT},
    {"time_functions", check_time_functions, VF_AFTER_INIT},
    {"switch_callbacks", check_switch_callbacks, VF_AFTER_INIT},
    {"randomize_stacks", check_randomize_stacks, VF_AFTER_INIT},
    {"primordial_exit", check_primordial_exit, VF_BEFORE_INIT},
    {"pthread_schedulers", check_pthread_schedulers, VF_BEFORE_INIT},
    {NULL, NULL, VF_AFTER_INIT},
};
