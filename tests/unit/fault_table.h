/*
 * The fault-injection table: every function the fault tests can make fail,
 * once. Include it after defining the kinds of entry you need; the ones left
 * undefined expand to nothing, and all are undefined again at the end.
 *
 *   FAULT_WRAP(name, type, failure, (parameters), (arguments))
 *       A libc function the library calls, linked with -Wl,--wrap=name: its
 *       wrapper __wrap_name is generated (fault_inject.c) and fails as armed
 *       with `failure` and the armed errno, or calls __real_name.
 *   FAULT_WRAP_BY_HAND(name, type, (parameters))
 *       Linked with --wrap=name too, but its wrapper is written out in
 *       fault_inject.c: variadic functions, and those whose wrapper does more
 *       than fail (an operation filter, a rewritten result, liburing shims).
 *   FAULT_POINT(name)
 *       An injection point that is no libc function: the liburing shims
 *       that the wrapped dlsym hands the io_uring backend.
 *
 * Each entry gets an arming state, faults[FAULT_ID(name)]. tests/unit/
 * meson.build reads the FAULT_WRAP and FAULT_WRAP_BY_HAND lines of this
 * file for the --wrap= link arguments, so one line here is all a new
 * wrapped function needs (one entry a line, each line starting with its
 * macro). Builds use 64-bit file offsets: the library calls mmap64,
 * open64, getrlimit64 and setrlimit64.
 */
#ifndef FAULT_WRAP
#define FAULT_WRAP(name, type, failure, parameters, arguments)
#endif
#ifndef FAULT_WRAP_BY_HAND
#define FAULT_WRAP_BY_HAND(name, type, parameters)
#endif
#ifndef FAULT_POINT
#define FAULT_POINT(name)
#endif

/* Memory: allocations, stacks and their guard pages. */
FAULT_WRAP(malloc, void *, NULL, (size_t size), (size))
FAULT_WRAP(calloc, void *, NULL, (size_t n, size_t size), (n, size))
FAULT_WRAP(realloc, void *, NULL, (void *ptr, size_t size), (ptr, size))
FAULT_WRAP(mmap64, void *, MAP_FAILED, (void *addr, size_t len, int prot, int flags, int fd, off_t off), (addr, len, prot, flags, fd, off))
FAULT_WRAP(mprotect, int, -1, (void *addr, size_t len, int prot), (addr, len, prot))
FAULT_WRAP(munmap, int, -1, (void *addr, size_t len), (addr, len))
FAULT_WRAP(madvise, int, -1, (void *addr, size_t len, int advice), (addr, len, advice))
FAULT_WRAP(process_madvise, ssize_t, -1, (int pidfd, const struct iovec *iov, size_t n, int advice, unsigned int flags), (pidfd, iov, n, advice, flags))

/* The backends. epoll_ctl can be armed for one operation (ADD, MOD, DEL) only. */
FAULT_WRAP(epoll_create1, int, -1, (int flags), (flags))
FAULT_WRAP_BY_HAND(epoll_ctl, int, (int epfd, int op, int fd, struct epoll_event *ev))
FAULT_WRAP(epoll_wait, int, -1, (int epfd, struct epoll_event *ev, int max, int timeout), (epfd, ev, max, timeout))
FAULT_WRAP(poll, int, -1, (struct pollfd *fds, nfds_t n, int timeout), (fds, n, timeout))
FAULT_WRAP(select, int, -1, (int n, fd_set *r, fd_set *w, fd_set *e, struct timeval *tv), (n, r, w, e, tv))

/*
 * st_init and the overflow reporter. RLIMIT_NOFILE can also be played as
 * unlimited: getrlimit64 reports it so, setrlimit64 changes nothing.
 */
FAULT_WRAP(sigaction, int, -1, (int sig, const struct sigaction *sa, struct sigaction *old), (sig, sa, old))
FAULT_WRAP(sigaltstack, int, -1, (const stack_t *ss, stack_t *old), (ss, old))
FAULT_WRAP_BY_HAND(getrlimit64, int, (int resource, struct rlimit *rl))
FAULT_WRAP_BY_HAND(setrlimit64, int, (int resource, const struct rlimit *rl))
/* pthread functions return the error instead of setting errno. */
FAULT_WRAP(pthread_key_create, int, fault->err, (pthread_key_t *key, void (*destructor)(void *)), (key, destructor))
FAULT_WRAP(pthread_setspecific, int, fault->err, (pthread_key_t key, const void *value), (key, value))

/* Descriptors and I/O. */
FAULT_WRAP_BY_HAND(ioctl, int, (int fd, unsigned long request, ...))
FAULT_WRAP_BY_HAND(open64, int, (const char *path, int flags, ...))
FAULT_WRAP(close, int, -1, (int fd), (fd))
FAULT_WRAP(accept4, int, -1, (int fd, struct sockaddr *addr, socklen_t *len, int flags), (fd, addr, len, flags))
FAULT_WRAP(connect, int, -1, (int fd, const struct sockaddr *addr, socklen_t len), (fd, addr, len))
FAULT_WRAP(getsockopt, int, -1, (int fd, int level, int name, void *value, socklen_t *len), (fd, level, name, value, len))
FAULT_WRAP(read, ssize_t, -1, (int fd, void *buf, size_t n), (fd, buf, n))
FAULT_WRAP(write, ssize_t, -1, (int fd, const void *buf, size_t n), (fd, buf, n))
FAULT_WRAP(readv, ssize_t, -1, (int fd, const struct iovec *iov, int n), (fd, iov, n))
FAULT_WRAP(writev, ssize_t, -1, (int fd, const struct iovec *iov, int n), (fd, iov, n))
FAULT_WRAP(recvfrom, ssize_t, -1, (int fd, void *buf, size_t n, int flags, struct sockaddr *a, socklen_t *l), (fd, buf, n, flags, a, l))
FAULT_WRAP(sendto, ssize_t, -1, (int fd, const void *buf, size_t n, int flags, const struct sockaddr *a, socklen_t l), (fd, buf, n, flags, a, l))
FAULT_WRAP(recvmsg, ssize_t, -1, (int fd, struct msghdr *msg, int flags), (fd, msg, flags))
FAULT_WRAP(sendmsg, ssize_t, -1, (int fd, const struct msghdr *msg, int flags), (fd, msg, flags))
FAULT_WRAP(recvmmsg, int, -1, (int fd, struct mmsghdr *v, unsigned int n, int flags, struct timespec *t), (fd, v, n, flags, t))
FAULT_WRAP(sendmmsg, int, -1, (int fd, struct mmsghdr *v, unsigned int n, int flags), (fd, v, n, flags))

/*
 * File I/O off the scheduler: the fstat that tells a file netfd at its
 * creation, the eventfd of a scheduler's completions (its reads and writes
 * are the read and write above) and the worker pthreads.
 */
FAULT_WRAP(fstat64, int, -1, (int fd, struct stat *st), (fd, st))
FAULT_WRAP(eventfd, int, -1, (unsigned int count, int flags), (count, flags))
FAULT_WRAP(pthread_create, int, fault->err, (pthread_t *thread, const pthread_attr_t *attr, void *(*start)(void *), void *arg), (thread, attr, start, arg))

/* Loading liburing: dlopen and dlsym fail as armed, dlsym hands out the shims below. */
FAULT_WRAP_BY_HAND(dlopen, void *, (const char *file, int flags))
FAULT_WRAP_BY_HAND(dlsym, void *, (void *handle, const char *name))
FAULT_WRAP_BY_HAND(dlclose, int, (void *handle))

/* liburing, as the io_uring backend calls it; they fail with -errno, as liburing does. */
FAULT_POINT(io_uring_queue_init)        /* the probe ring of st_set_eventsys */
FAULT_POINT(io_uring_queue_init_params) /* the scheduler's ring, in st_init */
FAULT_POINT(io_uring_submit)
FAULT_POINT(io_uring_submit_and_wait_timeout)
FAULT_POINT(io_uring_cqe_res) /* rewrites the result of a poll completion the backend reads */
FAULT_POINT(io_uring_cancel_res) /* rewrites the result of a cancellation's completion */
FAULT_POINT(io_uring_op_res) /* rewrites the result of an operation's completion */
FAULT_POINT(io_uring_get_probe_ring) /* the probe of accept, connect, file ops (st_init) */

#undef FAULT_WRAP
#undef FAULT_WRAP_BY_HAND
#undef FAULT_POINT
