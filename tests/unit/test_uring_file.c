/*
 * The io_uring engine's file operations (src/uring_io.c), through the
 * backend's submit_io as the file I/O functions call it: reads and writes
 * at an offset and at the file position, vectors, end of file, fsync and
 * fdatasync, the errors the kernel reports, and the protocol of an
 * operation in flight (timeout, interrupt, close, free, teardown).
 *
 * A read or write of a regular file never waits for anything that a test
 * could hold back, so the protocol of an operation in flight is exercised
 * with a read from an empty pipe, which the kernel keeps pending until
 * data comes or it is cancelled: the same request (IORING_OP_READ), the
 * same wait and the same cancellation. What is deterministic for regular
 * files: every operation completes through the event loop, so a coroutine
 * that is runnable when an operation is submitted runs before it returns.
 *
 * Buffers are filled before the kernel writes into them: valgrind cannot
 * see a write the kernel makes outside a system call.
 */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "st.h"
#include "st_config.h"

#if !ST__HAVE_IO_URING

Test(uring_file, file_operations)
{
    cr_skip_test("st was built without liburing: there is no io_uring engine to run file operations");
}

#else

#include "backend.h"
#include "backend_uring.h"
#include "netfd.h"
#include "scheduler.h"

/* ---- helpers ---------------------------------------------------------------------- */

/* An io_uring scheduler whose kernel has the file operations, or the test skips and says why. */
static struct st__uring_state *start_uring(void)
{
    if (st_set_eventsys(ST_EVENTSYS_IO_URING) != 0) {
        cr_assert(errno == ENOSYS || errno == EPERM || errno == EACCES, "io_uring: %s",
                  strerror(errno));
        cr_skip_test("io_uring is refused here (%s): no file operations to test", strerror(errno));
    }
    cr_assert_eq(st_init(), 0, "st_init: %s", strerror(errno));
    struct st__sched *sched = st__sched_peek();
    cr_assert_not_null(sched->backend->submit_io);
    struct st__uring_state *st = sched->backend_state;
    unsigned all = 1U << ST__IO_READ | 1U << ST__IO_WRITE | 1U << ST__IO_READV |
                   1U << ST__IO_WRITEV | 1U << ST__IO_FSYNC;
    if (st->file_kinds != all || !st->file_position) {
        cr_skip_test("this kernel lacks io_uring file operations (kinds %#x of %#x, file position "
                     "%d): they are left to the caller",
                     st->file_kinds, all, st->file_position);
    }
    return st;
}

/* One request through the backend, as the file I/O functions make it. */
static ssize_t submit(int fd, enum st__io_kind kind, void *buf, size_t len, off_t offset,
                      st_utime_t timeout)
{
    struct st__sched *sched = st__sched_peek();
    struct st__io_req req = {.kind = kind, .buf = buf, .len = len, .offset = offset};
    errno = 0;
    return sched->backend->submit_io(sched, fd, &req, timeout);
}

static ssize_t file_write(int fd, const char *text, off_t offset)
{
    return submit(fd, ST__IO_WRITE, (void *)(uintptr_t)text, strlen(text), offset,
                  ST_UTIME_NO_TIMEOUT);
}

static ssize_t file_sync(int fd, int flags)
{
    struct st__sched *sched = st__sched_peek();
    struct st__io_req req = {.kind = ST__IO_FSYNC, .flags = flags};
    errno = 0;
    return sched->backend->submit_io(sched, fd, &req, ST_UTIME_NO_TIMEOUT);
}

/* A read of up to `len` bytes into `buf` (NUL-terminated, filled with '#' first). */
static ssize_t file_read(int fd, char *buf, size_t len, off_t offset)
{
    memset(buf, '#', len + 1);
    ssize_t n = submit(fd, ST__IO_READ, buf, len, offset, ST_UTIME_NO_TIMEOUT);
    buf[n >= 0 ? (size_t)n : 0] = '\0';
    return n;
}

/* A new empty temporary file, opened with `flags` (O_RDWR...), unlinked. */
static int temp_file(char *path, size_t size)
{
    const char *dir = getenv("TMPDIR");
    snprintf(path, size, "%s/st_uring_file_XXXXXX", dir != NULL ? dir : "/tmp");
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0, "mkstemp: %s", strerror(errno));
    return fd;
}

/* A temporary file as a netfd (O_RDWR), unlinked at once. */
static st_netfd_t temp_netfd(void)
{
    char path[PATH_MAX];
    int fd = temp_file(path, sizeof(path));
    cr_assert_eq(unlink(path), 0);
    st_netfd_t nfd = st_netfd_open(fd);
    cr_assert_not_null(nfd, "st_netfd_open: %s", strerror(errno));
    return nfd;
}

/* An io_uring scheduler (or the test skips) and a temporary file as a netfd: its descriptor. */
static int start_with_file(st_netfd_t *nfd)
{
    (void)start_uring();
    *nfd = temp_netfd();
    return st_netfd_fileno(*nfd);
}

/* The end of a test: the netfd closes (no operation is left on it) and the scheduler goes. */
static void close_and_destroy(st_netfd_t nfd)
{
    cr_expect_eq(st_netfd_close(nfd), 0, "close: %s", strerror(errno));
    st_destroy();
}

/* What the file holds from `offset`, read with pread(2): `want` exactly. */
static void expect_contents(int fd, off_t offset, const char *want, size_t len)
{
    char got[256];
    cr_assert_lt(len, sizeof(got));
    memset(got, '#', sizeof(got));
    ssize_t n = pread(fd, got, sizeof(got), offset);
    cr_assert_eq(n, (ssize_t)len, "pread: %zd bytes, want %zu", n, len);
    cr_expect_eq(memcmp(got, want, len), 0, "the file holds what was written");
}

/* ---- reads and writes ------------------------------------------------------------- */

Test(uring_file, reads_and_writes_at_offsets_leave_the_file_position_alone)
{
    st_netfd_t nfd;
    int fd = start_with_file(&nfd);
    cr_expect_eq(file_write(fd, "hello world", 0), 11);
    cr_expect_eq(file_write(fd, "XY", 20), 2, "a write past the end leaves a hole");
    expect_contents(fd, 0, "hello world\0\0\0\0\0\0\0\0\0XY", 22);

    char buf[64];
    cr_expect_eq(file_read(fd, buf, 5, 6), 5);
    cr_expect_str_eq(buf, "world");
    cr_expect_eq(file_read(fd, buf, 10, 18), 4, "a read across the end is short");
    cr_expect_eq(memcmp(buf, "\0\0XY", 4), 0);
    cr_expect_eq(file_read(fd, buf, 10, 22), 0, "a read at the end is end of file");
    cr_expect_eq(file_read(fd, buf, 10, 1000), 0, "a read past the end too");
    cr_expect_eq(lseek(fd, 0, SEEK_CUR), 0, "offsets leave the file position alone");
    cr_expect_eq(file_read(fd, buf, 0, 0), 0, "nothing asked, nothing read");
    close_and_destroy(nfd);
}

Test(uring_file, the_file_position_advances_and_sequential_operations_see_each_other)
{
    st_netfd_t nfd;
    int fd = start_with_file(&nfd);
    cr_expect_eq(file_write(fd, "abc", -1), 3);
    cr_expect_eq(lseek(fd, 0, SEEK_CUR), 3);
    cr_expect_eq(file_write(fd, "defgh", -1), 5, "appended where the first ended");
    cr_expect_eq(lseek(fd, 0, SEEK_CUR), 8);
    expect_contents(fd, 0, "abcdefgh", 8);

    char buf[16];
    cr_expect_eq(file_read(fd, buf, 4, -1), 0, "at the end: end of file");
    cr_assert_eq(lseek(fd, 1, SEEK_SET), 1);
    cr_expect_eq(file_read(fd, buf, 3, -1), 3);
    cr_expect_str_eq(buf, "bcd");
    cr_expect_eq(file_read(fd, buf, 3, -1), 3, "the next read goes on from there");
    cr_expect_str_eq(buf, "efg");
    cr_expect_eq(file_write(fd, "H", -1), 1, "a write at the position the reads left");
    cr_expect_eq(file_read(fd, buf, 8, -1), 0);
    cr_expect_eq(lseek(fd, 0, SEEK_CUR), 8);
    expect_contents(fd, 0, "abcdefgH", 8);
    close_and_destroy(nfd);
}

Test(uring_file, vectored_reads_and_writes)
{
    st_netfd_t nfd;
    int fd = start_with_file(&nfd);
    char a[] = "one ";
    char b[] = "two ";
    char c[] = "three";
    struct iovec out[] = {{a, 4}, {b, 4}, {c, 5}};
    cr_expect_eq(submit(fd, ST__IO_WRITEV, out, 3, 2, ST_UTIME_NO_TIMEOUT), 13);
    expect_contents(fd, 0, "\0\0one two three", 15);
    cr_expect_eq(lseek(fd, 0, SEEK_CUR), 0);

    char x[6];
    char y[32];
    memset(x, '#', sizeof(x));
    memset(y, '#', sizeof(y));
    struct iovec in[] = {{x, 5}, {y, sizeof(y)}};
    cr_expect_eq(submit(fd, ST__IO_READV, in, 2, 4, ST_UTIME_NO_TIMEOUT), 11,
                 "short at the end of the file");
    cr_expect_eq(memcmp(x, "e two", 5), 0);
    cr_expect_eq(memcmp(y, " three", 6), 0);

    /* At the file position. */
    cr_expect_eq(submit(fd, ST__IO_WRITEV, out, 2, -1, ST_UTIME_NO_TIMEOUT), 8);
    cr_expect_eq(lseek(fd, 0, SEEK_CUR), 8);
    cr_assert_eq(lseek(fd, 4, SEEK_SET), 4);
    struct iovec one[] = {{x, 4}};
    cr_expect_eq(submit(fd, ST__IO_READV, one, 1, -1, ST_UTIME_NO_TIMEOUT), 4);
    cr_expect_eq(memcmp(x, "two ", 4), 0);
    cr_expect_eq(lseek(fd, 0, SEEK_CUR), 8);
    expect_contents(fd, 0, "one two o three", 15);

    /* More vectors than readv(2) takes: EINVAL, as readv says, and nothing submitted. */
    cr_expect_eq(submit(fd, ST__IO_READV, in, (size_t)IOV_MAX + 1, 0, ST_UTIME_NO_TIMEOUT), -1);
    cr_expect_eq(errno, EINVAL);
    cr_expect_eq(submit(fd, ST__IO_WRITEV, out, (size_t)UINT32_MAX + 2, 0, ST_UTIME_NO_TIMEOUT),
                 -1, "a count beyond 32 bits is not cut down to one vector");
    cr_expect_eq(errno, EINVAL);
    expect_contents(fd, 0, "one two o three", 15);
    close_and_destroy(nfd);
}

Test(uring_file, fsync_and_fdatasync)
{
    st_netfd_t nfd;
    int fd = start_with_file(&nfd);
    cr_expect_eq(file_write(fd, "durable", 0), 7);
    cr_expect_eq(file_sync(fd, 0), 0, "fsync: %s", strerror(errno));
    cr_expect_eq(file_write(fd, "!", 7), 1);
    cr_expect_eq(file_sync(fd, ST__IO_DATASYNC), 0, "fdatasync: %s", strerror(errno));
    expect_contents(fd, 0, "durable!", 8);
    close_and_destroy(nfd);
}

Test(uring_file, the_kernels_errors_are_returned_as_errno)
{
    (void)start_uring();
    char path[PATH_MAX];
    int fd = temp_file(path, sizeof(path));
    cr_assert_eq(write(fd, "data", 4), 4);
    st_netfd_t rd = st_open(path, O_RDONLY, 0);
    cr_assert_not_null(rd, "st_open: %s", strerror(errno));
    st_netfd_t wr = st_open(path, O_WRONLY, 0);
    cr_assert_not_null(wr, "st_open: %s", strerror(errno));
    cr_assert_eq(unlink(path), 0);
    int r = st_netfd_fileno(rd);
    int w = st_netfd_fileno(wr);
    char buf[8];

    cr_expect_eq(file_write(r, "x", 0), -1, "a write on a descriptor opened for reading");
    cr_expect_eq(errno, EBADF, "errno %s", strerror(errno));
    struct iovec v = {buf, 1};
    cr_expect_eq(submit(r, ST__IO_WRITEV, &v, 1, -1, ST_UTIME_NO_TIMEOUT), -1);
    cr_expect_eq(errno, EBADF);
    cr_expect_eq(file_read(w, buf, 4, 0), -1, "a read on a descriptor opened for writing");
    cr_expect_eq(errno, EBADF);
    cr_expect_eq(file_sync(r, 0), 0, "fsync(2) takes a descriptor opened for reading");

    /* Negative offsets other than -1, the file position: EINVAL, as pread(2) says. */
    static const off_t bad[] = {-2, -4096, INT64_MIN};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        cr_expect_eq(file_read(r, buf, 4, bad[i]), -1);
        cr_expect_eq(errno, EINVAL, "read at %lld: %s", (long long)bad[i], strerror(errno));
        cr_expect_eq(file_write(w, "zz", bad[i]), -1);
        cr_expect_eq(errno, EINVAL, "write at %lld: %s", (long long)bad[i], strerror(errno));
        cr_expect_eq(submit(r, ST__IO_READV, &v, 1, bad[i], ST_UTIME_NO_TIMEOUT), -1);
        cr_expect_eq(errno, EINVAL);
    }
    cr_expect_eq(lseek(r, 0, SEEK_CUR), 0);
    cr_expect_eq(lseek(w, 0, SEEK_CUR), 0);
    expect_contents(fd, 0, "data", 4);

    /* A descriptor closed behind st's back. */
    int gone = dup(fd);
    cr_assert_geq(gone, 0);
    cr_assert_eq(close(gone), 0);
    cr_expect_eq(file_read(gone, buf, 4, 0), -1);
    cr_expect_eq(errno, EBADF);
    cr_expect_eq(file_sync(gone, 0), -1);
    cr_expect_eq(errno, EBADF);

    cr_expect_eq(st_netfd_close(rd), 0);
    cr_expect_eq(st_netfd_close(wr), 0);
    cr_assert_eq(close(fd), 0);
    st_destroy();
}

/* A descriptor that is no netfd, numbered where the backend has no record yet. */
Test(uring_file, a_descriptor_without_a_record_gets_one)
{
    struct st__uring_state *st = start_uring();
    char path[PATH_MAX];
    int low = temp_file(path, sizeof(path));
    cr_assert_eq(unlink(path), 0);
    int fd = fcntl(low, F_DUPFD_CLOEXEC, 700);
    cr_assert_geq(fd, 700, "F_DUPFD: %s", strerror(errno));
    cr_assert_null(st__fdwatch_find(&st->watches, fd), "no record for %d yet", fd);
    cr_expect_eq(file_write(fd, "unwatched", 0), 9);
    char buf[16];
    cr_expect_eq(file_read(fd, buf, 9, 0), 9);
    cr_expect_str_eq(buf, "unwatched");
    cr_expect_eq(file_sync(fd, 0), 0);
    struct st__fdwatch *w = st__fdwatch_find(&st->watches, fd);
    cr_assert_not_null(w, "the descriptor has a record now");
    cr_expect_not(w->owned, "which no netfd owns");
    cr_expect(st__list_empty(&ST__CONTAINER_OF(w, struct st__uring_watch, common)->ops));
    cr_assert_eq(close(fd), 0);
    cr_assert_eq(close(low), 0);
    st_destroy();
}

/* ---- what the engine leaves to the caller --------------------------------------------- */

Test(uring_file, a_pending_interrupt_or_a_zero_timeout_leaves_the_call_to_the_caller)
{
    st_netfd_t nfd;
    int fd = start_with_file(&nfd);
    char buf[8];
    memset(buf, '#', sizeof(buf));

    cr_expect_eq(submit(fd, ST__IO_WRITE, "zero", 4, -1, 0), ST__IO_NOT_SUBMITTED, "timeout 0");
    st_thread_interrupt(st_thread_self());
    cr_expect_eq(submit(fd, ST__IO_WRITE, "intr", 4, -1, ST_UTIME_NO_TIMEOUT),
                 ST__IO_NOT_SUBMITTED, "interrupt pending");
    cr_expect_eq(file_sync(fd, 0), ST__IO_NOT_SUBMITTED);
    cr_expect_eq(submit(fd, ST__IO_READ, buf, 4, 0, 1000000), ST__IO_NOT_SUBMITTED);
    cr_expect_eq(lseek(fd, 0, SEEK_CUR), 0, "nothing was written");
    cr_expect_eq(lseek(fd, 0, SEEK_END), 0);
    /* The interrupt is the caller's to deliver: it is still pending. */
    cr_expect_eq(st_usleep(1000), -1);
    cr_expect_eq(errno, EINTR);
    cr_expect_eq(file_write(fd, "done", -1), 4, "taken once the interrupt was delivered");

    cr_expect_eq(file_write(fd, "more", -1), 4);
    expect_contents(fd, 0, "donemore", 8);
    close_and_destroy(nfd);
}

/* ---- other coroutines run while an operation is in flight ----------------------------- */

static void *mark_ran(void *arg)
{
    *(bool *)arg = true;
    return NULL;
}

/* A coroutine that is runnable when `op` is submitted runs before it returns. */
#define EXPECT_OTHERS_RUN(op, what)                                                                \
    do {                                                                                           \
        bool ran_ = false;                                                                         \
        st_thread_t t_ = st_thread_create(mark_ran, &ran_, 1, 0);                                  \
        cr_assert_not_null(t_);                                                                    \
        cr_expect_geq((op), 0, "%s: %s", what, strerror(errno));                                   \
        cr_expect(ran_, "another coroutine ran while the %s was in flight", what);                 \
        cr_assert_eq(st_thread_join(t_, NULL), 0);                                                 \
    } while (0)

Test(uring_file, other_coroutines_run_while_an_operation_is_in_flight)
{
    st_netfd_t nfd;
    int fd = start_with_file(&nfd);
    static char block[1 << 16];
    memset(block, 'b', sizeof(block));
    for (off_t off = 0; off < 16 * (off_t)sizeof(block); off += (off_t)sizeof(block)) {
        EXPECT_OTHERS_RUN(submit(fd, ST__IO_WRITE, block, sizeof(block), off, ST_UTIME_NO_TIMEOUT),
                          "write");
    }
    EXPECT_OTHERS_RUN(file_sync(fd, 0), "fsync");
    char buf[8];
    EXPECT_OTHERS_RUN(file_read(fd, buf, 4, 0), "read");
    cr_expect_str_eq(buf, "bbbb");
    EXPECT_OTHERS_RUN(file_write(fd, "x", 0), "write");
    EXPECT_OTHERS_RUN(file_sync(fd, ST__IO_DATASYNC), "fdatasync");
    close_and_destroy(nfd);
}

/* Coroutines with operations on one file at once: each gets its own result. */
struct reader {
    off_t offset;
    ssize_t got;
    int fd;
    int err;
    char buf[8];
};

static void *read_at(void *arg)
{
    struct reader *r = arg;
    r->got = file_read(r->fd, r->buf, 4, r->offset);
    r->err = errno;
    return NULL;
}

Test(uring_file, coroutines_reading_one_file_at_once_each_get_theirs)
{
    st_netfd_t nfd;
    int fd = start_with_file(&nfd);
    enum { N = 40 };
    char text[4 * N + 1];
    for (int i = 0; i < N; i++) {
        snprintf(text + 4 * i, 5, "%04d", i);
    }
    cr_assert_eq(file_write(fd, text, 0), 4 * N);
    struct reader r[N];
    st_thread_t t[N];
    for (int i = 0; i < N; i++) {
        r[i] = (struct reader){.fd = fd, .offset = (off_t)(4 * (N - 1 - i))};
        t[i] = st_thread_create(read_at, &r[i], 1, 0);
        cr_assert_not_null(t[i]);
    }
    for (int i = 0; i < N; i++) {
        cr_assert_eq(st_thread_join(t[i], NULL), 0);
        char want[5];
        snprintf(want, sizeof(want), "%04d", N - 1 - i);
        cr_expect_eq(r[i].got, 4, "reader %d: %zd (%s)", i, r[i].got, strerror(r[i].err));
        cr_expect_str_eq(r[i].buf, want);
    }
    close_and_destroy(nfd);
}

/* ---- an operation in flight: a read the kernel keeps pending ---------------------------- */

struct pending {
    int fd;
    st_utime_t timeout;
    char buf[16];
    ssize_t got;
    int err;
    bool returned;
};

static void *read_pending(void *arg)
{
    struct pending *p = arg;
    memset(p->buf, '#', sizeof(p->buf));
    p->got = submit(p->fd, ST__IO_READ, p->buf, sizeof(p->buf) - 1, -1, p->timeout);
    p->err = errno;
    p->returned = true;
    return NULL;
}

/* A pipe whose read end is a netfd: reads from it wait until something is written. */
struct pipe_ends {
    st_netfd_t in;
    int out;
};

static void open_pipe(struct pipe_ends *p)
{
    int pv[2];
    cr_assert_eq(pipe(pv), 0, "pipe: %s", strerror(errno));
    p->in = st_netfd_open(pv[0]);
    cr_assert_not_null(p->in, "st_netfd_open: %s", strerror(errno));
    p->out = pv[1];
}

/* A coroutine whose read of the pipe is in the kernel when this returns. */
static st_thread_t start_pending(struct pending *p, const struct pipe_ends *pipe_ends,
                                 st_utime_t timeout)
{
    *p = (struct pending){.fd = st_netfd_fileno(pipe_ends->in), .timeout = timeout, .got = -2};
    st_thread_t t = st_thread_create(read_pending, p, 1, 0);
    cr_assert_not_null(t);
    cr_assert_eq(st_usleep(2000), 0);
    cr_assert_not(p->returned, "the read waits for data");
    return t;
}

/* What is in the pipe now (it was not taken by a cancelled read). */
static void expect_in_pipe(const struct pipe_ends *p, const char *want)
{
    char buf[16];
    memset(buf, 0, sizeof(buf));
    cr_assert_eq(fcntl(st_netfd_fileno(p->in), F_GETFL) & O_NONBLOCK, O_NONBLOCK);
    ssize_t n = read(st_netfd_fileno(p->in), buf, sizeof(buf) - 1);
    cr_expect_eq(n, (ssize_t)strlen(want), "read(2): %zd (%s)", n, n < 0 ? strerror(errno) : "");
    cr_expect_str_eq(buf, want);
}

Test(uring_file, an_operation_in_flight_completes_times_out_or_is_interrupted)
{
    (void)start_uring();
    struct pipe_ends p;
    open_pipe(&p);

    /* Completes: data comes. */
    struct pending r;
    st_thread_t t = start_pending(&r, &p, ST_UTIME_NO_TIMEOUT);
    cr_assert_eq(write(p.out, "ping", 4), 4);
    cr_assert_eq(st_thread_join(t, NULL), 0);
    cr_expect_eq(r.got, 4, "%zd (%s)", r.got, strerror(r.err));
    cr_expect_eq(memcmp(r.buf, "ping", 4), 0);

    /* Times out: ETIME, and the request is gone: what is written next stays in the pipe. */
    st_utime_t start = st_utime();
    t = start_pending(&r, &p, 20000);
    cr_assert_eq(st_thread_join(t, NULL), 0);
    cr_expect_eq(r.got, -1);
    cr_expect_eq(r.err, ETIME, "%s", strerror(r.err));
    cr_expect_geq(st_utime() - start, 20000, "not before the deadline");
    cr_expect_eq(memcmp(r.buf, "###", 3), 0, "nothing was read");
    cr_assert_eq(write(p.out, "late", 4), 4);
    expect_in_pipe(&p, "late");

    /* Interrupted: EINTR, the interrupt consumed, the request gone. */
    t = start_pending(&r, &p, ST_UTIME_NO_TIMEOUT);
    st_thread_interrupt(t);
    cr_assert_eq(st_thread_join(t, NULL), 0);
    cr_expect_eq(r.got, -1);
    cr_expect_eq(r.err, EINTR, "%s", strerror(r.err));
    cr_assert_eq(write(p.out, "next", 4), 4);
    expect_in_pipe(&p, "next");

    cr_expect_eq(st_netfd_close(p.in), 0);
    cr_expect_eq(close(p.out), 0);
    st_destroy();
}

/*
 * st_read on a file netfd at the file position, as file_io.c carries it
 * out. The netfd is the pipe's read end marked as a file, so that the
 * operation stays in flight until the test writes.
 */
struct positioned {
    st_netfd_t fd;
    st_utime_t timeout;
    char buf[8];
    ssize_t got;
    int err;
};

static void *read_at_position(void *arg)
{
    struct positioned *r = arg;
    memset(r->buf, '#', sizeof(r->buf));
    r->got = st_read(r->fd, r->buf, sizeof(r->buf) - 1, r->timeout);
    r->err = errno;
    return NULL;
}

static st_thread_t start_positioned(struct positioned *r, st_netfd_t fd, st_utime_t timeout)
{
    *r = (struct positioned){.fd = fd, .timeout = timeout, .got = -2};
    st_thread_t t = st_thread_create(read_at_position, r, 1, 0);
    cr_assert_not_null(t);
    return t;
}

Test(uring_file, operations_at_the_file_position_of_one_netfd_take_turns)
{
    struct st__uring_state *st = start_uring();
    struct pipe_ends p;
    open_pipe(&p);
    p.in->is_file = true;

    struct positioned first;
    struct positioned second;
    st_thread_t t1 = start_positioned(&first, p.in, ST_UTIME_NO_TIMEOUT);
    st_thread_t t2 = start_positioned(&second, p.in, ST_UTIME_NO_TIMEOUT);
    cr_assert_eq(st_usleep(2000), 0);
    cr_expect_eq(st->ops_in_flight, 1, "one operation at the position in flight, not %zu",
                 st->ops_in_flight);
    cr_expect_eq(st_netfd_close(p.in), -1, "the netfd has a call in flight and one waiting");
    cr_expect_eq(errno, EBUSY);

    /* The first read gets the data; then the second is submitted and waits for its own. */
    cr_assert_eq(write(p.out, "one", 3), 3);
    cr_assert_eq(st_thread_join(t1, NULL), 0);
    cr_expect_eq(first.got, 3, "%zd (%s)", first.got, strerror(first.err));
    cr_expect_eq(memcmp(first.buf, "one", 3), 0);
    cr_assert_eq(st_usleep(2000), 0);
    cr_expect_eq(st->ops_in_flight, 1, "the second read is in flight now");
    cr_assert_eq(write(p.out, "two", 3), 3);
    cr_assert_eq(st_thread_join(t2, NULL), 0);
    cr_expect_eq(second.got, 3, "%zd (%s)", second.got, strerror(second.err));
    cr_expect_eq(memcmp(second.buf, "two", 3), 0);

    /* A wait for the turn ends as any wait: at the deadline, or by an interrupt; nothing done. */
    t1 = start_positioned(&first, p.in, ST_UTIME_NO_TIMEOUT);
    t2 = start_positioned(&second, p.in, 20000);
    struct positioned third;
    st_thread_t t3 = start_positioned(&third, p.in, ST_UTIME_NO_TIMEOUT);
    cr_assert_eq(st_usleep(2000), 0);
    st_thread_interrupt(t3);
    cr_assert_eq(st_thread_join(t2, NULL), 0);
    cr_assert_eq(st_thread_join(t3, NULL), 0);
    cr_expect_eq(second.got, -1);
    cr_expect_eq(second.err, ETIME, "%s", strerror(second.err));
    cr_expect_eq(third.got, -1);
    cr_expect_eq(third.err, EINTR, "%s", strerror(third.err));
    cr_expect_eq(st->ops_in_flight, 1, "only the first read was ever submitted");
    cr_assert_eq(write(p.out, "end", 3), 3);
    cr_assert_eq(st_thread_join(t1, NULL), 0);
    cr_expect_eq(first.got, 3, "%zd (%s)", first.got, strerror(first.err));

    cr_expect_eq(st_netfd_close(p.in), 0);
    cr_expect_eq(close(p.out), 0);
    st_destroy();
}

static void *close_netfd(void *arg)
{
    return (void *)(intptr_t)(st_netfd_close(arg) == 0 ? 0 : errno);
}

Test(uring_file, close_refuses_and_free_cancels_while_an_operation_is_in_flight)
{
    (void)start_uring();
    struct pipe_ends p;
    open_pipe(&p);

    /* The read was submitted without entering the netfd: the backend itself refuses. */
    struct pending r;
    st_thread_t t = start_pending(&r, &p, ST_UTIME_NO_TIMEOUT);
    errno = 0;
    cr_expect_eq(st_netfd_close(p.in), -1);
    cr_expect_eq(errno, EBUSY, "close: %s", strerror(errno));
    /* From another coroutine too. */
    st_thread_t closer = st_thread_create(close_netfd, p.in, 1, 0);
    cr_assert_not_null(closer);
    void *err = NULL;
    cr_assert_eq(st_thread_join(closer, &err), 0);
    cr_expect_eq((intptr_t)err, EBUSY);
    cr_assert_eq(write(p.out, "ping", 4), 4);
    cr_assert_eq(st_thread_join(t, NULL), 0);
    cr_expect_eq(r.got, 4, "the read in flight is not disturbed: %s", strerror(r.err));
    cr_expect_eq(memcmp(r.buf, "ping", 4), 0);

    /* st_netfd_free cancels it: ECANCELED, the descriptor stays the caller's, nothing taken. */
    int fd = st_netfd_fileno(p.in);
    t = start_pending(&r, &p, ST_UTIME_NO_TIMEOUT);
    st_netfd_free(p.in);
    cr_assert_eq(st_thread_join(t, NULL), 0);
    cr_expect_eq(r.got, -1);
    cr_expect_eq(r.err, ECANCELED, "%s", strerror(r.err));
    cr_assert_eq(write(p.out, "kept", 4), 4);
    char buf[8] = {0};
    cr_expect_eq(read(fd, buf, sizeof(buf)), 4);
    cr_expect_str_eq(buf, "kept");

    cr_expect_eq(close(fd), 0);
    cr_expect_eq(close(p.out), 0);
    st_destroy();
}

/* A coroutine that writes to a file, its buffer on its own stack. */
struct stack_writer {
    int fd;
    ssize_t got;
};

static void *write_from_stack(void *arg)
{
    struct stack_writer *w = arg;
    char text[32];
    memcpy(text, "written from a coroutine's stack", sizeof(text));
    w->got = submit(w->fd, ST__IO_WRITE, text, sizeof(text), 0, ST_UTIME_NO_TIMEOUT);
    return NULL;
}

Test(uring_file, destroy_with_operations_in_flight)
{
    (void)start_uring();
    struct pipe_ends p;
    open_pipe(&p);
    char path[PATH_MAX];
    int file = temp_file(path, sizeof(path));
    cr_assert_eq(unlink(path), 0);

    /* A read the kernel keeps pending, and a write queued but not submitted yet. */
    struct pending r;
    (void)start_pending(&r, &p, ST_UTIME_NO_TIMEOUT);
    struct stack_writer w = {.fd = file, .got = -2};
    st_thread_t t = st_thread_create(write_from_stack, &w, 0, 0);
    cr_assert_not_null(t);
    st_thread_yield();
    cr_assert_eq(w.got, -2, "the write waits for the next dispatch");
    struct st__uring_state *st = st__sched_peek()->backend_state;
    cr_assert_eq(st->ops_in_flight, 2);

    st_destroy();
    cr_expect_not(r.returned, "the coroutines went with the scheduler");
    /* The read was cancelled: what is written now stays in the pipe. */
    cr_assert_eq(write(p.out, "late", 4), 4);
    char buf[8] = {0};
    cr_expect_eq(read(st_netfd_fileno(p.in), buf, sizeof(buf)), 4);
    cr_expect_str_eq(buf, "late");
    /* The write was carried out (or cancelled) before its stack went: all of it, or nothing. */
    char got[40];
    memset(got, 0, sizeof(got));
    ssize_t n = pread(file, got, sizeof(got), 0);
    cr_expect(n == 0 || (n == 32 && memcmp(got, "written from a coroutine's stack", 32) == 0),
              "the file holds %zd bytes: %.32s", n, got);

    cr_expect_eq(st_netfd_close(p.in), 0, "the netfd outlives st_destroy");
    cr_expect_eq(close(p.out), 0);
    cr_expect_eq(close(file), 0);
}

#endif /* ST__HAVE_IO_URING */
