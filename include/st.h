/*
 * st.h - the public interface of the st coroutine library.
 *
 * This header is source- and link-compatible with State Threads 1.9.3:
 * every type, macro and function below keeps the name, signature and
 * meaning it has there, so programs written for State Threads build
 * against it unchanged.
 */
#ifndef ST_H
#define ST_H

#include <errno.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#ifdef __cplusplus
extern "C" {
#endif

#define ST_VERSION "1.9.3"
#define ST_VERSION_MAJOR 1
#define ST_VERSION_MINOR 9
#define ST_VERSION_PATCH 3

/* The switch callbacks below are always compiled in. */
#ifndef ST_SWITCH_CB
#define ST_SWITCH_CB 1
#endif

#ifndef ETIME
#define ETIME ETIMEDOUT
#endif

#ifndef ST_UTIME_NO_TIMEOUT
#define ST_UTIME_NO_TIMEOUT ((st_utime_t)-1LL)
#endif

#ifndef ST_UTIME_NO_WAIT
#define ST_UTIME_NO_WAIT 0
#endif

#define ST_EVENTSYS_DEFAULT 0
#define ST_EVENTSYS_SELECT 1
#define ST_EVENTSYS_POLL 2
#define ST_EVENTSYS_ALT 3
/* Extension: io_uring, which also carries socket and file I/O out (Linux, with liburing). */
#define ST_EVENTSYS_IO_URING 4

/* Marks the functions the shared library exports; everything else is hidden. */
#if defined(__GNUC__) || defined(__clang__)
#define ST_EXPORT __attribute__((visibility("default")))
#else
#define ST_EXPORT
#endif

typedef unsigned long long st_utime_t;
typedef struct _st_thread *st_thread_t;
typedef struct _st_cond *st_cond_t;
typedef struct _st_mutex *st_mutex_t;
typedef struct _st_netfd *st_netfd_t;
typedef void (*st_switch_cb_t)(void);

ST_EXPORT int st_init(void);
ST_EXPORT int st_getfdlimit(void);

ST_EXPORT int st_set_eventsys(int eventsys);
ST_EXPORT int st_get_eventsys(void);
ST_EXPORT const char *st_get_eventsys_name(void);

ST_EXPORT st_switch_cb_t st_set_switch_in_cb(st_switch_cb_t cb);
ST_EXPORT st_switch_cb_t st_set_switch_out_cb(st_switch_cb_t cb);

ST_EXPORT st_thread_t st_thread_self(void);
ST_EXPORT void st_thread_exit(void *retval);
ST_EXPORT int st_thread_join(st_thread_t thread, void **retvalp);
ST_EXPORT void st_thread_interrupt(st_thread_t thread);
ST_EXPORT void st_thread_yield(void);
ST_EXPORT st_thread_t st_thread_create(void *(*start)(void *arg), void *arg, int joinable, int stack_size);
ST_EXPORT int st_randomize_stacks(int on);
ST_EXPORT int st_set_utime_function(st_utime_t (*func)(void));
ST_EXPORT st_utime_t st_utime(void);
ST_EXPORT st_utime_t st_utime_last_clock(void);
ST_EXPORT int st_timecache_set(int on);
ST_EXPORT time_t st_time(void);
ST_EXPORT int st_usleep(st_utime_t usecs);
ST_EXPORT int st_sleep(int secs);
ST_EXPORT st_cond_t st_cond_new(void);
ST_EXPORT int st_cond_destroy(st_cond_t cvar);
ST_EXPORT int st_cond_timedwait(st_cond_t cvar, st_utime_t timeout);
ST_EXPORT int st_cond_wait(st_cond_t cvar);
ST_EXPORT int st_cond_signal(st_cond_t cvar);
ST_EXPORT int st_cond_broadcast(st_cond_t cvar);
ST_EXPORT st_mutex_t st_mutex_new(void);
ST_EXPORT int st_mutex_destroy(st_mutex_t lock);
ST_EXPORT int st_mutex_lock(st_mutex_t lock);
ST_EXPORT int st_mutex_unlock(st_mutex_t lock);
ST_EXPORT int st_mutex_trylock(st_mutex_t lock);

ST_EXPORT int st_key_create(int *keyp, void (*destructor)(void *));
ST_EXPORT int st_key_getlimit(void);
ST_EXPORT int st_thread_setspecific(int key, void *value);
ST_EXPORT void *st_thread_getspecific(int key);

ST_EXPORT st_netfd_t st_netfd_open(int osfd);
ST_EXPORT st_netfd_t st_netfd_open_socket(int osfd);
ST_EXPORT void st_netfd_free(st_netfd_t fd);
ST_EXPORT int st_netfd_close(st_netfd_t fd);
ST_EXPORT int st_netfd_fileno(st_netfd_t fd);
ST_EXPORT void st_netfd_setspecific(st_netfd_t fd, void *value, void (*destructor)(void *));
ST_EXPORT void *st_netfd_getspecific(st_netfd_t fd);
ST_EXPORT int st_netfd_serialize_accept(st_netfd_t fd);
ST_EXPORT int st_netfd_poll(st_netfd_t fd, int how, st_utime_t timeout);

ST_EXPORT int st_poll(struct pollfd *pds, int npds, st_utime_t timeout);
ST_EXPORT st_netfd_t st_accept(st_netfd_t fd, struct sockaddr *addr, int *addrlen, st_utime_t timeout);
ST_EXPORT int st_connect(st_netfd_t fd, const struct sockaddr *addr, int addrlen, st_utime_t timeout);
ST_EXPORT ssize_t st_read(st_netfd_t fd, void *buf, size_t nbyte, st_utime_t timeout);
ST_EXPORT ssize_t st_read_fully(st_netfd_t fd, void *buf, size_t nbyte, st_utime_t timeout);
ST_EXPORT int st_read_resid(st_netfd_t fd, void *buf, size_t *resid, st_utime_t timeout);
ST_EXPORT ssize_t st_readv(st_netfd_t fd, const struct iovec *iov, int iov_size, st_utime_t timeout);
ST_EXPORT int st_readv_resid(st_netfd_t fd, struct iovec **iov, int *iov_size, st_utime_t timeout);
ST_EXPORT ssize_t st_write(st_netfd_t fd, const void *buf, size_t nbyte, st_utime_t timeout);
ST_EXPORT int st_write_resid(st_netfd_t fd, const void *buf, size_t *resid, st_utime_t timeout);
ST_EXPORT ssize_t st_writev(st_netfd_t fd, const struct iovec *iov, int iov_size, st_utime_t timeout);
ST_EXPORT int st_writev_resid(st_netfd_t fd, struct iovec **iov, int *iov_size, st_utime_t timeout);
ST_EXPORT int st_recvfrom(st_netfd_t fd, void *buf, int len, struct sockaddr *from, int *fromlen, st_utime_t timeout);
ST_EXPORT int st_sendto(st_netfd_t fd, const void *msg, int len, const struct sockaddr *to, int tolen, st_utime_t timeout);
ST_EXPORT int st_recvmsg(st_netfd_t fd, struct msghdr *msg, int flags, st_utime_t timeout);
ST_EXPORT int st_sendmsg(st_netfd_t fd, const struct msghdr *msg, int flags, st_utime_t timeout);
ST_EXPORT st_netfd_t st_open(const char *path, int oflags, mode_t mode);

/*
 * Extensions: batched datagrams (Linux sendmmsg/recvmmsg) with the I/O
 * semantics of the functions above. struct mmsghdr is only declared by
 * <sys/socket.h> under _GNU_SOURCE; these prototypes do not need it.
 */
struct mmsghdr;
ST_EXPORT int st_sendmmsg(st_netfd_t fd, struct mmsghdr *msgvec, unsigned int vlen, int flags,
                          st_utime_t timeout);
ST_EXPORT int st_recvmmsg(st_netfd_t fd, struct mmsghdr *msgvec, unsigned int vlen, int flags,
                          st_utime_t timeout);

/*
 * Extensions: file I/O that does not stall the scheduler. A regular file
 * ignores O_NONBLOCK, so a read or write of one would block the pthread,
 * and every coroutine on it, for as long as the disk takes. A netfd whose
 * descriptor is a regular file or a block device (st_open, st_netfd_open)
 * has its reads, writes and the calls below carried out off the
 * scheduler: as io_uring operations, or on a small pool of worker
 * pthreads, while the calling coroutine waits the ST way. The mode is
 * process-wide; ST_FILE_IO_BLOCKING keeps State Threads' behaviour (the
 * call blocks the pthread).
 */
#define ST_FILE_IO_DEFAULT 0
#define ST_FILE_IO_BLOCKING 1
#define ST_FILE_IO_WORKERS 2
#define ST_FILE_IO_URING 3
ST_EXPORT int st_set_file_io(int mode);
ST_EXPORT int st_get_file_io(void);
ST_EXPORT ssize_t st_pread(st_netfd_t fd, void *buf, size_t nbyte, off_t offset, st_utime_t timeout);
ST_EXPORT ssize_t st_pwrite(st_netfd_t fd, const void *buf, size_t nbyte, off_t offset, st_utime_t timeout);
ST_EXPORT int st_fsync(st_netfd_t fd, st_utime_t timeout);
ST_EXPORT int st_fdatasync(st_netfd_t fd, st_utime_t timeout);

ST_EXPORT void st_destroy(void);
ST_EXPORT int st_thread_setspecific2(st_thread_t thread, int key, void *value);
ST_EXPORT void st_set_primordial_stack(void *top, void *bottom);

/*
 * State Threads' DEBUG-build functions, in a library built with the
 * debug_api option (the *-debug targets of the make interface): a
 * breakpoint place, and an iteration that stops there on every coroutine's
 * stack while _st_iterate_threads_flag is set from a debugger.
 */
#ifdef DEBUG
ST_EXPORT void _st_show_thread_stack(st_thread_t thread, const char *messg);
ST_EXPORT void _st_iterate_threads(void);
#endif

#ifdef __cplusplus
}
#endif

#endif /* ST_H */
