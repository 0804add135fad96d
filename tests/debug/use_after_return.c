/*
 * A coroutine uses a pointer to a local of a function that has returned.
 * Under AddressSanitizer with detect_stack_use_after_return, the fake stack
 * of the coroutine must catch it: st tells ASan about every stack switch.
 */
#include <st.h>
#include <stdio.h>

__attribute__((noinline)) static int *dangling(void)
{
    int local = 42;
    int *volatile escape = &local;
    return escape; // NOLINT(clang-analyzer-core.StackAddressEscape): on purpose
}

static void *misbehave(void *arg)
{
    (void)arg;
    int *p = dangling();
    st_thread_yield(); /* switch away and back: the annotations must hold */
    printf("read %d\n", *p);
    return NULL;
}

int main(void)
{
    if (st_init() != 0) {
        return 2;
    }
    st_thread_t t = st_thread_create(misbehave, NULL, 1, 0);
    if (t == NULL || st_thread_join(t, NULL) != 0) {
        return 2;
    }
    st_destroy();
    return 0;
}
