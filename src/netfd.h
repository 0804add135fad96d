/*
 * The netfd: an OS descriptor the scheduler can wait on. Creating one makes
 * the descriptor non-blocking and tells the backend about it; freed netfds
 * go on a per-pthread free list, since servers make one per connection.
 */
#ifndef ST__NETFD_H
#define ST__NETFD_H

#include <errno.h>
#include <stdbool.h>

#include "st.h"

struct st__sched;

struct _st_netfd {
    int osfd;
    bool inuse;
    void *private_data;
    void (*destructor)(void *value);
    struct _st_netfd *next; /* on the free list */
};

/* Wrap `osfd`; make it non-blocking first when `set_nonblock`. NULL + errno on failure. */
struct _st_netfd *st__netfd_new(int osfd, bool set_nonblock);

/* A netfd the I/O functions may use; otherwise false with errno EBADF. */
static inline bool st__netfd_usable(const struct _st_netfd *fd)
{
    if (fd == NULL || !fd->inuse) {
        errno = EBADF;
        return false;
    }
    return true;
}

/* Free every netfd on the scheduler's free list (st_destroy). */
void st__netfd_freelist_release(struct st__sched *sched);

#endif /* ST__NETFD_H */
