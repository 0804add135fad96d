/*
 * A program written for State Threads, built with the strictest warnings a
 * user might have: st.h must not trip any of them.
 */
#include <st.h>
#include <stdio.h>

static void *worker(void *arg)
{
    st_usleep(1000);
    return arg;
}

int main(void)
{
    static int token;
    if (st_set_eventsys(ST_EVENTSYS_ALT) != 0 || st_init() != 0) {
        perror("st init");
        return 1;
    }
    st_thread_t t = st_thread_create(worker, &token, 1, 0);
    void *rv = NULL;
    if (t == NULL || st_thread_join(t, &rv) != 0 || rv != &token) {
        fprintf(stderr, "join failed\n");
        return 1;
    }
    printf("ok %s %d.%d.%d\n", st_get_eventsys_name(), ST_VERSION_MAJOR, ST_VERSION_MINOR,
           ST_VERSION_PATCH);
    return 0;
}
