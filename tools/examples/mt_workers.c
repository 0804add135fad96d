/*
 * mt_workers: passing work between pthreads that each run an st scheduler.
 *
 * usage: mt_workers [-w workers] [-c coroutines] [-k connections] [-n items]
 *                   [-e eventsys[,eventsys...]]
 *
 *   -w  worker pthreads (default 4)
 *   -c  job coroutines per worker (default 2000)
 *   -k  socket pairs per worker, its connection pool (default 256; fewer
 *       when the descriptor limit, or select's FD_SETSIZE, is lower)
 *   -n  work items (default 100000)
 *   -e  event system of each pthread, round robin over the list: epoll,
 *       poll, select (default epoll)
 *
 * The main pthread hands out numbers 1..n; each worker answers with the
 * number's Collatz step count, computed by a "backend" at the other end of
 * a socket pair. docs/multithreading.md explains the rules this follows:
 *
 *   - every pthread calls st_set_eventsys() and st_init() itself and owns
 *     everything it creates: coroutines, condition variables, netfds;
 *   - only OS descriptors and plain memory cross pthreads. Requests go
 *     through a ring guarded by a pthread mutex, and an eventfd per worker
 *     says "look at the ring": the worker's intake coroutine blocks in
 *     st_read() on it. Replies come back through a pipe per worker, read by
 *     a collector coroutine in the main pthread with st_read();
 *   - a pthread blocks only in its own scheduler (pthread_mutex_lock is held
 *     for a few instructions), so its other coroutines keep running;
 *   - a worker's scheduler is released when the pthread exits.
 *
 * In a worker: the intake coroutine moves requests into a local queue; each
 * of the job coroutines takes one, borrows a connection from the pool (an
 * st_cond_t when none is free), writes the number, reads the answer from the
 * backend coroutine at the far end, sleeps a little (a stand-in for real
 * latency, so that thousands of jobs are in flight at once) and writes a
 * 24-byte reply record to the pipe (one write under PIPE_BUF: atomic, so
 * records from many coroutines never interleave).
 *
 * The main pthread keeps at most 2 x coroutines requests outstanding per
 * worker, checks every reply, and prints one summary line. Exit status 0
 * when every number was answered exactly once and correctly.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "example_args.h"
#include "st.h"

enum {
    MAX_WORKERS = 64,
    MAX_EVENTSYS = 8,
    CHUNK = 64,            /* requests pushed per worker per pass */
    JOB_STACK = 64 * 1024, /* job coroutines need little stack */
    SMALL_STACK = 32 * 1024,
    RESERVED_FDS = 32, /* stdio, the backends' own descriptors, slack */
};

static const st_utime_t IO_TIMEOUT = 10 * 1000 * 1000;

struct reply {
    uint64_t number;
    uint64_t steps;
    uint32_t worker;
    uint32_t pad;
};

/* ---- shared between the main pthread and one worker: plain data and fds only ---- */

struct ring {
    pthread_mutex_t lock;
    uint64_t *items; /* capacity entries */
    long capacity;
    long head; /* next to take */
    long count;
    int stop; /* no more requests after what is queued */
};

struct worker {
    int index;
    int eventsys;
    int coroutines;
    int connections;
    int wake_fd;  /* eventfd: main writes (and closes), the worker's intake coroutine reads */
    int reply_fd; /* write end of the reply pipe */
    struct ring ring;
    pthread_t thread;
    int failed; /* set by the worker, read after pthread_join */
};

/* ---- the work ------------------------------------------------------------------------- */

static uint64_t collatz_steps(uint64_t x)
{
    uint64_t steps = 0;
    while (x > 1) {
        x = (x & 1) != 0 ? 3 * x + 1 : x / 2;
        steps++;
    }
    return steps;
}

/* ---- a worker pthread: everything below belongs to its own scheduler --------------------- */

struct conn {
    st_netfd_t client; /* job side */
    st_netfd_t server; /* backend side */
    st_thread_t backend;
};

struct world {
    struct worker *w;
    st_netfd_t wake;
    st_netfd_t reply;
    /* local request queue (coroutines only: no lock) */
    uint64_t *queue;
    long q_head;
    long q_count;
    int stopping;
    st_cond_t have_jobs;
    /* connection pool */
    struct conn *conns;
    struct conn **free_conns;
    int nfree;
    st_cond_t conn_free;
    long done;
    int failed;
};

/* The far end of a connection: reads numbers, answers with their step counts. */
static void *backend_main(void *arg)
{
    st_netfd_t fd = arg;
    uint64_t x = 0;
    while (st_read_fully(fd, &x, sizeof x, ST_UTIME_NO_TIMEOUT) == (ssize_t)sizeof x) {
        uint64_t steps = collatz_steps(x);
        if (st_write(fd, &steps, sizeof steps, IO_TIMEOUT) != (ssize_t)sizeof steps) {
            break;
        }
    }
    return NULL; /* EOF: the job side closed */
}

/* Moves requests from the shared ring into the local queue whenever woken. */
static void *intake_main(void *arg)
{
    struct world *wd = arg;
    struct ring *ring = &wd->w->ring;
    while (!wd->stopping) {
        uint64_t counter = 0;
        if (st_read(wd->wake, &counter, sizeof counter, ST_UTIME_NO_TIMEOUT) !=
            (ssize_t)sizeof counter) {
            wd->failed = 1;
            wd->stopping = 1;
            break;
        }
        long moved = 0;
        (void)pthread_mutex_lock(&ring->lock);
        while (ring->count > 0) {
            long tail = (wd->q_head + wd->q_count) % ring->capacity;
            wd->queue[tail] = ring->items[ring->head];
            wd->q_count++;
            ring->head = (ring->head + 1) % ring->capacity;
            ring->count--;
            moved++;
        }
        if (ring->stop) {
            wd->stopping = 1;
        }
        (void)pthread_mutex_unlock(&ring->lock);
        if (wd->stopping) {
            (void)st_cond_broadcast(wd->have_jobs);
        } else {
            for (long i = 0; i < moved; i++) {
                (void)st_cond_signal(wd->have_jobs);
            }
        }
    }
    return NULL;
}

static struct conn *borrow(struct world *wd)
{
    while (wd->nfree == 0) {
        if (st_cond_wait(wd->conn_free) != 0) {
            return NULL;
        }
    }
    return wd->free_conns[--wd->nfree];
}

static void give_back(struct world *wd, struct conn *c)
{
    wd->free_conns[wd->nfree++] = c;
    (void)st_cond_signal(wd->conn_free);
}

static int handle(struct world *wd, uint64_t x)
{
    struct conn *c = borrow(wd);
    uint64_t steps = 0;
    if (c == NULL) {
        return -1;
    }
    int ok = st_write(c->client, &x, sizeof x, IO_TIMEOUT) == (ssize_t)sizeof x &&
             st_read_fully(c->client, &steps, sizeof steps, IO_TIMEOUT) == (ssize_t)sizeof steps;
    give_back(wd, c);
    if (!ok || st_usleep(100 + x % 400) != 0) {
        return -1;
    }
    struct reply r = {x, steps, (uint32_t)wd->w->index, 0};
    if (st_write(wd->reply, &r, sizeof r, IO_TIMEOUT) != (ssize_t)sizeof r) {
        return -1;
    }
    wd->done++;
    return 0;
}

static void *job_main(void *arg)
{
    struct world *wd = arg;
    for (;;) {
        while (wd->q_count == 0 && !wd->stopping) {
            if (st_cond_wait(wd->have_jobs) != 0) {
                wd->failed = 1;
                return NULL;
            }
        }
        if (wd->q_count == 0) {
            return NULL; /* stopping, and nothing left */
        }
        uint64_t x = wd->queue[wd->q_head];
        wd->q_head = (wd->q_head + 1) % wd->w->ring.capacity;
        wd->q_count--;
        if (handle(wd, x) != 0) {
            wd->failed = 1;
            return NULL;
        }
    }
}

static int open_pool(struct world *wd, int n)
{
    wd->conns = calloc((size_t)n, sizeof *wd->conns);
    wd->free_conns = calloc((size_t)n, sizeof(struct conn *));
    if (wd->conns == NULL || wd->free_conns == NULL) {
        return -1;
    }
    for (int i = 0; i < n; i++) {
        struct conn *c = &wd->conns[i];
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
            return -1;
        }
        c->client = st_netfd_open_socket(sv[0]);
        c->server = st_netfd_open_socket(sv[1]);
        if (c->client == NULL || c->server == NULL) {
            return -1;
        }
        c->backend = st_thread_create(backend_main, c->server, 1, SMALL_STACK);
        if (c->backend == NULL) {
            return -1;
        }
        wd->free_conns[wd->nfree++] = c;
    }
    return 0;
}

/* Closes the job sides; each backend sees EOF and ends; then the rest. */
static int close_pool(struct world *wd, int n)
{
    int rc = 0;
    for (int i = 0; i < n && wd->conns != NULL; i++) {
        struct conn *c = &wd->conns[i];
        if (c->client != NULL && st_netfd_close(c->client) != 0) {
            rc = -1;
        }
        if (c->backend != NULL && st_thread_join(c->backend, NULL) != 0) {
            rc = -1;
        }
        if (c->server != NULL && st_netfd_close(c->server) != 0) {
            rc = -1;
        }
    }
    free(wd->conns);
    free(wd->free_conns);
    return rc;
}

static int run_worker(struct world *wd)
{
    struct worker *w = wd->w;
    if (st_set_eventsys(w->eventsys) != 0 || st_init() != 0) {
        return -1;
    }
    wd->have_jobs = st_cond_new();
    wd->conn_free = st_cond_new();
    wd->queue = calloc((size_t)w->ring.capacity, sizeof *wd->queue);
    wd->wake = st_netfd_open(w->wake_fd);
    wd->reply = st_netfd_open(w->reply_fd);
    st_thread_t *jobs = calloc((size_t)w->coroutines, sizeof(st_thread_t));
    st_thread_t intake = NULL;
    int rc = -1;
    if (wd->have_jobs == NULL || wd->conn_free == NULL || wd->queue == NULL ||
        wd->wake == NULL || wd->reply == NULL || jobs == NULL ||
        open_pool(wd, w->connections) != 0 ||
        (intake = st_thread_create(intake_main, wd, 1, SMALL_STACK)) == NULL) {
        goto out;
    }
    for (int i = 0; i < w->coroutines; i++) {
        jobs[i] = st_thread_create(job_main, wd, 1, JOB_STACK);
        if (jobs[i] == NULL) {
            goto out;
        }
    }
    rc = 0;
    /* Everything runs from here; the primordial waits for the end. */
    if (st_thread_join(intake, NULL) != 0) {
        rc = -1;
    }
    for (int i = 0; i < w->coroutines; i++) {
        if (st_thread_join(jobs[i], NULL) != 0) {
            rc = -1;
        }
    }
out:
    if (close_pool(wd, w->connections) != 0) {
        rc = -1;
    }
    /* Closing the reply pipe tells the main pthread this worker is done. */
    if (wd->reply != NULL) {
        (void)st_netfd_close(wd->reply);
    }
    /* The eventfd is the main pthread's: let go of the netfd, keep the descriptor. */
    st_netfd_free(wd->wake);
    free(jobs);
    free(wd->queue);
    if (wd->have_jobs != NULL && st_cond_destroy(wd->have_jobs) != 0) {
        rc = -1;
    }
    if (wd->conn_free != NULL && st_cond_destroy(wd->conn_free) != 0) {
        rc = -1;
    }
    return rc == 0 && !wd->failed ? 0 : -1;
}

static void *worker_main(void *arg)
{
    struct world wd;
    memset(&wd, 0, sizeof wd);
    wd.w = arg;
    if (run_worker(&wd) != 0) {
        wd.w->failed = 1;
    }
    return NULL; /* pthread exit releases this pthread's scheduler */
}

/* ---- the main pthread ------------------------------------------------------------------------ */

struct options {
    long workers;
    long coroutines;
    long connections;
    long items;
    int eventsys[MAX_EVENTSYS];
    const char *names[MAX_EVENTSYS];
    int neventsys;
};

struct collector {
    int index;
    st_netfd_t fd;
    st_thread_t thread;
};

static struct {
    struct worker *workers;
    struct collector *collectors;
    long *outstanding;
    unsigned char *seen; /* one bit per number */
    long replies;
    long errors;
    st_cond_t room;
} mainw;

static int check_reply(const struct reply *r, int index)
{
    uint64_t x = r->number;
    if (r->worker != (uint32_t)index || x == 0 || x > (uint64_t)LONG_MAX ||
        r->steps != collatz_steps(x)) {
        return -1;
    }
    unsigned char bit = (unsigned char)(1U << (x % 8));
    if ((mainw.seen[x / 8] & bit) != 0) {
        return -1; /* answered twice */
    }
    mainw.seen[x / 8] |= bit;
    return 0;
}

/* Reads one worker's replies until it closes the pipe. */
static void *collector_main(void *arg)
{
    struct collector *c = arg;
    struct reply buf[128];
    size_t have = 0;
    for (;;) {
        ssize_t n = st_read(c->fd, (char *)buf + have, sizeof buf - have, ST_UTIME_NO_TIMEOUT);
        if (n <= 0) {
            if (n < 0 || have != 0) {
                mainw.errors++;
            }
            return NULL;
        }
        have += (size_t)n;
        size_t records = have / sizeof buf[0];
        for (size_t i = 0; i < records; i++) {
            if (check_reply(&buf[i], c->index) != 0) {
                mainw.errors++;
            }
        }
        mainw.replies += (long)records;
        mainw.outstanding[c->index] -= (long)records;
        have -= records * sizeof buf[0];
        memmove(buf, (char *)buf + records * sizeof buf[0], have);
        (void)st_cond_signal(mainw.room);
    }
}

static int wake(const struct worker *w)
{
    uint64_t one = 1;
    /* An eventfd write never blocks (short of 2^64 - 2 unread wake-ups). */
    return write(w->wake_fd, &one, sizeof one) == (ssize_t)sizeof one ? 0 : -1;
}

/* Hands out 1..items, keeping at most the ring's capacity outstanding per worker. */
static int produce(const struct options *opt)
{
    uint64_t next = 1;
    while (next <= (uint64_t)opt->items) {
        long pushed = 0;
        for (long i = 0; i < opt->workers && next <= (uint64_t)opt->items; i++) {
            struct worker *w = &mainw.workers[i];
            long room = w->ring.capacity - mainw.outstanding[i];
            long n = room < CHUNK ? room : CHUNK;
            if ((uint64_t)n > (uint64_t)opt->items - next + 1) {
                n = (long)((uint64_t)opt->items - next + 1);
            }
            if (n <= 0) {
                continue;
            }
            (void)pthread_mutex_lock(&w->ring.lock);
            for (long k = 0; k < n; k++) {
                long tail = (w->ring.head + w->ring.count) % w->ring.capacity;
                w->ring.items[tail] = next++;
                w->ring.count++;
            }
            (void)pthread_mutex_unlock(&w->ring.lock);
            mainw.outstanding[i] += n;
            pushed += n;
            if (wake(w) != 0) {
                return -1;
            }
        }
        /* Every worker is full: wait until a collector sees replies. */
        if (pushed == 0 && st_cond_timedwait(mainw.room, IO_TIMEOUT) != 0) {
            fprintf(stderr, "mt_workers: no reply for 10 s\n");
            return -1;
        }
    }
    return 0;
}

static int parse_eventsys(char *list, struct options *opt)
{
    static const struct {
        const char *name;
        int eventsys;
    } names[] = {{"epoll", ST_EVENTSYS_ALT}, {"poll", ST_EVENTSYS_POLL}, {"select", ST_EVENTSYS_SELECT}};
    char *save = NULL;
    opt->neventsys = 0;
    for (char *tok = strtok_r(list, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
        size_t i = 0;
        while (i < sizeof names / sizeof names[0] && strcmp(names[i].name, tok) != 0) {
            i++;
        }
        if (i == sizeof names / sizeof names[0] || opt->neventsys == MAX_EVENTSYS) {
            return -1;
        }
        opt->names[opt->neventsys] = names[i].name;
        opt->eventsys[opt->neventsys++] = names[i].eventsys;
    }
    return opt->neventsys > 0 ? 0 : -1;
}

static int parse_options(int argc, char **argv, struct options *opt)
{
    int c = 0;
    opt->workers = 4;
    opt->coroutines = 2000;
    opt->connections = 256;
    opt->items = 100000;
    opt->eventsys[0] = ST_EVENTSYS_ALT;
    opt->names[0] = "epoll";
    opt->neventsys = 1;
    while ((c = getopt(argc, argv, "w:c:k:n:e:")) != -1) {
        int rc = -1;
        if (c == 'w') {
            rc = example_parse_long(optarg, 1, MAX_WORKERS, &opt->workers);
        } else if (c == 'c') {
            rc = example_parse_long(optarg, 1, 100000, &opt->coroutines);
        } else if (c == 'k') {
            rc = example_parse_long(optarg, 1, 100000, &opt->connections);
        } else if (c == 'n') {
            rc = example_parse_long(optarg, 1, 100L * 1000 * 1000, &opt->items);
        } else if (c == 'e') {
            rc = parse_eventsys(optarg, opt);
        }
        if (rc != 0) {
            return -1;
        }
    }
    return optind == argc ? 0 : -1;
}

/* Connections per worker that the descriptor limit (and select's) allows. */
static long fit_connections(const struct options *opt)
{
    long limit = st_getfdlimit(); /* st_init raised the soft limit to the hard one */
    for (int i = 0; i < opt->neventsys; i++) {
        if (opt->eventsys[i] == ST_EVENTSYS_SELECT && limit > FD_SETSIZE) {
            limit = FD_SETSIZE; /* select refuses descriptors at or above it */
        }
    }
    /* Per worker: an eventfd, a pipe, and two descriptors per connection. */
    long per_worker = (limit - RESERVED_FDS) / opt->workers - 3;
    long fit = per_worker / 2;
    return fit < opt->connections ? fit : opt->connections;
}

static int start_worker(const struct options *opt, int i, long connections)
{
    struct worker *w = &mainw.workers[i];
    int pipefd[2];
    w->index = i;
    w->eventsys = opt->eventsys[i % opt->neventsys];
    w->coroutines = (int)opt->coroutines;
    w->connections = (int)connections;
    w->ring.capacity = 2 * opt->coroutines;
    w->ring.items = calloc((size_t)w->ring.capacity, sizeof *w->ring.items);
    w->wake_fd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (w->ring.items == NULL || w->wake_fd < 0 || pipe2(pipefd, O_NONBLOCK | O_CLOEXEC) != 0 ||
        pthread_mutex_init(&w->ring.lock, NULL) != 0) {
        return -1;
    }
    w->reply_fd = pipefd[1];
    mainw.collectors[i].index = i;
    mainw.collectors[i].fd = st_netfd_open(pipefd[0]);
    if (mainw.collectors[i].fd == NULL) {
        return -1;
    }
    mainw.collectors[i].thread =
        st_thread_create(collector_main, &mainw.collectors[i], 1, SMALL_STACK);
    if (mainw.collectors[i].thread == NULL) {
        return -1;
    }
    return pthread_create(&w->thread, NULL, worker_main, w) == 0 ? 0 : -1;
}

static int stop_workers(const struct options *opt)
{
    int rc = 0;
    for (long i = 0; i < opt->workers; i++) {
        struct worker *w = &mainw.workers[i];
        (void)pthread_mutex_lock(&w->ring.lock);
        w->ring.stop = 1;
        (void)pthread_mutex_unlock(&w->ring.lock);
        if (wake(w) != 0) {
            rc = -1;
        }
    }
    /* A collector ends when its worker closes the pipe, just before it exits. */
    for (long i = 0; i < opt->workers; i++) {
        if (st_thread_join(mainw.collectors[i].thread, NULL) != 0 ||
            st_netfd_close(mainw.collectors[i].fd) != 0) {
            rc = -1;
        }
        (void)pthread_join(mainw.workers[i].thread, NULL);
        if (mainw.workers[i].failed) {
            fprintf(stderr, "mt_workers: worker %ld failed\n", i);
            rc = -1;
        }
        (void)close(mainw.workers[i].wake_fd); /* the worker no longer reads it */
        (void)pthread_mutex_destroy(&mainw.workers[i].ring.lock);
        free(mainw.workers[i].ring.items);
    }
    return rc;
}

static double now_seconds(void)
{
    struct timespec ts;
    (void)clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    struct options opt;
    if (parse_options(argc, argv, &opt) != 0) {
        fprintf(stderr,
                "usage: %s [-w workers] [-c coroutines] [-k connections] [-n items]"
                " [-e epoll|poll|select[,...]]\n",
                argv[0]);
        return 2;
    }
    if (st_set_eventsys(opt.eventsys[0]) != 0 || st_init() != 0 ||
        (mainw.room = st_cond_new()) == NULL) {
        perror("mt_workers: st_init");
        return 1;
    }
    long connections = fit_connections(&opt);
    if (connections < 1) {
        fprintf(stderr, "mt_workers: too few descriptors for %ld workers\n", opt.workers);
        return 1;
    }
    mainw.workers = calloc((size_t)opt.workers, sizeof *mainw.workers);
    mainw.collectors = calloc((size_t)opt.workers, sizeof *mainw.collectors);
    mainw.outstanding = calloc((size_t)opt.workers, sizeof *mainw.outstanding);
    mainw.seen = calloc((size_t)opt.items / 8 + 1, 1);
    if (mainw.workers == NULL || mainw.collectors == NULL || mainw.outstanding == NULL ||
        mainw.seen == NULL) {
        perror("mt_workers: calloc");
        return 1;
    }
    double start = now_seconds();
    for (int i = 0; i < (int)opt.workers; i++) {
        if (start_worker(&opt, i, connections) != 0) {
            perror("mt_workers: starting a worker");
            return 1; /* exit() ends the pthreads already started */
        }
    }
    int rc = produce(&opt);
    if (stop_workers(&opt) != 0) {
        rc = -1;
    }
    double elapsed = now_seconds() - start;
    char backends[64] = "";
    for (int i = 0; i < opt.neventsys && i < opt.workers; i++) {
        size_t used = strlen(backends);
        (void)snprintf(backends + used, sizeof backends - used, "%s%s", i > 0 ? "," : "",
                       opt.names[i]);
    }
    printf("mt_workers: %ld workers (%s) x %ld coroutines, %ld connections each: "
           "%ld items, %ld replies, %ld errors, %.2f s\n",
           opt.workers, backends, opt.coroutines, connections, opt.items, mainw.replies,
           mainw.errors, elapsed);
    int ok = rc == 0 && mainw.errors == 0 && mainw.replies == opt.items;
    (void)st_cond_destroy(mainw.room);
    free(mainw.workers);
    free(mainw.collectors);
    free(mainw.outstanding);
    free(mainw.seen);
    st_destroy();
    return ok ? 0 : 1;
}
