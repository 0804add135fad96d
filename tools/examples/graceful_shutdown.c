/*
 * graceful_shutdown: stopping an st program cleanly on SIGTERM or SIGINT.
 *
 * usage: graceful_shutdown [-w workers] [-e epoll|poll|select] [-t seconds]
 *
 *   -w  worker coroutines (default 8)
 *   -e  event system (default epoll)
 *   -t  give up (exit status 1) after this many seconds without a signal
 *       (default 0: wait for ever)
 *
 * The pattern (docs/signals.md):
 *
 *   1. a self-pipe, both ends O_NONBLOCK: the signal handler only write()s
 *      one byte to it, which is async-signal-safe and never blocks;
 *   2. a watcher coroutine waits on the read end with st_read(), so the
 *      signal arrives as ordinary I/O in the scheduler, where every st call
 *      is allowed again;
 *   3. the watcher interrupts every worker with st_thread_interrupt(): each
 *      blocking call (st_read, st_accept, st_usleep, st_cond_wait...) returns
 *      -1 with errno EINTR, and the worker unwinds, releasing what it holds;
 *   4. the watcher joins the workers; the primordial coroutine joins the
 *      watcher, calls st_destroy() and returns 0 from main.
 *
 * The workers here wait in four different ways, in turn: reading a socket
 * with no data, accepting on a listening socket nobody connects to, sleeping
 * for ever, and waiting on a condition variable nobody signals. Prints
 * `ready` once all of them are blocked, `got SIGTERM` (or SIGINT) when the
 * signal comes, and `<n> workers stopped` when all of them have ended with
 * EINTR.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "example_args.h"
#include "example_net.h"
#include "st.h"

enum { MAX_WORKERS = 10000, KINDS = 4 };

enum kind { READER, ACCEPTOR, SLEEPER, WAITER };

static const char *const kind_names[KINDS] = {"st_read", "st_accept", "st_usleep", "st_cond_wait"};

struct worker {
    enum kind kind;
    st_thread_t thread;
    int saw_eintr; /* its blocking call ended with -1/EINTR */
};

static struct {
    struct worker *workers;
    int nworkers;
    int started;
    st_netfd_t listener; /* shared by the acceptors */
    st_cond_t never;     /* what the waiters wait on */
    st_netfd_t signals;  /* read end of the self-pipe */
    int stopped;
} app;

/* ---- 1. the signal handler: one byte into the pipe, nothing else ---------------------- */

static int signal_pipe[2] = {-1, -1};

static void on_signal(int sig)
{
    int saved = errno;
    unsigned char byte = (unsigned char)sig;
    /* Async-signal-safe; O_NONBLOCK, so a full pipe drops the byte instead of blocking. */
    (void)write(signal_pipe[1], &byte, 1);
    errno = saved;
}

static int install_signal_pipe(void)
{
    struct sigaction sa;
    if (pipe2(signal_pipe, O_NONBLOCK | O_CLOEXEC) != 0) {
        return -1;
    }
    app.signals = st_netfd_open(signal_pipe[0]);
    if (app.signals == NULL) {
        return -1;
    }
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    (void)sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    if (sigaction(SIGTERM, &sa, NULL) != 0 || sigaction(SIGINT, &sa, NULL) != 0) {
        return -1;
    }
    return 0;
}

/* ---- the workers: each blocks in one kind of call until interrupted -------------------- */

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    int rc = 0;
    app.started++;
    switch (w->kind) {
    case READER: {
        /* A connection that never says anything. */
        int sv[2];
        char buf[64];
        st_netfd_t fd = NULL;
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0 ||
            (fd = st_netfd_open_socket(sv[0])) == NULL) {
            perror("graceful_shutdown: socketpair");
            return NULL;
        }
        rc = (int)st_read(fd, buf, sizeof buf, ST_UTIME_NO_TIMEOUT);
        w->saw_eintr = rc == -1 && errno == EINTR;
        (void)st_netfd_close(fd); /* unwinding: release what this worker holds */
        (void)close(sv[1]);
        break;
    }
    case ACCEPTOR: {
        st_netfd_t client = st_accept(app.listener, NULL, NULL, ST_UTIME_NO_TIMEOUT);
        w->saw_eintr = client == NULL && errno == EINTR;
        if (client != NULL) {
            (void)st_netfd_close(client);
        }
        break;
    }
    case SLEEPER:
        rc = st_usleep(ST_UTIME_NO_TIMEOUT);
        w->saw_eintr = rc == -1 && errno == EINTR;
        break;
    case WAITER:
        rc = st_cond_wait(app.never);
        w->saw_eintr = rc == -1 && errno == EINTR;
        break;
    }
    if (!w->saw_eintr) {
        fprintf(stderr, "graceful_shutdown: a %s worker did not end with EINTR\n",
                kind_names[w->kind]);
    }
    return NULL;
}

/* ---- 2-4. the watcher: waits for the signal, stops everyone ----------------------------- */

static void *watcher_main(void *arg)
{
    unsigned char sig = 0;
    (void)arg;
    /* The signal arrives as a byte to read, like any other I/O. */
    if (st_read(app.signals, &sig, 1, ST_UTIME_NO_TIMEOUT) != 1) {
        perror("graceful_shutdown: reading the signal pipe");
        return NULL;
    }
    printf("got %s\n", sig == SIGTERM ? "SIGTERM" : sig == SIGINT ? "SIGINT" : "a signal");
    (void)fflush(stdout);
    for (int i = 0; i < app.nworkers; i++) {
        st_thread_interrupt(app.workers[i].thread);
    }
    for (int i = 0; i < app.nworkers; i++) {
        if (st_thread_join(app.workers[i].thread, NULL) == 0 && app.workers[i].saw_eintr) {
            app.stopped++;
        }
    }
    return (void *)&app; /* anything non-NULL: the shutdown ran */
}

/* Gives up after the -t delay, so that a lost signal cannot hang a test. */
static void *deadline_main(void *arg)
{
    int seconds = *(const int *)arg;
    if (st_sleep(seconds) == 0) {
        fprintf(stderr, "graceful_shutdown: no signal after %d s\n", seconds);
        exit(1);
    }
    return NULL;
}

/* ---- start-up --------------------------------------------------------------------------- */

static int select_eventsys(const char *name)
{
    static const struct {
        const char *name;
        int eventsys;
    } names[] = {{"epoll", ST_EVENTSYS_ALT}, {"poll", ST_EVENTSYS_POLL}, {"select", ST_EVENTSYS_SELECT}};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (strcmp(names[i].name, name) == 0) {
            return st_set_eventsys(names[i].eventsys);
        }
    }
    errno = EINVAL;
    return -1;
}

/* A listening socket on a free loopback port that nobody connects to. */
static st_netfd_t open_listener(void)
{
    unsigned port = 0;
    return example_open_loopback(SOCK_STREAM, 0, 0, 16, &port);
}

static int parse_int(const char *s, int min, int max, int *out)
{
    long v = 0;
    if (example_parse_long(s, min, max, &v) != 0) {
        return -1;
    }
    *out = (int)v;
    return 0;
}

int main(int argc, char **argv)
{
    static int seconds;
    const char *eventsys = "epoll";
    int c = 0;
    app.nworkers = 8;
    while ((c = getopt(argc, argv, "w:e:t:")) != -1) {
        int rc = -1;
        if (c == 'w') {
            rc = parse_int(optarg, 1, MAX_WORKERS, &app.nworkers);
        } else if (c == 'e') {
            eventsys = optarg;
            rc = 0;
        } else if (c == 't') {
            rc = parse_int(optarg, 0, 1000000, &seconds);
        }
        if (rc != 0) {
            fprintf(stderr, "usage: %s [-w workers] [-e epoll|poll|select] [-t seconds]\n",
                    argv[0]);
            return 2;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "usage: %s [-w workers] [-e epoll|poll|select] [-t seconds]\n", argv[0]);
        return 2;
    }
    if (select_eventsys(eventsys) != 0) {
        fprintf(stderr, "graceful_shutdown: event system '%s': %s\n", eventsys, strerror(errno));
        return 1;
    }
    if (st_init() != 0 || (app.never = st_cond_new()) == NULL ||
        (app.listener = open_listener()) == NULL || install_signal_pipe() != 0) {
        perror("graceful_shutdown: start-up");
        return 1;
    }
    app.workers = calloc((size_t)app.nworkers, sizeof *app.workers);
    if (app.workers == NULL) {
        perror("graceful_shutdown: calloc");
        return 1;
    }
    for (int i = 0; i < app.nworkers; i++) {
        app.workers[i].kind = (enum kind)(i % KINDS);
        app.workers[i].thread = st_thread_create(worker_main, &app.workers[i], 1, 0);
        if (app.workers[i].thread == NULL) {
            perror("graceful_shutdown: st_thread_create");
            return 1;
        }
    }
    st_thread_t watcher = st_thread_create(watcher_main, NULL, 1, 0);
    st_thread_t deadline = NULL;
    if (seconds > 0) {
        deadline = st_thread_create(deadline_main, &seconds, 1, 0);
    }
    if (watcher == NULL || (seconds > 0 && deadline == NULL)) {
        perror("graceful_shutdown: st_thread_create");
        return 1;
    }
    /* Let every worker reach its blocking call before announcing readiness. */
    while (app.started < app.nworkers) {
        st_thread_yield();
    }
    printf("ready: %d workers blocked, pid %ld\n", app.nworkers, (long)getpid());
    (void)fflush(stdout);

    void *shutdown_ran = NULL;
    if (st_thread_join(watcher, &shutdown_ran) != 0 || shutdown_ran == NULL) {
        return 1;
    }
    printf("%d workers stopped\n", app.stopped);
    (void)fflush(stdout);
    int ok = app.stopped == app.nworkers;
    if (deadline != NULL) {
        /* Nothing may be left running, waiting or sleeping at st_destroy(). */
        st_thread_interrupt(deadline);
        (void)st_thread_join(deadline, NULL);
    }

    /* The handlers go before the pipe they write to; then everything the
     * workers shared, then the scheduler itself. */
    (void)signal(SIGTERM, SIG_DFL);
    (void)signal(SIGINT, SIG_DFL);
    (void)st_netfd_close(app.listener);
    (void)st_netfd_close(app.signals);
    (void)close(signal_pipe[1]);
    (void)st_cond_destroy(app.never);
    free(app.workers);
    st_destroy();
    return ok ? 0 : 1;
}
