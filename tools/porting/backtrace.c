/*
 * backtrace: backtrace(3) from inside a coroutine.
 *
 * usage: backtrace [--check]
 *
 * A coroutine runs start_coroutine -> foo -> bar, and bar prints the call
 * chain with backtrace_symbols_fd. Each coroutine has a stack of its own, so
 * the chain ends at st's entry trampoline instead of main. The program is
 * linked with -rdynamic so that backtrace_symbols can name these (global)
 * functions; for other frames use `addr2line -f -e backtrace <address>`.
 *
 * With --check it also verifies that bar, foo and start_coroutine all
 * appear in the symbolised chain, and exits 1 if one is missing.
 */
#include <execinfo.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "st.h"

enum { MAX_FRAMES = 64 };

/* Global, not static: -rdynamic only exports global symbols. */
void *start_coroutine(void *arg);
int foo(int depth);
int bar(int depth);

static const char *const expected[] = {"bar", "foo", "start_coroutine"};
enum { N_EXPECTED = sizeof expected / sizeof expected[0] };

static int check_mode;
static int missing = -1;

/* glibc formats a frame as "binary(symbol+0xoff) [0xaddr]". */
static int has_frame(char *const *symbols, int n, const char *name)
{
    size_t len = strlen(name);
    for (int i = 0; i < n; i++) {
        const char *open = strchr(symbols[i], '(');
        if (open != NULL && strncmp(open + 1, name, len) == 0 && open[1 + len] == '+') {
            return 1;
        }
    }
    return 0;
}

static int count_missing(void *const *frames, int n)
{
    int count = 0;
    char **symbols = backtrace_symbols(frames, n);
    if (symbols == NULL) {
        perror("backtrace_symbols");
        return N_EXPECTED;
    }
    for (int i = 0; i < N_EXPECTED; i++) {
        if (!has_frame(symbols, n, expected[i])) {
            fprintf(stderr, "backtrace: frame '%s' is missing from the chain\n", expected[i]);
            count++;
        }
    }
    free(symbols);
    return count;
}

__attribute__((noinline)) int bar(int depth)
{
    void *frames[MAX_FRAMES];
    int n = backtrace(frames, MAX_FRAMES);
    printf("backtrace from bar() inside a coroutine (%d frames):\n", n);
    (void)fflush(stdout);
    backtrace_symbols_fd(frames, n, STDOUT_FILENO);
    if (check_mode) {
        missing = count_missing(frames, n);
    }
    return depth + n;
}

__attribute__((noinline)) int foo(int depth)
{
    int r = bar(depth + 1);
    return r + 1; /* not a tail call: foo's frame stays on the stack */
}

__attribute__((noinline)) void *start_coroutine(void *arg)
{
    int r = foo(*(int *)arg);
    *(int *)arg = r + 1;
    return arg;
}

int main(int argc, char **argv)
{
    int value = 0;
    st_thread_t thread = NULL;

    check_mode = argc > 1 && strcmp(argv[1], "--check") == 0;
    if (argc > 1 && !check_mode) {
        fprintf(stderr, "usage: %s [--check]\n", argv[0]);
        return 2;
    }
    if (st_init() != 0) {
        perror("st_init");
        return 1;
    }
    thread = st_thread_create(start_coroutine, &value, 1, 0);
    if (thread == NULL || st_thread_join(thread, NULL) != 0) {
        perror("st_thread_create/join");
        return 1;
    }
    if (check_mode) {
        printf("check: %s\n", missing == 0 ? "bar, foo and start_coroutine found" : "FAILED");
        return missing == 0 ? 0 : 1;
    }
    return 0;
}
