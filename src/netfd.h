/*
 * The netfd: an OS descriptor the scheduler can wait on. Creating one makes
 * the descriptor non-blocking and tells the backend about it; freed netfds
 * go on a per-pthread free list, since servers make one per connection.
 */
#ifndef ST__NETFD_H
#define ST__NETFD_H

#include <errno.h>
#include <stdbool.h>

#include "list.h"
#include "st.h"
#include "sync.h"

struct st__sched;

struct _st_netfd {
    int osfd;
    bool inuse;
    /*
     * A regular file or a block device (fstat at creation): O_NONBLOCK
     * means nothing to it, so its I/O goes off the scheduler (file_io.h).
     * Next to `inuse`, which every I/O call reads first.
     */
    bool is_file;
    /* st_accept has been called on it, and reserved stacks for its accept queue (io.c). */
    bool accepted_on;
    /* An io_uring CONNECT made the connect(2) the program's next st_connect owes (io.c). */
    bool connect_owed;
    /*
     * Coroutines inside st_netfd_poll() on it, woken or not. While any are,
     * st_netfd_close() refuses (EBUSY) and a freed netfd is not recycled:
     * a woken waiter that has not run yet must not find another
     * connection's descriptor behind its handle.
     */
    unsigned users;
    void *private_data;
    void (*destructor)(void *value);
    /* On the scheduler's list of netfds handed out, or on its free list once recycled. */
    struct st__list live;
    /*
     * File netfds: an io_uring operation at the file position is in
     * flight, and the coroutines waiting for their turn (file_io.c). The
     * kernel takes no lock on the position for io_uring as it does for
     * read(2) and write(2), so st makes those operations take turns.
     */
    bool position_busy;
    struct _st_cond position_turn;
};

/* How st__netfd_new treats the descriptor. */
enum st__netfd_how {
    ST__NETFD_NONBLOCK = 1U << 0, /* make it non-blocking first */
    ST__NETFD_ANY = 1U << 1,      /* it may be a file: ask fstat (not for accepted sockets) */
};

/* Wrap `osfd` as `how` (ST__NETFD_* flags) says. NULL + errno on failure. */
struct _st_netfd *st__netfd_new(int osfd, unsigned how);

/* A netfd the I/O functions may use; otherwise false with errno EBADF. */
static inline bool st__netfd_usable(const struct _st_netfd *fd)
{
    if (fd == NULL || !fd->inuse) {
        errno = EBADF;
        return false;
    }
    return true;
}

/* A coroutine starts / stops waiting on `fd` (st_netfd_poll). */
static inline void st__netfd_enter(struct _st_netfd *fd)
{
    fd->users++;
}

/* Put a freed netfd its last user has left on the free list (or free it). */
void st__netfd_recycle(struct st__sched *sched, struct _st_netfd *fd);

static inline void st__netfd_leave(struct st__sched *sched, struct _st_netfd *fd)
{
    if (--fd->users == 0 && !fd->inuse) {
        st__netfd_recycle(sched, fd);
    }
}

/*
 * st_destroy: free the free list and the freed netfds that waited for their
 * last user; the netfds still open stay valid handles (they may be closed
 * or freed after st_destroy) and forget the coroutines that were inside them.
 */
void st__netfd_release_all(struct st__sched *sched);

#endif /* ST__NETFD_H */
