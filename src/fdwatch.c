#include "fdwatch.h"

#include <errno.h>
#include <poll.h>

void st__fdwatch_init(struct st__fdwatch *w, int fd)
{
    st__list_init(&w->waiters);
    w->fd = fd;
}

bool st__fdwatch_busy(const struct st__fdtable *table, int fd)
{
    const struct st__fdwatch *w = st__fdwatch_find(table, fd);
    return w != NULL && !st__list_empty(&w->waiters);
}

struct st__fdwatch *st__fdwatch_own(struct st__fdtable *table, int fd)
{
    if (st__fdtable_reserve(table, fd) != 0) {
        return NULL;
    }
    struct st__fdwatch *w = st__fdwatch_at(table, fd);
    w->owned = true;
    return w;
}

struct st__fdwatch *st__fdwatch_disown(const struct st__fdtable *table, int fd)
{
    struct st__fdwatch *w = st__fdwatch_find(table, fd);
    if (w != NULL) {
        w->owned = false;
    }
    return w;
}

