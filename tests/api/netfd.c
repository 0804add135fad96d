/*
 * The netfd handle: st_netfd_open, st_netfd_open_socket, st_netfd_fileno,
 * st_netfd_free, st_netfd_close, st_netfd_setspecific/getspecific,
 * st_netfd_serialize_accept, st_open, st_getfdlimit.
 */
#include "st_test.h"

#include <limits.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/stat.h>

ST_TEST_SUITE(netfd);

Test(netfd, open_makes_fd_nonblocking)
{
    int p[2];
    st_netfd_t r;
    st_netfd_t w;

    st_test_init();
    cr_assert_eq(pipe(p), 0);
    cr_assert(!st_test_is_nonblocking(p[0]));
    r = st_netfd_open(p[0]);
    w = st_netfd_open(p[1]);
    cr_assert_not_null(r);
    cr_assert_not_null(w);
    cr_assert(st_test_is_nonblocking(p[0]));
    cr_assert(st_test_is_nonblocking(p[1]));
    cr_assert_eq(st_netfd_fileno(r), p[0]);
    cr_assert_eq(st_netfd_fileno(w), p[1]);
    cr_assert_neq(r, w);
    cr_assert_eq(st_netfd_close(r), 0);
    cr_assert_eq(st_netfd_close(w), 0);
}

Test(netfd, open_socket_makes_fd_nonblocking)
{
    int sv[2];
    st_netfd_t a;

    st_test_init();
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    cr_assert(!st_test_is_nonblocking(sv[0]));
    a = st_netfd_open_socket(sv[0]);
    cr_assert_not_null(a);
    cr_assert(st_test_is_nonblocking(sv[0]));
    cr_assert_eq(st_netfd_fileno(a), sv[0]);
    cr_assert(!st_test_is_nonblocking(sv[1]), "the other end was changed too");
    cr_assert_eq(st_netfd_close(a), 0);
    close(sv[1]);
}

Test(netfd, bad_fds_are_ebadf)
{
    int p[2];

    st_test_init();
    ST_ASSERT_FAILS_NULL(st_netfd_open(-1), EBADF);
    ST_ASSERT_FAILS_NULL(st_netfd_open_socket(-1), EBADF);
    ST_ASSERT_FAILS_NULL(st_netfd_open(-12345), EBADF);
    cr_assert_eq(pipe(p), 0);
    close(p[0]);
    close(p[1]);
    ST_ASSERT_FAILS_NULL(st_netfd_open(p[0]), EBADF);
    ST_ASSERT_FAILS_NULL(st_netfd_open_socket(p[1]), EBADF);
}

Test(netfd, free_keeps_os_fd_open)
{
    int raw;
    st_netfd_t nfd;
    int osfd;
    char c = 0;

    st_test_init();
    nfd = st_test_socketpair_raw(&raw);
    osfd = st_netfd_fileno(nfd);
    st_netfd_free(nfd);
    cr_assert(st_test_fd_is_open(osfd));
    /* The fd still works and can be wrapped again. */
    cr_assert_eq(write(raw, "q", 1), 1);
    nfd = st_netfd_open_socket(osfd);
    cr_assert_not_null(nfd);
    cr_assert_eq(st_read(nfd, &c, 1, 1000000), 1);
    cr_assert_eq(c, 'q');
    cr_assert_eq(st_netfd_close(nfd), 0);
    close(raw);
}

Test(netfd, close_closes_os_fd)
{
    int raw;
    st_netfd_t nfd;
    int osfd;
    char c;

    st_test_init();
    nfd = st_test_socketpair_raw(&raw);
    osfd = st_netfd_fileno(nfd);
    cr_assert_eq(st_netfd_close(nfd), 0);
    cr_assert(!st_test_fd_is_open(osfd));
    /* The peer sees the close. */
    cr_assert_eq(read(raw, &c, 1), 0);
    close(raw);
}

Test(netfd, handles_are_recycled_safely)
{
    int i;

    st_test_init();
    for (i = 0; i < 200; i++) {
        st_netfd_t a;
        st_netfd_t b;
        char buf[8];

        st_test_socketpair(&a, &b);
        cr_assert_eq(st_write(a, "ping", 4, 1000000), 4);
        cr_assert_eq(st_read(b, buf, sizeof(buf), 1000000), 4);
        if (i % 2) {
            int fa = st_netfd_fileno(a);
            int fb = st_netfd_fileno(b);

            st_netfd_free(a);
            st_netfd_free(b);
            close(fa);
            close(fb);
        } else {
            cr_assert_eq(st_netfd_close(a), 0);
            cr_assert_eq(st_netfd_close(b), 0);
        }
    }
}

Test(netfd, close_while_waited_on_is_ebusy)
{
    struct st_test_blocked br = {.call = st_test_read_forever};
    st_thread_t t;
    int raw;
    int osfd;

    st_test_init();
    br.nfd = st_test_socketpair_raw(&raw);
    osfd = st_netfd_fileno(br.nfd);
    t = st_test_block_and_sleep(&br, 1000);
    ST_ASSERT_FAILS(st_netfd_close(br.nfd), EBUSY);
    cr_assert(st_test_fd_is_open(osfd));
    /* The waiter is unharmed and gets its data. */
    cr_assert_eq(write(raw, "hi", 2), 2);
    st_test_join(t);
    cr_assert_eq(br.rc, 2);
    cr_assert_eq(memcmp(br.buf, "hi", 2), 0);
    cr_assert_eq(st_netfd_close(br.nfd), 0);
    cr_assert(!st_test_fd_is_open(osfd));
    close(raw);
}

Test(netfd, close_after_interrupted_wait)
{
    struct st_test_blocked br = {.call = st_test_read_forever};

    st_test_init();
    /* Closes the netfd after: the interrupted waiter is no longer registered. */
    st_test_interrupt_call_on_socketpair(&br, 1000);
}

/*
 * Descriptor numbers are reused: a new file that gets the number of one a
 * netfd had must be watched for its own events, whatever was waiting on or
 * kept for the number before.
 */

/* Put a new socket under the number `osfd` (closed already); returns its peer. */
static int reuse_number(int osfd)
{
    int sv[2];

    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0, "socketpair: %s", strerror(errno));
    if (sv[0] != osfd) { /* the lowest free number is usually osfd itself */
        cr_assert_eq(dup2(sv[0], osfd), osfd, "dup2: %s", strerror(errno));
        close(sv[0]);
    }
    return sv[1];
}

static long long read_within_2s(struct st_test_blocked *b)
{
    return st_read(b->nfd, b->buf, sizeof(b->buf) - 1, 2000000);
}

/* A reader on `nfd` gets what is written to `peer` (not deaf to the new file). */
static void expect_reader_hears(st_netfd_t nfd, int peer)
{
    struct st_test_blocked br = {.call = read_within_2s, .nfd = nfd};
    st_thread_t t = st_test_block_and_sleep(&br, 1000);

    cr_assert_eq(write(peer, "hi", 2), 2);
    st_test_join(t);
    cr_assert_eq(br.rc, 2, "the reader of the reused number got %lld (%s)", br.rc,
                 strerror(br.err));
    cr_assert_eq(memcmp(br.buf, "hi", 2), 0);
}

/*
 * Leaves old reading on a raw pair, frees the netfd under it and puts a new
 * socket (its peer in *peer) under the number: returns the new netfd.
 */
static st_netfd_t reuse_under_a_waiter(struct st_test_blocked *old, st_thread_t *t, int *raw,
                                       int *peer)
{
    st_netfd_t fresh;
    int osfd;

    old->call = st_test_read_forever;
    old->nfd = st_test_socketpair_raw(raw);
    osfd = st_netfd_fileno(old->nfd);
    *t = st_test_block_and_sleep(old, 1000);
    /* Freeing a netfd that a coroutine waits on is allowed; its number is then reused. */
    st_netfd_free(old->nfd);
    close(osfd);
    *peer = reuse_number(osfd);
    fresh = st_netfd_open_socket(osfd);
    cr_assert_not_null(fresh, "st_netfd_open_socket(%d): %s", osfd, strerror(errno));
    return fresh;
}

Test(netfd, number_reused_while_a_freed_netfd_is_waited_on)
{
    struct st_test_blocked old = {0};
    st_thread_t t;
    st_netfd_t fresh;
    int raw;
    int peer;

    st_test_init();
    fresh = reuse_under_a_waiter(&old, &t, &raw, &peer);
    expect_reader_hears(fresh, peer);
    st_thread_interrupt(t);
    st_test_join(t);
    cr_assert_eq(old.rc, -1, "the old waiter read %lld bytes", old.rc);
    /* And after the old waiter has left. */
    expect_reader_hears(fresh, peer);
    cr_assert_eq(st_netfd_close(fresh), 0);
    close(peer);
    close(raw);
}

Test(netfd, number_reused_after_the_waiter_of_a_freed_netfd_left)
{
    struct st_test_blocked old = {0};
    st_thread_t t;
    st_netfd_t fresh;
    int raw;
    int peer;

    st_test_init();
    fresh = reuse_under_a_waiter(&old, &t, &raw, &peer);
    st_thread_interrupt(t);
    st_test_join(t);
    expect_reader_hears(fresh, peer);
    cr_assert_eq(st_netfd_close(fresh), 0);
    close(peer);
    close(raw);
}

Test(netfd, number_reused_after_a_close_behind_a_live_netfd)
{
    st_netfd_t old;
    st_netfd_t fresh;
    int raw;
    int peer;
    int osfd;

    st_test_init();
    old = st_test_socketpair_raw(&raw);
    osfd = st_netfd_fileno(old);
    /* The old netfd has waited once (a backend may keep its registration). */
    expect_reader_hears(old, raw);
    close(osfd); /* behind the netfd's back */
    peer = reuse_number(osfd);
    fresh = st_netfd_open_socket(osfd);
    cr_assert_not_null(fresh, "st_netfd_open_socket(%d): %s", osfd, strerror(errno));
    expect_reader_hears(fresh, peer);
    /* The stale handle lets go without closing the number, which is fresh's now. */
    st_netfd_free(old);
    expect_reader_hears(fresh, peer);
    cr_assert_eq(st_netfd_close(fresh), 0);
    close(peer);
    close(raw);
}

static void *destroyed_value;
static int ndestroyed;

static void record_destroy(void *value)
{
    destroyed_value = value;
    ndestroyed++;
}

Test(netfd, specific_data_and_destructor_on_close)
{
    st_netfd_t a;
    st_netfd_t b;
    int v1;
    int v2;

    st_test_init();
    st_test_socketpair(&a, &b);
    cr_assert_null(st_netfd_getspecific(a));
    st_netfd_setspecific(a, &v1, record_destroy);
    cr_assert_eq(st_netfd_getspecific(a), &v1);
    cr_assert_null(st_netfd_getspecific(b));
    /* Replacing the value destroys the old one. */
    st_netfd_setspecific(a, &v2, record_destroy);
    cr_assert_eq(ndestroyed, 1);
    cr_assert_eq(destroyed_value, &v1);
    cr_assert_eq(st_netfd_getspecific(a), &v2);
    /* The same value again destroys nothing. */
    st_netfd_setspecific(a, &v2, record_destroy);
    cr_assert_eq(ndestroyed, 1);
    cr_assert_eq(st_netfd_close(a), 0);
    cr_assert_eq(ndestroyed, 2);
    cr_assert_eq(destroyed_value, &v2);
    cr_assert_eq(st_netfd_close(b), 0);
    cr_assert_eq(ndestroyed, 2);
}

Test(netfd, destructor_on_free_and_not_for_null)
{
    st_netfd_t a;
    st_netfd_t b;
    int v;
    int fa;
    int fb;

    st_test_init();
    st_test_socketpair(&a, &b);
    fa = st_netfd_fileno(a);
    fb = st_netfd_fileno(b);
    st_netfd_setspecific(a, &v, record_destroy);
    st_netfd_free(a);
    cr_assert_eq(ndestroyed, 1);
    cr_assert_eq(destroyed_value, &v);
    st_netfd_setspecific(b, NULL, record_destroy);
    st_netfd_free(b);
    cr_assert_eq(ndestroyed, 1, "destructor called for a NULL value");
    close(fa);
    close(fb);

    /* A recycled handle starts without data. */
    st_test_socketpair(&a, &b);
    cr_assert_null(st_netfd_getspecific(a));
    cr_assert_null(st_netfd_getspecific(b));
    /* Without a destructor the value is just dropped. */
    st_netfd_setspecific(a, &v, NULL);
    cr_assert_eq(st_netfd_close(a), 0);
    cr_assert_eq(st_netfd_close(b), 0);
    cr_assert_eq(ndestroyed, 1);
}

Test(netfd, serialize_accept_is_a_no_op)
{
    unsigned short port;
    st_netfd_t lfd;

    st_test_init();
    lfd = st_test_listener(&port, 8);
    cr_assert_eq(st_netfd_serialize_accept(lfd), 0);
    cr_assert_eq(st_netfd_serialize_accept(lfd), 0);
    cr_assert_eq(st_netfd_close(lfd), 0);
}

static char tmp_path[128];

static void make_tmp_file(const char *content)
{
    int fd;

    snprintf(tmp_path, sizeof(tmp_path), "/tmp/st_api_netfd_XXXXXX");
    fd = mkstemp(tmp_path);
    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, content, strlen(content)), (ssize_t)strlen(content));
    close(fd);
}

Test(netfd, st_open_reads_a_file)
{
    st_netfd_t f;
    char buf[64] = {0};

    st_test_init();
    make_tmp_file("hello file");
    f = st_open(tmp_path, O_RDONLY, 0);
    cr_assert_not_null(f, "st_open: %s", strerror(errno));
    cr_assert(st_test_is_nonblocking(st_netfd_fileno(f)));
    cr_assert_eq(st_read(f, buf, sizeof(buf) - 1, 1000000), 10);
    cr_assert_str_eq(buf, "hello file");
    cr_assert_eq(st_read(f, buf, sizeof(buf), 1000000), 0);
    cr_assert_eq(st_netfd_close(f), 0);
    unlink(tmp_path);
}

Test(netfd, st_open_creates_with_mode)
{
    st_netfd_t f;
    struct stat sb;
    char path[128];
    int fd;
    char buf[16] = {0};

    st_test_init();
    snprintf(path, sizeof(path), "/tmp/st_api_create_%ld", (long)getpid());
    unlink(path);
    f = st_open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
    cr_assert_not_null(f, "st_open: %s", strerror(errno));
    cr_assert_eq(st_write(f, "written", 7, 1000000), 7);
    cr_assert_eq(st_netfd_close(f), 0);
    cr_assert_eq(stat(path, &sb), 0);
    {
        mode_t mask = umask(0);

        umask(mask);
        cr_assert_eq(sb.st_mode & 0777, 0600 & ~mask);
    }
    fd = open(path, O_RDONLY);
    cr_assert_geq(fd, 0);
    cr_assert_eq(read(fd, buf, sizeof(buf)), 7);
    close(fd);
    cr_assert_str_eq(buf, "written");
    /* O_EXCL on an existing file fails with the open(2) error. */
    ST_ASSERT_FAILS_NULL(st_open(path, O_WRONLY | O_CREAT | O_EXCL, 0600), EEXIST);
    unlink(path);
}

Test(netfd, st_open_missing_file_is_enoent)
{
    st_test_init();
    ST_ASSERT_FAILS_NULL(st_open("/nonexistent/st_api/no_such_file", O_RDONLY, 0), ENOENT);
}

Test(netfd, st_open_null_path_is_einval)
{
    st_test_init();
    errno = 0;
    cr_assert_null(st_open(NULL, O_RDONLY, 0));
    cr_assert(errno == EINVAL || errno == EFAULT, "errno %d (%s)", errno, strerror(errno));
}

Test(netfd, fdlimit_is_positive)
{
    st_test_init();
    cr_assert_gt(st_getfdlimit(), 0);
    if (st_test_is_select()) {
        cr_assert_leq(st_getfdlimit(), FD_SETSIZE);
    }
}

/*
 * An fd numbered at or above FD_SETSIZE cannot be watched by select(2); the
 * other backends handle it like any other.
 */
Test(netfd, fd_above_fd_setsize)
{
    struct rlimit rl;
    int sv[2];
    int high = FD_SETSIZE + 16;
    st_netfd_t nfd;
    char buf[8];

    /* Opened before st_init(): with select, st_init() lowers the limit below it. */
    cr_assert_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
    if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur <= (rlim_t)high) {
        if (rl.rlim_max == RLIM_INFINITY || rl.rlim_max > (rlim_t)high) {
            rl.rlim_cur = (rlim_t)high + 1;
            cr_assert_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
        } else {
            cr_skip_test("RLIMIT_NOFILE hard limit %llu is too low",
                         (unsigned long long)rl.rlim_max);
        }
    }
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    cr_assert_eq(dup2(sv[0], high), high, "dup2: %s", strerror(errno));
    close(sv[0]);
    st_test_init();

    errno = 0;
    nfd = st_netfd_open_socket(high);
    if (st_test_is_select()) {
        struct pollfd pd = {.fd = high, .events = POLLIN};

        if (nfd == NULL) {
            cr_assert_eq(errno, EMFILE, "errno %d (%s)", errno, strerror(errno));
        } else {
            ST_ASSERT_FAILS(st_netfd_poll(nfd, POLLIN, 1000), EINVAL);
            st_netfd_free(nfd);
        }
        ST_ASSERT_FAILS(st_poll(&pd, 1, 1000), EINVAL);
        close(high);
    } else {
        cr_assert_not_null(nfd, "st_netfd_open_socket(%d): %s", high, strerror(errno));
        cr_assert_eq(write(sv[1], "high", 4), 4);
        cr_assert_eq(st_read(nfd, buf, sizeof(buf), 1000000), 4);
        cr_assert_eq(memcmp(buf, "high", 4), 0);
        /* And it waits correctly. */
        ST_ASSERT_FAILS(st_read(nfd, buf, sizeof(buf), 2000), ETIME);
        cr_assert_eq(st_netfd_close(nfd), 0);
    }
    close(sv[1]);
}
