/*
 * Soak test: churn loopback connections for a fixed time, then check that
 * nothing was lost.
 *
 *   soak [-t SECONDS] [-c CONNS] [-e epoll|poll|select] [-s SEED]
 *
 * A server (several acceptor coroutines, one echo coroutine per connection)
 * and CONNS client coroutines run in one scheduler on 127.0.0.1. Each client
 * connects, sends random-sized messages and checks their echo, sometimes
 * stalls past the server's read timeout or hangs up early, then reconnects.
 * A chaos coroutine interrupts random coroutines all along. Every wait has
 * a random timeout. At the deadline everything is stopped, and the run
 * passes only if:
 *
 *   - every echo came back intact and no call failed with an errno other
 *     than the expected ETIME, EINTR, ECONNRESET, EPIPE (or end of file);
 *   - every coroutine created has finished, every connection accepted was
 *     closed, and /proc/self/fd holds the descriptors it held before;
 *   - the resident set after the whole run is within 20% (+8 MiB) of what
 *     it was at 25% of the run, once warmed up (not checked under
 *     AddressSanitizer, whose quarantine grows on purpose).
 *
 * The last line is "soak: PASS" or "soak: FAIL ..."; the exit status is 0
 * for PASS. Loopback only, bounded in time and in connections.
 */
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "st.h"
#include "st_test_util.h"

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SOAK_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) && !defined(SOAK_ASAN)
#define SOAK_ASAN 1
#endif

#define MAX_MSG 4096
#define ACCEPTORS 4
#define STACK_SIZE (64 * 1024)

/* ---- state ------------------------------------------------------------------ */

struct member {              /* a live coroutine the chaos coroutine may interrupt */
    st_thread_t thread;
    int index;
};

static struct {
    int conns;
    st_utime_t deadline;
    bool stopping;
    st_netfd_t listener;
    struct sockaddr_in addr;
    uint64_t rng;

    struct member **members;
    int nmembers;
    int max_members;

    long created, finished;
    long accepted, server_closed;
    long connects, client_closed;
    long messages, bytes;
    long interrupts, stalls, hangups;
    long expected_errors, unexpected_errors, corrupt, create_failures;
    int last_unexpected;
} s;

static uint64_t next_random(void)
{
    /* xorshift64*: reproducible for a given seed */
    s.rng ^= s.rng >> 12;
    s.rng ^= s.rng << 25;
    s.rng ^= s.rng >> 27;
    return s.rng * 2685821657736338717ULL;
}

static unsigned random_below(unsigned n)
{
    return (unsigned)(next_random() % n);
}

static void join_members(struct member *m)
{
    m->thread = st_thread_self();
    m->index = s.nmembers;
    s.members[s.nmembers++] = m;
}

static void leave_members(struct member *m)
{
    struct member *last = s.members[--s.nmembers];
    s.members[m->index] = last;
    last->index = m->index;
}

static bool spawn(void *(*start)(void *), void *arg)
{
    if (s.created - s.finished >= s.max_members) {
        return false;
    }
    if (st_thread_create(start, arg, 0, STACK_SIZE) == NULL) {
        s.create_failures++;
        return false;
    }
    s.created++;
    return true;
}

/* An errno the churn is expected to produce, or an unexpected one. */
static void count_error(int err)
{
    if (err == ETIME || err == EINTR || err == ECONNRESET || err == EPIPE) {
        s.expected_errors++;
        if (err == EINTR) {
            s.interrupts++;
        }
    } else {
        s.unexpected_errors++;
        s.last_unexpected = err;
    }
}

static st_utime_t random_timeout(st_utime_t lo, st_utime_t hi)
{
    return lo + random_below((unsigned)(hi - lo));
}

/*
 * Closing with an RST instead of a FIN: thousands of connections a second
 * would otherwise pile up in TIME_WAIT and exhaust the loopback ports.
 */
static void abortive_close_on_exit(int osfd)
{
    struct linger lg = {.l_onoff = 1, .l_linger = 0};
    (void)setsockopt(osfd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg));
}

/* ---- server ----------------------------------------------------------------- */

static void *echo_connection(void *arg)
{
    st_netfd_t fd = arg;
    struct member me;
    char buf[MAX_MSG];
    join_members(&me);
    while (!s.stopping) {
        ssize_t n = st_read(fd, buf, sizeof(buf), random_timeout(50000, 400000));
        if (n == 0) {
            break;
        }
        if (n < 0) {
            count_error(errno);
            break;
        }
        if (st_write(fd, buf, (size_t)n, random_timeout(50000, 400000)) != n) {
            count_error(errno);
            break;
        }
    }
    if (st_netfd_close(fd) != 0) {
        count_error(errno);
    }
    s.server_closed++;
    leave_members(&me);
    s.finished++;
    return NULL;
}

static void *acceptor(void *arg)
{
    (void)arg;
    struct member me;
    join_members(&me);
    while (!s.stopping) {
        st_netfd_t c = st_accept(s.listener, NULL, NULL, random_timeout(10000, 200000));
        if (c == NULL) {
            if (errno != ETIME && errno != EINTR) {
                count_error(errno);
            }
            continue;
        }
        s.accepted++;
        abortive_close_on_exit(st_netfd_fileno(c));
        if (!spawn(echo_connection, c)) {
            (void)st_netfd_close(c);
            s.server_closed++;
        }
    }
    leave_members(&me);
    s.finished++;
    return NULL;
}

/* ---- clients ----------------------------------------------------------------- */

static void fill(char *buf, size_t n, uint64_t seed)
{
    for (size_t i = 0; i < n; i++) {
        buf[i] = (char)((seed + i * 7) & 0xff);
    }
}

/* One connection: a few messages, maybe a stall or an early hang-up. */
static void client_session(void)
{
    int osfd = socket(AF_INET, SOCK_STREAM, 0);
    if (osfd < 0) {
        count_error(errno);
        return;
    }
    abortive_close_on_exit(osfd);
    st_netfd_t fd = st_netfd_open_socket(osfd);
    if (fd == NULL) {
        count_error(errno);
        close(osfd);
        return;
    }
    s.connects++;
    if (st_connect(fd, (struct sockaddr *)&s.addr, sizeof(s.addr), random_timeout(100000, 1000000)) !=
        0) {
        count_error(errno);
    } else {
        char out[MAX_MSG];
        char in[MAX_MSG];
        unsigned count = 1 + random_below(8);
        for (unsigned m = 0; m < count && !s.stopping; m++) {
            unsigned r = random_below(100);
            if (r < 3) {
                s.hangups++;
                break;
            }
            if (r < 6) {
                s.stalls++; /* past the server's read timeout */
                if (st_usleep(random_timeout(400000, 600000)) != 0) {
                    count_error(errno);
                    break;
                }
            }
            size_t len = 1 + random_below(MAX_MSG);
            uint64_t seed = next_random();
            fill(out, len, seed);
            if (st_write(fd, out, len, random_timeout(50000, 500000)) != (ssize_t)len) {
                count_error(errno);
                break;
            }
            ssize_t got = st_read_fully(fd, in, len, random_timeout(50000, 500000));
            if (got < 0) {
                count_error(errno);
                break;
            }
            if ((size_t)got < len) {
                break; /* the server hung up (its read timed out): end of file */
            }
            if (memcmp(in, out, len) != 0) {
                s.corrupt++;
                break;
            }
            s.messages++;
            s.bytes += (long)len;
        }
    }
    if (st_netfd_close(fd) != 0) {
        count_error(errno);
    }
    s.client_closed++;
}

static void *client(void *arg)
{
    (void)arg;
    struct member me;
    join_members(&me);
    while (!s.stopping) {
        client_session();
        if (!s.stopping && random_below(4) == 0 && st_usleep(random_timeout(1000, 20000)) != 0) {
            count_error(errno);
        }
    }
    leave_members(&me);
    s.finished++;
    return NULL;
}

/* ---- chaos and bookkeeping ------------------------------------------------------ */

static void *chaos(void *arg)
{
    (void)arg;
    while (!s.stopping) {
        if (st_usleep(random_timeout(500, 5000)) != 0) {
            continue;
        }
        if (s.nmembers > 0) {
            st_thread_interrupt(s.members[random_below((unsigned)s.nmembers)]->thread);
        }
    }
    s.finished++;
    return NULL;
}

static long rss_kib(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    if (f == NULL) {
        return -1;
    }
    char line[256];
    long kib = -1;
    while (fgets(line, sizeof(line), f) != NULL) {
        if (strncmp(line, "VmRSS:", 6) == 0) {
            kib = strtol(line + 6, NULL, 10);
            break;
        }
    }
    fclose(f);
    return kib;
}

static int usage(const char *argv0)
{
    fprintf(stderr, "usage: %s [-t SECONDS] [-c CONNS] [-e epoll|poll|select] [-s SEED]\n", argv0);
    return 2;
}

int main(int argc, char **argv)
{
    long seconds = 10;
    long conns = 500;
    int eventsys = ST_EVENTSYS_ALT;
    unsigned long seed = 1;
    int opt;
    while ((opt = getopt(argc, argv, "t:c:e:s:")) != -1) {
        switch (opt) {
        case 't':
            seconds = strtol(optarg, NULL, 10);
            break;
        case 'c':
            conns = strtol(optarg, NULL, 10);
            break;
        case 'e':
            eventsys = st_test_eventsys_by_name(optarg);
            break;
        case 's':
            seed = strtoul(optarg, NULL, 10);
            break;
        default:
            return usage(argv[0]);
        }
    }
    if (seconds < 1 || seconds > 7 * 24 * 3600 || conns < 1 || conns > 20000 || eventsys < 0) {
        return usage(argv[0]);
    }

    int fds_before = st_test_count_open_fds();
    s.rng = seed * 0x9E3779B97F4A7C15ULL + 1;
    s.conns = (int)conns;
    s.max_members = 2 * s.conns + ACCEPTORS + 16;
    s.members = calloc((size_t)s.max_members, sizeof(struct member *));
    if (s.members == NULL || st_set_eventsys(eventsys) != 0 || st_init() != 0) {
        perror("soak: set-up");
        return 1;
    }
    if (eventsys == ST_EVENTSYS_SELECT && 2 * conns + 32 > FD_SETSIZE) {
        fprintf(stderr, "soak: select watches fds below %d only: use -c %d or fewer\n", FD_SETSIZE,
                (FD_SETSIZE - 32) / 2);
        return 2;
    }

    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    memset(&s.addr, 0, sizeof(s.addr));
    s.addr.sin_family = AF_INET;
    s.addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t alen = sizeof(s.addr);
    if (lfd < 0 || setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
        bind(lfd, (struct sockaddr *)&s.addr, sizeof(s.addr)) != 0 ||
        getsockname(lfd, (struct sockaddr *)&s.addr, &alen) != 0 || listen(lfd, (int)conns) != 0 ||
        (s.listener = st_netfd_open_socket(lfd)) == NULL) {
        perror("soak: listener");
        return 1;
    }

    st_utime_t start = st_utime();
    s.deadline = start + (st_utime_t)seconds * 1000000ULL;
    for (int i = 0; i < ACCEPTORS; i++) {
        (void)spawn(acceptor, NULL);
    }
    for (long i = 0; i < conns; i++) {
        (void)spawn(client, NULL);
    }
    (void)spawn(chaos, NULL);

    long rss_warm = -1;
    st_utime_t quarter = start + (s.deadline - start) / 4;
    while (st_utime() < s.deadline) {
        (void)st_usleep(100000);
        if (rss_warm < 0 && st_utime() >= quarter) {
            rss_warm = rss_kib();
        }
    }
    long rss_end = rss_kib();
    double elapsed = (double)(st_utime() - start) / 1e6;

    /* Stop: everyone sees the flag at its next step, the blocked ones are woken. */
    s.stopping = true;
    for (int round = 0; s.finished < s.created && round < 2000; round++) {
        for (int i = 0; i < s.nmembers; i++) {
            st_thread_interrupt(s.members[i]->thread);
        }
        (void)st_usleep(5000);
    }
    long live = s.created - s.finished;
    int close_rc = st_netfd_close(s.listener);
    st_destroy();
    free(s.members);
    int fds_after = st_test_count_open_fds();

    printf("soak: %.1f s, %d conns, %s, seed %lu\n", elapsed, s.conns,
           eventsys == ST_EVENTSYS_ALT ? "epoll" : eventsys == ST_EVENTSYS_POLL ? "poll" : "select",
           seed);
    printf("soak: coroutines created %ld, finished %ld; connections made %ld, closed %ld; "
           "accepted %ld, closed %ld\n",
           s.created, s.finished, s.connects, s.client_closed, s.accepted, s.server_closed);
    printf("soak: %ld echoes (%ld bytes), %ld stalls, %ld hang-ups, %ld interrupts seen, "
           "%ld expected errors\n",
           s.messages, s.bytes, s.stalls, s.hangups, s.interrupts, s.expected_errors);
    printf("soak: fds %d before, %d after; RSS %ld KiB at 25%%, %ld KiB at the end\n", fds_before,
           fds_after, rss_warm, rss_end);

    char why[256] = "";
    size_t used = 0;
#define FAIL_IF(cond, ...)                                                                         \
    do {                                                                                           \
        if ((cond) && used < sizeof(why)) {                                                        \
            int n_ = snprintf(why + used, sizeof(why) - used, __VA_ARGS__);                        \
            used += n_ > 0 ? (size_t)n_ : 0;                                                       \
        }                                                                                          \
    } while (0)
    FAIL_IF(live != 0, " %ld coroutines never finished;", live);
    FAIL_IF(s.accepted != s.server_closed, " accepted %ld != closed %ld;", s.accepted,
            s.server_closed);
    FAIL_IF(s.connects != s.client_closed, " connections %ld != closed %ld;", s.connects,
            s.client_closed);
    FAIL_IF(close_rc != 0, " closing the listener failed;");
    FAIL_IF(fds_after != fds_before, " %d fds leaked;", fds_after - fds_before);
    FAIL_IF(s.corrupt != 0, " %ld corrupt echoes;", s.corrupt);
    FAIL_IF(s.unexpected_errors != 0, " %ld unexpected errors (last: %s);", s.unexpected_errors,
            strerror(s.last_unexpected));
    FAIL_IF(s.create_failures != 0, " %ld coroutine creations failed;", s.create_failures);
    FAIL_IF(s.messages == 0, " no echo completed;");
#ifndef SOAK_ASAN
    FAIL_IF(rss_warm <= 0 || rss_end > rss_warm + rss_warm / 5 + 8192,
            " RSS grew from %ld to %ld KiB;", rss_warm, rss_end);
#endif
    if (used > 0) {
        printf("soak: FAIL%s\n", why);
        return 1;
    }
    printf("soak: PASS\n");
    return 0;
}
