/*
 * Giving one process a small fixed share of one CPU, for the fairness group
 * (fairness.c). Three ways, tried in this order unless one is asked for:
 *
 *   cgroup2  a child cgroup with cpu.max = share * period / 100, period;
 *            needs a writable cgroup v2 hierarchy whose root hands the cpu
 *            controller down (cgroup.subtree_control names it); the kernel
 *            takes no quota under 1 ms, so a small share gets a longer
 *            period (5%: 1 ms per 20 ms);
 *   cgroup1  a child of the cgroup v1 cpu controller with cpu.cfs_quota_us
 *            and cpu.cfs_period_us, the same quota;
 *   spin     busy processes pinned to the process's CPU: with k of them the
 *            kernel's fair scheduler gives it 1/(k+1) of that CPU;
 *   rt       (first, when the caller runs at real-time priority, as under
 *            run.sh --rt) the process at SCHED_FIFO in a cgroup v1 child
 *            with cpu.rt_runtime_us per cpu.rt_period_us: the same budget,
 *            which other (normal) work on the machine cannot eat into.
 *
 * A quota is what a container CPU limit is (docker --cpus sets the same
 * files, period 100 ms): the process runs its quota, then waits for the next
 * period. Spinners share the CPU in slices of a few milliseconds instead.
 *
 * Everything made here is undone by bench_starve_stop(): spinners are
 * killed (they also die with the process that started them:
 * PR_SET_PDEATHSIG), and the cgroup directory is removed once its process
 * has been reaped. A directory left by a run that was killed (its name
 * carries the pid of that run) is removed by the next run.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"

#define CGROUP_PREFIX "st_bench_starve."

/* Say in s->why what was chosen, or why it could not be. */
static void explain(struct bench_starve *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void explain(struct bench_starve *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    (void)vsnprintf(s->why, sizeof s->why, fmt, ap);
    va_end(ap);
}

/* Keep why a method could not be used, for the note on the one that was. */
static void set_aside(struct bench_starve *s, const char *method)
{
    size_t len = strlen(s->tried);
    (void)snprintf(s->tried + len, sizeof s->tried - len, "%snot %s: ", len > 0 ? "; " : "",
                   method);
    len = strlen(s->tried);
    (void)snprintf(s->tried + len, sizeof s->tried - len, "%.*s", (int)(sizeof s->tried - len),
                   s->why);
}

/* Write `text` to an existing file; 0 or -1 with errno. */
static int write_file(const char *dir, const char *name, const char *text)
{
    char path[PATH_MAX + 64];
    (void)snprintf(path, sizeof path, "%s/%s", dir, name);
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) {
        return -1;
    }
    size_t len = strlen(text);
    ssize_t n = write(fd, text, len);
    int err = errno;
    (void)close(fd);
    errno = err;
    return n == (ssize_t)len ? 0 : -1;
}

/* Whether the first line of dir/name has `word` as a word (space or comma separated). */
static bool file_has_word(const char *dir, const char *name, const char *word)
{
    char path[PATH_MAX + 64];
    char line[1024];
    (void)snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        return false;
    }
    bool found = false;
    if (fgets(line, sizeof line, f) != NULL) {
        char *save = NULL;
        for (char *tok = strtok_r(line, " ,\n", &save); tok != NULL && !found;
             tok = strtok_r(NULL, " ,\n", &save)) {
            found = strcmp(tok, word) == 0;
        }
    }
    (void)fclose(f);
    return found;
}

/*
 * The mount point of the first hierarchy of `fstype` ("cgroup2", or
 * "cgroup" with `option` among its super options) in /proc/self/mountinfo.
 */
static int find_mount(const char *fstype, const char *option, char *out, size_t size)
{
    char line[4096];
    FILE *f = fopen("/proc/self/mountinfo", "r");
    if (f == NULL) {
        return -1;
    }
    int rc = -1;
    while (rc != 0 && fgets(line, sizeof line, f) != NULL) {
        /* id parent major:minor root mountpoint options... - fstype source superoptions */
        char mountpoint[PATH_MAX];
        char type[64];
        char super[1024];
        const char *dash = strstr(line, " - ");
        if (dash == NULL || sscanf(line, "%*s %*s %*s %*s %4095s", mountpoint) != 1 ||
            sscanf(dash + 3, "%63s %*s %1023s", type, super) != 2 || strcmp(type, fstype) != 0) {
            continue;
        }
        if (option != NULL) {
            bool has = false;
            char *save = NULL;
            for (char *tok = strtok_r(super, ",", &save); tok != NULL && !has;
                 tok = strtok_r(NULL, ",", &save)) {
                has = strcmp(tok, option) == 0;
            }
            if (!has) {
                continue;
            }
        }
        (void)snprintf(out, size, "%s", mountpoint);
        rc = 0;
    }
    (void)fclose(f);
    return rc;
}

/* Remove the directories that killed runs left under `root` (their pid is gone). */
static void remove_stale(const char *root)
{
    DIR *d = opendir(root);
    if (d == NULL) {
        return;
    }
    const struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        size_t len = strlen(CGROUP_PREFIX);
        if (strncmp(e->d_name, CGROUP_PREFIX, len) != 0) {
            continue;
        }
        long pid = bench_parse_long(e->d_name + len);
        if (pid > 0 && kill((pid_t)pid, 0) != 0 && errno == ESRCH) {
            char path[PATH_MAX + 300];
            (void)snprintf(path, sizeof path, "%s/%s", root, e->d_name);
            (void)rmdir(path);
        }
    }
    (void)closedir(d);
}

/* mkdir our cgroup under `root`; the path in s->dir. */
static int make_cgroup(struct bench_starve *s, const char *root)
{
    remove_stale(root);
    (void)snprintf(s->dir, sizeof s->dir, "%s/%s%ld", root, CGROUP_PREFIX, (long)getpid());
    if (mkdir(s->dir, 0755) != 0 && errno != EEXIST) {
        int err = errno;
        s->dir[0] = '\0';
        errno = err;
        return -1;
    }
    return 0;
}

static void remove_cgroup(struct bench_starve *s)
{
    if (s->dir[0] != '\0') {
        if (rmdir(s->dir) != 0) {
            fprintf(stderr, "bench: rmdir %s: %s\n", s->dir, strerror(errno));
        }
        s->dir[0] = '\0';
    }
}

/* A CFS quota under 1 ms is refused (EINVAL): a longer period keeps the share. */
static long cfs_quota(struct bench_starve *s)
{
    enum { MIN_QUOTA_US = 1000 };
    if (s->period_us * s->share / 100 < MIN_QUOTA_US) {
        s->period_us = (MIN_QUOTA_US * 100 + s->share - 1) / s->share;
    }
    return s->period_us * s->share / 100;
}

static int try_cgroup2(struct bench_starve *s)
{
    char root[PATH_MAX];
    char value[64];
    if (find_mount("cgroup2", NULL, root, sizeof root) != 0) {
        explain(s, "no cgroup v2 hierarchy is mounted");
        return -1;
    }
    if (!file_has_word(root, "cgroup.subtree_control", "cpu")) {
        explain(s, "the cgroup v2 root %s does not hand the cpu controller to children", root);
        return -1;
    }
    if (make_cgroup(s, root) != 0) {
        explain(s, "cannot create a cgroup under %s: %s", root,
                       strerror(errno));
        return -1;
    }
    long quota = cfs_quota(s);
    (void)snprintf(value, sizeof value, "%ld %ld", quota, s->period_us);
    if (write_file(s->dir, "cpu.max", value) != 0) {
        explain(s, "cannot write %s/cpu.max: %s", s->dir,
                       strerror(errno));
        remove_cgroup(s);
        return -1;
    }
    (void)snprintf(s->procs, sizeof s->procs, "cgroup.procs");
    explain(s, "cgroup v2 %s, cpu.max \"%s\"", s->dir, value);
    return 0;
}

/* A child of the cgroup v1 cpu controller with a quota in `quota_file` per `period_file`. */
static int try_v1(struct bench_starve *s, const char *period_file, const char *quota_file,
                  long quota_us)
{
    char root[PATH_MAX];
    char quota[32];
    char period[32];
    if (find_mount("cgroup", "cpu", root, sizeof root) != 0) {
        explain(s, "no cgroup v1 cpu controller is mounted");
        return -1;
    }
    if (make_cgroup(s, root) != 0) {
        explain(s, "cannot create a cgroup under %s: %s", root, strerror(errno));
        return -1;
    }
    (void)snprintf(period, sizeof period, "%ld", s->period_us);
    (void)snprintf(quota, sizeof quota, "%ld", quota_us);
    if (write_file(s->dir, period_file, period) != 0 || write_file(s->dir, quota_file, quota) != 0) {
        explain(s, "cannot set %s in %s: %s", quota_file, s->dir, strerror(errno));
        remove_cgroup(s);
        return -1;
    }
    (void)snprintf(s->procs, sizeof s->procs, "cgroup.procs");
    explain(s, "cgroup v1 %s, %s %s per %s %s", s->dir, quota_file, quota, period_file, period);
    return 0;
}

static int try_cgroup1(struct bench_starve *s)
{
    long quota = cfs_quota(s);
    return try_v1(s, "cpu.cfs_period_us", "cpu.cfs_quota_us", quota);
}

/* The server at SCHED_FIFO with a real-time budget: other (normal) work on the machine cannot take from it. */
static int try_rt(struct bench_starve *s)
{
    if (try_v1(s, "cpu.rt_period_us", "cpu.rt_runtime_us", s->period_us * s->share / 100) != 0) {
        return -1;
    }
    size_t len = strlen(s->why);
    (void)snprintf(s->why + len, sizeof s->why - len, ", the server at SCHED_FIFO");
    return 0;
}

/* Normal (not real-time) scheduling for a process that must share its CPU. */
static void normal_policy(void)
{
    struct sched_param param = {.sched_priority = 0};
    (void)sched_setscheduler(0, SCHED_OTHER, &param);
}

static int start_spinners(struct bench_starve *s)
{
    if (s->cpu < 0) {
        explain(s, "one CPU: spinners would starve the client too");
        return -1;
    }
    int count = (100 + s->share / 2) / s->share - 1; /* round(100 / share) - 1 */
    if (count < 1) {
        count = 1;
    }
    if (count > BENCH_MAX_SPINNERS) {
        count = BENCH_MAX_SPINNERS;
    }
    for (int i = 0; i < count; i++) {
        pid_t pid = bench_fork();
        if (pid < 0) {
            explain(s, "fork: %s", strerror(errno));
            bench_starve_stop(s);
            return -1;
        }
        if (pid == 0) {
            (void)prctl(PR_SET_PDEATHSIG, SIGKILL);
            normal_policy();
            bench_pin(s->cpu);
            for (volatile unsigned long n = 0;; n++) {
            }
        }
        s->spinners[s->nspinners++] = pid;
    }
    s->share = 100 / (count + 1);
    explain(s, "%d busy processes pinned to CPU %d with the server (about %d%% each)", count,
                   s->cpu, s->share);
    return 0;
}

int bench_starve_start(struct bench_starve *s, const char *method, int share, long period_us,
                       int cpu)
{
    static const struct {
        const char *name;
        enum bench_starve_kind kind;
        int (*start)(struct bench_starve *s);
    } methods[] = {
        {"rt", BENCH_STARVE_RT, try_rt},
        {"cgroup2", BENCH_STARVE_CGROUP2, try_cgroup2},
        {"cgroup1", BENCH_STARVE_CGROUP1, try_cgroup1},
        {"spin", BENCH_STARVE_SPIN, start_spinners},
    };
    memset(s, 0, sizeof *s);
    s->share = share;
    s->cpu = cpu;
    s->period_us = period_us;
    if (share <= 0 || share >= 100 || strcmp(method, "none") == 0) {
        s->kind = BENCH_STARVE_NONE;
        s->share = 100;
        explain(s, "not starved: the server has its CPU to itself");
        return 0;
    }
    bool any = strcmp(method, "auto") == 0;
    /* A real-time budget only when everything else runs at real-time priority too (--rt). */
    int policy = sched_getscheduler(0);
    bool rt = policy == SCHED_FIFO || policy == SCHED_RR;
    struct sched_param param = {.sched_priority = 0};
    s->rt_priority = rt && sched_getparam(0, &param) == 0 && param.sched_priority > 0
                         ? param.sched_priority
                         : 1;
    explain(s, "unknown method '%s' (auto, rt, cgroup2, cgroup1, spin or none)", method);
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++) {
        if (any ? methods[i].kind == BENCH_STARVE_RT && !rt : strcmp(method, methods[i].name) != 0) {
            continue;
        }
        if (methods[i].start(s) == 0) {
            s->kind = methods[i].kind;
            if (s->tried[0] != '\0') {
                size_t len = strlen(s->why);
                (void)snprintf(s->why + len, sizeof s->why - len, " (%.*s)",
                               (int)(sizeof s->why - len), s->tried);
            }
            return 0;
        }
        set_aside(s, methods[i].name);
    }
    return -1;
}

int bench_starve_enter(const struct bench_starve *s)
{
    char pid[32];
    if (s->kind == BENCH_STARVE_NONE) {
        return 0;
    }
    /* A CFS quota only holds back normal tasks, and spinners only compete with them. */
    normal_policy();
    if (s->kind == BENCH_STARVE_SPIN) {
        return 0;
    }
    (void)snprintf(pid, sizeof pid, "%ld", (long)getpid());
    if (write_file(s->dir, s->procs, pid) != 0) {
        fprintf(stderr, "bench: joining %s: %s\n", s->dir, strerror(errno));
        return -1;
    }
    struct sched_param fifo = {.sched_priority = s->rt_priority}; /* the caller's */
    if (s->kind == BENCH_STARVE_RT && sched_setscheduler(0, SCHED_FIFO, &fifo) != 0) {
        fprintf(stderr, "bench: SCHED_FIFO in %s: %s\n", s->dir, strerror(errno));
        return -1;
    }
    return 0;
}

void bench_starve_stop(struct bench_starve *s)
{
    for (int i = 0; i < s->nspinners; i++) {
        bench_stop_child(s->spinners[i]);
    }
    s->nspinners = 0;
    remove_cgroup(s);
}
