/*
 * example_eventsys: choosing st's event system by name (see
 * example_eventsys.h).
 */
#include "example_eventsys.h"

#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "st.h"

int example_set_eventsys(const char *name)
{
    /* ST_EVENTSYS_ALT is st's name for epoll, as in State Threads. */
    static const struct {
        const char *name;
        int eventsys;
    } names[] = {{"epoll", ST_EVENTSYS_ALT},
                 {"poll", ST_EVENTSYS_POLL},
                 {"select", ST_EVENTSYS_SELECT},
                 {"io_uring", ST_EVENTSYS_IO_URING}};
    if (name == NULL) {
        (void)st_set_eventsys(ST_EVENTSYS_ALT); /* keep st's default if it has no epoll */
        return 0;
    }
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (strcmp(names[i].name, name) == 0) {
            return st_set_eventsys(names[i].eventsys);
        }
    }
    errno = EINVAL;
    return -1;
}
