/*
 * A program that uses st as any other project would, through st.h and the
 * `st` dependency only: a few coroutines, and an echo over a socketpair
 * served by one of them. Prints "ok" and exits 0 when everything worked.
 */
#include <st.h>

#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#define WORKERS 8
#define ROUNDS 100

/* Echoes what it reads until the peer closes. */
static void *echo(void *arg)
{
    st_netfd_t fd = arg;
    char buf[64];
    ssize_t n;

    while ((n = st_read(fd, buf, sizeof(buf), ST_UTIME_NO_TIMEOUT)) > 0) {
        if (st_write(fd, buf, (size_t)n, ST_UTIME_NO_TIMEOUT) != n) {
            break;
        }
    }
    return NULL;
}

/* Sleeps a little, then counts itself. */
static void *worker(void *arg)
{
    int *done = arg;

    if (st_usleep(1000) == 0) {
        (*done)++;
    }
    return arg;
}

static int fail(const char *what)
{
    perror(what);
    return 1;
}

int main(void)
{
    st_thread_t workers[WORKERS];
    int done = 0;
    int sv[2];

    if (st_init() != 0) {
        return fail("st_init");
    }
    for (int i = 0; i < WORKERS; i++) {
        workers[i] = st_thread_create(worker, &done, 1, 0);
        if (workers[i] == NULL) {
            return fail("st_thread_create");
        }
    }

    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) {
        return fail("socketpair");
    }
    st_netfd_t client = st_netfd_open_socket(sv[0]);
    st_netfd_t server = st_netfd_open_socket(sv[1]);
    if (client == NULL || server == NULL) {
        return fail("st_netfd_open_socket");
    }
    st_thread_t echoer = st_thread_create(echo, server, 1, 0);
    if (echoer == NULL) {
        return fail("st_thread_create");
    }

    for (int round = 0; round < ROUNDS; round++) {
        char msg[32];
        char reply[32];
        int len = snprintf(msg, sizeof(msg), "ping %d", round);

        if (len <= 0 || st_write(client, msg, (size_t)len, 1000000) != len ||
            st_read_fully(client, reply, (size_t)len, 1000000) != len ||
            memcmp(msg, reply, (size_t)len) != 0) {
            return fail("echo");
        }
    }

    /* Closing our end ends the echo coroutine (end of file). */
    if (st_netfd_close(client) != 0 || st_thread_join(echoer, NULL) != 0 ||
        st_netfd_close(server) != 0) {
        return fail("close");
    }
    for (int i = 0; i < WORKERS; i++) {
        void *rv = NULL;

        if (st_thread_join(workers[i], &rv) != 0 || rv != &done) {
            return fail("st_thread_join");
        }
    }
    if (done != WORKERS) {
        (void)fprintf(stderr, "%d of %d coroutines ran\n", done, WORKERS);
        return 1;
    }
    printf("ok: %d coroutines, %d echoes, st %s, %s\n", WORKERS + 1, ROUNDS, ST_VERSION,
           st_get_eventsys_name());
    return 0;
}
