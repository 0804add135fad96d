/*
 * example_stop: stopping an example server on a signal or after N seconds
 * (see example_stop.h).
 */
#include "example_stop.h"

#include <fcntl.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

/* One scheduler per example process, so one stop per process. */
static int stopping;
static st_thread_t stop_target;

static int signal_pipe[2] = {-1, -1};
static st_netfd_t signal_fd; /* the read end, kept for the process's lifetime */

/*
 * Runs in a coroutine, never in a signal handler: st calls are not
 * async-signal-safe. Both the watcher and the timer may get here, and the
 * target must be interrupted only once: a second interrupt could cut short
 * a blocking call of its shutdown work.
 */
static void stop(void)
{
    if (!stopping) {
        stopping = 1;
        st_thread_interrupt(stop_target);
    }
}

static void *stop_after(void *arg)
{
    long seconds = *(const long *)arg;
    if (st_sleep((int)seconds) == 0) {
        stop();
    }
    return NULL;
}

static void on_signal(int sig)
{
    char c = (char)sig;
    /* write() is async-signal-safe; the byte wakes the watcher coroutine. The
     * write end is O_NONBLOCK: a full pipe (a signal storm) drops the byte
     * instead of blocking the handler, and one byte is enough to stop. */
    (void)write(signal_pipe[1], &c, 1);
}

static void *watch_signals(void *arg)
{
    char c = 0;
    st_netfd_t fd = arg;
    if (st_read(fd, &c, 1, ST_UTIME_NO_TIMEOUT) == 1) {
        stop();
    }
    return NULL;
}

static int install_signals(void)
{
    struct sigaction sa;
    if (pipe(signal_pipe) != 0) {
        return -1;
    }
    (void)fcntl(signal_pipe[1], F_SETFL, O_NONBLOCK);
    signal_fd = st_netfd_open(signal_pipe[0]);
    if (signal_fd == NULL || st_thread_create(watch_signals, signal_fd, 0, 0) == NULL) {
        return -1;
    }
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    (void)sigemptyset(&sa.sa_mask);
    if (sigaction(SIGINT, &sa, NULL) != 0 || sigaction(SIGTERM, &sa, NULL) != 0) {
        return -1;
    }
    return 0;
}

int example_stop_init(st_thread_t loop, long seconds)
{
    static long timer_seconds; /* outlives this call: the timer reads it later */
    stop_target = loop;
    if (install_signals() != 0) {
        return -1;
    }
    timer_seconds = seconds;
    if (seconds > 0 && st_thread_create(stop_after, &timer_seconds, 0, 0) == NULL) {
        return -1;
    }
    return 0;
}

int example_stopping(void)
{
    return stopping;
}
