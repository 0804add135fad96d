/*
 * A coroutine allocates and loses the only pointer. After st_destroy()
 * everything the library allocated is freed, so the one leak reported must
 * be this one: LeakSanitizer and valgrind must both point at it.
 */
#include <st.h>
#include <stdlib.h>
#include <string.h>

__attribute__((noinline)) static void lose_memory(void)
{
    char *volatile lost = malloc(4242);
    if (lost != NULL) {
        memset(lost, 1, 4242);
    }
    lost = NULL;
} // NOLINT(clang-analyzer-unix.Malloc): the leak is what this program is for

static void *leaker(void *arg)
{
    (void)arg;
    lose_memory();
    st_usleep(1000);
    return NULL;
}

int main(void)
{
    if (st_init() != 0) {
        return 2;
    }
    st_thread_t t = st_thread_create(leaker, NULL, 1, 0);
    if (t == NULL || st_thread_join(t, NULL) != 0) {
        return 2;
    }
    st_destroy();
    return 0;
}
