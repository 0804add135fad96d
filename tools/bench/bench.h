/*
 * The benchmark suite: shared helpers and the entry point of every group.
 *
 * Every figure is printed as one machine-readable line on stdout,
 *
 *   RESULT <key> <value> <unit> <base-key|-> <description...>
 *
 * where <base-key> names the figure this one is compared with (the raw
 * switch, or the epoll server at the same connection count). Remarks that
 * belong under the table (a bound that was hit, a utilisation) are printed
 * as `NOTE <text>`. Progress goes to stderr. tools/bench/run.sh collects the
 * lines of every group and prints one table.
 */
#ifndef BENCH_H
#define BENCH_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* How much work a group does: the full run, or a quick check that it works. */
struct bench_scale {
    bool smoke;     /* tiny counts, for the test suite */
    int reps;       /* timed repetitions; the median is reported */
    long exact;     /* > 0: exactly this many iterations, once, no warm-up (callgrind) */
    const char *only; /* micro: run only this figure (raw, min, cond, yield, cache, free) */
};

/* ---- util.c ---------------------------------------------------------------------- */

/* Monotonic clock in seconds. */
double bench_now(void);

/*
 * CPU time of the calling thread in seconds (user and system). The
 * micro-benchmarks are single-threaded and never idle, so on a quiet machine
 * this equals the elapsed time; on a busy one it leaves out the time the
 * benchmark was preempted.
 */
double bench_cpu_now(void);

/* Median of `n` values (reorders them). */
double bench_median(double *values, int n);

/* Sort `n` values in ascending order. */
void bench_sort(double *values, long n);

/* The nearest-rank percentile `pct` (0..100) of `n` sorted values; 0 with none. */
double bench_percentile(const double *sorted, long n, long pct);

/* Median of the double at `offset` in each of `n` items of `size` bytes (at most BENCH_MAX_SAMPLES). */
enum { BENCH_MAX_SAMPLES = 64 };
double bench_median_field(const void *items, size_t size, int n, size_t offset);

/* Resident set and page-table size of this process in KiB (VmRSS, VmPTE), or -1. */
long bench_vm_kib(const char *field);

/* Number of mappings of this process (lines of /proc/self/maps), or -1. */
long bench_map_count(void);

/* A sysctl-style integer from /proc/sys, or -1. */
long bench_proc_long(const char *path);

/*
 * CPU time a process has used, all its threads, in nanoseconds (schedstat,
 * else stat ticks), or -1. Threads that have exited are not counted.
 */
long long bench_cpu_ns(pid_t pid);

/* CPU time the whole machine has spent busy (all CPUs, /proc/stat, incl. steal), in ns, or -1. */
long long bench_machine_busy_ns(void);

/*
 * How much CPU the rest of the machine used while a group ran (a sign of a
 * disturbed measurement): start with bench_other_start(), and
 * bench_other_note() prints "<what>: everything else X% of a CPU".
 */
struct bench_other {
    long long machine_ns;
    long long self_ns;
    double t;
};
void bench_other_start(struct bench_other *o);
double bench_other_util(const struct bench_other *o);
void bench_other_note(const struct bench_other *o, const char *what);

/* The n-th CPU this process may run on, or -1 if there are not that many. */
int bench_cpu(int n);

/* Pin the calling process to one CPU (no-op for cpu < 0). */
void bench_pin(int cpu);

/* TCP_NODELAY on a socket. */
void bench_set_nodelay(int fd);

/* O_NONBLOCK on a descriptor; 0 or -1. */
int bench_set_nonblocking(int fd);

/* 127.0.0.1:port. */
struct sockaddr_in;
void bench_loopback_addr(struct sockaddr_in *addr, long port);

/* A listening socket on 127.0.0.1:port (0: any free port); its port in *bound. */
int bench_listen_loopback(long port, int backlog, unsigned *bound);

/* Raise the soft fd limit to the hard one; returns the new soft limit. */
long bench_raise_fd_limit(void);

/* Print one RESULT line (the description is printf-style). */
void bench_result(const char *key, double value, const char *unit, const char *base,
                  const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* Print one NOTE line. */
void bench_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Whether server `name` is in `list`: names separated by commas, "both" (epoll, st) or "all". */
bool bench_server_wanted(const char *list, const char *name);

/* Parse a non-negative decimal number; -1 if it is not one. */
long bench_parse_long(const char *s);

/* A small deterministic PRNG (xorshift64*), so runs repeat exactly. */
unsigned long long bench_random(unsigned long long *state);

/* fork() with stdout and stderr flushed first; says why on failure (-1). */
pid_t bench_fork(void);

/* A server child tells its parent it accepts: one byte down the pipe `fd`, which it closes. */
void bench_say_ready(int fd);

/* SIGKILL a child and reap it. */
void bench_stop_child(pid_t pid);

/*
 * Run `fn(arg)` in a child process and wait for it, so that every group
 * starts from a fresh process (fresh st scheduler, clean RSS). Returns the
 * child's exit status, or -1.
 */
int bench_in_child(int (*fn)(const void *arg), const void *arg);

/* Whether this build puts guard pages below coroutine stacks. */
bool bench_guard_pages(void);

/* ---- the groups -------------------------------------------------------------------- */

/* micro.c: raw switch, cond ping-pong, yield, create+join (cache and free). */
int bench_micro(const struct bench_scale *scale);

/* micro.c: the timeout-heap test with `sleepers` coroutines, `rounds` rounds. */
int bench_heap(const struct bench_scale *scale, long sleepers, long rounds);

/* memory.c: RSS per coroutine blocked in st_read (`sleep` false) or st_usleep. */
int bench_memory(bool sleep, long count, long stack_kib);

/*
 * echo.c: the driver. For `rounds` rounds, for each server (the plain epoll
 * loop, then st), fork the server, open the connections, warm up, measure
 * `windows` windows; print the medians over all windows of all rounds.
 */
struct echo_params {
    const char *servers;  /* names separated by commas, "both" (epoll,st) or "all" */
    long conns;
    double warmup_s;
    double window_s;
    int windows;
    int rounds;
};
int bench_echo(const struct echo_params *params);

/* echo's built-in servers, in the order they alternate (peers follow); NULL ends the list. */
extern const char *const bench_echo_servers[];

/*
 * echo.c: the st server's frame: st_init with `eventsys`, then a listener
 * looping st_accept + st_thread_create(connection, netfd) (TCP_NODELAY on
 * each with `nodelay`); writes a byte to `ready_fd` (closing it) once it
 * accepts, unless it is -1. Returns only on failure.
 */
int bench_st_serve(int lfd, int eventsys, void *(*connection)(void *fd), bool nodelay,
                   int ready_fd);

/* echo.c: a standalone server; prints `port <n>`. `once`: exit when the first connection ends. */
int bench_serve(const char *server, long port, bool once);

/*
 * echo.c: a standalone client: `conns` connections, exactly `requests` round
 * trips in all; with `gap_us`, each request is sent that long after the
 * previous echo arrived (so that a slowed-down server is idle when it comes).
 */
int bench_client(long port, long conns, long requests, long gap_us);

/* fairness.c: first-byte latency of a burst of new connections to a starved server. */
struct fairness_params {
    const char *servers; /* names separated by commas, "both" (epoll,st) or "all" */
    long conns;          /* connections opened at once */
    long backlog;        /* the listen backlog */
    int share;           /* percent of one CPU the server gets (0: all of it) */
    long period_us;      /* the period of a cgroup quota (a CFS quota is at least 1 ms: see starve.c) */
    const char *method;  /* how: auto, cgroup2, cgroup1, spin or none (starve.c) */
    double limit_s;      /* a run ends when every connection is served or after this long */
    bool warm;           /* a first burst, closed, before the measured one */
    double pause_s;      /* how long the server has been up and idle when the burst starts */
    int rounds;
    bool serve_all;      /* fail unless every run served every connection (the smoke test) */
};
int bench_fairness(const struct fairness_params *params);

/* fairness's built-in servers, in the order they alternate (peers follow); NULL ends the list. */
extern const char *const bench_fair_servers[];

/*
 * disk.c: a 1 ms tick's lateness and an echo server's round trips while a
 * coroutine of the same scheduler writes `size_mib` MiB to a file in `dir`,
 * for each file I/O mode, against a plain write loop.
 */
struct disk_params {
    const char *modes; /* thread, blocking, workers, io_uring separated by commas, or "all" */
    const char *dir;   /* where the file is written (and removed) */
    long size_mib;     /* the file's size */
    long chunk_kib;    /* bytes per write */
    long sync_mib;     /* an fsync after every this many MiB (a multiple of the chunk) */
    long conns;        /* echo client connections (0: no echo) */
    double before_s;   /* the phase with no writes first */
    int rounds;        /* each mode and the plain loop run this often, alternating */
};
int bench_disk(const struct disk_params *params);

/* ---- starve.c: a small fixed share of one CPU for one process ------------------------ */

enum bench_starve_kind {
    BENCH_STARVE_NONE,
    BENCH_STARVE_RT,
    BENCH_STARVE_CGROUP2,
    BENCH_STARVE_CGROUP1,
    BENCH_STARVE_SPIN
};
enum { BENCH_MAX_SPINNERS = 64 };

struct bench_starve {
    enum bench_starve_kind kind;
    int share;          /* percent of one CPU (for spinners: what their count gives) */
    int cpu;            /* the CPU the starved process is pinned to, or -1 */
    long period_us;     /* the quota's period */
    int rt_priority;    /* rt: the server's SCHED_FIFO priority, the caller's */
    char dir[512];      /* the cgroup made for it */
    char procs[32];     /* the file of that cgroup a pid is written to */
    pid_t spinners[BENCH_MAX_SPINNERS];
    int nspinners;
    char why[1024];     /* what was chosen (and why the ones before it were not) */
    char tried[768];    /* why the methods tried first could not be used */
};

/*
 * Get ready to hold one process to `share` percent of CPU `cpu` (a quota
 * per `period_us` for the cgroup methods), by
 * `method`: auto (the first that works of rt (only for a real-time caller),
 * cgroup2, cgroup1, spin), one of those, or none. 0, or -1 with the reason
 * in s->why.
 */
int bench_starve_start(struct bench_starve *s, const char *method, int share, long period_us,
                       int cpu);

/* In the process to starve (a child, after its pinning): join the cgroup. */
int bench_starve_enter(const struct bench_starve *s);

/* Undo everything: kill the spinners, remove the cgroup (its process must be reaped). */
void bench_starve_stop(struct bench_starve *s);

/*
 * peer.c: servers outside st_bench (tools/bench/peers/), named with
 * `--peer NAME=PATH` and then used like the built-in servers.
 */
enum { BENCH_MAX_PEERS = 8 };
int bench_peer_add(const char *spec); /* "NAME=PATH"; -1 (with a message) if malformed */
const char *bench_peer_find(const char *name); /* its PATH, or NULL */
/*
 * A group's servers in the order they alternate: its built-in ones
 * (`builtin`, ended by NULL), then every peer, into `names`, which has room
 * for them and BENCH_MAX_PEERS more. Returns how many.
 */
size_t bench_server_list(const char *const *builtin, const char **names);
/*
 * Run the peer with the listening socket as fd 3 and, if ready_fd >= 0, that
 * pipe as fd 4; returns (-1) only on failure.
 */
int bench_peer_exec(const char *name, int lfd, int ready_fd, bool once);

#endif /* BENCH_H */
