/*
 * gdb_target: the program tools/gdb/test_gdb.py debugs.
 *
 * It parks coroutines in known places, then the primordial coroutine calls
 * all_parked(), where the test sets its breakpoint:
 *
 *   sleeper_main -> sleeper_level1 -> sleeper_level2 -> st_usleep (60 s)
 *   cond_waiter  -> st_cond_wait
 *   reader       -> st_read on one end of a socketpair
 *   lock_waiter  -> st_mutex_lock on a mutex the primordial holds
 *   zombie       returned at once; joinable, not joined yet
 *
 * Afterwards it wakes every one of them (signal, unlock, write, interrupt),
 * joins them and exits 0, so it also runs fine outside a debugger.
 * Built with -O0 -fno-omit-frame-pointer; the functions are global and
 * noinline so that their names show in every backtrace.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "st.h"

enum { SLEEP_US = 60 * 1000 * 1000 };

void *sleeper_main(void *arg);
int sleeper_level1(int depth);
int sleeper_level2(int depth);
void *cond_waiter(void *arg);
void *reader(void *arg);
void *lock_waiter(void *arg);
void *zombie(void *arg);
void all_parked(void);

static st_cond_t cond;
static st_mutex_t lock;
static st_netfd_t read_end;
volatile int parked_marker;
int reader_fd = -1; /* the fd reader() polls, for the test's checks */

__attribute__((noinline)) int sleeper_level2(int depth)
{
#if defined(__x86_64__)
    /*
     * Distinct values in the callee-saved registers: the switch saves them,
     * and the test checks that st-regs reads each from its own slot (an -O0
     * library leaves them alone, so they reach the switch unchanged).
     */
    __asm__ volatile("movq $0x1212121212121212, %%r12\n\t"
                     "movq $0x1313131313131313, %%r13\n\t"
                     "movq $0x1414141414141414, %%r14\n\t"
                     "movq $0x1515151515151515, %%r15\n\t"
                     "movq $0x0b0b0b0b0b0b0b0b, %%rbx"
                     :
                     :
                     : "r12", "r13", "r14", "r15", "rbx");
#endif
    /* Interrupted by main when the test is over: -1/EINTR is the expected outcome. */
    int rc = st_usleep(SLEEP_US);
    return rc == -1 && errno == EINTR ? depth : -1;
}

__attribute__((noinline)) int sleeper_level1(int depth)
{
    return sleeper_level2(depth + 1);
}

__attribute__((noinline)) void *sleeper_main(void *arg)
{
    (void)arg;
    return sleeper_level1(1) == 2 ? (void *)"sleeper" : NULL;
}

__attribute__((noinline)) void *cond_waiter(void *arg)
{
    (void)arg;
    return st_cond_wait(cond) == 0 ? (void *)"cond" : NULL;
}

__attribute__((noinline)) void *reader(void *arg)
{
    (void)arg;
    char byte = 0;
    ssize_t n = st_read(read_end, &byte, 1, ST_UTIME_NO_TIMEOUT);
    return n == 1 && byte == 'x' ? (void *)"reader" : NULL;
}

__attribute__((noinline)) void *lock_waiter(void *arg)
{
    (void)arg;
    if (st_mutex_lock(lock) != 0) {
        return NULL;
    }
    return st_mutex_unlock(lock) == 0 ? (void *)"lock" : NULL;
}

__attribute__((noinline)) void *zombie(void *arg)
{
    return arg;
}

/* The debugger's breakpoint: every coroutine above is parked by now. */
__attribute__((noinline)) void all_parked(void)
{
    parked_marker = 1;
    __asm__ volatile("" ::: "memory");
}

static int fail(const char *what)
{
    perror(what);
    return 1;
}

int main(void)
{
    int sv[2];
    /* GDB_TARGET_EVENTSYS=io_uring: the reader waits in a submitted operation (77: no io_uring). */
    const char *eventsys = getenv("GDB_TARGET_EVENTSYS");
    if (eventsys != NULL && strcmp(eventsys, "io_uring") == 0 &&
        st_set_eventsys(ST_EVENTSYS_IO_URING) != 0) {
        perror("gdb_target: no io_uring");
        return 77;
    }
    if (st_init() != 0) {
        return fail("st_init");
    }
    cond = st_cond_new();
    lock = st_mutex_new();
    if (cond == NULL || lock == NULL) {
        return fail("st_cond_new/st_mutex_new");
    }
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) {
        return fail("socketpair");
    }
    reader_fd = sv[0];
    read_end = st_netfd_open_socket(sv[0]);
    if (read_end == NULL || st_mutex_lock(lock) != 0) {
        return fail("st_netfd_open_socket/st_mutex_lock");
    }

    void *(*const starts[])(void *) = {sleeper_main, cond_waiter, reader, lock_waiter, zombie};
    const char *const expect[] = {"sleeper", "cond", "reader", "lock", "zombie"};
    enum { N = sizeof starts / sizeof starts[0] };
    st_thread_t threads[N];
    for (int i = 0; i < N; i++) {
        threads[i] = st_thread_create(starts[i], (void *)"zombie", 1, 0);
        if (threads[i] == NULL) {
            return fail("st_thread_create");
        }
    }
    /* Let every coroutine run up to where it blocks. */
    if (st_usleep(10 * 1000) != 0) {
        return fail("st_usleep");
    }

    all_parked();

    if (st_cond_signal(cond) != 0 || st_mutex_unlock(lock) != 0) {
        return fail("st_cond_signal/st_mutex_unlock");
    }
    if (write(sv[1], "x", 1) != 1) {
        return fail("write");
    }
    st_thread_interrupt(threads[0]);
    int bad = 0;
    for (int i = 0; i < N; i++) {
        void *ret = NULL;
        if (st_thread_join(threads[i], &ret) != 0) {
            return fail("st_thread_join");
        }
        if (ret == NULL || strcmp(ret, expect[i]) != 0) {
            fprintf(stderr, "gdb_target: coroutine %s did not finish as expected\n", expect[i]);
            bad = 1;
        }
    }
    if (st_netfd_close(read_end) != 0 || close(sv[1]) != 0 || st_cond_destroy(cond) != 0 ||
        st_mutex_destroy(lock) != 0) {
        return fail("cleanup");
    }
    st_destroy();
    if (!bad) {
        printf("gdb_target: done\n");
    }
    return bad;
}
