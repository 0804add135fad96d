/*
 * A program that reads State Threads' DEBUG_STATS counters the way SRS does,
 * through extern declarations of its own: it links only against a library
 * built with the counters (make linux-debug with -DDEBUG_STATS, or Meson's
 * debug_stats option). One st_read that must wait, one that need not, one
 * yield to a runnable coroutine; prints the counters and exits 0 when each
 * moved as State Threads counts it.
 */
#include <st.h>

#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

extern __thread unsigned long long _st_stat_read;
extern __thread unsigned long long _st_stat_read_eagain;
extern __thread unsigned long long _st_stat_thread_yield;
extern __thread unsigned long long _st_stat_thread_yield2;
extern __thread int _st_active_count;

static int sv[2];

/* Lets main wait in st_read, then writes twice. */
static void *writer(void *arg)
{
    (void)arg;
    st_usleep(1000);
    if (write(sv[1], "ab", 2) != 2) {
        return NULL;
    }
    return NULL;
}

int main(void)
{
    char c[2];

    if (st_init() != 0 || socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) {
        perror("debug_stats: set-up");
        return 1;
    }
    st_netfd_t fd = st_netfd_open_socket(sv[0]);
    st_thread_t t = st_thread_create(writer, NULL, 1, 0);
    if (fd == NULL || t == NULL) {
        perror("debug_stats: set-up");
        return 1;
    }
    int active = _st_active_count; /* main and the writer */
    /* Nothing to read yet: the first attempt gets EAGAIN and waits. */
    ssize_t first = st_read(fd, c, 1, ST_UTIME_NO_TIMEOUT);
    /* The second byte is there: no wait. */
    ssize_t second = st_read(fd, c + 1, 1, ST_UTIME_NO_TIMEOUT);
    st_thread_join(t, NULL);
    st_thread_t again = st_thread_create(writer, NULL, 1, 0);
    st_thread_yield(); /* the new coroutine is runnable: the yield switches */
    st_thread_interrupt(again);
    st_thread_join(again, NULL);

    printf("read %llu, read_eagain %llu, thread_yield %llu, thread_yield2 %llu, active %d\n",
           _st_stat_read, _st_stat_read_eagain, _st_stat_thread_yield, _st_stat_thread_yield2,
           active);
    if (first != 1 || second != 1 || _st_stat_read != 2 || _st_stat_read_eagain != 1 ||
        _st_stat_thread_yield != 1 || _st_stat_thread_yield2 != 1 || active != 2) {
        fprintf(stderr, "debug_stats: the counters are not State Threads' counts\n");
        return 1;
    }
    puts("ok");
    return 0;
}
