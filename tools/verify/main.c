/*
 * verify: conformance runner for st.
 *
 * usage: verify [select|poll|epoll|io_uring|all] [CHECK...]
 *
 * Runs every check once per selected event backend. Each check runs in a
 * forked process of its own that selects the backend and calls st_init, so a
 * crash, a hang (caught by alarm) or leftover coroutines of one check cannot
 * affect the next. Prints `PASS <backend>/<check>` or
 * `FAIL <backend>/<check>: <why>` per check, a `SKIP` line for a backend that
 * st_set_eventsys refuses, and finally `N passed, N failed`. The exit status
 * is 0 iff every check that ran passed and at least one ran.
 */
#include "verify.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* The backends the library was built with, from the build system. */
#ifndef VF_BACKENDS
#define VF_BACKENDS "epoll,poll,select"
#endif

enum {
    CHECK_ALARM_S = 20, /* a check still running after this is a failure */
    REASON_MAX = 600,
    EXIT_USAGE = 2,
};

static const struct vf_backend known_backends[] = {
    {"epoll", ST_EVENTSYS_ALT},
    {"poll", ST_EVENTSYS_POLL},
    {"select", ST_EVENTSYS_SELECT},
    {"io_uring", ST_EVENTSYS_IO_URING},
};
enum { N_KNOWN = sizeof known_backends / sizeof known_backends[0] };

static const struct vf_check *const check_tables[] = {
    vf_checks_init,      vf_checks_thread, vf_checks_context, vf_checks_time, vf_checks_sync,
    vf_checks_interrupt, vf_checks_key,    vf_checks_io,      vf_checks_net,  vf_checks_regs,
};
enum { N_TABLES = sizeof check_tables / sizeof check_tables[0] };

struct totals {
    int passed;
    int failed;
    int backends_run;
};

struct options {
    const char *backend; /* NULL for all compiled backends */
    char **filters;      /* check names to run; none means all */
    int n_filters;
};

/* ---- the child side ------------------------------------------------------ */

static void write_reason(int fd, const char *reason)
{
    size_t len = strlen(reason);
    while (len > 0) {
        ssize_t n = write(fd, reason, len);
        if (n <= 0) {
            return;
        }
        reason += n;
        len -= (size_t)n;
    }
}

static int child_prepare(const struct vf_backend *backend)
{
    if (st_set_eventsys(backend->eventsys) != 0) {
        return vf_fail("st_set_eventsys(%d) failed: %s", backend->eventsys, strerror(errno));
    }
    if (st_init() != 0) {
        return vf_fail("st_init failed: %s", strerror(errno));
    }
    return 0;
}

static void child_run(const struct vf_backend *backend, const struct vf_check *check, int fd)
{
    int rc = 0;
    (void)alarm(CHECK_ALARM_S);
    vf_set_current_backend(backend);
    if (check->flags != VF_BEFORE_INIT) {
        rc = child_prepare(backend);
    }
    if (rc == 0) {
        rc = check->run();
    }
    if (rc != 0 && vf_first_failure() == NULL) {
        (void)vf_fail("check reported failure without a reason");
    }
    if (vf_first_failure() != NULL) {
        write_reason(fd, vf_first_failure());
        _exit(1);
    }
    _exit(0);
}

/* ---- the parent side ----------------------------------------------------- */

static void read_reason(int fd, char *buf, size_t size)
{
    size_t used = 0;
    int flags = fcntl(fd, F_GETFL);
    /* The child has exited: take what it wrote, never wait for more. */
    if (flags >= 0) {
        (void)fcntl(fd, F_SETFL, flags | O_NONBLOCK);
    }
    while (used + 1 < size) {
        ssize_t n = read(fd, buf + used, size - 1 - used);
        if (n <= 0) {
            break;
        }
        used += (size_t)n;
    }
    buf[used] = '\0';
}

static void describe_status(int status, const char *reason, char *out, size_t size)
{
    if (WIFSIGNALED(status)) {
        int sig = WTERMSIG(status);
        (void)snprintf(out, size, "killed by signal %d (%s)%s", sig, strsignal(sig),
                       sig == SIGALRM ? ": timed out" : "");
    } else if (reason[0] != '\0') {
        (void)snprintf(out, size, "%s", reason);
    } else if (WIFEXITED(status) && WEXITSTATUS(status) != 0) {
        (void)snprintf(out, size, "exited with status %d", WEXITSTATUS(status));
    } else {
        out[0] = '\0';
    }
}

static void report(const struct vf_backend *backend, const char *name, const char *why,
                   struct totals *totals)
{
    if (why[0] == '\0') {
        printf("PASS %s/%s\n", backend->name, name);
        totals->passed++;
    } else {
        printf("FAIL %s/%s: %s\n", backend->name, name, why);
        totals->failed++;
    }
    (void)fflush(stdout);
}

static void run_one(const struct vf_backend *backend, const struct vf_check *check,
                    struct totals *totals)
{
    char reason[REASON_MAX];
    char why[REASON_MAX + 64];
    int fds[2];
    int status = 0;
    pid_t pid;

    (void)fflush(stdout);
    if (pipe(fds) != 0) {
        (void)snprintf(why, sizeof why, "pipe: %s", strerror(errno));
        report(backend, check->name, why, totals);
        return;
    }
    pid = fork();
    if (pid == 0) {
        (void)close(fds[0]);
        child_run(backend, check, fds[1]);
    }
    (void)close(fds[1]);
    if (pid < 0 || waitpid(pid, &status, 0) != pid) {
        (void)snprintf(why, sizeof why, "fork/waitpid: %s", strerror(errno));
        (void)close(fds[0]);
        report(backend, check->name, why, totals);
        return;
    }
    read_reason(fds[0], reason, sizeof reason);
    (void)close(fds[0]);
    describe_status(status, reason, why, sizeof why);
    report(backend, check->name, why, totals);
}

/* 0 if st_set_eventsys accepts the backend, else the errno it gave. */
static int probe_backend(const struct vf_backend *backend)
{
    int status = 0;
    pid_t pid = fork();
    if (pid == 0) {
        int rc = st_set_eventsys(backend->eventsys);
        _exit(rc == 0 ? 0 : (errno > 0 && errno < 256 ? errno : EINVAL));
    }
    if (pid < 0 || waitpid(pid, &status, 0) != pid) {
        return errno != 0 ? errno : ECHILD;
    }
    if (!WIFEXITED(status)) {
        return EFAULT;
    }
    return WEXITSTATUS(status);
}

static int wanted(const struct vf_check *check, const struct options *opt)
{
    if (opt->n_filters == 0) {
        return 1;
    }
    for (int i = 0; i < opt->n_filters; i++) {
        if (strcmp(opt->filters[i], check->name) == 0) {
            return 1;
        }
    }
    return 0;
}

static void run_backend(const struct vf_backend *backend, const struct options *opt,
                        struct totals *totals)
{
    int err = probe_backend(backend);
    if (err != 0) {
        printf("SKIP %s: st_set_eventsys(%d) refused it: %s\n", backend->name, backend->eventsys,
               strerror(err));
        (void)fflush(stdout);
        return;
    }
    totals->backends_run++;
    for (int t = 0; t < N_TABLES; t++) {
        for (const struct vf_check *check = check_tables[t]; check->name != NULL; check++) {
            if (wanted(check, opt)) {
                run_one(backend, check, totals);
            }
        }
    }
}

static const struct vf_backend *find_backend(const char *name)
{
    for (int i = 0; i < N_KNOWN; i++) {
        if (strcmp(known_backends[i].name, name) == 0) {
            return &known_backends[i];
        }
    }
    return NULL;
}

/* Is `name` one of the comma-separated names in VF_BACKENDS? */
int vf_backend_compiled(const char *name)
{
    size_t len = strlen(name);
    const char *p = VF_BACKENDS;
    while (*p != '\0') {
        const char *comma = strchr(p, ',');
        size_t item = comma != NULL ? (size_t)(comma - p) : strlen(p);
        if (item == len && strncmp(p, name, len) == 0) {
            return 1;
        }
        p += item + (comma != NULL ? 1 : 0);
    }
    return 0;
}

static int parse_args(int argc, char **argv, struct options *opt)
{
    opt->backend = NULL;
    opt->filters = NULL;
    opt->n_filters = 0;
    if (argc > 1) {
        if (strcmp(argv[1], "all") != 0) {
            if (find_backend(argv[1]) == NULL) {
                fprintf(stderr, "usage: %s [select|poll|epoll|io_uring|all] [CHECK...]\n", argv[0]);
                return -1;
            }
            opt->backend = argv[1];
        }
        opt->filters = argv + 2;
        opt->n_filters = argc - 2;
    }
    return 0;
}

int main(int argc, char **argv)
{
    struct options opt;
    struct totals totals = {0, 0, 0};

    if (parse_args(argc, argv, &opt) != 0) {
        return EXIT_USAGE;
    }
    for (int i = 0; i < N_KNOWN; i++) {
        const struct vf_backend *backend = &known_backends[i];
        if (opt.backend != NULL ? strcmp(opt.backend, backend->name) == 0
                                : vf_backend_compiled(backend->name)) {
            run_backend(backend, &opt, &totals);
        }
    }
    if (totals.backends_run == 0) {
        printf("FAIL verify: no event backend could be selected, nothing was checked\n");
        totals.failed++;
    } else if (totals.passed + totals.failed == 0) {
        printf("FAIL verify: no check has the given name\n");
        totals.failed++;
    }
    printf("%d passed, %d failed\n", totals.passed, totals.failed);
    return totals.failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
