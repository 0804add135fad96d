/*
 * The liburing functions the io_uring backend calls out of line, as a table
 * of pointers filled with dlsym when io_uring is first asked for. Linking
 * liburing would make every user of libst.a add -luring, and st must link
 * exactly like State Threads; the inline parts of liburing.h (preparing
 * requests, reading completions) need nothing at run time. The fault tests
 * hand the backend shims for these same functions.
 */
#ifndef ST__LIBURING_API_H
#define ST__LIBURING_API_H

#include <liburing.h>

struct st__liburing_api {
    int (*queue_init)(unsigned entries, struct io_uring *ring, unsigned flags);
    int (*queue_init_params)(unsigned entries, struct io_uring *ring, struct io_uring_params *p);
    void (*queue_exit)(struct io_uring *ring);
    int (*submit)(struct io_uring *ring);
    int (*submit_and_wait_timeout)(struct io_uring *ring, struct io_uring_cqe **cqe_ptr,
                                   unsigned wait_nr, struct __kernel_timespec *ts, sigset_t *sigmask);
    unsigned (*peek_batch_cqe)(struct io_uring *ring, struct io_uring_cqe **cqes, unsigned count);
    struct io_uring_probe *(*get_probe_ring)(struct io_uring *ring);
    void (*free_probe)(struct io_uring_probe *probe);
};

#endif /* ST__LIBURING_API_H */
