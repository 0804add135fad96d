#include "netfd.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/ioctl.h>

#include "backend.h"
#include "sched.h"

struct _st_netfd *st__netfd_new(int osfd, bool set_nonblock)
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
    if (set_nonblock && ioctl(osfd, FIONBIO, &on) != 0) {
        return NULL;
    }
    if (sched->backend->fd_new(sched, osfd) != 0) {
        return NULL;
    }
    struct _st_netfd *fd = sched->netfd_freelist;
    if (fd != NULL) {
        sched->netfd_freelist = fd->next;
    } else {
        fd = malloc(sizeof(*fd));
        if (fd == NULL) {
            errno = ENOMEM;
            return NULL;
        }
    }
    fd->osfd = osfd;
    fd->inuse = true;
    fd->private_data = NULL;
    fd->destructor = NULL;
    fd->next = NULL;
    return fd;
}

st_netfd_t st_netfd_open(int osfd)
{
    return st__netfd_new(osfd, true);
}

st_netfd_t st_netfd_open_socket(int osfd)
{
    return st__netfd_new(osfd, true);
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
    if (sched == NULL) {
        free(fd);
        return;
    }
    if (sched->initialized) {
        sched->backend->fd_free(sched, fd->osfd);
    }
    fd->next = sched->netfd_freelist;
    sched->netfd_freelist = fd;
}

int st_netfd_close(st_netfd_t fd)
{
    if (!st__netfd_usable(fd)) {
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

void st__netfd_freelist_release(struct st__sched *sched)
{
    struct _st_netfd *fd = sched->netfd_freelist;
    while (fd != NULL) {
        struct _st_netfd *next = fd->next;
        free(fd);
        fd = next;
    }
    sched->netfd_freelist = NULL;
}
