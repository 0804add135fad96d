/*
 * Memory per idle coroutine: VmRSS before and after creating `count`
 * coroutines that all block, divided by the count.
 *
 * Readers block in st_read() on one end of a socketpair that never receives
 * data. The fd limit is far below the coroutine counts measured, so several
 * readers share a socket (st lets any number of coroutines wait on one fd).
 * Sleepers block in st_usleep() for an hour.
 *
 * Where stacks are mappings of their own (two with a guard page: always for
 * the first 8192 guarded ones, and for all of them on kernels without
 * page-table guard markers), creation can stop at vm.max_map_count; the
 * count reached and the reason are reported.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench.h"
#include "st.h"

enum { MAX_SOCKETS = 4096, HOUR_US = 3600 * 1000 * 1000U };

static long blocked;

static void *reader(void *arg)
{
    char buf[64];
    blocked++;
    (void)st_read(arg, buf, sizeof buf, ST_UTIME_NO_TIMEOUT);
    return NULL;
}

static void *sleeper(void *arg)
{
    (void)arg;
    blocked++;
    (void)st_usleep(HOUR_US);
    return NULL;
}

/* One end of `count` socketpairs as netfds; the other ends stay open and silent. */
static st_netfd_t *open_sockets(long count)
{
    /* An array of netfd handles, which are pointers. */
    st_netfd_t *fds = calloc((size_t)count, sizeof(st_netfd_t)); // NOLINT(bugprone-sizeof-expression)
    if (fds == NULL) {
        return NULL;
    }
    for (long i = 0; i < count; i++) {
        int sv[2];
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0 ||
            (fds[i] = st_netfd_open_socket(sv[0])) == NULL) {
            perror("bench: socketpair");
            free((void *)fds);
            return NULL;
        }
    }
    return fds;
}

int bench_memory(bool sleep, long count, long stack_kib)
{
    long sockets = count < MAX_SOCKETS ? count : MAX_SOCKETS;
    st_netfd_t *fds = NULL;
    long created = 0;
    int create_errno = 0;
    char key[64];
    char count_key[80];

    (void)st_set_eventsys(ST_EVENTSYS_ALT);
    if (st_init() != 0) {
        perror("bench: st_init");
        return -1;
    }
    if (!sleep && (fds = open_sockets(sockets)) == NULL) {
        return -1;
    }
    st_thread_yield();
    long rss0 = bench_vm_kib("VmRSS");
    long pte0 = bench_vm_kib("VmPTE");
    double t0 = bench_now();
    for (; created < count; created++) {
        void *arg = sleep ? NULL : fds[created % sockets];
        if (st_thread_create(sleep ? sleeper : reader, arg, 0, (int)(stack_kib * 1024)) == NULL) {
            create_errno = errno;
            break;
        }
    }
    st_thread_yield(); /* every new coroutine runs once and blocks */
    double elapsed = bench_now() - t0;
    long rss1 = bench_vm_kib("VmRSS");
    long pte1 = bench_vm_kib("VmPTE");
    free((void *)fds); /* the readers hold the netfds themselves */
    if (blocked != created || created == 0 || rss0 < 0 || rss1 < 0) {
        fprintf(stderr, "bench: %ld of %ld coroutines blocked\n", blocked, created);
        return -1;
    }

    double per = (double)(rss1 - rss0) / (double)created;
    double pte = (double)(pte1 - pte0) / (double)created;
    bool guard = bench_guard_pages();
    (void)snprintf(key, sizeof key, "mem_%s_%s_%ldk", sleep ? "sleep" : "read",
                   guard ? "guard" : "noguard", stack_kib);
    bench_result(key, per, "KiB", "-", "RSS per coroutine, %s, %ldK stack, %s",
                 sleep ? "st_usleep" : "st_read", stack_kib, guard ? "guard" : "no guard");
    (void)snprintf(count_key, sizeof count_key, "%s_count", key);
    bench_result(count_key, (double)created, "coroutines", "-", "  coroutines created (of %ld)",
                 count);
    if (sleep) {
        bench_note("%s: %ld coroutines in st_usleep; %.2f KiB page tables each (VmPTE, not in "
                   "RSS); %.1f s (%.2f us each) to create them and let them block",
                   key, created, pte, elapsed, elapsed * 1e6 / (double)created);
    } else {
        bench_note("%s: %ld coroutines in st_read on %ld socketpairs (%.1f per socket%s); %.2f "
                   "KiB page tables each (VmPTE, not in RSS); %.1f s (%.2f us each) to create "
                   "them and let them block",
                   key, created, sockets, (double)created / (double)sockets,
                   created > sockets ? ": fds are limited" : "", pte, elapsed,
                   elapsed * 1e6 / (double)created);
    }
    if (created < count) {
        bench_note("%s: stopped at %ld of %ld coroutines: st_thread_create: %s; the process has "
                   "%ld mappings, vm.max_map_count is %ld (stacks outside slabs take one mapping%s)",
                   key, created, count, strerror(create_errno), bench_map_count(),
                   bench_proc_long("/proc/sys/vm/max_map_count"),
                   guard ? ", two with a guard page" : "");
    }
    return 0;
}
