/*
 * helloworld: the smallest st program. If it prints its lines with pauses in
 * between, st_init, the idle coroutine and the sleep timer all work.
 *
 * usage: helloworld [COUNT]     (default 3 lines, 100 ms apart)
 */
#include <stdio.h>
#include <stdlib.h>

#include "st.h"

enum { DEFAULT_COUNT = 3, MAX_COUNT = 1000000, PAUSE_US = 100000 };

static int parse_count(int argc, char **argv)
{
    char *end = NULL;
    long count = DEFAULT_COUNT;
    if (argc > 1) {
        count = strtol(argv[1], &end, 10);
        if (end == argv[1] || *end != '\0' || count < 0 || count > MAX_COUNT) {
            return -1;
        }
    }
    return (int)count;
}

int main(int argc, char **argv)
{
    int count = parse_count(argc, argv);
    if (count < 0) {
        fprintf(stderr, "usage: %s [COUNT]\n", argv[0]);
        return 2;
    }
    if (st_init() != 0) {
        perror("st_init");
        return 1;
    }
    for (int i = 1; i <= count; i++) {
        printf("hello world %d/%d (event system: %s)\n", i, count, st_get_eventsys_name());
        (void)fflush(stdout);
        if (i < count && st_usleep(PAUSE_US) != 0) {
            perror("st_usleep");
            return 1;
        }
    }
    return 0;
}
