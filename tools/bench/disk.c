/*
 * Disk writes against the scheduler: how late a coroutine that wakes every
 * millisecond gets, and how an echo server fares, while another coroutine
 * of the same scheduler writes a large file to the disk.
 *
 * The write load is a recorder's: `size` MiB in `chunk` KiB writes through
 * st_write on a netfd from st_open, with an st_fsync every `sync` MiB and
 * one at the end. Each file I/O mode runs in a process of its own:
 *
 *   blocking   ST_FILE_IO_BLOCKING, epoll: State Threads' behaviour, every
 *              write and fsync runs on the scheduler's pthread;
 *   workers    ST_FILE_IO_WORKERS, epoll: the pool of worker pthreads;
 *   io_uring   ST_FILE_IO_URING on the io_uring event system (skipped,
 *              with the reason, where the library or kernel has none).
 *
 * In each, a tick coroutine sleeps 1 ms at a time and records by how much
 * each wake-up was late, first for `before` seconds with no writes, then
 * while the writes run; an echo server on the same scheduler serves `conns`
 * client connections (in a separate process on the other CPU), each
 * sending a 64-byte request 1 ms after the previous answer came. The
 * client splits its round trips into the same two phases and reports the
 * requests per second and the 99th-percentile round trip of each.
 *
 * Two references, each also in a process of its own:
 *
 *   plain      a plain write() loop of the same shape with fsync(), alone:
 *              what the disk takes;
 *   thread     the same loop on a pthread of its own beside the scheduler,
 *              while the tick and the echo run as in the modes: what the
 *              disk takes with the same load on the machine's CPUs.
 *
 * Every round runs the plain loop, then each of the others, each in a fresh
 * process; the table has the medians over the rounds, and each mode's
 * throughput over the plain loop's and over the writer thread's of the same
 * round (the disk's speed drifts by a factor of two from run to run). The
 * file lives in `dir` (the current directory by default) and is removed
 * afterwards; on tmpfs the figures say nothing about a disk, and a NOTE
 * says so.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "bench.h"
#include "st.h"

enum {
    MESSAGE = 64,             /* bytes of an echo request */
    CLIENT_GAP_US = 1000,     /* a connection's pause between an answer and its next request */
    TICK_US = 1000,           /* the tick coroutine's sleep */
    MAX_CONNS = 256,
    MAX_SAMPLES = 1 << 22,    /* per phase: ticks, or client round trips */
};

/* Phase boundaries, in bench_now() seconds, that the server hands to the client. */
struct disk_phases {
    double before_start;
    double writes_start;
    double writes_end;
};

/* Latencies of one phase, in seconds. */
struct disk_samples {
    double *v;
    long n;
};

static int samples_init(struct disk_samples *s)
{
    s->n = 0;
    s->v = malloc(sizeof(double) * MAX_SAMPLES);
    return s->v != NULL ? 0 : -1;
}

static void samples_add(struct disk_samples *s, double value)
{
    if (s->n < MAX_SAMPLES) {
        s->v[s->n++] = value;
    }
}

/* The nearest-rank percentile `pct` (0..100) of the samples (sorts them); 0 with none. */
static double percentile(struct disk_samples *s, long pct)
{
    bench_sort(s->v, s->n);
    return bench_percentile(s->v, s->n, pct);
}

static char *fill_chunk(long chunk_kib)
{
    size_t len = (size_t)chunk_kib * 1024;
    char *buf = malloc(len);
    if (buf != NULL) {
        for (size_t i = 0; i < len; i++) {
            buf[i] = (char)('a' + i % 26);
        }
    }
    return buf;
}

static void file_path(char *out, size_t len, const char *dir)
{
    (void)snprintf(out, len, "%s/st_bench_disk.%ld", dir, (long)getpid());
}

/* ---- the reference: a plain write loop -------------------------------------------------- */

/* Write the load with write() and fsync(); MiB per second, or -1. */
static double plain_write_loop(const struct disk_params *p)
{
    char path[4096];
    file_path(path, sizeof path, p->dir);
    char *chunk = fill_chunk(p->chunk_kib);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (chunk == NULL || fd < 0) {
        perror("bench: disk: plain loop");
        free(chunk);
        return -1;
    }
    size_t len = (size_t)p->chunk_kib * 1024;
    long long total = (long long)p->size_mib << 20;
    long long sync_every = (long long)p->sync_mib << 20;
    double t0 = bench_now();
    int rc = 0;
    for (long long done = 0; done < total && rc == 0; done += (long long)len) {
        size_t off = 0;
        while (off < len) {
            ssize_t n = write(fd, chunk + off, len - off);
            if (n <= 0) {
                rc = -1;
                break;
            }
            off += (size_t)n;
        }
        if (rc == 0 && (done + (long long)len) % sync_every == 0) {
            rc = fsync(fd);
        }
    }
    rc |= fsync(fd);
    double t1 = bench_now();
    (void)close(fd);
    (void)unlink(path);
    free(chunk);
    if (rc != 0) {
        perror("bench: disk: plain loop");
        return -1;
    }
    return (double)p->size_mib / (t1 - t0);
}

/* ---- the echo client (a process of its own) ----------------------------------------------- */

struct client_conn {
    int fd;
    double sent;  /* when the outstanding request went out; 0: none */
    double due;   /* when the next request goes out */
    size_t got;   /* bytes of the answer read */
};

/* File the round trip `rtt` that ended at `t` under the phase it ended in. */
static void client_file(const struct disk_phases *ph, struct disk_samples *before,
                        struct disk_samples *during, double t, double rtt)
{
    if (t >= ph->before_start && t < ph->writes_start) {
        samples_add(before, rtt);
    } else if (t >= ph->writes_start && t < ph->writes_end) {
        samples_add(during, rtt);
    }
}

/* What the client measured, handed to the server's process through a pipe. */
struct echo_figures {
    double before_rps;
    double before_p99; /* seconds */
    double during_rps;
    double during_p99;
};

struct echo_client_state {
    struct client_conn c[MAX_CONNS];
    long conns;
    int ep;
    struct disk_samples ends; /* when each round trip ended */
    struct disk_samples rtts; /* and how long it took */
};

/* Open the connections, each due to send at once; 0 or -1. */
static int client_connect(struct echo_client_state *cl, long port, int ctl)
{
    cl->ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN, .data.u32 = (unsigned)MAX_CONNS};
    if (cl->ep < 0 || epoll_ctl(cl->ep, EPOLL_CTL_ADD, ctl, &ev) != 0) {
        return -1;
    }
    struct sockaddr_in addr;
    bench_loopback_addr(&addr, port);
    for (long i = 0; i < cl->conns; i++) {
        struct client_conn *c = &cl->c[i];
        *c = (struct client_conn){.fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)};
        if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&addr, sizeof addr) != 0) {
            perror("bench: disk: client connect");
            return -1;
        }
        bench_set_nodelay(c->fd);
        (void)bench_set_nonblocking(c->fd);
        ev = (struct epoll_event){.events = EPOLLIN, .data.u32 = (unsigned)i};
        (void)epoll_ctl(cl->ep, EPOLL_CTL_ADD, c->fd, &ev);
        c->due = bench_now();
    }
    return 0;
}

/* Send the requests that are due; when the next one is due. */
static double client_send_due(struct echo_client_state *cl)
{
    static const char msg[MESSAGE] = {'x'};
    double now = bench_now();
    double next = now + 1;
    for (long i = 0; i < cl->conns; i++) {
        struct client_conn *c = &cl->c[i];
        if (c->sent == 0 && c->due <= now && write(c->fd, msg, sizeof msg) == (ssize_t)sizeof msg) {
            c->sent = now;
            c->got = 0;
        }
        if (c->sent == 0 && c->due < next) {
            next = c->due;
        }
    }
    return next;
}

/* Read what connection `c` has; a whole answer ends its round trip. */
static void client_receive(struct echo_client_state *cl, struct client_conn *c)
{
    char buf[MESSAGE];
    ssize_t got = read(c->fd, buf, sizeof buf - c->got);
    if (got <= 0) {
        return;
    }
    c->got += (size_t)got;
    if (c->got == MESSAGE && c->sent != 0) {
        double t = bench_now();
        samples_add(&cl->ends, t);
        samples_add(&cl->rtts, t - c->sent);
        c->sent = 0;
        c->due = t + CLIENT_GAP_US * 1e-6;
    }
}

/* The run is over: split the round trips by the phases on `ctl`, send the figures to `out`. */
static int client_finish(struct echo_client_state *cl, int ctl, int out)
{
    struct disk_phases ph;
    struct disk_samples before;
    struct disk_samples during;
    if (read(ctl, &ph, sizeof ph) != (ssize_t)sizeof ph || samples_init(&before) != 0 ||
        samples_init(&during) != 0) {
        return 1;
    }
    for (long s = 0; s < cl->ends.n; s++) {
        client_file(&ph, &before, &during, cl->ends.v[s], cl->rtts.v[s]);
    }
    double before_s = ph.writes_start - ph.before_start;
    double during_s = ph.writes_end - ph.writes_start;
    struct echo_figures f = {
        .before_rps = before_s > 0 ? (double)before.n / before_s : 0,
        .before_p99 = percentile(&before, 99),
        .during_rps = during_s > 0 ? (double)during.n / during_s : 0,
        .during_p99 = percentile(&during, 99),
    };
    return write(out, &f, sizeof f) == (ssize_t)sizeof f ? 0 : 1;
}

/*
 * Keep `conns` connections to `port` busy with paced requests until the
 * phases arrive on `ctl` (the server's end of the run), then send the
 * figures to `out`. Round trips are kept with their end time until the
 * phases are known.
 */
static int echo_client(long port, long conns, int ctl, int out)
{
    static struct echo_client_state cl;
    cl.conns = conns;
    if (samples_init(&cl.ends) != 0 || samples_init(&cl.rtts) != 0 ||
        client_connect(&cl, port, ctl) != 0) {
        return 1;
    }
    for (;;) {
        double next = client_send_due(&cl);
        struct epoll_event events[MAX_CONNS + 1];
        int timeout_ms = (int)((next - bench_now()) * 1e3);
        int n = epoll_wait(cl.ep, events, MAX_CONNS + 1, timeout_ms > 0 ? timeout_ms : 0);
        for (int k = 0; k < n; k++) {
            unsigned i = events[k].data.u32;
            if (i == (unsigned)MAX_CONNS) {
                return client_finish(&cl, ctl, out);
            }
            client_receive(&cl, &cl.c[i]);
        }
    }
}

/* ---- the st server: ticks, echo and the writer on one scheduler -------------------------- */

struct disk_run {
    const struct disk_params *p;
    bool writing;               /* the writes are under way: ticks go to `during` */
    bool stop;                  /* the tick coroutine ends */
    struct disk_samples before; /* tick lateness, seconds */
    struct disk_samples during;
};

static void *tick_main(void *arg)
{
    struct disk_run *run = arg;
    while (!run->stop) {
        bool writing = run->writing;
        double t = bench_now();
        if (st_usleep(TICK_US) != 0) {
            break;
        }
        double late = bench_now() - t - TICK_US * 1e-6;
        /* A wake-up late for what came after the writes (removing the file) is not counted. */
        if (!run->stop && writing == run->writing) {
            samples_add(writing ? &run->during : &run->before, late > 0 ? late : 0);
        }
    }
    return NULL;
}

static void *echo_conn(void *arg)
{
    st_netfd_t fd = arg;
    char buf[MESSAGE];
    ssize_t n;
    while ((n = st_read(fd, buf, sizeof buf, ST_UTIME_NO_TIMEOUT)) > 0) {
        if (st_write(fd, buf, (size_t)n, ST_UTIME_NO_TIMEOUT) != n) {
            break;
        }
    }
    (void)st_netfd_close(fd);
    return NULL;
}

static void *echo_listener(void *arg)
{
    st_netfd_t lfd = arg;
    st_netfd_t fd;
    while ((fd = st_accept(lfd, NULL, NULL, ST_UTIME_NO_TIMEOUT)) != NULL) {
        int one = 1;
        (void)setsockopt(st_netfd_fileno(fd), IPPROTO_TCP, 1 /* TCP_NODELAY */, &one, sizeof one);
        if (st_thread_create(echo_conn, fd, 0, 0) == NULL) {
            (void)st_netfd_close(fd);
        }
    }
    return NULL;
}

/*
 * The writes through st: 0, or -1 with errno. Between two writes the
 * writer lets the scheduler run (st_usleep(0) goes through the event loop),
 * as a recorder that waits for its next chunk from the network does: with
 * State Threads' blocking calls, the others then wait for one write or one
 * fsync at a time rather than for the whole file.
 */
static int st_writes(const struct disk_params *p, const char *path, const char *chunk,
                     struct disk_run *run)
{
    st_netfd_t fd = st_open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd == NULL) {
        return -1;
    }
    size_t len = (size_t)p->chunk_kib * 1024;
    long long total = (long long)p->size_mib << 20;
    long long sync_every = (long long)p->sync_mib << 20;
    int rc = 0;
    for (long long done = 0; done < total && rc == 0; done += (long long)len) {
        if (st_write(fd, chunk, len, ST_UTIME_NO_TIMEOUT) != (ssize_t)len) {
            rc = -1;
        } else if ((done + (long long)len) % sync_every == 0) {
            rc = st_fsync(fd, ST_UTIME_NO_TIMEOUT);
        }
        if (rc == 0) {
            rc = st_usleep(0);
        }
    }
    if (rc == 0) {
        rc = st_fsync(fd, ST_UTIME_NO_TIMEOUT);
    }
    int err = errno;
    /* Closing and removing a 1 GiB file blocks (dropping its page cache): not measured. */
    run->stop = true;
    (void)st_netfd_close(fd);
    errno = err;
    return rc;
}

/* One run's figures: a mode's, or the plain loop's (only mibps). Latencies in seconds. */
struct disk_figures {
    int status; /* 0 measured, 1 failed, 2 not available here */
    double mibps;
    double vs_plain;  /* mibps over the plain loop's of the same round (0: that one failed) */
    double vs_thread; /* over the writer thread's of the same round (0: none) */
    double tick_before_p99;
    double tick_p50;
    double tick_p99;
    double tick_max;
    struct echo_figures echo;
    char why[160]; /* status 2: why */
};

struct disk_mode {
    const char *name;
    int file_io;  /* ST_FILE_IO_*, or WRITER_THREAD */
    int eventsys; /* ST_EVENTSYS_* */
};

/* The writes are a plain write loop on a pthread of their own, beside the scheduler. */
enum { WRITER_THREAD = -1 };

struct writer_thread {
    const struct disk_params *p;
    double mibps; /* or -1 */
    int done;     /* written (one byte) when the loop is over */
};

static void *writer_main(void *arg)
{
    struct writer_thread *w = arg;
    w->mibps = plain_write_loop(w->p);
    char byte = 1;
    (void)!write(w->done, &byte, 1);
    return NULL;
}

/* The reference beside the scheduler: the plain loop on a pthread; MiB/s, or -1. */
static double thread_writes(const struct disk_params *p)
{
    int done[2];
    if (pipe2(done, O_CLOEXEC) != 0) {
        return -1;
    }
    struct writer_thread w = {.p = p, .mibps = -1, .done = done[1]};
    st_netfd_t in = st_netfd_open(done[0]);
    pthread_t thread;
    if (in == NULL || pthread_create(&thread, NULL, writer_main, &w) != 0) {
        (void)close(done[0]);
        (void)close(done[1]);
        return -1;
    }
    char byte = 0;
    (void)st_read(in, &byte, 1, ST_UTIME_NO_TIMEOUT);
    (void)pthread_join(thread, NULL);
    (void)st_netfd_close(in);
    (void)close(done[1]);
    return w.mibps;
}

/* The st side of a run, after st_init: fills f (status 0 or 1). */
static void run_scheduler(const struct disk_params *p, const struct disk_mode *m, int lfd,
                          struct disk_phases *ph, struct disk_figures *f)
{
    struct disk_run run = {.p = p};
    char *chunk = fill_chunk(p->chunk_kib);
    st_netfd_t listener = st_netfd_open_socket(lfd);
    f->status = 1;
    if (chunk != NULL && samples_init(&run.before) == 0 && samples_init(&run.during) == 0 &&
        listener != NULL) {
        st_thread_t tick = st_thread_create(tick_main, &run, 1, 0);
        (void)st_thread_create(echo_listener, listener, 0, 0);
        ph->before_start = bench_now();
        (void)st_usleep((st_utime_t)(p->before_s * 1e6));
        char path[4096];
        file_path(path, sizeof path, p->dir);
        run.writing = true;
        ph->writes_start = bench_now();
        double thread_mibps = 0;
        int wrc = 0;
        if (m->file_io == WRITER_THREAD) {
            thread_mibps = thread_writes(p);
            wrc = thread_mibps < 0 ? -1 : 0;
            run.stop = true;
        } else {
            wrc = st_writes(p, path, chunk, &run);
        }
        ph->writes_end = bench_now();
        int err = errno;
        (void)unlink(path);
        if (tick != NULL) {
            (void)st_thread_join(tick, NULL);
        }
        if (wrc == 0) {
            f->status = 0;
            f->mibps = m->file_io == WRITER_THREAD
                           ? thread_mibps
                           : (double)p->size_mib / (ph->writes_end - ph->writes_start);
            f->tick_before_p99 = percentile(&run.before, 99);
            f->tick_p50 = percentile(&run.during, 50);
            f->tick_p99 = percentile(&run.during, 99);
            f->tick_max = percentile(&run.during, 100);
        } else {
            (void)snprintf(f->why, sizeof f->why, "the writes failed: %s", strerror(err));
        }
    }
    free(chunk);
    free(run.before.v);
    free(run.during.v);
}

/*
 * One mode, in this (fresh) process: the echo client forked first, then the
 * scheduler with its tick, echo and writer. The figures go to `out`.
 */
static int run_mode(const struct disk_params *p, const struct disk_mode *m, int out)
{
    struct disk_figures f = {.status = 1};
    unsigned port = 0;
    int lfd = bench_listen_loopback(0, 128, &port);
    int ctl[2];
    int res[2];
    if (lfd < 0 || pipe2(ctl, O_CLOEXEC) != 0 || pipe2(res, O_CLOEXEC) != 0) {
        perror("bench: disk");
        return 1;
    }
    pid_t client = p->conns > 0 ? bench_fork() : -1;
    if (client == 0) {
        (void)close(ctl[1]);
        (void)close(res[0]);
        (void)close(lfd);
        bench_pin(bench_cpu(1));
        _exit(echo_client(port, p->conns, ctl[0], res[1]));
    }
    (void)close(ctl[0]);
    (void)close(res[1]);
    struct disk_phases ph = {0};
    if (st_set_eventsys(m->eventsys) != 0 || st_init() != 0 ||
        (m->file_io != WRITER_THREAD && st_set_file_io(m->file_io) != 0)) {
        f.status = 2;
        (void)snprintf(f.why, sizeof f.why, "%s", strerror(errno));
    } else {
        run_scheduler(p, m, lfd, &ph, &f);
    }
    if (client > 0) {
        if (f.status == 0 && (write(ctl[1], &ph, sizeof ph) != (ssize_t)sizeof ph ||
                              read(res[0], &f.echo, sizeof f.echo) != (ssize_t)sizeof f.echo)) {
            f.status = 1;
            (void)snprintf(f.why, sizeof f.why, "the echo client did not report");
        }
        bench_stop_child(client);
    }
    return write(out, &f, sizeof f) == (ssize_t)sizeof f ? 0 : 1;
}

/* Run `m` (NULL: the plain loop) in a fresh process; its figures in *f. */
static void run_in_child(const struct disk_params *p, const struct disk_mode *m,
                         struct disk_figures *f)
{
    *f = (struct disk_figures){.status = 1};
    int pipefd[2];
    if (pipe2(pipefd, O_CLOEXEC) != 0) {
        return;
    }
    pid_t pid = bench_fork();
    if (pid == 0) {
        (void)close(pipefd[0]);
        int rc = 1;
        if (m != NULL) {
            rc = run_mode(p, m, pipefd[1]);
        } else {
            struct disk_figures plain = {.mibps = plain_write_loop(p)};
            plain.status = plain.mibps < 0;
            rc = write(pipefd[1], &plain, sizeof plain) == (ssize_t)sizeof plain ? 0 : 1;
        }
        _exit(rc);
    }
    (void)close(pipefd[1]);
    if (pid > 0 && read(pipefd[0], f, sizeof *f) != (ssize_t)sizeof *f) {
        f->status = 1;
    }
    (void)close(pipefd[0]);
    if (pid > 0) {
        int status = 0;
        (void)waitpid(pid, &status, 0);
    }
}

static void note_round(const char *name, int round, const struct disk_figures *f)
{
    if (f->status != 0) {
        bench_note("disk %s, run %d: %s", name, round + 1,
                   f->status == 2 ? f->why : (f->why[0] != '\0' ? f->why : "failed"));
        return;
    }
    char beside[64] = "";
    if (f->vs_thread > 0) {
        (void)snprintf(beside, sizeof beside, ", %.2fx the writer thread's", f->vs_thread);
    }
    bench_note("disk %s, run %d: %.0f MiB/s (%.2fx the plain loop's%s in this round); tick late "
               "p50 %.2f p99 %.2f max %.1f ms (before the writes p99 %.2f); echo before %.0f req/s "
               "p99 %.2f ms, during %.0f req/s p99 %.2f ms",
               name, round + 1, f->mibps, f->vs_plain, beside, f->tick_p50 * 1e3,
               f->tick_p99 * 1e3, f->tick_max * 1e3, f->tick_before_p99 * 1e3, f->echo.before_rps,
               f->echo.before_p99 * 1e3, f->echo.during_rps, f->echo.during_p99 * 1e3);
}

/* The medians over the rounds that measured (n of them) of one mode. */
static void report_mode(const char *name, const struct disk_figures *rounds, int n)
{
    int paired = 0;
    int beside = 0;
    double ratios[BENCH_MAX_SAMPLES];
    double thread_ratios[BENCH_MAX_SAMPLES];
    for (int i = 0; i < n; i++) {
        if (rounds[i].vs_plain > 0) {
            ratios[paired++] = rounds[i].vs_plain;
        }
        if (rounds[i].vs_thread > 0) {
            thread_ratios[beside++] = rounds[i].vs_thread;
        }
    }
    static const struct {
        const char *key;
        size_t offset;
        double scale;
        const char *unit;
        const char *what;
    } figures[] = {
        {"tick_before_p99", offsetof(struct disk_figures, tick_before_p99), 1e3, "ms",
         "1 ms tick, lateness before the writes, p99"},
        {"tick_p50", offsetof(struct disk_figures, tick_p50), 1e3, "ms",
         "1 ms tick, lateness during the writes, median"},
        {"tick_p99", offsetof(struct disk_figures, tick_p99), 1e3, "ms",
         "1 ms tick, lateness during the writes, p99"},
        {"tick_max", offsetof(struct disk_figures, tick_max), 1e3, "ms",
         "1 ms tick, lateness during the writes, slowest"},
        {"echo_before_rps", offsetof(struct disk_figures, echo.before_rps), 1, "req/s",
         "echo before the writes, requests/s"},
        {"echo_before_p99", offsetof(struct disk_figures, echo.before_p99), 1e3, "ms",
         "echo before the writes, p99 round trip"},
        {"echo_during_rps", offsetof(struct disk_figures, echo.during_rps), 1, "req/s",
         "echo during the writes, requests/s"},
        {"echo_during_p99", offsetof(struct disk_figures, echo.during_p99), 1e3, "ms",
         "echo during the writes, p99 round trip"},
    };
    char key[96];
    (void)snprintf(key, sizeof key, "disk_%s_mibps", name);
    bench_result(key, bench_median_field(rounds, sizeof *rounds, n,
                                         offsetof(struct disk_figures, mibps)),
                 "MiB/s", "disk_plain_mibps", "disk %s: write throughput", name);
    if (paired > 0) {
        (void)snprintf(key, sizeof key, "disk_%s_vs_plain", name);
        bench_result(key, bench_median(ratios, paired), "x", "-",
                     "  throughput over the plain loop's of the same round, median");
    }
    if (beside > 0) {
        (void)snprintf(key, sizeof key, "disk_%s_vs_thread", name);
        bench_result(key, bench_median(thread_ratios, beside), "x", "-",
                     "  throughput over the writer thread's of the same round, median");
    }
    for (size_t i = 0; i < sizeof figures / sizeof figures[0]; i++) {
        (void)snprintf(key, sizeof key, "disk_%s_%s", name, figures[i].key);
        bench_result(key,
                     bench_median_field(rounds, sizeof *rounds, n, figures[i].offset) *
                         figures[i].scale,
                     figures[i].unit, "-", "  %s", figures[i].what);
    }
}

/* Say what the file system under `dir` is; a tmpfs is no disk. */
static void note_file_system(const char *dir)
{
    struct statfs fs;
    if (statfs(dir, &fs) != 0) {
        bench_note("disk: statfs %s: %s", dir, strerror(errno));
        return;
    }
    if (fs.f_type == TMPFS_MAGIC) {
        bench_note("disk: %s is on tmpfs: these figures say nothing about a disk", dir);
    } else {
        bench_note("disk: files in %s (file system type 0x%lx, %ld MiB free)", dir,
                   (unsigned long)fs.f_type,
                   (long)((unsigned long long)fs.f_bavail * (unsigned long long)fs.f_bsize >> 20));
    }
}

enum { MODES = 4 };
static const struct disk_mode modes[MODES] = {
    {"thread", WRITER_THREAD, ST_EVENTSYS_ALT},
    {"blocking", ST_FILE_IO_BLOCKING, ST_EVENTSYS_ALT},
    {"workers", ST_FILE_IO_WORKERS, ST_EVENTSYS_ALT},
    {"io_uring", ST_FILE_IO_URING, ST_EVENTSYS_IO_URING},
};

/* Rounds of the plain loop and then each mode, each run in a fresh process; the medians. */
int bench_disk(const struct disk_params *p)
{
    if (p->chunk_kib < 1 || p->sync_mib < 1 || p->size_mib < 1 || p->conns > MAX_CONNS ||
        p->rounds < 1 || p->rounds > BENCH_MAX_SAMPLES ||
        ((long long)p->sync_mib << 20) % ((long long)p->chunk_kib << 10) != 0) {
        fprintf(stderr, "st_bench: disk: --sync must be a multiple of --chunk; --conns at most %d\n",
                MAX_CONNS);
        return 1;
    }
    note_file_system(p->dir);
    static struct disk_figures plain[BENCH_MAX_SAMPLES];
    static struct disk_figures runs[MODES][BENCH_MAX_SAMPLES];
    int nplain = 0;
    int nruns[MODES] = {0};
    int rc = 0;
    for (int r = 0; r < p->rounds; r++) {
        fprintf(stderr, "st_bench: disk, round %d: plain write loop\n", r + 1);
        run_in_child(p, NULL, &plain[nplain]);
        const struct disk_figures *this_plain = &plain[nplain];
        const struct disk_figures *this_thread = NULL;
        if (this_plain->status == 0) {
            bench_note("disk plain loop, run %d: %.0f MiB/s", r + 1, this_plain->mibps);
            nplain++;
        } else {
            rc = 1;
        }
        for (int i = 0; i < MODES; i++) {
            if (!bench_server_wanted(p->modes, modes[i].name)) {
                continue;
            }
            fprintf(stderr, "st_bench: disk, round %d: %s\n", r + 1, modes[i].name);
            struct disk_figures *f = &runs[i][nruns[i]];
            run_in_child(p, &modes[i], f);
            f->vs_plain = f->status == 0 && this_plain->status == 0 ? f->mibps / this_plain->mibps : 0;
            if (modes[i].file_io == WRITER_THREAD) {
                this_thread = f->status == 0 ? f : NULL;
            } else if (f->status == 0 && this_thread != NULL) {
                f->vs_thread = f->mibps / this_thread->mibps;
            }
            note_round(modes[i].name, r, f);
            rc |= f->status == 1;
            nruns[i] += f->status == 0;
        }
    }
    if (nplain > 0) {
        bench_result("disk_plain_mibps",
                     bench_median_field(plain, sizeof *plain, nplain,
                                        offsetof(struct disk_figures, mibps)),
                     "MiB/s", "-", "disk: plain write loop, %ld MiB in %ld KiB writes, fsync every %ld MiB",
                     p->size_mib, p->chunk_kib, p->sync_mib);
    }
    for (int i = 0; i < MODES; i++) {
        if (nruns[i] > 0) {
            report_mode(modes[i].name, runs[i], nruns[i]);
        }
    }
    return rc;
}
