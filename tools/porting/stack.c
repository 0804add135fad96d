/*
 * stack: where st puts coroutine stacks and which way they grow.
 *
 * Creates coroutines with several stack sizes, first with plain placement
 * and then with st_randomize_stacks(1). Each coroutine notes the address of
 * a local at entry and inside two nested calls (each with a 1 KiB frame), so
 * the output shows the placement of every stack, the distance between
 * neighbouring stacks and the direction of growth. Exits non-zero if a
 * coroutine could not be created or two live coroutines share a stack.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "st.h"

enum { FRAME = 1024, N_SIZES = 5 };

static const int stack_sizes[N_SIZES] = {0, 16 * 1024, 64 * 1024, 256 * 1024, 1024 * 1024};

struct probe {
    int stack_size;
    uintptr_t entry;
    uintptr_t depth1;
    uintptr_t depth2;
};

__attribute__((noinline)) static void nested2(struct probe *p)
{
    volatile char frame[FRAME];
    frame[0] = 2;
    p->depth2 = (uintptr_t)&frame[0];
}

__attribute__((noinline)) static void nested1(struct probe *p)
{
    volatile char frame[FRAME];
    frame[0] = 1;
    p->depth1 = (uintptr_t)&frame[0];
    nested2(p);
    frame[1] = frame[0]; /* keeps this frame alive across the call */
}

static void *probe_main(void *arg)
{
    volatile char entry = 0;
    struct probe *p = arg;
    p->entry = (uintptr_t)&entry;
    nested1(p);
    st_thread_yield(); /* stay alive while the others are placed */
    return NULL;
}

static long long diff(uintptr_t a, uintptr_t b)
{
    return (long long)a - (long long)b;
}

static const char *size_name(int size, char *buf, size_t len)
{
    if (size == 0) {
        return "default";
    }
    (void)snprintf(buf, len, "%d KiB", size / 1024);
    return buf;
}

static void print_probe(const struct probe *p, const struct probe *prev)
{
    char name[32];
    printf("  %-9s entry %#14llx  depth1 %+7lld  depth2 %+7lld  grows %-4s",
           size_name(p->stack_size, name, sizeof name), (unsigned long long)p->entry,
           diff(p->depth1, p->entry), diff(p->depth2, p->entry),
           p->depth2 < p->entry ? "down" : "up");
    if (prev != NULL) {
        printf("  from previous stack %+lld", diff(p->entry, prev->entry));
    }
    printf("\n");
}

static int run_round(int randomize)
{
    struct probe probes[N_SIZES];
    st_thread_t threads[N_SIZES] = {NULL};

    (void)st_randomize_stacks(randomize);
    printf("st_randomize_stacks(%d):\n", randomize);
    for (int i = 0; i < N_SIZES; i++) {
        memset(&probes[i], 0, sizeof probes[i]);
        probes[i].stack_size = stack_sizes[i];
        threads[i] = st_thread_create(probe_main, &probes[i], 1, stack_sizes[i]);
        if (threads[i] == NULL) {
            perror("st_thread_create");
            return -1;
        }
    }
    for (int i = 0; i < N_SIZES; i++) {
        if (st_thread_join(threads[i], NULL) != 0) {
            perror("st_thread_join");
            return -1;
        }
    }
    for (int i = 0; i < N_SIZES; i++) {
        print_probe(&probes[i], i > 0 ? &probes[i - 1] : NULL);
        if (i > 0 && probes[i].entry == probes[i - 1].entry) {
            fprintf(stderr, "two live coroutines share a stack\n");
            return -1;
        }
    }
    return 0;
}

int main(void)
{
    volatile char local = 0;
    if (st_init() != 0) {
        perror("st_init");
        return 1;
    }
    printf("primordial coroutine (process stack): local at %#llx\n",
           (unsigned long long)(uintptr_t)&local);
    if (run_round(0) != 0 || run_round(1) != 0) {
        return 1;
    }
    return 0;
}
