#include "netfd.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/stat.h>

#include "backend.h"
#include "scheduler.h"

static struct _st_netfd *netfd_from_live(struct st__list *link)
{
    return ST__CONTAINER_OF(link, struct _st_netfd, live);
}

/* Is `osfd` a regular file or a block device? (*is_file) 0, or -1 with errno. */
static int file_kind(int osfd, bool *is_file)
{
    struct stat st;
    if (fstat(osfd, &st) != 0) {
        return -1;
    }
    *is_file = S_ISREG(st.st_mode) || S_ISBLK(st.st_mode);
    return 0;
}

struct _st_netfd *st__netfd_new(int osfd, unsigned how)
{
    struct st__sched *sched = st__sched_running();
    if (sched == NULL) {
        return NULL;
    }
    if (osfd < 0) {
        errno = EBADF;
        return NULL;
    }
    /* One syscall that also tells a closed descriptor (EBADF) apart. */
    int on = 1;
    if ((how & ST__NETFD_NONBLOCK) != 0 && ioctl(osfd, FIONBIO, &on) != 0) {
        return NULL;
    }
    bool is_file = false;
    if ((how & ST__NETFD_ANY) != 0 && file_kind(osfd, &is_file) != 0) {
        return NULL;
    }
    if (sched->backend->fd_new(sched, osfd) != 0) {
        return NULL;
    }
    struct _st_netfd *fd = NULL;
    struct st__list *recycled = st__list_first(&sched->netfd_freelist);
    if (recycled != NULL) {
        st__list_remove(recycled);
        fd = netfd_from_live(recycled);
    } else {
        fd = malloc(sizeof(*fd));
        if (fd == NULL) {
            errno = ENOMEM;
            return NULL;
        }
    }
    fd->osfd = osfd;
    fd->inuse = true;
    fd->is_file = is_file;
    fd->accepted_on = false;
    fd->connect_owed = false;
    fd->users = 0;
    fd->position_busy = false;
    st__cond_init(&fd->position_turn);
    fd->private_data = NULL;
    fd->destructor = NULL;
    st__list_insert_tail(&sched->netfds, &fd->live);
    return fd;
}

st_netfd_t st_netfd_open(int osfd)
{
    return st__netfd_new(osfd, ST__NETFD_NONBLOCK | ST__NETFD_ANY);
}

/* A caller may hand it anything: a file given here is still a file. */
st_netfd_t st_netfd_open_socket(int osfd)
{
    return st__netfd_new(osfd, ST__NETFD_NONBLOCK | ST__NETFD_ANY);
}

/* Put a netfd nobody uses any more on the free list (or free it). */
void st__netfd_recycle(struct st__sched *sched, struct _st_netfd *fd)
{
    st__list_remove(&fd->live);
    if (sched == NULL) {
        free(fd);
        return;
    }
    st__list_insert_head(&sched->netfd_freelist, &fd->live);
}

void st_netfd_free(st_netfd_t fd)
{
    if (fd == NULL || !fd->inuse) {
        return;
    }
    fd->inuse = false;
    if (fd->private_data != NULL && fd->destructor != NULL) {
        fd->destructor(fd->private_data);
    }
    fd->private_data = NULL;
    fd->destructor = NULL;
    struct st__sched *sched = st__sched_peek();
    if (sched != NULL && sched->initialized) {
        sched->backend->fd_free(sched, fd->osfd);
    }
    if (fd->users == 0) {
        st__netfd_recycle(sched, fd);
    }
    /* Otherwise the last coroutine to leave st_netfd_poll() recycles it. */
}

int st_netfd_close(st_netfd_t fd)
{
    if (!st__netfd_usable(fd)) {
        return -1;
    }
    if (fd->users > 0) {
        errno = EBUSY; /* a coroutine waits on it, or was woken and has not run yet */
        return -1;
    }
    struct st__sched *sched = st__sched_peek();
    if (sched != NULL && sched->initialized && sched->backend->fd_close(sched, fd->osfd) != 0) {
        return -1;
    }
    int osfd = fd->osfd;
    st_netfd_free(fd);
    return close(osfd);
}

int st_netfd_fileno(st_netfd_t fd)
{
    if (!st__netfd_usable(fd)) {
        return -1;
    }
    return fd->osfd;
}

void st_netfd_setspecific(st_netfd_t fd, void *value, void (*destructor)(void *))
{
    if (!st__netfd_usable(fd)) {
        return;
    }
    if (value != fd->private_data && fd->private_data != NULL && fd->destructor != NULL) {
        fd->destructor(fd->private_data);
    }
    fd->private_data = value;
    fd->destructor = destructor;
}

void *st_netfd_getspecific(st_netfd_t fd)
{
    return st__netfd_usable(fd) ? fd->private_data : NULL;
}

int st_netfd_serialize_accept(st_netfd_t fd)
{
    /* Linux wakes one acceptor per connection: nothing to serialise. */
    return st__netfd_usable(fd) ? 0 : -1;
}

void st__netfd_release_all(struct st__sched *sched)
{
    st__list_for_each_safe(link, next, &sched->netfd_freelist) {
        free(netfd_from_live(link));
    }
    st__list_init(&sched->netfd_freelist);

    st__list_for_each_safe(link, next, &sched->netfds) {
        struct _st_netfd *live = netfd_from_live(link);
        st__list_init(&live->live); /* the list head goes with the scheduler */
        live->users = 0;            /* their coroutines are gone */
        if (!live->inuse) {
            free(live); /* freed while a coroutine was inside it: nobody holds it */
        }
    }
    st__list_init(&sched->netfds);
}
