/*
 * Servers from outside st_bench ("peers", tools/bench/peers/: echo servers
 * on libuv, Go, a hand-written liburing loop; the fairness benchmark's
 * player server built against any library with State Threads' API), run by
 * the echo and fairness drivers and by `serve` like the built-in servers,
 * so that they get the same client, the same CPU pinning and the same
 * measurement.
 *
 * `--peer NAME=PATH` names one. In the server's process (the forked child
 * of the driver, or `serve` itself) the listening socket is moved to fd 3,
 * the fairness driver's ready pipe to fd 4, and PATH is executed, with
 * `--once` when the server is to exit after its first connection ends.
 * tools/bench/peers/README.md describes what such a program must do.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"

enum {
    LISTEN_FD = 3, /* where a peer finds its listening socket */
    READY_FD = 4,  /* and the pipe it writes a byte to when it accepts */
    SPARE_FD = 10, /* above both, while they are moved */
    NAME_MAX_LEN = 32,
};

struct peer {
    char name[NAME_MAX_LEN];
    const char *path;
};

static struct peer peers[BENCH_MAX_PEERS];
static int npeers;

static bool listed(const char *const *names, const char *name)
{
    for (; *names != NULL; names++) {
        if (strcmp(*names, name) == 0) {
            return true;
        }
    }
    return false;
}

/* A name --server already gives a meaning: a built-in server's, "both" or "all". */
static bool builtin(const char *name)
{
    static const char *const sets[] = {"both", "all", NULL};
    return listed(sets, name) || listed(bench_echo_servers, name) ||
           listed(bench_fair_servers, name);
}

size_t bench_server_list(const char *const *builtin, const char **names)
{
    size_t n = 0;
    for (; builtin[n] != NULL; n++) {
        names[n] = builtin[n];
    }
    for (int i = 0; i < npeers; i++) {
        names[n++] = peers[i].name;
    }
    return n;
}

int bench_peer_add(const char *spec)
{
    const char *eq = strchr(spec, '=');
    size_t len = eq != NULL ? (size_t)(eq - spec) : 0;
    if (len == 0 || len >= NAME_MAX_LEN || eq[1] == '\0' || strcspn(spec, ",") < len) {
        fprintf(stderr, "st_bench: --peer wants NAME=PATH (a name without commas), not '%s'\n",
                spec);
        return -1;
    }
    if (npeers == BENCH_MAX_PEERS) {
        fprintf(stderr, "st_bench: at most %d peers\n", BENCH_MAX_PEERS);
        return -1;
    }
    struct peer *p = &peers[npeers];
    memcpy(p->name, spec, len);
    p->name[len] = '\0';
    p->path = eq + 1;
    if (builtin(p->name) || bench_peer_find(p->name) != NULL) {
        fprintf(stderr, "st_bench: peer name '%s' is taken\n", p->name);
        return -1;
    }
    npeers++;
    return 0;
}

const char *bench_peer_find(const char *name)
{
    for (int i = 0; i < npeers; i++) {
        if (strcmp(peers[i].name, name) == 0) {
            return peers[i].path;
        }
    }
    return NULL;
}

/* Make `fd` descriptor `to`, open across exec; fd itself is closed unless it is `to`. */
static int move_fd(int fd, int to)
{
    /* dup2 leaves the copy without FD_CLOEXEC; a descriptor already there loses it here. */
    return fd == to ? fcntl(fd, F_SETFD, 0) : (dup2(fd, to) == to ? close(fd) : -1);
}

int bench_peer_exec(const char *name, int lfd, int ready_fd, bool once)
{
    const char *path = bench_peer_find(name);
    if (path == NULL) {
        errno = ENOENT;
        return -1;
    }
    /* The ready pipe out of the way first: it may be fd 3, or the listener fd 4. */
    int spare = -1;
    if (ready_fd >= 0 && (spare = fcntl(ready_fd, F_DUPFD_CLOEXEC, SPARE_FD)) < 0) {
        perror("bench: peer: the ready pipe");
        return -1;
    }
    if (ready_fd >= 0 && ready_fd != lfd) {
        (void)close(ready_fd);
    }
    if (move_fd(lfd, LISTEN_FD) != 0 || (spare >= 0 && move_fd(spare, READY_FD) != 0)) {
        perror("bench: peer: moving the listening socket to fd 3 and the ready pipe to fd 4");
        return -1;
    }
    /* The driver's output is line-buffered; nothing may be left to print twice. */
    (void)fflush(stdout);
    (void)fflush(stderr);
    char *argv[] = {(char *)path, once ? "--once" : NULL, NULL};
    (void)execv(path, argv);
    fprintf(stderr, "bench: peer %s: cannot run %s: %s\n", name, path, strerror(errno));
    return -1;
}
