/*
 * st_runner.c - main() and assertion reporting for the tests built with
 * st_runner.h instead of Criterion.
 *
 * usage: PROGRAM [--list] [PATTERN...]
 *
 *   PATTERN   run only the tests whose "suite/name" matches one of these
 *             shell patterns (fnmatch), e.g. 'cond/signal_*' or '*timeout*'
 *   --list    print the tests' names and exit
 *
 * Each test runs in a forked process of its own, in a process group of its
 * own: the suite's .init, then the test's, the test body, the test's .fini,
 * then the suite's. A test still running after its .timeout (else the
 * suite's, else 30 s), multiplied by $ST_RUNNER_TIMEOUT_SCALE if set, is
 * killed with its whole process group and fails. Output, one line per test:
 *
 *   PASS suite/name (0.01 s)
 *   FAIL suite/name: file.c:12: reason
 *   SKIP suite/name: reason
 *
 * then `N skipped` when any was, and last `N passed, N failed`. The exit
 * status is 0 iff no test failed and at least one test ran.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include "st_runner.h"

#include <errno.h>
#include <fnmatch.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

enum {
    REASON_MAX = 1024,
    EXIT_FATAL = 1, /* status of a process ended by a failed cr_assert_* */
    EXIT_USAGE = 2,
    EXIT_EARLY = 97, /* st_test.h: the process left before the test body finished */
};

static const double DEFAULT_TIMEOUT_S = 30.0;

/* What the test's processes report to the runner, in memory they all share. */
struct shared {
    atomic_int failures;
    atomic_int skipped;
    atomic_int finished;
    char reason[REASON_MAX];      /* the first failure */
    char skip_reason[REASON_MAX];
};

static struct shared *shared;

static const struct st_runner_test **tests;
static size_t n_tests;
static const struct st_runner_test **suites;
static size_t n_suites;

static void *grow(void *array, size_t count)
{
    void *bigger = realloc(array, (count + 1) * sizeof(void *));

    if (bigger == NULL) {
        fputs("st_runner: out of memory\n", stderr);
        abort();
    }
    return bigger;
}

void st_runner_add_test(const struct st_runner_test *test)
{
    tests = grow((void *)tests, n_tests);
    tests[n_tests++] = test;
}

void st_runner_add_suite(const struct st_runner_test *suite)
{
    suites = grow((void *)suites, n_suites);
    suites[n_suites++] = suite;
}

static void copy_reason(char *dst, const char *file, int line, const char *msg)
{
    /* The message is cut to leave room for the place: the reason only names the failure. */
    snprintf(dst, REASON_MAX, "%s:%d: %.*s", file, line, REASON_MAX - 128, msg);
}

static void record(const char *file, int line, const char *expr, const char *fmt, va_list ap)
{
    char msg[REASON_MAX];

    vsnprintf(msg, sizeof(msg), fmt, ap);
    if (msg[0] == '\0') {
        snprintf(msg, sizeof(msg), "failed: %s", expr);
    }
    fprintf(stderr, "%s:%d: %s\n", file, line, msg);
    fflush(stderr);
    if (shared != NULL && atomic_fetch_add(&shared->failures, 1) == 0) {
        copy_reason(shared->reason, file, line, msg);
    }
}

void st_runner_assert(const char *file, int line, const char *expr, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    record(file, line, expr, fmt, ap);
    va_end(ap);
    _exit(EXIT_FATAL);
}

void st_runner_expect(const char *file, int line, const char *expr, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    record(file, line, expr, fmt, ap);
    va_end(ap);
}

void st_runner_skip(const char *file, int line, const char *fmt, ...)
{
    char msg[REASON_MAX];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (shared != NULL && atomic_fetch_add(&shared->skipped, 1) == 0) {
        snprintf(shared->skip_reason, REASON_MAX, "%s", msg);
    }
    (void)file;
    (void)line;
    fflush(stdout);
    fflush(stderr);
    _exit(0);
}

static const struct st_runner_test *find_suite(const char *name)
{
    for (size_t i = 0; i < n_suites; i++) {
        if (strcmp(suites[i]->suite, name) == 0) {
            return suites[i];
        }
    }
    return NULL;
}

static int by_name(const void *a, const void *b)
{
    const struct st_runner_test *ta = *(const struct st_runner_test *const *)a;
    const struct st_runner_test *tb = *(const struct st_runner_test *const *)b;
    int c = strcmp(ta->suite, tb->suite);

    return c != 0 ? c : strcmp(ta->name, tb->name);
}

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The child: set up as Criterion's worker would, run, report. */
static _Noreturn void run_child(const struct st_runner_test *t, const struct st_runner_test *s,
                                const sigset_t *old_mask)
{
    setpgid(0, 0);
    sigprocmask(SIG_SETMASK, old_mask, NULL);
    if (s != NULL && s->init != NULL) {
        s->init();
    }
    if (t->init != NULL) {
        t->init();
    }
    t->fn();
    if (t->fini != NULL) {
        t->fini();
    }
    if (s != NULL && s->fini != NULL) {
        s->fini();
    }
    atomic_store(&shared->finished, 1);
    exit(0);
}

/* Waits for pid up to `limit` seconds; 1 when it ended (status set), 0 on timeout. */
static int wait_child(pid_t pid, double limit, int *status)
{
    sigset_t chld;
    double deadline = now_s() + limit;

    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    for (;;) {
        pid_t r = waitpid(pid, status, WNOHANG);
        if (r == pid) {
            return 1;
        }
        if (r < 0 && errno != EINTR) {
            *status = 0;
            return 1;
        }
        double left = deadline - now_s();
        if (left <= 0) {
            return 0;
        }
        /* Wake on any SIGCHLD, and at least every 100 ms. */
        double nap = left < 0.1 ? left : 0.1;
        struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)(nap * 1e9)};
        (void)sigtimedwait(&chld, NULL, &ts);
    }
}

enum verdict { PASSED, FAILED, SKIPPED };

static enum verdict run_test(const struct st_runner_test *t, double scale)
{
    const struct st_runner_test *s = find_suite(t->suite);
    double limit = t->timeout > 0 ? t->timeout
                   : (s != NULL && s->timeout > 0) ? s->timeout
                                                   : DEFAULT_TIMEOUT_S;
    sigset_t chld;
    sigset_t old_mask;
    int status = 0;
    double t0 = now_s();

    if (t->disabled || (s != NULL && s->disabled)) {
        printf("SKIP %s/%s: disabled\n", t->suite, t->name);
        return SKIPPED;
    }
    limit *= scale;
    memset(shared, 0, sizeof(*shared));
    sigemptyset(&chld);
    sigaddset(&chld, SIGCHLD);
    sigprocmask(SIG_BLOCK, &chld, &old_mask);
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        sigprocmask(SIG_SETMASK, &old_mask, NULL);
        printf("FAIL %s/%s: fork: %s\n", t->suite, t->name, strerror(errno));
        return FAILED;
    }
    if (pid == 0) {
        run_child(t, s, &old_mask);
    }
    setpgid(pid, pid); /* also here, so that the kill below cannot miss */
    int ended = wait_child(pid, limit, &status);
    if (!ended) {
        kill(-pid, SIGKILL);
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
    } else {
        kill(-pid, SIGKILL); /* anything the test left behind */
    }
    sigprocmask(SIG_SETMASK, &old_mask, NULL);

    const char *sn = t->suite;
    const char *tn = t->name;
    if (atomic_load(&shared->failures) > 0) {
        printf("FAIL %s/%s: %s\n", sn, tn, shared->reason);
    } else if (!ended) {
        printf("FAIL %s/%s: timed out after %.0f s\n", sn, tn, limit);
    } else if (WIFSIGNALED(status)) {
        printf("FAIL %s/%s: killed by signal %d (%s)\n", sn, tn, WTERMSIG(status),
               strsignal(WTERMSIG(status)));
    } else if (WIFEXITED(status) && WEXITSTATUS(status) == EXIT_EARLY) {
        printf("FAIL %s/%s: the process exited (status %d) before the test body finished\n", sn,
               tn, EXIT_EARLY);
    } else if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        printf("FAIL %s/%s: exited with status %d\n", sn, tn, WEXITSTATUS(status));
    } else if (atomic_load(&shared->skipped) > 0) {
        printf("SKIP %s/%s: %s\n", sn, tn, shared->skip_reason);
        return SKIPPED;
    } else if (!atomic_load(&shared->finished)) {
        printf("FAIL %s/%s: the process exited 0 before the test body finished\n", sn, tn);
    } else {
        printf("PASS %s/%s (%.2f s)\n", sn, tn, now_s() - t0);
        return PASSED;
    }
    return FAILED;
}

static int selected(const struct st_runner_test *t, char **patterns, int n_patterns)
{
    char full[512];

    if (n_patterns == 0) {
        return 1;
    }
    snprintf(full, sizeof(full), "%s/%s", t->suite, t->name);
    for (int i = 0; i < n_patterns; i++) {
        if (fnmatch(patterns[i], full, 0) == 0) {
            return 1;
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    int list = 0;
    char **patterns = argv + 1;
    int n_patterns = argc - 1;
    double scale = 1.0;
    const char *env = getenv("ST_RUNNER_TIMEOUT_SCALE");

    if (n_patterns > 0 && strcmp(patterns[0], "--list") == 0) {
        list = 1;
        patterns++;
        n_patterns--;
    }
    if (n_patterns > 0 && patterns[0][0] == '-') {
        fprintf(stderr, "usage: %s [--list] [PATTERN...]\n", argv[0]);
        return EXIT_USAGE;
    }
    if (env != NULL && *env != '\0') {
        char *end = NULL;
        scale = strtod(env, &end);
        if (end == env || *end != '\0' || scale <= 0) {
            fprintf(stderr, "%s: bad ST_RUNNER_TIMEOUT_SCALE '%s'\n", argv[0], env);
            return EXIT_USAGE;
        }
    }
    if (n_tests > 1) {
        qsort((void *)tests, n_tests, sizeof(const struct st_runner_test *), by_name);
    }
    if (list) {
        for (size_t i = 0; i < n_tests; i++) {
            if (selected(tests[i], patterns, n_patterns)) {
                printf("%s/%s\n", tests[i]->suite, tests[i]->name);
            }
        }
        return 0;
    }
    shared = mmap(NULL, sizeof(*shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1,
                  0);
    if (shared == MAP_FAILED) {
        perror("mmap");
        return EXIT_FATAL;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);

    int passed = 0;
    int failed = 0;
    int skipped = 0;
    for (size_t i = 0; i < n_tests; i++) {
        if (!selected(tests[i], patterns, n_patterns)) {
            continue;
        }
        switch (run_test(tests[i], scale)) {
        case PASSED:
            passed++;
            break;
        case FAILED:
            failed++;
            break;
        case SKIPPED:
            skipped++;
            break;
        }
    }
    if (skipped > 0) {
        printf("%d skipped\n", skipped);
    }
    printf("%d passed, %d failed\n", passed, failed);
    if (passed + failed + skipped == 0) {
        fprintf(stderr, "%s: no test ran\n", argv[0]);
        return EXIT_FATAL;
    }
    return failed == 0 ? 0 : EXIT_FATAL;
}
