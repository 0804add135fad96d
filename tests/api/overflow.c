/*
 * A coroutine that overflows its stack hits the guard page below it: the
 * library names the coroutine and its stack on stderr, then lets the fault
 * take its course (death by SIGSEGV, or the application's own handler).
 * Each case runs in a forked child whose stderr and exit are examined.
 */
#include "st_test.h"

#include <signal.h>
#include <sys/wait.h>

#define STACK_SIZE (64 * 1024)

struct outcome {
    int status;
    char err[4096];
};

/* Run `child` in a forked process, capturing its stderr and exit status. */
static void run_child(void (*child)(void), struct outcome *out)
{
    int pipefd[2];
    cr_assert_eq(pipe(pipefd), 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        st_test_allow_exit();
        dup2(pipefd[1], STDERR_FILENO);
        close(pipefd[0]);
        child();
        _exit(0);
    }
    close(pipefd[1]);
    size_t len = 0;
    ssize_t n;
    while (len < sizeof(out->err) - 1 &&
           (n = read(pipefd[0], out->err + len, sizeof(out->err) - 1 - len)) > 0) {
        len += (size_t)n;
    }
    out->err[len] = '\0';
    close(pipefd[0]);
    cr_assert_eq(waitpid(pid, &out->status, 0), pid);
}

/* Always true; the compiler cannot know, so the recursion is not "infinite". */
static volatile int keep_going = 1;

__attribute__((noinline)) static int recurse_forever(int n)
{
    volatile char frame[512];
    frame[0] = (char)n;
    return keep_going ? recurse_forever(n + 1) + frame[0] : n;
}

static void *runaway(void *arg)
{
    (void)arg;
    return (void *)(intptr_t)recurse_forever(0);
}

static void overflow_in_a_coroutine(void)
{
    st_test_init();
    st_thread_t t = st_thread_create(runaway, NULL, 1, STACK_SIZE);
    if (t != NULL) {
        st_thread_join(t, NULL);
    }
    _exit(3); /* not reached */
}

static void *park(void *arg)
{
    (void)arg;
    (void)st_sleep(-1);
    return NULL;
}

/*
 * Past several thousand coroutines, guarded stacks are carved from shared
 * slabs where the kernel has page-table guard markers (docs/design.md,
 * "Stacks"). Their overflows are reported just the same.
 */
static void overflow_after_many_coroutines(void)
{
    enum { PARKED = 9000 };
    st_test_init();
    for (int i = 0; i < PARKED; i++) {
        if (st_thread_create(park, NULL, 0, STACK_SIZE) == NULL) {
            _exit(4);
        }
    }
    overflow_in_a_coroutine();
}

ST_TEST_SUITE(overflow);

#ifdef ST_TEST_GUARD_PAGES

Test(overflow, is_reported_and_the_process_dies_of_sigsegv, .timeout = ST_TEST_TIMEOUT)
{
    struct outcome out;
    run_child(overflow_in_a_coroutine, &out);
    cr_expect(WIFSIGNALED(out.status) && WTERMSIG(out.status) == SIGSEGV,
              "status %#x: expected death by SIGSEGV", out.status);
    cr_expect_not_null(strstr(out.err, "st: stack overflow in coroutine 0x"), "stderr: %s",
                       out.err);
    char start[64];
    snprintf(start, sizeof(start), "start function %p", (void *)(uintptr_t)runaway);
    cr_expect_not_null(strstr(out.err, start), "no %s in: %s", start, out.err);
    cr_expect_not_null(strstr(out.err, ", stack 0x"), "no stack bounds in: %s", out.err);
}

Test(overflow, is_reported_in_a_slab_stack_too, .timeout = ST_TEST_TIMEOUT)
{
    struct outcome out;
    run_child(overflow_after_many_coroutines, &out);
    cr_expect(WIFSIGNALED(out.status) && WTERMSIG(out.status) == SIGSEGV,
              "status %#x: expected death by SIGSEGV", out.status);
    char start[64];
    snprintf(start, sizeof(start), "start function %p", (void *)(uintptr_t)runaway);
    cr_expect_not_null(strstr(out.err, "st: stack overflow in coroutine 0x"), "stderr: %s",
                       out.err);
    cr_expect_not_null(strstr(out.err, start), "no %s in: %s", start, out.err);
}

static void app_handler(int sig, siginfo_t *info, void *context)
{
    (void)sig;
    (void)info;
    (void)context;
    static const char msg[] = "application handler ran\n";
    (void)write(STDERR_FILENO, msg, sizeof(msg) - 1);
    _exit(42);
}

static void overflow_with_an_application_handler(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = app_handler;
    sa.sa_flags = SA_SIGINFO;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, NULL);
    overflow_in_a_coroutine();
}

Test(overflow, chains_to_the_handler_the_application_installed, .timeout = ST_TEST_TIMEOUT)
{
    struct outcome out;
    run_child(overflow_with_an_application_handler, &out);
    cr_expect(WIFEXITED(out.status) && WEXITSTATUS(out.status) == 42, "status %#x", out.status);
    char *report = strstr(out.err, "st: stack overflow in coroutine");
    char *app = strstr(out.err, "application handler ran");
    cr_expect_not_null(report, "stderr: %s", out.err);
    cr_expect_not_null(app, "stderr: %s", out.err);
    cr_expect(report == NULL || app == NULL || report < app, "report first, then the handler");
}

#endif /* ST_TEST_GUARD_PAGES */

static void *wild_write(void *arg)
{
    (void)arg;
    static volatile uintptr_t address = 16; /* unmapped, far from any stack */
    volatile int *nowhere = (volatile int *)address;
    *nowhere = 1;
    return NULL;
}

static void real_crash_in_a_coroutine(void)
{
    st_test_init();
    st_thread_t t = st_thread_create(wild_write, NULL, 1, STACK_SIZE);
    if (t != NULL) {
        st_thread_join(t, NULL);
    }
    _exit(3);
}

Test(overflow, a_crash_that_is_no_overflow_is_not_swallowed_or_mislabelled,
     .timeout = ST_TEST_TIMEOUT)
{
    struct outcome out;
    run_child(real_crash_in_a_coroutine, &out);
    cr_expect(WIFSIGNALED(out.status) && WTERMSIG(out.status) == SIGSEGV, "status %#x",
              out.status);
    cr_expect_null(strstr(out.err, "stack overflow"), "stderr: %s", out.err);
}
