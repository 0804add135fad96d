/*
 * libFuzzer harness of the public API (tools/fuzz/run.sh builds and runs it; the
 * corpus replays as a regular test through fuzz_replay.c).
 *
 * One input is one program: its first byte picks the event backend, every
 * following byte is an operation (with argument bytes after it) executed by
 * whichever actor runs when it is read: the primordial coroutine (actor 0)
 * or one of NSLOTS coroutines. Operations create, yield, sleep, wait on and
 * signal condition variables, lock and unlock mutexes, interrupt and join
 * coroutines, read, write, poll and close netfds of socketpairs, and exit.
 * When the input runs out every actor winds down; the primordial joins
 * everyone, closes everything and calls st_destroy().
 *
 * A model of what the library must do is kept next to it, and checked after
 * every operation: mutex ownership (with the direct hand-off to the oldest
 * waiter), which calls may fail with EINTR (only an interrupt makes them,
 * and an interrupt of a blocked call always does), EDEADLK/EPERM/EBUSY/EINVAL
 * exactly when they are due, that every byte written to a socketpair is read
 * once, and, per input, that every coroutine ran its key destructor and was
 * accounted for and that no file descriptor was left open. A violated
 * invariant aborts, which libFuzzer reports as a crash.
 *
 * Time is virtual, so that a run is deterministic and never sleeps: the
 * clock (st_set_utime_function) only moves when the scheduler idles, and the
 * backends' waits are wrapped (-Wl,--wrap=epoll_wait,--wrap=poll,
 * --wrap=select) to poll without blocking and then advance the clock by the
 * timeout asked for. A wait without a timeout that finds nothing ready is a
 * deadlock of the fuzzed program (a cond wait nobody signals): the harness
 * breaks it by interrupting every coroutine.
 *
 * Each input ends with st_destroy(), which unmaps the stacks of the
 * coroutines still alive (the idle one at least): the library clears their
 * AddressSanitizer shadow and LeakSanitizer root regions itself, so that
 * the next input's stacks, mapped at the same addresses, start clean.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "st.h"
#include "st_test_util.h"

#define NSLOTS 6
#define NACTORS (NSLOTS + 1)
#define NPAIRS 3
#define NFDS (2 * NPAIRS)
#define NCONDS 2
#define NMUTEXES 2
#define IOBUF 8192

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* ---- failing loudly ------------------------------------------------------ */

#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fail_at(__LINE__, #cond);                                                              \
        }                                                                                          \
    } while (0)

static _Noreturn void fail_at(int line, const char *what)
{
    fprintf(stderr, "fuzz_api.c:%d: invariant violated: %s (errno %d)\n", line, what, errno);
    abort();
}

/* ---- the model ------------------------------------------------------------ */

enum slot_state { SLOT_FREE, SLOT_ALIVE, SLOT_FINISHED };

/* What an actor is doing inside the library right now. */
enum op_kind { OP_NONE, OP_SLEEP, OP_COND, OP_LOCK, OP_JOIN, OP_IO, OP_POLL, OP_OTHER };

struct actor {
    enum slot_state state;
    st_thread_t handle;
    bool joinable;
    int joiner;            /* actor inside st_thread_join() on it, or -1 */
    bool interrupted;      /* an interrupt it has not consumed yet */
    bool hit_during_op;    /* interrupted while inside the current call */
    enum op_kind op;
    int lock_wait;         /* mutex waited for, or -1 */
    bool lock_pending;     /* still waiting: neither handed the lock nor interrupted */
    unsigned long lock_seq;
    int cond_wait;         /* cond waited on, or -1 */
    unsigned long cond_seq; /* when it started waiting on it */
    bool cond_infinite;    /* waiting without a timeout */
    bool signalled;        /* the model says a signal or broadcast woke it */
    unsigned io_mask;      /* netfds (by index) it is inside a call on */
    unsigned netfd_mask;   /* ...through a netfd I/O call (not a plain st_poll) */
    short io_events[NFDS]; /* what it waits for on each of them */
    bool must_exit;
};

struct pair_stream {       /* one direction of a socketpair */
    unsigned long written;
    unsigned long read;
    unsigned long sum_written;
    unsigned long sum_read;
};

static struct {
    const uint8_t *data;
    size_t size;
    size_t pos;

    struct actor actors[NACTORS];
    unsigned long lock_seq;
    unsigned long cond_seq;

    st_cond_t conds[NCONDS];
    st_mutex_t mutexes[NMUTEXES];
    int owner[NMUTEXES];   /* actor, or -1 */

    st_netfd_t fds[NFDS];
    int osfd[NFDS];        /* -1 when closed */
    int closed_number[NFDS]; /* the number it had when closed (for polls), or -1 */
    struct pair_stream streams[NPAIRS][2];
    bool pair_live[NPAIRS]; /* both ends open since the pair was made */

    int key;
    unsigned long created, started, finished;
    unsigned long key_destructed, key_replaced, fd_destructed, fd_specific_set;
    st_utime_t now;
    bool active;           /* inside an input: the wrapped waits are virtual */
    bool made[NPAIRS];      /* the pair was created (lazily, at first use) */
    int lowest_free_fd;    /* at the start of the input */
    int used_numbers[64];  /* every descriptor the input created */
    int nused;
} g;

static int anchor_fd = -1;    /* kept open across inputs, duplicated to probe */
static unsigned long inputs;

static uint8_t next_byte(void)
{
    return g.pos < g.size ? g.data[g.pos++] : 0;
}

static bool exhausted(void)
{
    return g.pos >= g.size;
}

static int self_id(void)
{
    st_thread_t me = st_thread_self();
    for (int i = 1; i < NACTORS; i++) {
        if (g.actors[i].state == SLOT_ALIVE && g.actors[i].handle == me) {
            return i;
        }
    }
    return 0;
}

static void *token_of(int id)
{
    return &g.actors[id];
}

/* The model's side of st_thread_interrupt(actors[id]). */
static void model_interrupt(int id)
{
    struct actor *a = &g.actors[id];
    if (a->state != SLOT_ALIVE) {
        return; /* finished: a zombie is not affected */
    }
    a->interrupted = true;
    if (a->op != OP_NONE) {
        a->hit_during_op = true;
    }
    if (a->lock_wait >= 0 && a->lock_pending) {
        a->lock_pending = false; /* it leaves the queue without the lock */
    }
}

static void interrupt_actor(int id)
{
    if (g.actors[id].state != SLOT_ALIVE) {
        return;
    }
    model_interrupt(id);
    st_thread_interrupt(g.actors[id].handle);
}

/* After a call that consumes an interrupt whenever one is set before or during it. */
static void expect_consumed(int me, int rc, int err)
{
    struct actor *a = &g.actors[me];
    if (a->interrupted) {
        CHECK(rc == -1 && err == EINTR);
        a->interrupted = false;
    } else {
        CHECK(!(rc == -1 && err == EINTR));
    }
}

/* After an I/O call: EINTR iff interrupted while waiting, or (maybe) before. */
static void expect_io_interrupt(int me, bool failed, int err)
{
    struct actor *a = &g.actors[me];
    bool eintr = failed && err == EINTR;
    if (a->hit_during_op) {
        CHECK(eintr);
    }
    if (eintr) {
        CHECK(a->interrupted);
        a->interrupted = false;
    }
}

static void begin_op(int me, enum op_kind op)
{
    g.actors[me].op = op;
    g.actors[me].hit_during_op = false;
}

static void end_op(int me)
{
    g.actors[me].op = OP_NONE;
    g.actors[me].hit_during_op = false;
}

/* ---- the virtual clock and the wrapped waits ------------------------------ */

static st_utime_t virtual_clock(void)
{
    return g.now;
}

/* Nothing is ready and nothing has a deadline: wake everyone with EINTR. */
static void break_deadlock(void)
{
    for (int i = 0; i < NACTORS; i++) {
        interrupt_actor(i);
    }
}

static void advance(long long usecs)
{
    if (usecs > 0) {
        g.now += (st_utime_t)usecs;
    }
}

int __real_poll(struct pollfd *fds, nfds_t nfds, int timeout);

/*
 * The backend found nothing ready: then no coroutine may be waiting for
 * something that is ready (a lost wake-up, or a registration that was lost).
 * The scheduler only idles when every coroutine is blocked, so the model's
 * I/O waiters are all really waiting.
 */
static void check_no_lost_wakeup(void)
{
    for (int a = 0; a < NACTORS; a++) {
        const struct actor *x = &g.actors[a];
        if (x->state != SLOT_ALIVE || (x->op != OP_IO && x->op != OP_POLL)) {
            continue;
        }
        for (int i = 0; i < NFDS; i++) {
            if ((x->io_mask & (1U << i)) == 0 || g.fds[i] == NULL || x->io_events[i] == 0) {
                continue;
            }
            struct pollfd pd = {.fd = g.osfd[i], .events = x->io_events[i], .revents = 0};
            int ready;
            do { /* libFuzzer's SIGALRM timer may interrupt it */
                ready = __real_poll(&pd, 1, 0);
            } while (ready < 0 && errno == EINTR);
            CHECK(ready == 0);
        }
    }
}

int __real_epoll_wait(int epfd, struct epoll_event *events, int maxevents, int timeout);
int __wrap_epoll_wait(int epfd, struct epoll_event *events, int maxevents, int timeout);
int __wrap_poll(struct pollfd *fds, nfds_t nfds, int timeout);
int __real_select(int nfds, fd_set *r, fd_set *w, fd_set *e, struct timeval *tv);
int __wrap_select(int nfds, fd_set *r, fd_set *w, fd_set *e, struct timeval *tv);

int __wrap_epoll_wait(int epfd, struct epoll_event *events, int maxevents, int timeout)
{
    if (!g.active) {
        return __real_epoll_wait(epfd, events, maxevents, timeout);
    }
    int n = __real_epoll_wait(epfd, events, maxevents, 0);
    if (n == 0) {
        check_no_lost_wakeup();
        if (timeout < 0) {
            break_deadlock();
        } else {
            advance((long long)timeout * 1000);
        }
    }
    return n;
}

int __wrap_poll(struct pollfd *fds, nfds_t nfds, int timeout)
{
    if (!g.active) {
        return __real_poll(fds, nfds, timeout);
    }
    int n = __real_poll(fds, nfds, 0);
    if (n == 0) {
        check_no_lost_wakeup();
        if (timeout < 0) {
            break_deadlock();
        } else {
            advance((long long)timeout * 1000);
        }
    }
    return n;
}

int __wrap_select(int nfds, fd_set *r, fd_set *w, fd_set *e, struct timeval *tv)
{
    if (!g.active) {
        return __real_select(nfds, r, w, e, tv);
    }
    struct timeval zero = {0, 0};
    int n = __real_select(nfds, r, w, e, &zero);
    if (n == 0) {
        check_no_lost_wakeup();
        if (tv == NULL) {
            break_deadlock();
        } else {
            advance((long long)tv->tv_sec * 1000000 + tv->tv_usec);
        }
    }
    return n;
}

/* ---- helpers ------------------------------------------------------------- */

static void key_destructor(void *value)
{
    CHECK(value != NULL);
    g.key_destructed++;
}

static void fd_destructor(void *value)
{
    CHECK(value != NULL);
    g.fd_destructed++;
}

static st_utime_t small_timeout(uint8_t b)
{
    switch (b % 8) {
    case 0:
        return ST_UTIME_NO_WAIT;
    case 7:
        return ST_UTIME_NO_TIMEOUT;
    default:
        return (st_utime_t)(b % 8) * 250;
    }
}

static void open_pair(int p)
{
    int sv[2];
    CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) == 0);
    /* Small buffers, so writers block and partial transfers happen. */
    int small = 4096;
    (void)setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
    (void)setsockopt(sv[1], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small));
    for (int e = 0; e < 2; e++) {
        int i = 2 * p + e;
        if (g.nused < (int)(sizeof(g.used_numbers) / sizeof(g.used_numbers[0]))) {
            g.used_numbers[g.nused++] = sv[e];
        }
        g.fds[i] = st_netfd_open_socket(sv[e]);
        CHECK(g.fds[i] != NULL);
        g.osfd[i] = sv[e];
        g.closed_number[i] = -1;
        st_netfd_setspecific(g.fds[i], &g.osfd[i], fd_destructor);
        g.fd_specific_set++;
    }
    memset(g.streams[p], 0, sizeof(g.streams[p]));
    g.pair_live[p] = true;
}

/* Is any actor inside a call on netfd i? */
static bool fd_in_use(int i)
{
    for (int a = 0; a < NACTORS; a++) {
        if ((g.actors[a].io_mask & (1U << i)) != 0) {
            return true;
        }
    }
    return false;
}

static void close_end(int i)
{
    if (g.fds[i] == NULL) {
        return;
    }
    bool busy = fd_in_use(i);
    bool netfd_busy = false;
    for (int a = 0; a < NACTORS; a++) {
        netfd_busy = netfd_busy || (g.actors[a].netfd_mask & (1U << i)) != 0;
    }
    int number = g.osfd[i];
    errno = 0;
    int rc = st_netfd_close(g.fds[i]);
    /* Always EBUSY while a coroutine is inside an I/O call on it, woken or not. */
    CHECK(!netfd_busy || (rc == -1 && errno == EBUSY));
    if (rc != 0) {
        CHECK(errno == EBUSY && busy); /* EBUSY only while someone waits on it */
        return;
    }
    g.fds[i] = NULL;
    g.osfd[i] = -1;
    g.closed_number[i] = number;
    g.pair_live[i / 2] = false;
}

/*
 * Is an actor still inside a call on a netfd (or polling a number) that was
 * closed under it? A woken waiter that has not run yet is not "waiting", so
 * st_netfd_close() lets the netfd go; that actor then gets EBADF, unless a
 * new netfd recycled the handle or the number first.
 */
static bool has_stale_users(void)
{
    for (int i = 0; i < NFDS; i++) {
        if (g.fds[i] == NULL && fd_in_use(i)) {
            return true;
        }
    }
    return false;
}

/* A new pair may recycle a closed netfd: only once nobody can still use one. */
static void reopen_pair(int p)
{
    if (has_stale_users()) {
        return;
    }
    for (int e = 0; e < 2; e++) {
        close_end(2 * p + e);
    }
    if (g.fds[2 * p] == NULL && g.fds[2 * p + 1] == NULL && !has_stale_users()) {
        /* Numbers closed earlier may be reused by the new pair. */
        for (int i = 0; i < NFDS; i++) {
            g.closed_number[i] = -1;
        }
        open_pair(p);
    }
}

/* Pairs are made at their first use: most inputs touch few of them. */
static void need_pair(int p)
{
    if (g.made[p] || has_stale_users()) {
        return;
    }
    g.made[p] = true;
    for (int i = 0; i < NFDS; i++) {
        g.closed_number[i] = -1;
    }
    open_pair(p);
}

/* The lowest free descriptor number. */
static int lowest_free_fd(void)
{
    int fd = dup(anchor_fd);
    CHECK(fd >= 0);
    close(fd);
    return fd;
}

/* ---- operations ------------------------------------------------------------ */

static void *actor_main(void *arg);

static void op_create(int me)
{
    (void)me;
    uint8_t b = next_byte();
    int slot = 1 + (b % NSLOTS);
    struct actor *a = &g.actors[slot];
    if (a->state != SLOT_FREE) {
        return;
    }
    bool joinable = (b & 0x80) == 0;
    int stack = (b & 0x40) != 0 ? 65536 + 1 : 0;
    memset(a, 0, sizeof(*a));
    a->joinable = joinable;
    a->joiner = -1;
    a->lock_wait = -1;
    a->cond_wait = -1;
    a->state = SLOT_ALIVE;
    a->handle = st_thread_create(actor_main, (void *)(intptr_t)slot, joinable, stack);
    CHECK(a->handle != NULL);
    g.created++;
}

static void op_sleep(int me)
{
    uint8_t b = next_byte();
    begin_op(me, OP_SLEEP);
    errno = 0;
    int rc = (b & 1) != 0 ? st_usleep(small_timeout(b >> 1)) : st_sleep((b >> 1) % 4 == 3 ? -1 : 0);
    int err = errno;
    end_op(me);
    CHECK(rc == 0 || err == EINTR);
    expect_consumed(me, rc, err);
}

static void op_cond_wait(int me)
{
    uint8_t b = next_byte();
    int c = b % NCONDS;
    st_utime_t timeout = small_timeout(b >> 1);
    struct actor *a = &g.actors[me];
    begin_op(me, OP_COND);
    a->cond_wait = c;
    a->cond_seq = ++g.cond_seq;
    a->cond_infinite = timeout == ST_UTIME_NO_TIMEOUT;
    a->signalled = false;
    errno = 0;
    int rc = st_cond_timedwait(g.conds[c], timeout);
    int err = errno;
    bool during = a->hit_during_op;
    a->cond_wait = -1;
    end_op(me);
    CHECK(rc == 0 || err == EINTR || (err == ETIME && timeout != ST_UTIME_NO_TIMEOUT));
    if (a->signalled && !during) {
        CHECK(rc == 0); /* a signal that reached it is not lost */
    }
    expect_consumed(me, rc, err);
}

/*
 * Which waiters a signal or broadcast wakes, as far as the model can tell:
 * the oldest waiter still waiting (broadcast: every one). A waiter with a
 * timeout may have timed out already, unseen: a signal that meets one tells
 * nothing more.
 */
static void model_cond_wake(int c, bool all)
{
    unsigned long after = 0;
    for (;;) {
        int next = -1;
        for (int i = 0; i < NACTORS; i++) {
            const struct actor *x = &g.actors[i];
            if (x->cond_wait == c && !x->signalled && !x->hit_during_op && x->cond_seq > after &&
                (next == -1 || x->cond_seq < g.actors[next].cond_seq)) {
                next = i;
            }
        }
        if (next == -1) {
            return;
        }
        after = g.actors[next].cond_seq;
        if (g.actors[next].cond_infinite) {
            g.actors[next].signalled = true;
            if (!all) {
                return;
            }
        } else if (!all) {
            return;
        }
    }
}

static void op_cond_wake(int me)
{
    (void)me;
    uint8_t b = next_byte();
    int c = b % NCONDS;
    bool all = (b & 0x10) != 0;
    CHECK((all ? st_cond_broadcast(g.conds[c]) : st_cond_signal(g.conds[c])) == 0);
    model_cond_wake(c, all);
}

static void op_cond_renew(int me)
{
    (void)me;
    int c = next_byte() % NCONDS;
    bool waited = false;
    for (int a = 0; a < NACTORS; a++) {
        waited = waited || g.actors[a].cond_wait == c;
    }
    errno = 0;
    int rc = st_cond_destroy(g.conds[c]);
    CHECK(waited ? (rc == -1 && errno == EBUSY) : rc == 0);
    if (rc == 0) {
        g.conds[c] = st_cond_new();
        CHECK(g.conds[c] != NULL);
    }
}

static void op_lock(int me)
{
    int m = next_byte() % NMUTEXES;
    struct actor *a = &g.actors[me];
    bool pre = a->interrupted;
    int owner = g.owner[m];
    begin_op(me, OP_LOCK);
    a->lock_wait = m;
    a->lock_pending = !pre && owner != -1 && owner != me;
    a->lock_seq = ++g.lock_seq;
    errno = 0;
    int rc = st_mutex_lock(g.mutexes[m]);
    int err = errno;
    bool handed = !a->lock_pending && !pre && owner != -1 && owner != me && g.owner[m] == me;
    a->lock_wait = -1;
    a->lock_pending = false;
    end_op(me);
    if (pre) {
        CHECK(rc == -1 && err == EINTR);
        a->interrupted = false;
    } else if (owner == -1) {
        CHECK(rc == 0);
        g.owner[m] = me;
    } else if (owner == me) {
        CHECK(rc == -1 && err == EDEADLK);
    } else if (handed) {
        CHECK(rc == 0); /* the hand-off wins over a later interrupt, which stays pending */
    } else {
        CHECK(rc == -1 && err == EINTR && a->interrupted);
        CHECK(g.owner[m] != me);
        a->interrupted = false;
    }
}

static void model_unlock(int m)
{
    int next = -1;
    for (int i = 0; i < NACTORS; i++) {
        const struct actor *w = &g.actors[i];
        if (w->lock_wait == m && w->lock_pending &&
            (next == -1 || w->lock_seq < g.actors[next].lock_seq)) {
            next = i;
        }
    }
    g.owner[m] = next;
    if (next != -1) {
        g.actors[next].lock_pending = false;
    }
}

static void op_unlock(int me)
{
    int m = next_byte() % NMUTEXES;
    errno = 0;
    int rc = st_mutex_unlock(g.mutexes[m]);
    if (g.owner[m] == me) {
        CHECK(rc == 0);
        model_unlock(m);
    } else {
        CHECK(rc == -1 && errno == EPERM);
    }
}

static void op_trylock(int me)
{
    int m = next_byte() % NMUTEXES;
    errno = 0;
    int rc = st_mutex_trylock(g.mutexes[m]);
    if (g.owner[m] == -1) {
        CHECK(rc == 0);
        g.owner[m] = me;
    } else {
        CHECK(rc == -1 && errno == EBUSY);
    }
}

static void op_mutex_renew(int me)
{
    (void)me;
    int m = next_byte() % NMUTEXES;
    bool waited = g.owner[m] != -1;
    for (int a = 0; a < NACTORS; a++) {
        waited = waited || g.actors[a].lock_wait == m;
    }
    errno = 0;
    int rc = st_mutex_destroy(g.mutexes[m]);
    CHECK(waited ? (rc == -1 && errno == EBUSY) : rc == 0);
    if (rc == 0) {
        g.mutexes[m] = st_mutex_new();
        CHECK(g.mutexes[m] != NULL);
    }
}

static void op_interrupt(int me)
{
    (void)me;
    int id = next_byte() % NACTORS;
    if (g.actors[id].state == SLOT_FREE && id != 0) {
        st_thread_interrupt(NULL); /* a no-op */
        return;
    }
    if (id == 0 && g.actors[0].state != SLOT_ALIVE) {
        return;
    }
    interrupt_actor(id);
}

static void op_join(int me)
{
    int id = next_byte() % NACTORS;
    struct actor *t = &g.actors[id];
    if (t->state == SLOT_FREE) {
        errno = 0;
        CHECK(st_thread_join(NULL, NULL) == -1 && errno == EINVAL);
        return; /* a reaped coroutine's handle must not be used again */
    }
    void *rv = NULL;
    errno = 0;
    if (!t->joinable) {
        CHECK(st_thread_join(t->handle, &rv) == -1 && errno == EINVAL);
        return;
    }
    if (id == me) {
        CHECK(st_thread_join(t->handle, &rv) == -1 && errno == EDEADLK);
        return;
    }
    if (t->joiner != -1) {
        CHECK(st_thread_join(t->handle, &rv) == -1 && errno == EINVAL);
        return;
    }
    bool finished = t->state == SLOT_FINISHED;
    bool pre = g.actors[me].interrupted;
    t->joiner = me;
    begin_op(me, OP_JOIN);
    int rc = st_thread_join(t->handle, &rv);
    int err = errno;
    bool during = g.actors[me].hit_during_op;
    end_op(me);
    t->joiner = -1;
    if (finished) {
        CHECK(rc == 0);
    } else if (pre || during) {
        CHECK(rc == -1 && err == EINTR);
        g.actors[me].interrupted = false;
    } else {
        CHECK(rc == 0);
    }
    if (rc == 0) {
        CHECK(t->state == SLOT_FINISHED);
        CHECK(rv == token_of(id));
        t->state = SLOT_FREE;
        t->handle = NULL;
    }
}

/* Bytes of stream (p, dir) carry a pattern of their position. */
static uint8_t pattern(unsigned long pos)
{
    return (uint8_t)(pos * 131U + 7U);
}

static void account_write(int i, const uint8_t *buf, size_t n)
{
    struct pair_stream *s = &g.streams[i / 2][i % 2];
    for (size_t k = 0; k < n; k++) {
        s->sum_written += buf[k];
    }
    s->written += n;
}

static void account_read(int i, const uint8_t *buf, size_t n)
{
    /* What end i reads was written by its peer: stream (pair, 1 - i % 2). */
    struct pair_stream *s = &g.streams[i / 2][1 - i % 2];
    for (size_t k = 0; k < n; k++) {
        s->sum_read += buf[k];
    }
    s->read += n; /* may run ahead of `written` while a writer waits to finish */
}

static void fill(uint8_t *buf, unsigned long start, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        buf[k] = pattern(start + k);
    }
}

static void op_write(int me)
{
    uint8_t b = next_byte();
    int i = b % NFDS;
    need_pair(i / 2);
    size_t n = ((size_t)next_byte() * 37U) % IOBUF;
    st_utime_t timeout = small_timeout(b >> 3);
    st_netfd_t fd = g.fds[i];
    /* On this coroutine's stack: another writer may run while this one waits. */
    uint8_t data[IOBUF] = {0};
    fill(data, g.streams[i / 2][i % 2].written, n);
    bool vector = (b & 0x80) != 0;
    begin_op(me, OP_IO);
    g.actors[me].io_mask |= fd != NULL ? 1U << i : 0U;
    g.actors[me].netfd_mask |= fd != NULL ? 1U << i : 0U;
    g.actors[me].io_events[i] = POLLOUT;
    errno = 0;
    int rc;
    size_t done;
    if (vector) {
        struct iovec vec[6];
        size_t part = n / 6;
        for (int k = 0; k < 6; k++) {
            vec[k].iov_base = data + (size_t)k * part;
            vec[k].iov_len = k == 5 ? n - 5 * part : part;
        }
        struct iovec *iov = vec;
        int count = 6;
        rc = st_writev_resid(fd, &iov, &count, timeout);
        done = n;
        for (int k = 0; k < count; k++) {
            done -= iov[k].iov_len;
        }
    } else {
        size_t resid = n;
        rc = st_write_resid(fd, data, &resid, timeout);
        done = n - resid;
    }
    int err = errno;
    g.actors[me].io_mask &= ~(1U << i);
    g.actors[me].netfd_mask &= ~(1U << i);
    g.actors[me].io_events[i] = 0;
    end_op(me);
    if (fd == NULL) {
        CHECK(rc == -1 && err == EBADF);
        return;
    }
    CHECK(rc == 0 || err == ETIME || err == EINTR || err == EPIPE || err == EBADF ||
          err == ECONNRESET);
    CHECK(rc != 0 || done == n);
    if (err == ETIME) {
        CHECK(timeout != ST_UTIME_NO_TIMEOUT);
    }
    expect_io_interrupt(me, rc != 0, err);
    if (g.pair_live[i / 2] && g.fds[i] == fd) {
        account_write(i, data, done);
    }
}

static void op_read(int me)
{
    uint8_t b = next_byte();
    int i = b % NFDS;
    need_pair(i / 2);
    size_t n = 1 + ((size_t)next_byte() * 41U) % (IOBUF - 1);
    st_utime_t timeout = small_timeout(b >> 3);
    st_netfd_t fd = g.fds[i];
    uint8_t local[IOBUF];
    begin_op(me, OP_IO);
    g.actors[me].io_mask |= fd != NULL ? 1U << i : 0U;
    g.actors[me].netfd_mask |= fd != NULL ? 1U << i : 0U;
    g.actors[me].io_events[i] = POLLIN;
    errno = 0;
    ssize_t got;
    int kind = (b >> 6) & 3;
    if (kind == 0) {
        got = st_read(fd, local, n, timeout);
    } else if (kind == 1) {
        struct iovec vec[2] = {{local, n / 2}, {local + n / 2, n - n / 2}};
        got = st_readv(fd, vec, 2, timeout);
    } else if (kind == 2) {
        size_t resid = n;
        int rc = st_read_resid(fd, local, &resid, timeout);
        got = rc == 0 ? (ssize_t)(n - resid) : -1;
        if (rc != 0 && errno != EBADF && resid != n && g.pair_live[i / 2] && g.fds[i] == fd) {
            account_read(i, local, n - resid); /* partial progress */
        }
    } else {
        got = st_netfd_poll(fd, POLLIN, timeout) == 0 ? 0 : -1;
    }
    int err = errno;
    g.actors[me].io_mask &= ~(1U << i);
    g.actors[me].netfd_mask &= ~(1U << i);
    g.actors[me].io_events[i] = 0;
    end_op(me);
    if (fd == NULL) {
        CHECK(got == -1 && err == EBADF);
        return;
    }
    CHECK(got >= 0 || err == ETIME || err == EINTR || err == EBADF || err == ECONNRESET);
    if (got < 0 && err == ETIME) {
        CHECK(timeout != ST_UTIME_NO_TIMEOUT);
    }
    expect_io_interrupt(me, got < 0, err);
    if (got > 0 && g.pair_live[i / 2] && g.fds[i] == fd) {
        account_read(i, local, (size_t)got);
    }
}

static void op_poll(int me)
{
    uint8_t b = next_byte();
    uint8_t sel = next_byte();
    struct pollfd pds[NFDS];
    int idx[NFDS];
    int npds = 0;
    unsigned mask = 0;
    for (int i = 0; i < NFDS; i++) {
        if ((sel & (1U << i)) != 0) {
            need_pair(i / 2);
        }
    }
    for (int i = 0; i < NFDS; i++) {
        if ((sel & (1U << i)) == 0) {
            continue;
        }
        int number = g.osfd[i] >= 0 ? g.osfd[i] : g.closed_number[i];
        if (number < 0) {
            continue;
        }
        pds[npds].fd = number;
        pds[npds].events = (short)(((sel >> 6) & 1) != 0 ? POLLOUT : POLLIN);
        if ((b & 0x40) != 0) {
            pds[npds].events = (short)(pds[npds].events | POLLIN | POLLOUT);
        }
        idx[npds] = i;
        mask |= 1U << i;
        npds++;
    }
    st_utime_t timeout = small_timeout(b);
    begin_op(me, OP_POLL);
    g.actors[me].io_mask |= mask;
    for (int k = 0; k < npds; k++) {
        g.actors[me].io_events[idx[k]] = pds[k].events;
    }
    errno = 0;
    int n = st_poll(pds, npds, timeout);
    int err = errno;
    g.actors[me].io_mask &= ~mask;
    for (int k = 0; k < npds; k++) {
        g.actors[me].io_events[idx[k]] = 0;
    }
    end_op(me);
    if (n < 0 && err == EBADF) {
        /* epoll refuses a closed descriptor outright. */
        bool any_closed = false;
        for (int k = 0; k < npds; k++) {
            any_closed = any_closed || g.osfd[idx[k]] < 0;
        }
        CHECK(any_closed && st_get_eventsys() == ST_EVENTSYS_ALT);
        return;
    }
    CHECK(n >= 0 || err == EINTR);
    CHECK(n <= npds);
    expect_consumed(me, n < 0 ? -1 : 0, err);
    if (n > 0) {
        int counted = 0;
        for (int k = 0; k < npds; k++) {
            short allowed = (short)(pds[k].events | POLLERR | POLLHUP | POLLNVAL);
            CHECK((pds[k].revents & ~allowed) == 0);
            counted += pds[k].revents != 0;
            if ((pds[k].revents & POLLNVAL) != 0) {
                CHECK(g.osfd[idx[k]] < 0);
            }
        }
        CHECK(counted == n);
    }
}

static void op_close(int me)
{
    (void)me;
    uint8_t b = next_byte();
    int i = b % NFDS;
    need_pair(i / 2);
    if ((b & 0x80) != 0) {
        reopen_pair(i / 2);
    } else if (g.fds[i] == NULL) {
        errno = 0;
        CHECK(st_netfd_close(NULL) == -1 && errno == EBADF);
    } else {
        close_end(i);
    }
}

static void op_key(int me)
{
    uint8_t b = next_byte();
    /* Replacing the value runs the destructor on the old one. */
    void *old = st_thread_getspecific(g.key);
    void *value = (b & 1) != 0 ? token_of(me) : &g.key;
    if (me != 0) {
        CHECK(old != NULL);
    }
    if (old != NULL && old != value) {
        g.key_replaced++;
    }
    CHECK(st_thread_setspecific(g.key, value) == 0);
    CHECK(st_thread_getspecific(g.key) == value);
    errno = 0;
    CHECK(st_thread_setspecific(g.key + 1 + (b >> 1) % 20, value) == -1 && errno == EINVAL);
}

static void release_mutexes(int me)
{
    for (int m = 0; m < NMUTEXES; m++) {
        if (g.owner[m] == me) {
            CHECK(st_mutex_unlock(g.mutexes[m]) == 0);
            model_unlock(m);
        }
    }
}

static void finish(int me)
{
    release_mutexes(me);
    struct actor *a = &g.actors[me];
    a->state = a->joinable ? SLOT_FINISHED : SLOT_FREE;
    g.finished++;
}

/* ---- invariants after each step -------------------------------------------- */

static void check_step(int me)
{
    if (me != 0) {
        CHECK(st_thread_self() == g.actors[me].handle);
    }
    for (int m = 0; m < NMUTEXES; m++) {
        errno = 0;
        if (g.owner[m] == -1) {
            /* Free: nobody is queued for it and it can be taken and given back. */
            CHECK(st_mutex_trylock(g.mutexes[m]) == 0);
            CHECK(st_mutex_unlock(g.mutexes[m]) == 0);
        } else {
            CHECK(st_mutex_trylock(g.mutexes[m]) == -1 && errno == EBUSY);
            if (g.owner[m] != me) {
                CHECK(st_mutex_unlock(g.mutexes[m]) == -1 && errno == EPERM);
            }
        }
    }
    for (int i = 0; i < NFDS; i++) {
        if (g.fds[i] != NULL) {
            CHECK(st_netfd_fileno(g.fds[i]) == g.osfd[i]);
            CHECK(st_netfd_getspecific(g.fds[i]) == &g.osfd[i]);
        }
    }
    CHECK(g.started - g.finished <= NSLOTS);
}

static void run_ops(int me)
{
    while (!exhausted() && !g.actors[me].must_exit) {
        uint8_t op = next_byte();
        switch (op % 20) {
        case 0:
        case 1:
            op_create(me);
            break;
        case 2:
            st_thread_yield();
            break;
        case 3:
            op_sleep(me);
            break;
        case 4:
            op_cond_wait(me);
            break;
        case 5:
            op_cond_wake(me);
            break;
        case 6:
            op_lock(me);
            break;
        case 7:
            op_unlock(me);
            break;
        case 8:
            op_trylock(me);
            break;
        case 9:
            op_interrupt(me);
            break;
        case 10:
            op_join(me);
            break;
        case 11:
        case 12:
            op_write(me);
            break;
        case 13:
        case 14:
            op_read(me);
            break;
        case 15:
            op_poll(me);
            break;
        case 16:
            op_close(me);
            break;
        case 17:
            if ((op & 0x80) != 0) {
                op_cond_renew(me);
            } else {
                op_mutex_renew(me);
            }
            break;
        case 18:
            op_key(me);
            break;
        default:
            if (me != 0 && (op & 0x80) != 0) {
                finish(me);
                st_thread_exit(token_of(me));
                fail_at(__LINE__, "st_thread_exit returned");
            }
            st_thread_yield();
            break;
        }
        check_step(me);
    }
}

static void *actor_main(void *arg)
{
    int me = (int)(intptr_t)arg;
    g.started++;
    CHECK(self_id() == me);
    CHECK(st_thread_setspecific(g.key, token_of(me)) == 0);
    run_ops(me);
    finish(me);
    return token_of(me);
}

/* ---- one input -------------------------------------------------------------- */

static bool anyone_left(void)
{
    for (int i = 1; i < NACTORS; i++) {
        if (g.actors[i].state != SLOT_FREE) {
            return true;
        }
    }
    return false;
}

static void wind_down(void)
{
    g.pos = g.size;
    release_mutexes(0);
    for (int round = 0; anyone_left(); round++) {
        CHECK(round < 1000); /* everyone leaves once interrupted */
        for (int i = 1; i < NACTORS; i++) {
            struct actor *a = &g.actors[i];
            if (a->state == SLOT_ALIVE && a->op != OP_NONE) {
                interrupt_actor(i);
            }
            if (a->state == SLOT_FINISHED && a->joiner == -1) {
                void *rv = NULL;
                CHECK(st_thread_join(a->handle, &rv) == 0);
                CHECK(rv == token_of(i));
                a->state = SLOT_FREE;
            }
        }
        begin_op(0, OP_SLEEP);
        int rc = st_usleep(1000);
        int err = errno;
        end_op(0);
        expect_consumed(0, rc, err);
    }
    g.actors[0].interrupted = false;
}

static void check_streams(void)
{
    /* Every byte written to a live pair is read once, and only those bytes. */
    for (int p = 0; p < NPAIRS; p++) {
        if (!g.pair_live[p]) {
            continue;
        }
        for (int e = 0; e < 2; e++) {
            int reader = 2 * p + 1 - e;
            uint8_t local[IOBUF];
            for (;;) {
                ssize_t n = st_read(g.fds[reader], local, sizeof(local), ST_UTIME_NO_WAIT);
                if (n <= 0) {
                    break;
                }
                account_read(reader, local, (size_t)n);
            }
            const struct pair_stream *s = &g.streams[p][e];
            CHECK(s->read == s->written);
            CHECK(s->sum_read == s->sum_written);
        }
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0) {
        return 0;
    }
    memset(&g, 0, sizeof(g));
    g.data = data;
    g.size = size;
    g.pos = 1;
    g.now = 1000000000ULL;
    if (anchor_fd < 0) {
        anchor_fd = dup(STDIN_FILENO);
        if (anchor_fd < 0) {
            anchor_fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        }
        CHECK(anchor_fd >= 0);
    }
    /* Every 64th input also counts /proc/self/fd, which costs more. */
    bool full_fd_check = inputs++ % 64 == 0;
    int open_before = full_fd_check ? st_test_count_open_fds() : 0;
    g.lowest_free_fd = lowest_free_fd();
    static const int backends[3] = {ST_EVENTSYS_ALT, ST_EVENTSYS_POLL, ST_EVENTSYS_SELECT};
    int backend = backends[data[0] % 3];
    if (st_set_eventsys(backend) != 0) {
        CHECK(errno == EINVAL); /* not compiled in */
        st_destroy();
        return 0;
    }
    CHECK(st_set_utime_function(virtual_clock) == 0);
    CHECK(st_key_create(&g.key, key_destructor) == 0);
    CHECK(st_init() == 0);
    g.active = true;

    g.actors[0].state = SLOT_ALIVE;
    g.actors[0].handle = st_thread_self();
    g.actors[0].joiner = -1;
    g.actors[0].lock_wait = -1;
    g.actors[0].cond_wait = -1;
    for (int i = 1; i < NACTORS; i++) {
        g.actors[i].joiner = -1;
        g.actors[i].lock_wait = -1;
        g.actors[i].cond_wait = -1;
    }
    for (int i = 0; i < NFDS; i++) {
        g.osfd[i] = -1;
        g.closed_number[i] = -1;
    }
    for (int c = 0; c < NCONDS; c++) {
        g.conds[c] = st_cond_new();
        CHECK(g.conds[c] != NULL);
    }
    for (int m = 0; m < NMUTEXES; m++) {
        g.mutexes[m] = st_mutex_new();
        CHECK(g.mutexes[m] != NULL);
        g.owner[m] = -1;
    }
    run_ops(0);
    wind_down();

    CHECK(g.created == g.started && g.started == g.finished);
    CHECK(g.key_destructed == g.finished + g.key_replaced);
    check_streams();
    for (int i = 0; i < NFDS; i++) {
        close_end(i);
        CHECK(g.fds[i] == NULL);
    }
    CHECK(g.fd_destructed == g.fd_specific_set);
    for (int c = 0; c < NCONDS; c++) {
        CHECK(st_cond_destroy(g.conds[c]) == 0);
    }
    for (int m = 0; m < NMUTEXES; m++) {
        CHECK(st_mutex_destroy(g.mutexes[m]) == 0);
    }
    g.active = false;
    /* The primordial's key value has no destructor call at st_destroy (ST does not either). */
    st_destroy();
    /* Nothing the input (or st_init) opened is left open. */
    CHECK(lowest_free_fd() == g.lowest_free_fd);
    for (int k = 0; k < g.nused; k++) {
        CHECK(fcntl(g.used_numbers[k], F_GETFD) == -1 && errno == EBADF);
    }
    if (full_fd_check) {
        CHECK(st_test_count_open_fds() == open_before);
    }
    return 0;
}
