/* Helpers shared by the benchmark groups: time, statistics, /proc, CPUs, output. */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "players.h"
#include "st_config.h"

double bench_now(void)
{
    struct timespec ts;
    (void)clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

double bench_cpu_now(void)
{
    struct timespec ts;
    (void)clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a;
    double y = *(const double *)b;
    return (x > y) - (x < y);
}

void bench_sort(double *values, long n)
{
    if (n > 0) {
        qsort(values, (size_t)n, sizeof *values, compare_double);
    }
}

double bench_percentile(const double *sorted, long n, long pct)
{
    if (n <= 0) {
        return 0.0;
    }
    long rank = (pct * n + 99) / 100;
    if (rank < 1) {
        rank = 1;
    } else if (rank > n) {
        rank = n;
    }
    return sorted[rank - 1];
}

double bench_median(double *values, int n)
{
    if (n <= 0) {
        return 0.0;
    }
    bench_sort(values, n);
    if (n % 2 == 1) {
        return values[n / 2];
    }
    return (values[n / 2 - 1] + values[n / 2]) / 2.0;
}

long bench_vm_kib(const char *field)
{
    char line[256];
    size_t len = strlen(field);
    long kib = -1;
    FILE *f = fopen("/proc/self/status", "r");
    if (f == NULL) {
        return -1;
    }
    while (fgets(line, sizeof line, f) != NULL) {
        if (strncmp(line, field, len) == 0 && line[len] == ':') {
            kib = strtol(line + len + 1, NULL, 10);
            break;
        }
    }
    (void)fclose(f);
    return kib;
}

long bench_map_count(void)
{
    char buf[65536];
    long lines = 0;
    size_t n = 0;
    FILE *f = fopen("/proc/self/maps", "r");
    if (f == NULL) {
        return -1;
    }
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) {
        for (size_t i = 0; i < n; i++) {
            lines += buf[i] == '\n';
        }
    }
    (void)fclose(f);
    return lines;
}

/* The first line of a small file, or -1. */
static int read_line(const char *path, char *buf, size_t size)
{
    FILE *f = fopen(path, "r");
    if (f == NULL) {
        return -1;
    }
    int ok = fgets(buf, (int)size, f) != NULL;
    (void)fclose(f);
    return ok ? 0 : -1;
}

long bench_proc_long(const char *path)
{
    char line[64];
    char *end = NULL;
    if (read_line(path, line, sizeof line) != 0) {
        return -1;
    }
    long value = strtol(line, &end, 10);
    return end == line ? -1 : value;
}

/* utime + stime from /proc/<pid>/stat, in ns; the fallback when schedstat is missing. */
static long long stat_cpu_ns(pid_t pid)
{
    char path[64];
    char line[1024];
    (void)snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
    if (read_line(path, line, sizeof line) != 0) {
        return -1;
    }
    /* Fields after the command name, which may hold spaces: state is field 3, utime 14. */
    char *p = strrchr(line, ')');
    unsigned long long ticks = 0;
    for (int field = 3; p != NULL && field <= 15; field++) {
        p = strchr(p + 1, ' ');
        if (p != NULL && field >= 14) {
            ticks += strtoull(p + 1, NULL, 10);
        }
    }
    if (p == NULL) {
        return -1;
    }
    long hz = sysconf(_SC_CLK_TCK);
    return (long long)(ticks * (1000000000ULL / (unsigned long long)(hz > 0 ? hz : 100)));
}

/* The first field of a schedstat file (time on the CPU, ns) added to *sum; -1 if unreadable. */
static int add_schedstat(const char *path, unsigned long long *sum)
{
    char line[128];
    char *end = NULL;
    if (read_line(path, line, sizeof line) != 0) {
        return -1;
    }
    unsigned long long ns = strtoull(line, &end, 10);
    if (end == line) {
        return -1;
    }
    *sum += ns;
    return 0;
}

/*
 * /proc/<pid>/schedstat is the main thread's alone: a server with threads
 * of its own (Go's runtime, io_uring's workers) is summed over
 * /proc/<pid>/task/<tid>/schedstat.
 */
long long bench_cpu_ns(pid_t pid)
{
    char path[96];
    unsigned long long sum = 0;
    int threads = 0;
    (void)snprintf(path, sizeof path, "/proc/%ld/task", (long)pid);
    DIR *dir = opendir(path);
    if (dir != NULL) {
        const struct dirent *e = NULL;
        while ((e = readdir(dir)) != NULL) {
            if (e->d_name[0] == '.') {
                continue;
            }
            (void)snprintf(path, sizeof path, "/proc/%ld/task/%.16s/schedstat", (long)pid,
                           e->d_name);
            threads += add_schedstat(path, &sum) == 0;
        }
        (void)closedir(dir);
    }
    return threads > 0 ? (long long)sum : stat_cpu_ns(pid);
}

long long bench_machine_busy_ns(void)
{
    char line[256];
    unsigned long long v[8] = {0};
    if (read_line("/proc/stat", line, sizeof line) != 0 || strncmp(line, "cpu ", 4) != 0) {
        return -1;
    }
    /* user nice system idle iowait irq softirq steal */
    char *p = line + 4;
    for (int i = 0; i < 8; i++) {
        char *end = NULL;
        v[i] = strtoull(p, &end, 10);
        if (end == p) {
            return -1;
        }
        p = end;
    }
    unsigned long long busy = v[0] + v[1] + v[2] + v[5] + v[6] + v[7];
    long hz = sysconf(_SC_CLK_TCK);
    return (long long)(busy * (1000000000ULL / (unsigned long long)(hz > 0 ? hz : 100)));
}

void bench_other_start(struct bench_other *o)
{
    o->machine_ns = bench_machine_busy_ns();
    o->self_ns = bench_cpu_ns(getpid());
    o->t = bench_now();
}

double bench_other_util(const struct bench_other *o)
{
    double t = bench_now() - o->t;
    double machine = (double)(bench_machine_busy_ns() - o->machine_ns);
    double self = (double)(bench_cpu_ns(getpid()) - o->self_ns);
    double other = t > 0 ? (machine - self) / (t * 1e9) : 0.0;
    return other > 0 ? other : 0.0; /* /proc/stat counts in clock ticks */
}

void bench_other_note(const struct bench_other *o, const char *what)
{
    bench_note("%s: everything else %.0f%% of a CPU while it ran", what,
               100 * bench_other_util(o));
}

int bench_cpu(int n)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    if (sched_getaffinity(0, sizeof set, &set) != 0) {
        return -1;
    }
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++) {
        if (CPU_ISSET(cpu, &set) && n-- == 0) {
            return cpu;
        }
    }
    return -1;
}

void bench_pin(int cpu)
{
    cpu_set_t set;
    if (cpu < 0) {
        return;
    }
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof set, &set) != 0) {
        perror("bench: sched_setaffinity");
    }
}

void bench_set_nodelay(int fd)
{
    int one = 1;
    (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

int bench_set_nonblocking(int fd)
{
    int flags = fcntl(fd, F_GETFL);
    return flags < 0 ? -1 : fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

void bench_loopback_addr(struct sockaddr_in *addr, long port)
{
    memset(addr, 0, sizeof *addr);
    addr->sin_family = AF_INET;
    addr->sin_port = htons((uint16_t)port);
    addr->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
}

int bench_listen_loopback(long port, int backlog, unsigned *bound)
{
    int one = 1;
    struct sockaddr_in addr;
    socklen_t len = sizeof addr;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return -1;
    }
    bench_loopback_addr(&addr, port);
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&addr, sizeof addr) != 0 || listen(fd, backlog) != 0 ||
        getsockname(fd, (struct sockaddr *)&addr, &len) != 0) {
        (void)close(fd);
        return -1;
    }
    *bound = ntohs(addr.sin_port);
    return fd;
}

long bench_raise_fd_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0) {
        return -1;
    }
    if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        (void)setrlimit(RLIMIT_NOFILE, &rl);
        (void)getrlimit(RLIMIT_NOFILE, &rl);
    }
    return rl.rlim_cur == RLIM_INFINITY ? 1L << 30 : (long)rl.rlim_cur;
}

void bench_result(const char *key, double value, const char *unit, const char *base,
                  const char *fmt, ...)
{
    va_list ap;
    printf("RESULT %s %.6g %s %s ", key, value, unit, base != NULL ? base : "-");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    (void)fflush(stdout);
}

void bench_note(const char *fmt, ...)
{
    va_list ap;
    printf("NOTE ");
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    (void)fflush(stdout);
}

/* Whether `name` is in `list`: names separated by commas, or "both" (epoll, st) or "all". */
bool bench_server_wanted(const char *list, const char *name)
{
    if (strcmp(list, "all") == 0) {
        return true;
    }
    if (strcmp(list, "both") == 0) {
        return strcmp(name, "epoll") == 0 || strcmp(name, "st") == 0;
    }
    size_t len = strlen(name);
    for (const char *at = list; at != NULL; at = strchr(at, ',')) {
        at += *at == ',';
        if (strncmp(at, name, len) == 0 && (at[len] == ',' || at[len] == '\0')) {
            return true;
        }
    }
    return false;
}

long bench_parse_long(const char *s)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < 0) {
        return -1;
    }
    return v;
}

unsigned long long bench_random(unsigned long long *state)
{
    return players_random(state); /* one PRNG for the whole tool */
}

double bench_median_field(const void *items, size_t size, int n, size_t offset)
{
    double values[BENCH_MAX_SAMPLES];
    n = n < BENCH_MAX_SAMPLES ? n : BENCH_MAX_SAMPLES;
    for (int k = 0; k < n; k++) {
        values[k] = *(const double *)(const void *)((const char *)items + (size_t)k * size + offset);
    }
    return bench_median(values, n);
}

pid_t bench_fork(void)
{
    (void)fflush(stdout);
    (void)fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) {
        perror("bench: fork");
    }
    return pid;
}

void bench_say_ready(int fd)
{
    char c = 'r';
    if (write(fd, &c, 1) != 1) {
        perror("bench: ready pipe");
    }
    (void)close(fd);
}

void bench_stop_child(pid_t pid)
{
    (void)kill(pid, SIGKILL);
    while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {
    }
}

int bench_in_child(int (*fn)(const void *arg), const void *arg)
{
    int status = 0;
    pid_t pid = bench_fork();
    if (pid < 0) {
        return -1;
    }
    if (pid == 0) {
        int rc = fn(arg);
        (void)fflush(stdout);
        (void)fflush(stderr);
        _exit(rc == 0 ? 0 : 1);
    }
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR) {
            perror("bench: waitpid");
            return -1;
        }
    }
    if (WIFSIGNALED(status)) {
        fprintf(stderr, "bench: child killed by signal %d\n", WTERMSIG(status));
        return -1;
    }
    return WEXITSTATUS(status);
}

bool bench_guard_pages(void)
{
#if defined(ST__GUARD_PAGES) && !ST__GUARD_PAGES
    return false;
#else
    return true;
#endif
}
