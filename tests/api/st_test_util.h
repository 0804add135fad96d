/*
 * st_test_util.h - helpers that need no test framework, shared by the api
 * suites (through st_test.h), the soak test and the API fuzzer.
 */
#ifndef ST_TEST_UTIL_H
#define ST_TEST_UTIL_H

#include <dirent.h>
#include <string.h>

#include <st.h>

/* How many descriptors the process has open, or -1 if /proc cannot tell. */
static inline int st_test_count_open_fds(void)
{
    DIR *dir = opendir("/proc/self/fd");
    int n = 0;

    if (dir == NULL) {
        return -1;
    }
    while (readdir(dir) != NULL) {
        n++;
    }
    closedir(dir);
    return n;
}

/* The ST_EVENTSYS_* value of a backend's name (epoll, poll, select, io_uring), or -1. */
static inline int st_test_eventsys_by_name(const char *name)
{
    static const struct {
        const char *name;
        int eventsys;
    } names[] = {
        {"epoll", ST_EVENTSYS_ALT},
        {"poll", ST_EVENTSYS_POLL},
        {"select", ST_EVENTSYS_SELECT},
        {"io_uring", ST_EVENTSYS_IO_URING},
    };

    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (strcmp(name, names[i].name) == 0) {
            return names[i].eventsys;
        }
    }
    return -1;
}

#endif /* ST_TEST_UTIL_H */
