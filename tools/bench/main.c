/*
 * st_bench: the benchmark suite of st (see docs/performance.md).
 *
 * usage: st_bench [--smoke | all | COMMAND [options]]
 *
 *   all        every group with the full sizes, each in a fresh process
 *   --smoke    every group with tiny sizes, no timing checks (the test suite)
 *   micro      raw switch, cond ping-pong, yield, create+join cached and free
 *              [--reps N] [--only raw|min|cond|yield|burst|cache|free] [--exact N]
 *   heap       the timeout-heap test [--sleepers N] [--rounds N] [--reps N]
 *   echo       loopback echo, st and plain epoll servers [--server NAME[,NAME...]|both|all]
 *              (names: epoll, st, st-io_uring, epoll-drain; both: epoll,st)
 *              [--conns N[,N...]] [--repeat N] [--warmup S] [--window S] [--windows N]
 *   memory     RSS per idle coroutine --read|--sleep [--count N] [--stack KIB]
 *   fairness   first-byte latency of N connections opened at once to a server
 *              starved of CPU [--server NAME[,NAME...]|both|all] (names: epoll,
 *              st, epoll-timers, epoll-st, st-poll, st-select) [--conns N[,N...]] [--share PCT]
 *              [--method auto|rt|cgroup2|cgroup1|spin|none] [--period US] [--backlog N]
 *              [--limit S] [--repeat N] [--warm] [--pause S]
 *   disk       a 1 ms tick's lateness and echo round trips while a coroutine
 *              writes a large file, per file I/O mode (blocking, workers,
 *              io_uring), against a plain write loop alone and on a pthread
 *              beside the scheduler (thread) [--mode NAME[,NAME...]|all]
 *              [--dir DIR] [--size MIB] [--chunk KIB] [--sync MIB] [--conns N] [--before S]
 *              [--repeat N]
 *   serve      a standalone echo server --server st|st-io_uring|epoll|epoll-drain [--port P] [--once]
 *   client     a standalone client --port P --requests N [--conns N] [--gap-us N]
 *
 * echo, serve and fairness also take --peer NAME=PATH (repeatable): a server
 * from outside this program (tools/bench/peers/: an echo server, or for
 * fairness a player server), then a server name like the others.
 *
 * Results are RESULT/NOTE lines on stdout (see bench.h); run.sh tabulates.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

enum job_kind { JOB_MICRO, JOB_HEAP, JOB_ECHO, JOB_MEMORY, JOB_FAIRNESS, JOB_DISK };

struct job {
    enum job_kind kind;
    struct bench_scale scale;
    long count;      /* heap: sleepers; memory: coroutines */
    long size;       /* heap: rounds; memory: stack KiB */
    bool sleep;      /* memory: sleepers instead of readers */
    struct echo_params echo;
    struct fairness_params fairness;
    struct disk_params disk;
};

static int run_job(const void *arg)
{
    const struct job *job = arg;
    switch (job->kind) {
    case JOB_MICRO:
        return bench_micro(&job->scale);
    case JOB_HEAP:
        return bench_heap(&job->scale, job->count, job->size);
    case JOB_ECHO:
        return bench_echo(&job->echo);
    case JOB_MEMORY:
        return bench_memory(job->sleep, job->count, job->size);
    case JOB_FAIRNESS:
        return bench_fairness(&job->fairness);
    case JOB_DISK:
        return bench_disk(&job->disk);
    }
    return -1;
}

/* ---- options ---------------------------------------------------------------------- */

struct options {
    struct bench_scale scale;
    long reps;
    long sleepers;
    long rounds;
    long repeat;
    const char *server;
    const char *conns; /* NULL: the command's default */
    double warmup;
    double window;
    long windows;
    int memory_mode;  /* 0 unset, 1 read, 2 sleep */
    long count;
    long stack_kib;
    long port;
    long requests;
    long gap_us;
    bool once;
    bool warm;
    long share;
    long backlog;
    long period_us;
    const char *method;
    double limit;
    double pause;
    const char *modes;
    const char *dir;
    long size_mib;
    long chunk_kib;
    long sync_mib;
    double before;
};

static void usage(void)
{
    fprintf(stderr,
            "usage: st_bench [--smoke | all | COMMAND [options]]\n"
            "  micro  [--reps N] [--only raw|min|cond|yield|burst|cache|free] [--exact N]\n"
            "  heap   [--sleepers N] [--rounds N] [--reps N]\n"
            "  echo   [--server NAME[,NAME...]|both|all] [--conns N[,N...]] [--repeat N] [--warmup S]"
            " [--window S] [--windows N]\n"
            "  memory --read|--sleep [--count N] [--stack KIB]\n"
            "  fairness [--server NAME[,NAME...]|both|all] [--conns N[,N...]] [--share PCT]\n"
            "           [--method auto|rt|cgroup2|cgroup1|spin|none] [--period US] [--backlog N]\n"
            "           [--limit S] [--repeat N] [--warm] [--pause S]\n"
            "  disk   [--mode thread|blocking|workers|io_uring[,...]|all] [--dir DIR] [--size MIB]\n"
            "         [--chunk KIB] [--sync MIB] [--conns N] [--before S] [--repeat N]\n"
            "  serve  --server st|st-io_uring|epoll|epoll-drain [--port P] [--once]\n"
            "  client --port P --requests N [--conns N] [--gap-us N]\n"
            "  echo, serve, fairness: --peer NAME=PATH adds the server NAME (tools/bench/peers/)\n");
}

/* A duration under an hour, in seconds: more than 0, or 0 too with `zero_ok`. */
static int parse_duration(const char *s, double *out, bool zero_ok)
{
    char *end = NULL;
    double v = strtod(s, &end);
    if (end == s || *end != '\0' || !((v > 0 || (zero_ok && v == 0)) && v < 3600)) {
        return -1;
    }
    *out = v;
    return 0;
}

static int parse_seconds(const char *s, double *out)
{
    return parse_duration(s, out, false);
}

/* The variable of an option that takes a number, or NULL if `name` is not one. */
static long *number_option(struct options *o, const char *name)
{
    struct {
        const char *name;
        long *value;
    } table[] = {
        {"--reps", &o->reps},       {"--exact", &o->scale.exact}, {"--sleepers", &o->sleepers},
        {"--rounds", &o->rounds},   {"--windows", &o->windows},   {"--count", &o->count},
        {"--stack", &o->stack_kib}, {"--port", &o->port},         {"--requests", &o->requests},
        {"--gap-us", &o->gap_us},   {"--repeat", &o->repeat},     {"--share", &o->share},
        {"--backlog", &o->backlog}, {"--period", &o->period_us},  {"--size", &o->size_mib},
        {"--chunk", &o->chunk_kib}, {"--sync", &o->sync_mib},
    };
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        if (strcmp(table[i].name, name) == 0) {
            return table[i].value;
        }
    }
    return NULL;
}

static int parse_option(struct options *o, const char *name, const char *value)
{
    long *number = number_option(o, name);
    if (number != NULL) {
        long v = value != NULL ? bench_parse_long(value) : -1;
        if (v < 0) {
            return -1;
        }
        *number = v;
        return 0;
    }
    if (value == NULL) {
        return -1;
    }
    if (strcmp(name, "--only") == 0) {
        o->scale.only = value;
    } else if (strcmp(name, "--server") == 0) {
        o->server = value;
    } else if (strcmp(name, "--peer") == 0) {
        return bench_peer_add(value);
    } else if (strcmp(name, "--conns") == 0) {
        o->conns = value;
    } else if (strcmp(name, "--warmup") == 0) {
        return parse_seconds(value, &o->warmup);
    } else if (strcmp(name, "--window") == 0) {
        return parse_seconds(value, &o->window);
    } else if (strcmp(name, "--limit") == 0) {
        return parse_seconds(value, &o->limit);
    } else if (strcmp(name, "--pause") == 0) {
        return parse_duration(value, &o->pause, true);
    } else if (strcmp(name, "--method") == 0) {
        o->method = value;
    } else if (strcmp(name, "--mode") == 0) {
        o->modes = value;
    } else if (strcmp(name, "--dir") == 0) {
        o->dir = value;
    } else if (strcmp(name, "--before") == 0) {
        return parse_seconds(value, &o->before);
    } else {
        return -1;
    }
    return 0;
}

static int parse_options(int argc, char **argv, struct options *o)
{
    for (int i = 0; i < argc; i++) {
        const char *name = argv[i];
        if (strcmp(name, "--read") == 0 || strcmp(name, "--sleep") == 0) {
            o->memory_mode = strcmp(name, "--read") == 0 ? 1 : 2;
        } else if (strcmp(name, "--once") == 0) {
            o->once = true;
        } else if (strcmp(name, "--warm") == 0) {
            o->warm = true;
        } else if (parse_option(o, name, i + 1 < argc ? argv[i + 1] : NULL) == 0) {
            i++;
        } else {
            fprintf(stderr, "st_bench: bad option '%s'\n", name);
            return -1;
        }
    }
    if (o->reps < 1 || o->reps > 64 || o->windows < 1 || o->windows > 32 || o->repeat < 1 ||
        o->repeat > 32) {
        fprintf(stderr, "st_bench: --reps must be 1..64, --windows and --repeat 1..32\n");
        return -1;
    }
    o->scale.reps = (int)o->reps;
    return 0;
}

/* ---- the groups ------------------------------------------------------------------------ */

/* The echo or fairness job at one connection count. */
static struct job count_job(const struct options *o, enum job_kind kind, long conns)
{
    struct job job = {.kind = kind};
    if (kind == JOB_ECHO) {
        job.echo = (struct echo_params){.servers = o->server,
                                        .conns = conns,
                                        .warmup_s = o->warmup,
                                        .window_s = o->window,
                                        .windows = (int)o->windows,
                                        .rounds = (int)o->repeat};
        fprintf(stderr, "st_bench: echo %s, %ld connections\n", o->server, conns);
    } else {
        job.fairness = (struct fairness_params){.servers = o->server,
                                                .conns = conns,
                                                .backlog = o->backlog,
                                                .share = (int)o->share,
                                                .period_us = o->period_us,
                                                .method = o->method,
                                                .limit_s = o->limit,
                                                .warm = o->warm,
                                                .pause_s = o->pause,
                                                .rounds = (int)o->repeat,
                                                .serve_all = o->scale.smoke};
        fprintf(stderr, "st_bench: fairness %s, %ld connections, %ld%% of a CPU\n", o->server,
                conns, o->share);
    }
    return job;
}

/* An echo or fairness group at each connection count of `conn_list`, each in a fresh process. */
static int run_counts(const struct options *o, enum job_kind kind, const char *conn_list)
{
    char list[256];
    int rc = 0;
    (void)snprintf(list, sizeof list, "%s", conn_list);
    for (char *save = NULL, *tok = strtok_r(list, ",", &save); tok != NULL;
         tok = strtok_r(NULL, ",", &save)) {
        long conns = bench_parse_long(tok);
        if (conns < 1) {
            fprintf(stderr, "st_bench: bad connection count '%s'\n", tok);
            return -1;
        }
        struct job job = count_job(o, kind, conns);
        rc |= bench_in_child(run_job, &job) != 0;
    }
    return rc;
}

/* The echo runs: each server at each connection count, alternating servers. */
static int run_echo(const struct options *o, const char *conn_list)
{
    return run_counts(o, JOB_ECHO, conn_list);
}

/* The fairness bursts: each connection count in a fresh process. */
static int run_fairness(const struct options *o, const char *conn_list)
{
    if (o->share > 100 || o->backlog < 1 || o->backlog > 65535) {
        fprintf(stderr, "st_bench: --share must be 0..100, --backlog 1..65535\n");
        return -1;
    }
    return run_counts(o, JOB_FAIRNESS, conn_list);
}

/* A group in a fresh child process (`all`, --smoke), or in this one (single commands). */
static int run_group(const struct job *job, bool child)
{
    return (child ? bench_in_child(run_job, job) : run_job(job)) != 0;
}

static int run_memory(bool sleep, long count, long stack_kib, bool child)
{
    struct job job = {.kind = JOB_MEMORY, .sleep = sleep, .count = count, .size = stack_kib};
    fprintf(stderr, "st_bench: memory, %ld %s, %ld KiB stacks\n", count,
            sleep ? "sleepers" : "readers", stack_kib);
    return run_group(&job, child);
}

static int run_heap(const struct bench_scale *scale, long sleepers, long rounds, bool child)
{
    struct job job = {.kind = JOB_HEAP, .scale = *scale, .count = sleepers, .size = rounds};
    fprintf(stderr, "st_bench: heap, %ld sleepers x %ld rounds\n", sleepers, rounds);
    return run_group(&job, child);
}

static int run_disk(const struct options *o, const char *conns, bool child)
{
    long n = bench_parse_long(conns);
    if (n < 0) {
        fprintf(stderr, "st_bench: bad connection count '%s'\n", conns);
        return 1;
    }
    struct job job = {.kind = JOB_DISK,
                      .disk = {.modes = o->modes,
                               .dir = o->dir,
                               .size_mib = o->size_mib,
                               .chunk_kib = o->chunk_kib,
                               .sync_mib = o->sync_mib,
                               .conns = n,
                               .before_s = o->before,
                               .rounds = (int)o->repeat}};
    fprintf(stderr, "st_bench: disk, %ld MiB to %s\n", o->size_mib, o->dir);
    return run_group(&job, child);
}

static int run_micro(const struct bench_scale *scale, bool child)
{
    struct job job = {.kind = JOB_MICRO, .scale = *scale};
    fprintf(stderr, "st_bench: micro\n");
    return run_group(&job, child);
}

/* Every group; `smoke` shrinks them to a few thousand iterations. */
static int run_all(struct options *o, bool smoke)
{
    int rc = 0;
    o->scale.smoke = smoke;
    if (smoke) {
        o->scale.reps = 3;
        o->warmup = 0.05;
        o->window = 0.05;
        o->windows = 2;
        o->repeat = 1;
    }
    o->server = "epoll,st,epoll-drain";
    rc |= run_micro(&o->scale, true);
    rc |= run_heap(&o->scale, smoke ? 100 : 1000, smoke ? 5 : 1000, true);
    if (!smoke) {
        rc |= run_heap(&o->scale, 100000, 10, true);
    }
    rc |= run_echo(o, smoke ? "1,20" : "1,100,1000,10000");
    /* Smoke: a small burst to every built-in server, no starvation. */
    o->server = smoke ? "all" : "both";
    if (smoke) {
        o->share = 0;
        o->method = "none";
        o->limit = 10;
        o->pause = 0.05;
    }
    rc |= run_fairness(o, smoke ? "20" : "500,1000");
    if (smoke) {
        o->size_mib = 8;
        o->sync_mib = 4;
        o->before = 0.1;
    }
    rc |= run_disk(o, smoke ? "2" : "8", true);
    rc |= run_memory(false, smoke ? 500 : 100000, 16, true);
    rc |= run_memory(true, smoke ? 500 : 1000000, 16, true);
    if (!smoke) {
        rc |= run_memory(false, 100000, 128, true);
        rc |= run_memory(true, 1000000, 128, true);
    }
    return rc;
}

static int run_command(const char *cmd, struct options *o)
{
    if (strcmp(cmd, "micro") == 0) {
        return run_micro(&o->scale, false);
    }
    if (strcmp(cmd, "heap") == 0) {
        return run_heap(&o->scale, o->sleepers, o->rounds, false);
    }
    if (strcmp(cmd, "echo") == 0) {
        return run_echo(o, o->conns != NULL ? o->conns : "1,100,1000,10000");
    }
    if (strcmp(cmd, "fairness") == 0) {
        return run_fairness(o, o->conns != NULL ? o->conns : "500");
    }
    if (strcmp(cmd, "disk") == 0) {
        return run_disk(o, o->conns != NULL ? o->conns : "8", false);
    }
    if (strcmp(cmd, "memory") == 0 && o->memory_mode != 0) {
        return run_memory(o->memory_mode == 2, o->count, o->stack_kib, false);
    }
    if (strcmp(cmd, "serve") == 0 && strcmp(o->server, "both") != 0) {
        return bench_serve(o->server, o->port, o->once) != 0;
    }
    if (strcmp(cmd, "client") == 0 && o->port > 0 && o->requests > 0) {
        long conns = o->conns != NULL ? bench_parse_long(o->conns) : 1;
        return bench_client(o->port, conns > 0 ? conns : 1, o->requests, o->gap_us) != 0;
    }
    usage();
    return 2;
}

int main(int argc, char **argv)
{
    struct options o = {
        .reps = 7,
        .sleepers = 1000,
        .rounds = 1000,
        .server = "both",
        .share = 5,
        .backlog = 512,
        .period_us = 10000,
        .method = "auto",
        .limit = 8,
        .pause = 0.5,
        .repeat = 3,
        .warmup = 0.5,
        .window = 0.5,
        .windows = 3,
        .count = 100000,
        .stack_kib = 16,
        .modes = "all",
        .dir = ".",
        .size_mib = 1024,
        .chunk_kib = 1024,
        .sync_mib = 64,
        .before = 1,
    };
    if (argc < 2) {
        usage();
        return 2;
    }
    if (parse_options(argc - 2, argv + 2, &o) != 0) {
        usage();
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    if (strcmp(argv[1], "--smoke") == 0 || strcmp(argv[1], "all") == 0) {
        return run_all(&o, strcmp(argv[1], "--smoke") == 0) != 0;
    }
    return run_command(argv[1], &o);
}
