/*
 * File I/O off the scheduler: st_set_file_io, st_get_file_io, st_pread,
 * st_pwrite, st_fsync, st_fdatasync, and the stream functions (st_read,
 * st_write, their vector and resid forms) on netfds of regular files.
 * Most tests run their body once per mode (DEFAULT, BLOCKING, WORKERS).
 */
#include "st_test.h"

#include <limits.h>
#include <pthread.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>

#ifdef __linux__
#include <linux/userfaultfd.h>
#endif

ST_TEST_SUITE(file_io);

static const int modes[] = {ST_FILE_IO_DEFAULT, ST_FILE_IO_BLOCKING, ST_FILE_IO_WORKERS};
#define NMODES ((int)(sizeof(modes) / sizeof(modes[0])))

/* A fresh empty file in the temporary directory, already unlinked, opened with `flags`. */
static st_netfd_t temp_file(int flags)
{
    char path[] = "/tmp/st_file_io_XXXXXX";
    int osfd = mkstemp(path);
    st_netfd_t fd;

    cr_assert_geq(osfd, 0, "mkstemp: %s", strerror(errno));
    if (flags != O_RDWR) {
        close(osfd);
        fd = st_open(path, flags, 0600);
    } else {
        fd = st_netfd_open(osfd);
    }
    cr_assert_eq(unlink(path), 0);
    cr_assert_not_null(fd, "netfd on a file: %s", strerror(errno));
    return fd;
}

static void set_mode(int mode)
{
    cr_assert_eq(st_set_file_io(mode), 0, "st_set_file_io(%d): %s", mode, strerror(errno));
    cr_assert_eq(st_get_file_io(), mode);
}

Test(file_io, mode_is_set_and_checked)
{
    st_test_init();
    cr_assert_eq(st_get_file_io(), ST_FILE_IO_DEFAULT);
    set_mode(ST_FILE_IO_WORKERS);
    set_mode(ST_FILE_IO_BLOCKING);
    errno = 0;
    cr_assert_eq(st_set_file_io(-1), -1);
    cr_assert_eq(errno, EINVAL);
    cr_assert_eq(st_set_file_io(4), -1);
    cr_assert_eq(errno, EINVAL);
    cr_assert_eq(st_get_file_io(), ST_FILE_IO_BLOCKING, "a refused mode changes nothing");
#ifdef ST_TEST_HAVE_IO_URING
    set_mode(ST_FILE_IO_URING);
#else
    cr_assert_eq(st_set_file_io(ST_FILE_IO_URING), -1);
    cr_assert_eq(errno, ENOTSUP);
#endif
    set_mode(ST_FILE_IO_DEFAULT);
}

Test(file_io, positioned_round_trip)
{
    st_test_init();
    for (int m = 0; m < NMODES; m++) {
        set_mode(modes[m]);
        st_netfd_t fd = temp_file(O_RDWR);
        char buf[16] = {0};

        cr_assert_eq(st_pwrite(fd, "hello", 5, 10, ST_UTIME_NO_TIMEOUT), 5);
        cr_assert_eq(st_pwrite(fd, "HE", 2, 10, 1000000), 2);
        cr_assert_eq(st_pread(fd, buf, sizeof(buf), 10, ST_UTIME_NO_TIMEOUT), 5,
                     "a short read at end of file");
        cr_assert_eq(memcmp(buf, "HEllo", 5), 0, "mode %d", modes[m]);
        cr_assert_eq(st_pread(fd, buf, 4, 0, 1000000), 4, "the hole reads as zeros");
        cr_assert_eq(memcmp(buf, "\0\0\0\0", 4), 0);
        cr_assert_eq(st_pread(fd, buf, 4, 100, ST_UTIME_NO_TIMEOUT), 0, "past the end");
        cr_assert_eq(st_pread(fd, buf, 3, 11, 0), 3, "a wait of 0 runs in place");
        cr_assert_eq(memcmp(buf, "Ell", 3), 0);
        cr_assert_eq(st_fsync(fd, ST_UTIME_NO_TIMEOUT), 0);
        cr_assert_eq(st_fdatasync(fd, 1000000), 0);
        cr_assert_eq(st_fsync(fd, 0), 0);
        /* Positioned calls leave the file position alone. */
        cr_assert_eq(lseek(st_netfd_fileno(fd), 0, SEEK_CUR), 0);
        cr_assert_eq(st_netfd_close(fd), 0);
    }
}

Test(file_io, stream_calls_share_the_file_position)
{
    st_test_init();
    for (int m = 0; m < NMODES; m++) {
        set_mode(modes[m]);
        st_netfd_t fd = temp_file(O_RDWR);
        char buf[32] = {0};
        struct iovec out[2] = {{(void *)"cd", 2}, {(void *)"ef", 2}};

        cr_assert_eq(st_write(fd, "ab", 2, ST_UTIME_NO_TIMEOUT), 2);
        cr_assert_eq(st_writev(fd, out, 2, ST_UTIME_NO_TIMEOUT), 4);
        size_t resid = 3;
        cr_assert_eq(st_write_resid(fd, "ghi", &resid, ST_UTIME_NO_TIMEOUT), 0);
        cr_assert_eq(resid, 0U);
        struct iovec more[2] = {{(void *)"jk", 2}, {(void *)"l", 1}};
        struct iovec *cursor = more;
        int count = 2;
        cr_assert_eq(st_writev_resid(fd, &cursor, &count, 1000000), 0);
        cr_assert_eq(count, 0);
        cr_assert_eq(lseek(st_netfd_fileno(fd), 0, SEEK_CUR), 12, "mode %d", modes[m]);

        cr_assert_eq(lseek(st_netfd_fileno(fd), 0, SEEK_SET), 0);
        cr_assert_eq(st_read(fd, buf, 3, ST_UTIME_NO_TIMEOUT), 3);
        cr_assert_eq(memcmp(buf, "abc", 3), 0);
        char v1[2];
        char v2[3];
        struct iovec in[2] = {{v1, sizeof(v1)}, {v2, sizeof(v2)}};
        cr_assert_eq(st_readv(fd, in, 2, ST_UTIME_NO_TIMEOUT), 5);
        cr_assert_eq(memcmp(v1, "de", 2), 0);
        cr_assert_eq(memcmp(v2, "fgh", 3), 0);
        cr_assert_eq(st_read_fully(fd, buf, 2, 1000000), 2);
        cr_assert_eq(memcmp(buf, "ij", 2), 0);
        resid = 10;
        cr_assert_eq(st_read_resid(fd, buf, &resid, ST_UTIME_NO_TIMEOUT), 0);
        cr_assert_eq(resid, 8U, "two bytes were left before end of file");
        cr_assert_eq(memcmp(buf, "kl", 2), 0);
        cr_assert_eq(st_read(fd, buf, sizeof(buf), ST_UTIME_NO_TIMEOUT), 0, "end of file");
        cr_assert_eq(st_read_fully(fd, buf, 4, ST_UTIME_NO_TIMEOUT), 0);
        char r1[3];
        char r2[3];
        struct iovec back[2] = {{r1, 3}, {r2, 3}};
        cursor = back;
        count = 2;
        cr_assert_eq(lseek(st_netfd_fileno(fd), 8, SEEK_SET), 8);
        cr_assert_eq(st_readv_resid(fd, &cursor, &count, ST_UTIME_NO_TIMEOUT), 0);
        cr_assert_eq(count, 1, "end of file in the second vector");
        cr_assert_eq(cursor->iov_len, 2U);
        cr_assert_eq(memcmp(r1, "ijk", 3), 0);
        cr_assert_eq(r2[0], 'l');
        cr_assert_eq(st_netfd_close(fd), 0);
    }
}

Test(file_io, large_transfers_are_whole)
{
    enum { SIZE = 3 * 1024 * 1024 + 17 };
    unsigned char *data = malloc(SIZE);
    unsigned char *back = malloc(SIZE);

    cr_assert(data != NULL && back != NULL);
    for (size_t i = 0; i < SIZE; i++) {
        data[i] = (unsigned char)(i * 13 + i / 4099);
    }
    st_test_init();
    for (int m = 0; m < NMODES; m++) {
        set_mode(modes[m]);
        st_netfd_t fd = temp_file(O_RDWR);
        memset(back, 0, SIZE);
        cr_assert_eq(st_write(fd, data, SIZE, ST_UTIME_NO_TIMEOUT), SIZE);
        cr_assert_eq(st_pread(fd, back, SIZE, 0, ST_UTIME_NO_TIMEOUT), SIZE);
        cr_assert_eq(memcmp(data, back, SIZE), 0, "mode %d", modes[m]);
        cr_assert_eq(st_netfd_close(fd), 0);
    }
    free(data);
    free(back);
}

Test(file_io, bad_netfds_and_arguments)
{
    st_test_init();
    for (int m = 0; m < NMODES; m++) {
        set_mode(modes[m]);
        char buf[4] = {0};
        struct iovec iov = {buf, sizeof(buf)};

        errno = 0;
        cr_assert_eq(st_pread(NULL, buf, 1, 0, 1000), -1);
        cr_assert_eq(errno, EBADF);
        errno = 0;
        cr_assert_eq(st_pwrite(NULL, buf, 1, 0, 1000), -1);
        cr_assert_eq(errno, EBADF);
        errno = 0;
        cr_assert_eq(st_fsync(NULL, 1000), -1);
        cr_assert_eq(errno, EBADF);
        errno = 0;
        cr_assert_eq(st_fdatasync(NULL, 1000), -1);
        cr_assert_eq(errno, EBADF);

        st_netfd_t fd = temp_file(O_RDWR);
        errno = 0;
        cr_assert_eq(st_pread(fd, buf, 1, -1, ST_UTIME_NO_TIMEOUT), -1);
        cr_assert_eq(errno, EINVAL);
        errno = 0;
        cr_assert_eq(st_pwrite(fd, buf, 1, -4096, ST_UTIME_NO_TIMEOUT), -1);
        cr_assert_eq(errno, EINVAL);
        errno = 0;
        cr_assert_eq(st_readv(fd, &iov, -1, ST_UTIME_NO_TIMEOUT), -1);
        cr_assert_eq(errno, EINVAL);
        /* More vectors than the kernel takes at once: st_writev goes on, st_readv is refused. */
        struct iovec *many = calloc(IOV_MAX + 1, sizeof(*many));
        cr_assert_not_null(many);
        for (int i = 0; i < IOV_MAX + 1; i++) {
            many[i] = (struct iovec){buf, 1};
        }
        cr_assert_eq(st_writev(fd, many, IOV_MAX + 1, ST_UTIME_NO_TIMEOUT), IOV_MAX + 1);
        errno = 0;
        cr_assert_eq(st_readv(fd, many, IOV_MAX + 1, ST_UTIME_NO_TIMEOUT), -1);
        cr_assert_eq(errno, EINVAL);
        free(many);
        cr_assert_eq(st_netfd_close(fd), 0);

        /* Written through a read-only descriptor: the kernel's EBADF comes back. */
        fd = temp_file(O_RDONLY);
        errno = 0;
        cr_assert_eq(st_write(fd, "x", 1, ST_UTIME_NO_TIMEOUT), -1);
        cr_assert_eq(errno, EBADF, "mode %d: %s", modes[m], strerror(errno));
        errno = 0;
        cr_assert_eq(st_pwrite(fd, "x", 1, 0, ST_UTIME_NO_TIMEOUT), -1);
        cr_assert_eq(errno, EBADF);
        cr_assert_eq(st_read(fd, buf, 1, ST_UTIME_NO_TIMEOUT), 0);

        /* A freed netfd. */
        st_netfd_free(fd);
        errno = 0;
        cr_assert_eq(st_read(fd, buf, 1, ST_UTIME_NO_TIMEOUT), -1);
        cr_assert_eq(errno, EBADF);
        errno = 0;
        cr_assert_eq(st_pread(fd, buf, 1, 0, ST_UTIME_NO_TIMEOUT), -1);
        cr_assert_eq(errno, EBADF);
    }
}

Test(file_io, pipes_and_sockets_keep_the_socket_path)
{
    st_test_init();
    for (int m = 0; m < NMODES; m++) {
        set_mode(modes[m]);
        st_netfd_t r;
        st_netfd_t w;
        st_netfd_t a;
        st_netfd_t b;
        char buf[8];

        st_test_pipe(&r, &w);
        long long start = st_test_deadline_base();
        errno = 0;
        cr_assert_eq(st_read(r, buf, sizeof(buf), 20000), -1, "an empty pipe waits");
        cr_assert_eq(errno, ETIME);
        cr_assert_geq(st_test_now_us() - start, 20000);
        errno = 0;
        cr_assert_eq(st_pread(r, buf, 1, 0, 1000), -1);
        cr_assert_eq(errno, ESPIPE);
        errno = 0;
        cr_assert_eq(st_pwrite(w, "x", 1, 0, 1000), -1);
        cr_assert_eq(errno, ESPIPE);
        cr_assert_eq(st_write(w, "ok", 2, 1000), 2);
        cr_assert_eq(st_read(r, buf, sizeof(buf), 1000), 2);

        st_test_socketpair(&a, &b);
        errno = 0;
        cr_assert_eq(st_fsync(a, 1000), -1);
        cr_assert_eq(errno, EINVAL);
        errno = 0;
        cr_assert_eq(st_fdatasync(a, 1000), -1);
        cr_assert_eq(errno, EINVAL);
        errno = 0;
        cr_assert_eq(st_read(a, buf, 1, 10000), -1, "an empty socket waits");
        cr_assert_eq(errno, ETIME);
        st_netfd_close(a);
        st_netfd_close(b);
        st_netfd_close(r);
        st_netfd_close(w);
    }
}

static int ticks;

static void *ticker(void *arg)
{
    (void)arg;
    ticks++;
    return NULL;
}

/*
 * Off the scheduler, the caller always switches away (its result comes
 * back through the event system), so a coroutine made runnable before the
 * call has run by the time it returns; in place, it has not.
 */
Test(file_io, the_scheduler_runs_others_while_a_worker_is_busy)
{
    st_test_init();
    for (int m = 0; m < NMODES; m++) {
        set_mode(modes[m]);
        st_netfd_t fd = temp_file(O_RDWR);
        bool off = modes[m] != ST_FILE_IO_BLOCKING;
        char buf[4];

        ticks = 0;
        st_thread_t t = st_thread_create(ticker, NULL, 1, 0);
        cr_assert_not_null(t);
        cr_assert_eq(st_pwrite(fd, "abcd", 4, 0, ST_UTIME_NO_TIMEOUT), 4);
        cr_assert_eq(ticks, off ? 1 : 0, "mode %d", modes[m]);
        cr_assert_eq(st_thread_join(t, NULL), 0);

        ticks = 0;
        t = st_thread_create(ticker, NULL, 1, 0);
        cr_assert_eq(st_read(fd, buf, 4, 1000000), 4);
        cr_assert_eq(ticks, off ? 1 : 0);
        cr_assert_eq(st_thread_join(t, NULL), 0);

        ticks = 0;
        t = st_thread_create(ticker, NULL, 1, 0);
        cr_assert_eq(st_fsync(fd, ST_UTIME_NO_TIMEOUT), 0);
        cr_assert_eq(ticks, off ? 1 : 0);
        cr_assert_eq(st_thread_join(t, NULL), 0);

        ticks = 0;
        t = st_thread_create(ticker, NULL, 1, 0);
        cr_assert_eq(st_pread(fd, buf, 4, 0, 0), 4, "a wait of 0 runs in place");
        cr_assert_eq(ticks, 0);
        cr_assert_eq(st_thread_join(t, NULL), 0);
        cr_assert_eq(st_netfd_close(fd), 0);
    }
}

Test(file_io, a_pending_interrupt_fails_the_call_before_anything_is_done)
{
    st_test_init();
    set_mode(ST_FILE_IO_WORKERS);
    st_netfd_t fd = temp_file(O_RDWR);
    st_thread_interrupt(st_thread_self());
    errno = 0;
    cr_assert_eq(st_pwrite(fd, "abcd", 4, 0, ST_UTIME_NO_TIMEOUT), -1);
    cr_assert_eq(errno, EINTR);
    struct stat sb;
    cr_assert_eq(fstat(st_netfd_fileno(fd), &sb), 0);
    cr_assert_eq(sb.st_size, 0, "nothing was written");
    cr_assert_eq(st_pwrite(fd, "abcd", 4, 0, ST_UTIME_NO_TIMEOUT), 4, "the interrupt is consumed");
    cr_assert_eq(st_netfd_close(fd), 0);
}

/* ---- workers held fast: a read into memory whose page faults are ours to serve ---- */

#ifdef __linux__
#define PAGE 4096
#define STUCK ST_TEST_FILE_WORKERS

/* The pool's size (reference: four worker pthreads). */
#define ST_TEST_FILE_WORKERS 4

struct fault_trap {
    int uffd;
    char *area;
    size_t len;
};

/* Memory whose first touch blocks the toucher until fault_trap_release(); skips if refused. */
static void fault_trap_make(struct fault_trap *trap, size_t pages)
{
    trap->len = pages * PAGE;
    trap->uffd = (int)syscall(SYS_userfaultfd, O_CLOEXEC);
    if (trap->uffd < 0) {
        int err = errno;
        st_test_allow_exit();
        cr_skip_test("userfaultfd refused (%s): no way to hold a worker fast", strerror(err));
    }
    struct uffdio_api api = {.api = UFFD_API};
    cr_assert_eq(ioctl(trap->uffd, UFFDIO_API, &api), 0, "UFFDIO_API: %s", strerror(errno));
    trap->area = mmap(NULL, trap->len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    cr_assert_neq(trap->area, MAP_FAILED);
    struct uffdio_register reg = {
        .range = {.start = (unsigned long)trap->area, .len = trap->len},
        .mode = UFFDIO_REGISTER_MODE_MISSING,
    };
    if (ioctl(trap->uffd, UFFDIO_REGISTER, &reg) != 0) {
        int err = errno;
        st_test_allow_exit();
        cr_skip_test("userfaultfd registration refused (%s)", strerror(err));
    }
}

/* Block the pthread until `n` faults are reported: that many workers are held. */
static void fault_trap_wait(struct fault_trap *trap, int n)
{
    for (int seen = 0; seen < n;) {
        struct uffd_msg msg;
        ssize_t got = read(trap->uffd, &msg, sizeof(msg));
        if (got < 0 && errno == EINTR) {
            continue;
        }
        cr_assert_eq(got, (ssize_t)sizeof(msg), "userfaultfd read: %s", strerror(errno));
        cr_assert_eq(msg.event, UFFD_EVENT_PAGEFAULT);
        seen++;
    }
}

static void fault_trap_release(struct fault_trap *trap)
{
    struct uffdio_zeropage zero = {.range = {.start = (unsigned long)trap->area, .len = trap->len}};
    cr_assert_eq(ioctl(trap->uffd, UFFDIO_ZEROPAGE, &zero), 0, "UFFDIO_ZEROPAGE: %s",
                 strerror(errno));
}

static void fault_trap_free(struct fault_trap *trap)
{
    munmap(trap->area, trap->len);
    close(trap->uffd);
}

struct held_read {
    st_netfd_t fd;
    char *buf;
    st_utime_t timeout;
    ssize_t result;
    int err;
    int next_call_err; /* errno of a st_usleep right after, or 0 */
    int finished;
};

static void *held_reader(void *arg)
{
    struct held_read *h = arg;

    errno = 0;
    h->result = st_pread(h->fd, h->buf, PAGE, 0, h->timeout);
    h->err = errno;
    h->next_call_err = st_usleep(0) == 0 ? 0 : errno;
    h->finished = 1;
    return NULL;
}

Test(file_io, queued_calls_time_out_or_are_interrupted_running_ones_complete)
{
    st_test_init();
    set_mode(ST_FILE_IO_WORKERS);
    st_netfd_t fd = temp_file(O_RDWR);
    char *page = malloc(PAGE);
    cr_assert_not_null(page);
    memset(page, 'z', PAGE);
    cr_assert_eq(st_pwrite(fd, page, PAGE, 0, ST_UTIME_NO_TIMEOUT), PAGE);

    struct fault_trap trap;
    fault_trap_make(&trap, STUCK);
    struct held_read held[STUCK];
    st_thread_t threads[STUCK];
    for (int i = 0; i < STUCK; i++) {
        held[i] = (struct held_read){.fd = fd, .buf = trap.area + (size_t)i * PAGE,
                                     .timeout = i == 1 ? 10000 : ST_UTIME_NO_TIMEOUT};
        threads[i] = st_thread_create(held_reader, &held[i], 1, 0);
        cr_assert_not_null(threads[i]);
    }
    st_thread_yield(); /* each hands its read to the pool */
    fault_trap_wait(&trap, STUCK);
    st_thread_yield(); /* a fresh scheduler clock: the pthread was blocked above */

    /* Every worker is held: these wait in the queue. */
    char spare[8] = "unset";
    long long start = st_test_deadline_base();
    errno = 0;
    cr_assert_eq(st_pread(fd, spare, sizeof(spare), 0, 20000), -1);
    cr_assert_eq(errno, ETIME);
    cr_assert_geq(st_test_now_us() - start, 20000);
    cr_assert_eq(memcmp(spare, "unset", 6), 0, "a call that timed out in the queue did nothing");

    char other[PAGE];
    struct held_read queued = {.fd = fd, .buf = other, .timeout = ST_UTIME_NO_TIMEOUT};
    st_thread_t q = st_thread_create(held_reader, &queued, 1, 0);
    st_usleep(1000);
    cr_assert_eq(queued.finished, 0);
    st_thread_interrupt(q);
    cr_assert_eq(st_thread_join(q, NULL), 0);
    cr_assert_eq(queued.result, -1);
    cr_assert_eq(queued.err, EINTR);
    cr_assert_eq(queued.next_call_err, 0, "the interrupt was consumed");

    /* Running calls cannot be abandoned: an interrupt waits, the deadline passes. */
    st_thread_interrupt(threads[0]);
    st_usleep(30000);
    for (int i = 0; i < STUCK; i++) {
        cr_assert_eq(held[i].finished, 0, "call %d returned while its worker held its buffer", i);
    }
    errno = 0;
    cr_assert_eq(st_netfd_close(fd), -1);
    cr_assert_eq(errno, EBUSY, "I/O is in flight");

    fault_trap_release(&trap);
    for (int i = 0; i < STUCK; i++) {
        cr_assert_eq(st_thread_join(threads[i], NULL), 0);
        cr_assert_eq(held[i].result, PAGE, "call %d: %s", i, strerror(held[i].err));
        cr_assert_eq(memcmp(held[i].buf, page, PAGE), 0, "call %d's data", i);
        cr_assert_eq(held[i].next_call_err, i == 0 ? EINTR : 0,
                     "an interrupt that came meanwhile is kept for the next call");
    }
    cr_assert_eq(st_netfd_close(fd), 0);
    fault_trap_free(&trap);
    free(page);
}

/* A netfd freed under a call a worker runs: the call still returns its result, later ones EBADF. */
Test(file_io, a_netfd_freed_under_a_running_call)
{
    st_test_init();
    set_mode(ST_FILE_IO_WORKERS);
    st_netfd_t fd = temp_file(O_RDWR);
    char page[PAGE];
    memset(page, 'y', sizeof(page));
    cr_assert_eq(st_pwrite(fd, page, PAGE, 0, ST_UTIME_NO_TIMEOUT), PAGE);
    int osfd = st_netfd_fileno(fd);

    struct fault_trap trap;
    fault_trap_make(&trap, 1);
    struct held_read held = {.fd = fd, .buf = trap.area, .timeout = ST_UTIME_NO_TIMEOUT};
    st_thread_t t = st_thread_create(held_reader, &held, 1, 0);
    cr_assert_not_null(t);
    st_thread_yield();
    fault_trap_wait(&trap, 1);
    st_netfd_free(fd);
    errno = 0;
    cr_assert_eq(st_pread(fd, page, 1, 0, ST_UTIME_NO_TIMEOUT), -1);
    cr_assert_eq(errno, EBADF);
    fault_trap_release(&trap);
    cr_assert_eq(st_thread_join(t, NULL), 0);
    cr_assert_eq(held.result, PAGE, "the data read is not lost: %s", strerror(held.err));
    cr_assert_eq(memcmp(trap.area, page, PAGE), 0);
    close(osfd);
    fault_trap_free(&trap);
}

/* st_destroy waits for the calls workers run, and forgets those still queued. */
static void *stuck_forever(void *arg)
{
    struct held_read *h = arg;

    h->result = st_pread(h->fd, h->buf, PAGE, 0, ST_UTIME_NO_TIMEOUT);
    h->finished = 1; /* never: st_destroy takes the coroutine away */
    return NULL;
}

struct releaser {
    struct fault_trap *trap;
    int uffd_err;
};

static void *release_later(void *arg)
{
    struct releaser *r = arg;
    struct timespec ts = {0, 100 * 1000 * 1000};

    nanosleep(&ts, NULL);
    struct uffdio_zeropage zero = {
        .range = {.start = (unsigned long)r->trap->area, .len = r->trap->len}};
    r->uffd_err = ioctl(r->trap->uffd, UFFDIO_ZEROPAGE, &zero) == 0 ? 0 : errno;
    return NULL;
}

Test(file_io, st_destroy_waits_for_running_calls_and_drops_queued_ones)
{
    st_test_init();
    set_mode(ST_FILE_IO_WORKERS);
    st_netfd_t fd = temp_file(O_RDWR);
    cr_assert_eq(st_pwrite(fd, "data", 4, 0, ST_UTIME_NO_TIMEOUT), 4);
    struct fault_trap trap;
    fault_trap_make(&trap, STUCK);
    static struct held_read held[STUCK + 2];
    static char plain[2][PAGE];
    for (int i = 0; i < STUCK + 2; i++) {
        held[i] = (struct held_read){.fd = fd,
                                     .buf = i < STUCK ? trap.area + (size_t)i * PAGE : plain[i - STUCK]};
        cr_assert_not_null(st_thread_create(stuck_forever, &held[i], 0, 0));
    }
    st_thread_yield();
    fault_trap_wait(&trap, STUCK);
    struct releaser r = {.trap = &trap};
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, release_later, &r), 0);
    long long start = st_test_now_us();
    st_destroy();
    cr_assert_geq(st_test_now_us() - start, 50000, "st_destroy waited for the held workers");
    cr_assert_eq(pthread_join(th, NULL), 0);
    cr_assert_eq(r.uffd_err, 0);
    for (int i = 0; i < STUCK + 2; i++) {
        cr_assert_eq(held[i].finished, 0);
    }
    cr_assert_eq(plain[0][0], 0, "a queued call was dropped, not run");
    cr_assert_eq(plain[1][0], 0);

    /* A new scheduler gets a new pool. */
    st_test_init();
    char buf[4];
    cr_assert_eq(st_pread(fd, buf, 4, 0, ST_UTIME_NO_TIMEOUT), 4);
    cr_assert_eq(memcmp(buf, "data", 4), 0);
    cr_assert_eq(st_netfd_close(fd), 0);
    fault_trap_free(&trap);
}
#endif /* __linux__ */

Test(file_io, st_destroy_with_the_pool_alive_and_again)
{
    for (int round = 0; round < 3; round++) {
        st_test_init();
        set_mode(ST_FILE_IO_WORKERS);
        st_netfd_t fd = temp_file(O_RDWR);
        char buf[3];
        cr_assert_eq(st_pwrite(fd, "abc", 3, 0, ST_UTIME_NO_TIMEOUT), 3);
        cr_assert_eq(st_pread(fd, buf, 3, 0, ST_UTIME_NO_TIMEOUT), 3);
        cr_assert_eq(memcmp(buf, "abc", 3), 0);
        cr_assert_eq(st_netfd_close(fd), 0);
        st_destroy();
    }
}

Test(file_io, a_fork_child_gets_a_pool_of_its_own)
{
    st_test_skip_under_emulator("qemu-user aborts (a TCG assertion) when the fork child of a "
                                "process with threads starts a thread of its own");
    st_test_init();
    set_mode(ST_FILE_IO_WORKERS);
    st_netfd_t fd = temp_file(O_RDWR);
    cr_assert_eq(st_pwrite(fd, "parent", 6, 0, ST_UTIME_NO_TIMEOUT), 6);

    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        /* The child brings its own scheduler up, as it must with any event system. */
        char buf[6];
        st_destroy();
        int ok = st_get_file_io() == ST_FILE_IO_WORKERS && st_test_try_init() == 0;
        st_netfd_t cfd = ok ? st_netfd_open(dup(st_netfd_fileno(fd))) : NULL;
        ok = cfd != NULL && st_pread(cfd, buf, 6, 0, ST_UTIME_NO_TIMEOUT) == 6 &&
             memcmp(buf, "parent", 6) == 0 &&
             st_pwrite(cfd, "child!", 6, 6, ST_UTIME_NO_TIMEOUT) == 6;
        _exit(ok ? 0 : 1);
    }
    int status = 0;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child's file I/O failed");
    char buf[12];
    cr_assert_eq(st_pread(fd, buf, 12, 0, ST_UTIME_NO_TIMEOUT), 12, "the parent's pool still works");
    cr_assert_eq(memcmp(buf, "parentchild!", 12), 0);
    cr_assert_eq(st_netfd_close(fd), 0);
}

/* ---- several pthreads, each with a scheduler, doing file I/O at once ---- */

#define PTHREADS 3
#define ROUNDS 40

struct world {
    int index;
    int errors;
};

static void *world_main(void *arg)
{
    struct world *w = arg;
    int es = st_test_eventsys();

    if ((es >= 0 && st_set_eventsys(es) != 0) || st_init() != 0) {
        w->errors++;
        return NULL;
    }
    char path[] = "/tmp/st_file_io_mt_XXXXXX";
    int osfd = mkstemp(path);
    st_netfd_t fd = osfd >= 0 ? st_netfd_open(osfd) : NULL;
    if (fd == NULL) {
        w->errors++;
        return NULL;
    }
    (void)unlink(path);
    for (int i = 0; i < ROUNDS; i++) {
        char out[16];
        char in[16] = {0};
        int n = snprintf(out, sizeof(out), "w%d r%d", w->index, i);
        if (st_pwrite(fd, out, (size_t)n, (off_t)i * 16, ST_UTIME_NO_TIMEOUT) != n ||
            st_pread(fd, in, (size_t)n, (off_t)i * 16, 1000000) != n || memcmp(in, out, (size_t)n) != 0) {
            w->errors++;
        }
    }
    if (st_fdatasync(fd, ST_UTIME_NO_TIMEOUT) != 0 || st_netfd_close(fd) != 0) {
        w->errors++;
    }
    st_destroy();
    return NULL;
}

Test(file_io, pthreads_with_schedulers_do_file_io_at_once)
{
    pthread_t th[PTHREADS];
    struct world worlds[PTHREADS];

    cr_assert_eq(st_set_file_io(ST_FILE_IO_WORKERS), 0);
    for (int i = 0; i < PTHREADS; i++) {
        worlds[i] = (struct world){.index = i};
        cr_assert_eq(pthread_create(&th[i], NULL, world_main, &worlds[i]), 0);
    }
    for (int i = 0; i < PTHREADS; i++) {
        cr_assert_eq(pthread_join(th[i], NULL), 0);
        cr_assert_eq(worlds[i].errors, 0, "pthread %d", i);
    }
}
