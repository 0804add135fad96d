#include "overflow.h"

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "scheduler.h"

/* Room for the handler, dladdr() and the chained handler's first frames. */
#define ALT_STACK_SIZE ((size_t)64 * 1024)

static struct sigaction previous;
static pthread_once_t install_once = PTHREAD_ONCE_INIT;

/* ---- async-signal-safe output --------------------------------------------- */

struct st__line {
    char buf[512];
    size_t len;
};

static void put_str(struct st__line *l, const char *s)
{
    while (*s != '\0' && l->len < sizeof(l->buf)) {
        l->buf[l->len++] = *s++;
    }
}

static void put_hex(struct st__line *l, uintptr_t v)
{
    char digits[2 * sizeof(v) + 3];
    size_t n = sizeof(digits);
    digits[--n] = '\0';
    do {
        digits[--n] = "0123456789abcdef"[v & 15U];
        v >>= 4;
    } while (v != 0);
    digits[--n] = 'x';
    digits[--n] = '0';
    put_str(l, &digits[n]);
}

static void report(const struct _st_thread *thread, const void *fault)
{
    struct st__line l = {.len = 0};
    put_str(&l, "st: stack overflow in coroutine ");
    put_hex(&l, (uintptr_t)thread);
    put_str(&l, " (start function ");
    put_hex(&l, (uintptr_t)(void *)thread->start);
    /* Not async-signal-safe in theory, but the process is about to die. */
    void *start;
    memcpy(&start, &thread->start, sizeof(start));
    Dl_info info;
    if (dladdr(start, &info) != 0 && info.dli_sname != NULL) {
        put_str(&l, " ");
        put_str(&l, info.dli_sname);
    }
    put_str(&l, "): fault at ");
    put_hex(&l, (uintptr_t)fault);
    put_str(&l, ", stack ");
    put_hex(&l, (uintptr_t)thread->stack->bottom);
    put_str(&l, "-");
    put_hex(&l, (uintptr_t)thread->stack->top);
    put_str(&l, " (");
    put_hex(&l, (uintptr_t)(thread->stack->top - thread->stack->bottom));
    put_str(&l, " bytes)\n");
    (void)write(STDERR_FILENO, l.buf, l.len);
}

/* ---- the handler ------------------------------------------------------------ */

/* The coroutine of this pthread whose guard page holds `addr`, if any. */
static const struct _st_thread *guard_owner(const char *addr)
{
    const struct st__sched *sched = st__sched_peek();
    if (sched == NULL || !sched->initialized || sched->stacks.pagesize == 0) {
        return NULL;
    }
    st__list_for_each(link, &sched->threads) {
        const struct _st_thread *thread =
            ST__CONTAINER_OF(link, const struct _st_thread, all_links);
        const struct st__stack *stack = thread->stack;
        if (stack != NULL && stack->bottom != stack->map_base && addr >= stack->map_base &&
            addr < stack->bottom) {
            return thread;
        }
    }
    return NULL;
}

static void on_segv(int sig, siginfo_t *info, void *context)
{
    const struct _st_thread *thread = guard_owner(info->si_addr);
    if (thread != NULL) {
        report(thread, info->si_addr);
    }
    /* Never swallow the fault: pass it on to the previous disposition. */
    if ((previous.sa_flags & SA_SIGINFO) != 0 && previous.sa_sigaction != NULL) {
        previous.sa_sigaction(sig, info, context);
        return;
    }
    if (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN) {
        previous.sa_handler(sig);
        return;
    }
    /* Default action: restore it; returning re-runs the faulting access. */
    struct sigaction dfl;
    memset(&dfl, 0, sizeof(dfl));
    dfl.sa_handler = SIG_DFL;
    (void)sigemptyset(&dfl.sa_mask);
    (void)sigaction(SIGSEGV, &dfl, NULL);
}

static void install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = on_segv;
    sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
    (void)sigemptyset(&sa.sa_mask);
    if (sigaction(SIGSEGV, &sa, &previous) != 0) {
        memset(&previous, 0, sizeof(previous));
    }
}

void st__overflow_init(struct st__sched *sched)
{
    if (!sched->stacks.guard_pages) {
        return;
    }
    (void)pthread_once(&install_once, install);

    /* A pthread that already has a signal stack keeps it. */
    stack_t current;
    if (sigaltstack(NULL, &current) == 0 && (current.ss_flags & SS_DISABLE) == 0) {
        return;
    }
    stack_t alt = {.ss_sp = malloc(ALT_STACK_SIZE), .ss_size = ALT_STACK_SIZE, .ss_flags = 0};
    if (alt.ss_sp == NULL) {
        return; /* best effort: the fault still kills, just without the message */
    }
    if (sigaltstack(&alt, NULL) != 0) {
        free(alt.ss_sp);
        return;
    }
    sched->alt_stack = alt.ss_sp;
}

void st__overflow_fini(struct st__sched *sched)
{
    if (sched->alt_stack == NULL) {
        return;
    }
    stack_t off = {.ss_sp = NULL, .ss_size = 0, .ss_flags = SS_DISABLE};
    (void)sigaltstack(&off, NULL);
    free(sched->alt_stack);
    sched->alt_stack = NULL;
}
