/*
 * One scheduler per pthread, under load: N pthreads each run their own st
 * world with thousands of coroutines that sleep, hand a mutex around, signal
 * a condition variable and echo bytes over socketpairs, then exit (the
 * scheduler is released at pthread exit). Standalone (no test framework) so
 * that ThreadSanitizer can run it: it must report no race, since no st
 * object is shared between pthreads.
 *
 * usage: pthreads [PTHREADS [COROUTINES]]   (exit status 0 on success)
 */
#include <pthread.h>
#include <st.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

enum { ROUNDS = 5, PAIRS = 64, MAX_PTHREADS = 64 };

struct world {
    st_mutex_t lock;
    st_cond_t tick;
    st_cond_t done; /* signalled by the last worker to finish */
    long counter;   /* changed only under `lock`, by this pthread's coroutines */
    long echoes;
    int index;
    int coroutines;
    int eventsys;
    int finished;
    int failed;
};

struct pair_job {
    struct world *world;
    st_netfd_t end;
    int pinger;
};

static void *worker(void *arg)
{
    struct world *w = arg;
    for (int r = 0; r < ROUNDS; r++) {
        if (st_usleep((st_utime_t)(r % 3) * 100) != 0 || st_mutex_lock(w->lock) != 0) {
            w->failed = 1;
            return NULL;
        }
        w->counter++;
        st_thread_yield(); /* hold the lock across a switch */
        if (st_mutex_unlock(w->lock) != 0) {
            w->failed = 1;
        }
        (void)st_cond_signal(w->tick);
    }
    if (++w->finished == w->coroutines) {
        (void)st_cond_signal(w->done);
    }
    return NULL;
}

static void *echo(void *arg)
{
    struct pair_job *job = arg;
    char byte = 'a';
    for (int r = 0; r < ROUNDS * 4; r++) {
        if (job->pinger) {
            if (st_write(job->end, &byte, 1, 5000000) != 1 ||
                st_read(job->end, &byte, 1, 5000000) != 1) {
                job->world->failed = 1;
                return NULL;
            }
            job->world->echoes++;
        } else if (st_read(job->end, &byte, 1, 5000000) != 1 ||
                   st_write(job->end, &byte, 1, 5000000) != 1) {
            job->world->failed = 1;
            return NULL;
        }
    }
    return NULL;
}

static int run_world(struct world *w)
{
    if (st_set_eventsys(w->eventsys) != 0 || st_init() != 0) {
        return -1;
    }
    w->lock = st_mutex_new();
    w->tick = st_cond_new();
    w->done = st_cond_new();
    struct pair_job jobs[2 * PAIRS];
    st_thread_t echoers[2 * PAIRS];
    if (w->lock == NULL || w->tick == NULL || w->done == NULL) {
        return -1;
    }
    for (int i = 0; i < w->coroutines; i++) {
        if (st_thread_create(worker, w, 0, 16 * 1024) == NULL) {
            return -1;
        }
    }
    for (int p = 0; p < PAIRS; p++) {
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) {
            return -1;
        }
        for (int side = 0; side < 2; side++) {
            struct pair_job *job = &jobs[2 * p + side];
            job->world = w;
            job->end = st_netfd_open_socket(sv[side]);
            job->pinger = side == 0;
            echoers[2 * p + side] = st_thread_create(echo, job, 1, 16 * 1024);
            if (job->end == NULL || echoers[2 * p + side] == NULL) {
                return -1;
            }
        }
    }
    while (w->finished < w->coroutines) {
        if (st_cond_wait(w->done) != 0) {
            return -1;
        }
    }
    for (int i = 0; i < 2 * PAIRS; i++) {
        if (st_thread_join(echoers[i], NULL) != 0 || st_netfd_close(jobs[i].end) != 0) {
            return -1;
        }
    }
    if (st_mutex_destroy(w->lock) != 0 || st_cond_destroy(w->tick) != 0 ||
        st_cond_destroy(w->done) != 0) {
        return -1;
    }
    return 0;
}

static void *pthread_main(void *arg)
{
    struct world *w = arg;
    if (run_world(w) != 0) {
        w->failed = 1;
    }
    return NULL; /* the scheduler is released at pthread exit */
}

/* A decimal argument in [1, max], or -1. */
static int count_arg(const char *text, long max)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(text, &end, 10);
    return errno == 0 && end != text && *end == '\0' && v >= 1 && v <= max ? (int)v : -1;
}

int main(int argc, char **argv)
{
    static struct world worlds[MAX_PTHREADS];
    static pthread_t ids[MAX_PTHREADS];
    static const int eventsys[] = {ST_EVENTSYS_ALT, ST_EVENTSYS_POLL, ST_EVENTSYS_SELECT};
    int nthreads = argc > 1 ? count_arg(argv[1], MAX_PTHREADS) : 4;
    int coroutines = argc > 2 ? count_arg(argv[2], 1000000) : 2000;
    if (nthreads < 1 || coroutines < 1) {
        fprintf(stderr, "usage: %s [PTHREADS (1-64) [COROUTINES]]\n", argv[0]);
        return 2;
    }
    for (int i = 0; i < nthreads; i++) {
        worlds[i].index = i;
        worlds[i].coroutines = coroutines;
        worlds[i].eventsys = eventsys[i % 3];
        if (pthread_create(&ids[i], NULL, pthread_main, &worlds[i]) != 0) {
            return 2;
        }
    }
    int bad = 0;
    for (int i = 0; i < nthreads; i++) {
        (void)pthread_join(ids[i], NULL);
        long want_counter = (long)coroutines * ROUNDS;
        long want_echoes = (long)PAIRS * ROUNDS * 4;
        if (worlds[i].failed || worlds[i].counter != want_counter ||
            worlds[i].echoes != want_echoes) {
            fprintf(stderr, "pthread %d: failed=%d counter=%ld/%ld echoes=%ld/%ld\n", i,
                    worlds[i].failed, worlds[i].counter, want_counter, worlds[i].echoes,
                    want_echoes);
            bad = 1;
        }
    }
    printf("%d pthreads x %d coroutines + %d socket pairs: %s\n", nthreads, coroutines, PAIRS,
           bad ? "FAILED" : "ok");
    return bad;
}
