/*
 * The file I/O worker pool (workers.h).
 *
 * One mutex guards the whole pool: the queue of operations no worker has
 * taken yet, the list of those being run, and every scheduler's completion
 * list. An operation is held by exactly one of them, which its state says:
 *
 *   QUEUED    on pool.queue; the waiter may take it back (deadline, interrupt)
 *   RUNNING   on pool.running; a worker runs it, the waiter must wait
 *   DONE      on its port's completion list; the completer has not seen it
 *   COLLECTED on nothing; the waiter may go
 *
 * Operations live on their waiters' stacks: once it is DONE, nothing but
 * the waiter's own pthread touches one again, and st_destroy waits for the
 * RUNNING ones of its scheduler before the stacks go.
 *
 * A worker writes a port's eventfd when its completion list goes from
 * empty to not empty, holding the mutex, so that st_destroy, which closes
 * the eventfd under the mutex, never races with the write.
 */
#include "workers.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "file_io.h"
#include "list.h"
#include "scheduler.h"

enum st__work_state { ST__WORK_QUEUED, ST__WORK_RUNNING, ST__WORK_DONE, ST__WORK_COLLECTED };

/* A scheduler's end of the pool: where its finished operations come back. */
struct st__fio_port {
    struct st__list link;          /* on pool.ports */
    struct st__list done;          /* DONE operations the completer has not handed back */
    int efd;                       /* written by a worker when `done` gets its first entry */
    unsigned running;              /* RUNNING operations of this port */
    bool closing;                  /* st_destroy waits for `running` to drop to 0 */
    struct _st_thread *completer;
};

/* One operation handed to the pool: on the waiting coroutine's stack. */
struct st__work {
    struct st__list link; /* on pool.queue, pool.running or port->done, as `state` says */
    enum st__work_state state;
    const struct st__io_req *req;
    int osfd;
    struct st__fio_port *port;
    struct _st_thread *thread;
    ssize_t result;
    int err;
};

static struct {
    pthread_mutex_t lock;
    pthread_cond_t work;     /* a worker waits for an operation or its retirement */
    pthread_cond_t finished; /* st_destroy waits for a closing port's operations */
    bool lists_ready;
    struct st__list queue;
    struct st__list running;
    struct st__list ports;
    unsigned queued;         /* operations on `queue` */
    unsigned idle;           /* workers waiting for one */
    unsigned nworkers;
    unsigned generation;     /* a worker of an older generation retires */
    pthread_t threads[ST__FILE_WORKERS_MAX];
} pool = {
    .lock = PTHREAD_MUTEX_INITIALIZER,
    .work = PTHREAD_COND_INITIALIZER,
    .finished = PTHREAD_COND_INITIALIZER,
};

static pthread_once_t atfork_once = PTHREAD_ONCE_INIT;

/* This pthread's port, made by its first operation on the pool. */
static _Thread_local struct st__fio_port *this_port;

static struct st__work *work_from_link(struct st__list *link)
{
    return ST__CONTAINER_OF(link, struct st__work, link);
}

static struct st__fio_port *port_from_link(struct st__list *link)
{
    return ST__CONTAINER_OF(link, struct st__fio_port, link);
}

static void lists_init_locked(void)
{
    if (!pool.lists_ready) {
        st__list_init(&pool.queue);
        st__list_init(&pool.running);
        st__list_init(&pool.ports);
        pool.lists_ready = true;
    }
}

/* Tell the port's completer that its list has something. Under pool.lock. */
static void port_kick_locked(struct st__fio_port *port)
{
    uint64_t one = 1;
    for (;;) {
        if (write(port->efd, &one, sizeof(one)) == (ssize_t)sizeof(one)) {
            return;
        }
        if (errno != EINTR) {
            /* The counter cannot overflow (it is read before every drain): the fd is broken. */
            st__backend_wait_broken("write to the file I/O eventfd");
        }
    }
}

/* Hand a finished operation back to its scheduler. Under pool.lock. */
static void work_finish_locked(struct st__work *w, ssize_t result, int err)
{
    struct st__fio_port *port = w->port;
    w->result = result;
    w->err = err;
    w->state = ST__WORK_DONE;
    bool first = st__list_empty(&port->done);
    st__list_insert_tail(&port->done, &w->link);
    if (first) {
        port_kick_locked(port);
    }
}

static void *worker_main(void *arg)
{
    unsigned generation = (unsigned)(uintptr_t)arg;
    (void)pthread_mutex_lock(&pool.lock);
    for (;;) {
        while (pool.generation == generation && st__list_empty(&pool.queue)) {
            pool.idle++;
            (void)pthread_cond_wait(&pool.work, &pool.lock);
            pool.idle--;
        }
        if (pool.generation != generation) {
            break;
        }
        struct st__work *w = work_from_link(st__list_first(&pool.queue));
        st__list_remove(&w->link);
        pool.queued--;
        w->state = ST__WORK_RUNNING;
        st__list_insert_tail(&pool.running, &w->link);
        w->port->running++;
        (void)pthread_mutex_unlock(&pool.lock);

        ssize_t n = st__file_op_run(w->osfd, w->req);
        int err = n < 0 ? errno : 0;

        (void)pthread_mutex_lock(&pool.lock);
        st__list_remove(&w->link);
        struct st__fio_port *port = w->port;
        port->running--;
        work_finish_locked(w, n, err);
        if (port->closing && port->running == 0) {
            (void)pthread_cond_broadcast(&pool.finished);
        }
    }
    (void)pthread_mutex_unlock(&pool.lock);
    return NULL;
}

/*
 * In a fork child, only the forking pthread exists: the workers are gone.
 * The operations they had or had queued belong to the parent, which carries
 * them out; in the child they fail with ECANCELED. Each port gets an
 * eventfd of its own under the same number, so that the two processes do
 * not read each other's wake-ups.
 */
static void pool_prepare_fork(void)
{
    (void)pthread_mutex_lock(&pool.lock);
}

static void pool_parent_after_fork(void)
{
    (void)pthread_mutex_unlock(&pool.lock);
}

static void pool_child_after_fork(void)
{
    (void)pthread_mutex_init(&pool.lock, NULL);
    (void)pthread_cond_init(&pool.work, NULL);
    (void)pthread_cond_init(&pool.finished, NULL);
    pool.nworkers = 0;
    pool.idle = 0;
    pool.queued = 0;
    pool.generation++;
    if (!pool.lists_ready) {
        return;
    }
    st__list_for_each(link, &pool.ports) {
        struct st__fio_port *port = port_from_link(link);
        port->running = 0;
        int fresh = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
        if (fresh >= 0) {
            (void)dup3(fresh, port->efd, O_CLOEXEC);
            (void)close(fresh);
        }
    }
    st__list_for_each_safe(link, next, &pool.queue) {
        st__list_remove(link);
        work_finish_locked(work_from_link(link), -1, ECANCELED);
    }
    st__list_for_each_safe(link, next, &pool.running) {
        st__list_remove(link);
        work_finish_locked(work_from_link(link), -1, ECANCELED);
    }
}

static void register_atfork(void)
{
    (void)pthread_atfork(pool_prepare_fork, pool_parent_after_fork, pool_child_after_fork);
}

/*
 * Start a worker if the operations queued outnumber the idle workers and
 * the pool has room. Workers block every signal: signals are for the
 * application's pthreads. 0, or -1 with errno EAGAIN (or pthread_create's
 * error) when the pool has no worker at all and none can be started.
 */
static int pool_grow_locked(void)
{
    if (pool.queued <= pool.idle || pool.nworkers >= ST__FILE_WORKERS_MAX) {
        return 0;
    }
    /* The worker's generation travels as the argument's bits: nothing to allocate or free. */
    uintptr_t generation = pool.generation;
    void *arg = NULL;
    memcpy(&arg, &generation, sizeof(arg));
    sigset_t all;
    sigset_t old;
    (void)sigfillset(&all);
    (void)pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&pool.threads[pool.nworkers], NULL, worker_main, arg);
    (void)pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc == 0) {
        pool.nworkers++;
        return 0;
    }
    if (pool.nworkers > 0) {
        return 0; /* the running workers will get to it */
    }
    errno = EAGAIN; /* whatever pthread_create said: no worker can be had now */
    return -1;
}

/* Retire every worker and wait for them to go. Called with pool.lock held; releases it. */
static void pool_stop_and_unlock(void)
{
    pthread_t threads[ST__FILE_WORKERS_MAX];
    unsigned n = pool.nworkers;
    for (unsigned i = 0; i < n; i++) {
        threads[i] = pool.threads[i];
    }
    pool.nworkers = 0;
    pool.generation++;
    (void)pthread_cond_broadcast(&pool.work);
    (void)pthread_mutex_unlock(&pool.lock);
    for (unsigned i = 0; i < n; i++) {
        (void)pthread_join(threads[i], NULL);
    }
}

/* At exit, without st_destroy: the workers finish what they run and go. */
__attribute__((destructor)) static void pool_at_exit(void)
{
    (void)pthread_mutex_lock(&pool.lock);
    pool_stop_and_unlock();
}

/* Hand back this port's finished operations: make their waiters runnable. */
static void port_drain(struct st__sched *sched, struct st__fio_port *port)
{
    (void)pthread_mutex_lock(&pool.lock);
    st__list_for_each_safe(link, next, &port->done) {
        struct st__work *w = work_from_link(link);
        st__list_remove(link);
        w->state = ST__WORK_COLLECTED;
        if (w->thread->waiting_on == w) {
            st__sched_wake_io(sched, w->thread);
        }
    }
    (void)pthread_mutex_unlock(&pool.lock);
}

/*
 * The completer: waits on the eventfd and drains the completion list. If
 * its wait cannot be set up (the backend refused the descriptor), it looks
 * at the list every millisecond instead, so that no waiter is stranded.
 */
#define COMPLETER_RETRY_USEC 1000

static void *completer_main(void *arg)
{
    struct st__fio_port *port = arg;
    struct st__sched *sched = st__sched_peek();
    for (;;) {
        struct pollfd pd = {.fd = port->efd, .events = POLLIN};
        if (st__poll_one(&pd, ST_UTIME_NO_TIMEOUT) < 0 && errno != EINTR) {
            (void)st_usleep(COMPLETER_RETRY_USEC);
        }
        uint64_t count;
        (void)read(port->efd, &count, sizeof(count)); /* EAGAIN: woken for nothing */
        port_drain(sched, port);
    }
    return NULL;
}

/* This pthread's port, made with its eventfd and completer on first use; NULL + errno. */
static struct st__fio_port *port_get(struct st__sched *sched)
{
    if (this_port != NULL) {
        return this_port;
    }
    struct st__fio_port *port = calloc(1, sizeof(*port));
    if (port == NULL) {
        errno = ENOMEM;
        return NULL;
    }
    st__list_init(&port->done);
    port->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (port->efd < 0) {
        int err = errno;
        free(port);
        errno = err;
        return NULL;
    }
    port->completer = st__thread_new(sched, completer_main, port, 0, 0);
    if (port->completer == NULL) {
        int err = errno;
        (void)close(port->efd);
        free(port);
        errno = err;
        return NULL;
    }
    port->completer->flags |= ST__FL_SYSTEM;
    st__sched_make_runnable(sched, port->completer);
    (void)pthread_once(&atfork_once, register_atfork);
    (void)pthread_mutex_lock(&pool.lock);
    lists_init_locked();
    st__list_insert_tail(&pool.ports, &port->link);
    (void)pthread_mutex_unlock(&pool.lock);
    this_port = port;
    return port;
}

/* Wait to be woken: by the completer, the deadline or an interrupt. */
static void work_wait(struct st__sched *sched, struct _st_thread *me, struct st__work *w)
{
    me->state = ST__IO_WAIT;
    me->waiting_on = w;
    me->flags |= ST__FL_WAIT_FILE_CALL;
    st__sched_switch(sched, me);
    me->waiting_on = NULL;
    me->flags &= ~ST__FL_WAIT_FILE_CALL;
}

ssize_t st__workers_run(struct st__sched *sched, int osfd, const struct st__io_req *req,
                        st_utime_t timeout)
{
    struct _st_thread *me = sched->current;
    if (st__thread_take_interrupt(me)) {
        return -1;
    }
    struct st__fio_port *port = port_get(sched);
    if (port == NULL) {
        return -1;
    }
    struct st__work w = {.state = ST__WORK_QUEUED, .req = req, .osfd = osfd, .port = port,
                         .thread = me};
    (void)pthread_mutex_lock(&pool.lock);
    st__list_insert_tail(&pool.queue, &w.link);
    pool.queued++;
    if (pool_grow_locked() != 0) {
        st__list_remove(&w.link);
        pool.queued--;
        (void)pthread_mutex_unlock(&pool.lock);
        errno = EAGAIN;
        return -1;
    }
    (void)pthread_cond_signal(&pool.work);
    (void)pthread_mutex_unlock(&pool.lock);

    if (timeout != ST_UTIME_NO_TIMEOUT) {
        st__sched_sleep_add(sched, me, timeout);
    }
    for (;;) {
        work_wait(sched, me, &w);
        (void)pthread_mutex_lock(&pool.lock);
        enum st__work_state state = w.state;
        if (state == ST__WORK_QUEUED) {
            /* The deadline or an interrupt, before any worker took it: nothing was done. */
            st__list_remove(&w.link);
            pool.queued--;
            (void)pthread_mutex_unlock(&pool.lock);
            st__sched_sleep_del(sched, me);
            if (!st__thread_take_interrupt(me)) {
                errno = ETIME;
            }
            return -1;
        }
        if (state == ST__WORK_DONE) {
            st__list_remove(&w.link); /* woken otherwise before the completer came */
        }
        (void)pthread_mutex_unlock(&pool.lock);
        if (state != ST__WORK_RUNNING) {
            break;
        }
        /* A worker has it and may be writing into the caller's buffer: wait, without deadline. */
        st__sched_sleep_del(sched, me);
    }
    st__sched_sleep_del(sched, me);
    if (w.result < 0) {
        errno = w.err;
    }
    return w.result;
}

void st__workers_sched_fini(struct st__sched *sched)
{
    (void)sched;
    struct st__fio_port *port = this_port;
    if (port == NULL) {
        return;
    }
    this_port = NULL;
    (void)pthread_mutex_lock(&pool.lock);
    st__list_for_each_safe(link, next, &pool.queue) {
        if (work_from_link(link)->port == port) {
            st__list_remove(link);
            pool.queued--;
        }
    }
    port->closing = true;
    while (port->running > 0) {
        (void)pthread_cond_wait(&pool.finished, &pool.lock);
    }
    st__list_remove(&port->link);
    (void)close(port->efd);
    free(port);
    if (st__list_empty(&pool.ports)) {
        pool_stop_and_unlock();
        return;
    }
    (void)pthread_mutex_unlock(&pool.lock);
}
