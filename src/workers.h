/*
 * The file I/O worker pool: a few process-wide pthreads that carry out file
 * operations (file_io.h) which would otherwise block a scheduler's pthread.
 *
 * A coroutine hands its operation to the pool and waits the ST way (state
 * IO_WAIT, a deadline on the sleep heap). A worker that finished an
 * operation puts it on the completion list of the scheduler it came from
 * and writes that scheduler's eventfd; a library coroutine of the
 * scheduler, the completer, waits on the eventfd like any other descriptor
 * (so it works with every event system) and makes the waiters runnable.
 * The completer does not count as active: it never keeps a scheduler, or
 * the process, alive.
 */
#ifndef ST__WORKERS_H
#define ST__WORKERS_H

#include <sys/types.h>

#include "backend.h"
#include "st.h"

struct st__sched;

/* Most worker pthreads the pool runs at once (started as operations queue up). */
#define ST__FILE_WORKERS_MAX 4

/*
 * Run `req` on `osfd` on a worker while the current coroutine waits up to
 * `timeout` (not 0). Its result (>= 0) or -1 with the operation's errno;
 * -1 with ETIME or EINTR when the deadline or st_thread_interrupt() came
 * while no worker had taken it yet (then nothing was done); -1 with EAGAIN
 * when no worker pthread can be started; -1 with the errno of the
 * scheduler's eventfd or completer when they cannot be made. Once a worker
 * has the operation, the coroutine waits for its result whatever comes,
 * and an interrupt stays pending for its next blocking call.
 */
ssize_t st__workers_run(struct st__sched *sched, int osfd, const struct st__io_req *req,
                        st_utime_t timeout);

/*
 * st_destroy: forget this pthread's operations that no worker has taken,
 * wait for those a worker runs (they write into stacks about to go), close
 * the eventfd; the last scheduler to go stops the workers.
 */
void st__workers_sched_fini(struct st__sched *sched);

#endif /* ST__WORKERS_H */
