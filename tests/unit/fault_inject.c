/*
 * The wrappers of fault_table.h, linked into every fault-injection test:
 * generated for the FAULT_WRAP entries, written out here for the
 * FAULT_WRAP_BY_HAND ones. Under the dlsym wrapper, the io_uring backend
 * gets shims instead of liburing's functions; each calls the real one until
 * its FAULT_POINT is armed, then fails the way liburing reports it (-errno).
 */
#include "fault_inject.h"

#include <errno.h>
#include <stdarg.h>
#include <string.h>

#include "st_config.h"

#if ST__HAVE_IO_URING
#include "backend_uring.h"
#include "liburing_api.h"
#endif

struct fault faults[F_COUNT];
bool fault_nofile_unlimited;
struct fault_log fault_log;

/*
 * One wrapper body: fail instead of the call, or after it, with the armed
 * errno and `failure`, which may name the armed state as `fault`.
 */
#define FAULT_CALL(f, failure, call)                                                               \
    do {                                                                                           \
        const struct fault *const fault = &faults[f];                                              \
        enum fault_action action_ = fault_next(f);                                                 \
        if (action_ == FAULT_FAIL_NOW) {                                                           \
            errno = fault->err;                                                                    \
            return failure;                                                                        \
        }                                                                                          \
        __typeof__(call) result_ = call;                                                           \
        if (action_ == FAULT_FAIL_AFTER) {                                                         \
            errno = fault->err;                                                                    \
            return failure;                                                                        \
        }                                                                                          \
        return result_;                                                                            \
    } while (0)

#define FAULT_WRAP(name, type, failure, parameters, arguments)                                     \
    type __wrap_##name parameters                                                                  \
    {                                                                                              \
        FAULT_CALL(F_##name, failure, __real_##name arguments);                                    \
    }
#include "fault_table.h"

int __wrap_epoll_ctl(int epfd, int op, int fd, struct epoll_event *ev)
{
    if (faults[F_epoll_ctl].op_filter >= 0 && faults[F_epoll_ctl].op_filter != op) {
        return __real_epoll_ctl(epfd, op, fd, ev);
    }
    FAULT_CALL(F_epoll_ctl, -1, __real_epoll_ctl(epfd, op, fd, ev));
}

int __wrap_getrlimit64(int resource, struct rlimit *rl)
{
    if (fault_nofile_unlimited && resource == RLIMIT_NOFILE) {
        rl->rlim_cur = RLIM_INFINITY;
        rl->rlim_max = RLIM_INFINITY;
        return 0;
    }
    FAULT_CALL(F_getrlimit64, -1, __real_getrlimit64(resource, rl));
}

int __wrap_setrlimit64(int resource, const struct rlimit *rl)
{
    if (fault_nofile_unlimited && resource == RLIMIT_NOFILE) {
        /* The played limit is not the process's: raising or lowering it is not for real. */
        FAULT_CALL(F_setrlimit64, -1, 0);
    }
    FAULT_CALL(F_setrlimit64, -1, __real_setrlimit64(resource, rl));
}

/* The library passes ioctl one pointer (FIONBIO's flag) and open64 a mode. */
int __wrap_ioctl(int fd, unsigned long request, ...)
{
    va_list ap;
    va_start(ap, request);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    FAULT_CALL(F_ioctl, -1, __real_ioctl(fd, request, arg));
}

int __wrap_open64(const char *path, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    int mode = va_arg(ap, int);
    va_end(ap);
    FAULT_CALL(F_open64, -1, __real_open64(path, flags, mode));
}

void *__wrap_dlopen(const char *file, int flags)
{
    if (fault_next(F_dlopen) != FAULT_PASS) {
        return NULL; /* as a missing file or a failed mapping */
    }
    fault_log.last_dlopen_handle = __real_dlopen(file, flags);
    return fault_log.last_dlopen_handle;
}

int __wrap_dlclose(void *handle)
{
    fault_log.dlclose_calls++;
    fault_log.last_dlclose_handle = handle;
    return __real_dlclose(handle);
}

#if !ST__HAVE_IO_URING

void *__wrap_dlsym(void *handle, const char *name)
{
    fault_log.last_dlsym_name = name;
    if (fault_next(F_dlsym) != FAULT_PASS) {
        return NULL;
    }
    return __real_dlsym(handle, name);
}

#else

/* liburing's real functions, which the shims call through. */
static struct st__liburing_api real_api;

/* true: this call of a liburing shim fails. */
static bool shim_fails(enum fault_id f)
{
    return fault_next(f) != FAULT_PASS;
}

static int shim_queue_init(unsigned entries, struct io_uring *ring, unsigned flags)
{
    if (shim_fails(F_io_uring_queue_init)) {
        return -faults[F_io_uring_queue_init].err;
    }
    int rc = real_api.queue_init(entries, ring, flags);
    fault_log.rings_made += rc == 0;
    return rc;
}

static int shim_queue_init_params(unsigned entries, struct io_uring *ring, struct io_uring_params *p)
{
    struct fault_log *log = &fault_log;
    if (log->nring_requests < (int)(sizeof(log->ring_requests) / sizeof(log->ring_requests[0]))) {
        log->ring_requests[log->nring_requests].entries = entries;
        log->ring_requests[log->nring_requests].flags = p->flags;
        log->nring_requests++;
    }
    if (shim_fails(F_io_uring_queue_init_params)) {
        return -faults[F_io_uring_queue_init_params].err;
    }
    int rc = real_api.queue_init_params(entries, ring, p);
    log->rings_made += rc == 0;
    return rc;
}

static void shim_queue_exit(struct io_uring *ring)
{
    fault_log.rings_exited++;
    real_api.queue_exit(ring);
}

static int shim_submit(struct io_uring *ring)
{
    if (shim_fails(F_io_uring_submit)) {
        return -faults[F_io_uring_submit].err; /* nothing submitted: the requests stay queued */
    }
    return real_api.submit(ring);
}

static int shim_submit_and_wait_timeout(struct io_uring *ring, struct io_uring_cqe **cqe_ptr,
                                        unsigned wait_nr, struct __kernel_timespec *ts,
                                        sigset_t *sigmask)
{
    if (shim_fails(F_io_uring_submit_and_wait_timeout)) {
        return -faults[F_io_uring_submit_and_wait_timeout].err;
    }
    return real_api.submit_and_wait_timeout(ring, cqe_ptr, wait_nr, ts, sigmask);
}

static unsigned shim_peek_batch_cqe(struct io_uring *ring, struct io_uring_cqe **cqes, unsigned count)
{
    unsigned n = real_api.peek_batch_cqe(ring, cqes, count);
    for (unsigned i = 0; i < n; i++) {
        /* LIBURING_UDATA_TIMEOUT is also what the backend gives its POLL_REMOVEs. */
        uint64_t data = cqes[i]->user_data;
        if (data == LIBURING_UDATA_TIMEOUT) {
            continue;
        }
        if (st__uring_udata_is_poll(data) && shim_fails(F_io_uring_cqe_res)) {
            cqes[i]->res = -faults[F_io_uring_cqe_res].err;
        } else if (st__uring_udata_is_cancel(data) && shim_fails(F_io_uring_cancel_res)) {
            cqes[i]->res = -faults[F_io_uring_cancel_res].err;
        } else if ((data & ST__URING_TAG_MASK) == ST__URING_TAG_OP && shim_fails(F_io_uring_op_res)) {
            fault_log.op_res_replaced = cqes[i]->res; /* an accepted descriptor, for the test */
            cqes[i]->res = -faults[F_io_uring_op_res].err;
        }
    }
    return n;
}

static struct io_uring_probe *shim_get_probe_ring(struct io_uring *ring)
{
    if (shim_fails(F_io_uring_get_probe_ring)) {
        return NULL; /* as liburing says that the kernel has no probe, or memory ran out */
    }
    struct io_uring_probe *probe = real_api.get_probe_ring(ring);
    fault_log.probes_got += probe != NULL;
    return probe;
}

static void shim_free_probe(struct io_uring_probe *probe)
{
    fault_log.probes_freed++;
    real_api.free_probe(probe);
}

/* dlsym returns object pointers; POSIX makes them hold function pointers, byte for byte. */
_Static_assert(sizeof(void *) == sizeof(void (*)(void)), "function pointers fit in void *");

#define INTERPOSE(symbol, field, shim)                                                             \
    if (strcmp(name, symbol) == 0) {                                                               \
        memcpy((void *)&real_api.field, (const void *)&sym, sizeof(sym));                          \
        __typeof__(real_api.field) shim_ = shim;                                                   \
        memcpy((void *)&sym, (const void *)&shim_, sizeof(sym));                                   \
        return sym;                                                                                \
    }

void *__wrap_dlsym(void *handle, const char *name)
{
    fault_log.last_dlsym_name = name;
    if (fault_next(F_dlsym) != FAULT_PASS) {
        return NULL; /* an older liburing.so.2 without this function */
    }
    void *sym = __real_dlsym(handle, name);
    if (sym == NULL) {
        return NULL;
    }
    INTERPOSE("io_uring_queue_init", queue_init, shim_queue_init)
    INTERPOSE("io_uring_queue_init_params", queue_init_params, shim_queue_init_params)
    INTERPOSE("io_uring_queue_exit", queue_exit, shim_queue_exit)
    INTERPOSE("io_uring_submit", submit, shim_submit)
    INTERPOSE("io_uring_submit_and_wait_timeout", submit_and_wait_timeout,
              shim_submit_and_wait_timeout)
    INTERPOSE("io_uring_peek_batch_cqe", peek_batch_cqe, shim_peek_batch_cqe)
    INTERPOSE("io_uring_get_probe_ring", get_probe_ring, shim_get_probe_ring)
    INTERPOSE("io_uring_free_probe", free_probe, shim_free_probe)
    fault_log.unshimmed_lookups++;
    return sym;
}

#endif /* ST__HAVE_IO_URING */
