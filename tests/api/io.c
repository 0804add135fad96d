/*
 * Stream I/O on netfds: st_read, st_read_fully, st_read_resid, st_readv,
 * st_readv_resid, st_write, st_write_resid, st_writev, st_writev_resid.
 */
#include "st_test.h"

#include <signal.h>

ST_TEST_SUITE(io);

#define BIG (1024 * 1024)

static unsigned char pattern_at(size_t i)
{
    return (unsigned char)((i * 7 + i / 251) & 0xff);
}

static unsigned char *make_pattern(size_t n)
{
    unsigned char *p = malloc(n);
    size_t i;

    cr_assert_not_null(p);
    for (i = 0; i < n; i++) {
        p[i] = pattern_at(i);
    }
    return p;
}

/* Reads whatever is queued on a raw socket without blocking. */
static size_t drain_raw(int raw, size_t *offset, int check)
{
    static unsigned char buf[65536];
    size_t total = 0;
    ssize_t n;

    while ((n = recv(raw, buf, sizeof(buf), MSG_DONTWAIT)) > 0) {
        if (check) {
            ssize_t i;

            for (i = 0; i < n; i++) {
                cr_assert_eq(buf[i], pattern_at(*offset + (size_t)i), "byte %zu differs",
                             *offset + (size_t)i);
            }
        }
        *offset += (size_t)n;
        total += (size_t)n;
    }
    return total;
}

Test(io, write_then_read)
{
    st_netfd_t a;
    st_netfd_t b;
    char buf[16] = {0};

    st_test_init();
    st_test_socketpair(&a, &b);
    cr_assert_eq(st_write(a, "hello", 5, 1000000), 5);
    cr_assert_eq(st_read(b, buf, sizeof(buf), 1000000), 5);
    cr_assert_str_eq(buf, "hello");
    cr_assert_eq(st_write(b, "back", 4, ST_UTIME_NO_TIMEOUT), 4);
    cr_assert_eq(st_read(a, buf, 4, ST_UTIME_NO_TIMEOUT), 4);
    cr_assert_eq(memcmp(buf, "back", 4), 0);
    cr_assert_eq(st_netfd_close(a), 0);
    cr_assert_eq(st_netfd_close(b), 0);
}

Test(io, read_returns_what_is_available)
{
    st_netfd_t nfd;
    int raw;
    char buf[100];

    st_test_init();
    nfd = st_test_socketpair_raw(&raw);
    cr_assert_eq(write(raw, "abc", 3), 3);
    cr_assert_eq(st_read(nfd, buf, sizeof(buf), 1000000), 3);
    cr_assert_eq(memcmp(buf, "abc", 3), 0);
    /* Smaller buffer than available: the rest stays queued. */
    cr_assert_eq(write(raw, "defgh", 5), 5);
    cr_assert_eq(st_read(nfd, buf, 2, 1000000), 2);
    cr_assert_eq(memcmp(buf, "de", 2), 0);
    cr_assert_eq(st_read(nfd, buf, sizeof(buf), 1000000), 3);
    cr_assert_eq(memcmp(buf, "fgh", 3), 0);
    cr_assert_eq(st_netfd_close(nfd), 0);
    close(raw);
}

struct delayed_write {
    st_netfd_t nfd;
    int raw;
    st_utime_t delay;
    const char *data;
    int close_after;
};

static void *delayed_writer(void *arg)
{
    struct delayed_write *dw = arg;
    size_t len = strlen(dw->data);

    cr_expect_eq(st_usleep(dw->delay), 0);
    if (dw->nfd != NULL) {
        cr_expect_eq(st_write(dw->nfd, dw->data, len, 1000000), (ssize_t)len);
        if (dw->close_after) {
            cr_expect_eq(st_netfd_close(dw->nfd), 0);
        }
    } else {
        cr_expect_eq(write(dw->raw, dw->data, len), (ssize_t)len);
        if (dw->close_after) {
            close(dw->raw);
        }
    }
    return NULL;
}

Test(io, read_waits_for_data)
{
    struct delayed_write dw = {0};
    st_netfd_t a;
    st_netfd_t b;
    st_thread_t t;
    long long start;
    char buf[16] = {0};

    st_test_init();
    st_test_socketpair(&a, &b);
    dw.nfd = b;
    dw.delay = 5000;
    dw.data = "late";
    /* The writer only starts (and starts its delay) once the read blocks. */
    t = st_test_spawn(delayed_writer, &dw);
    start = st_test_deadline_base();
    cr_assert_eq(st_read(a, buf, sizeof(buf), ST_UTIME_NO_TIMEOUT), 4);
    cr_assert_str_eq(buf, "late");
    cr_assert_geq(st_test_now_us() - start, 5000);
    st_test_join(t);
    cr_assert_eq(st_netfd_close(a), 0);
    cr_assert_eq(st_netfd_close(b), 0);
}

Test(io, read_at_eof_returns_zero)
{
    st_netfd_t nfd;
    int raw;
    char buf[8];

    st_test_init();
    nfd = st_test_socketpair_raw(&raw);
    cr_assert_eq(write(raw, "x", 1), 1);
    close(raw);
    cr_assert_eq(st_read(nfd, buf, sizeof(buf), 1000000), 1);
    cr_assert_eq(st_read(nfd, buf, sizeof(buf), 1000000), 0);
    cr_assert_eq(st_read(nfd, buf, sizeof(buf), ST_UTIME_NO_WAIT), 0);
    cr_assert_eq(st_netfd_close(nfd), 0);
}

Test(io, read_eof_wakes_a_waiting_reader)
{
    struct delayed_write dw = {0};
    st_netfd_t nfd;
    st_thread_t t;
    int raw;
    char buf[8];

    st_test_init();
    nfd = st_test_socketpair_raw(&raw);
    dw.raw = raw;
    dw.delay = 3000;
    dw.data = "";
    dw.close_after = 1;
    t = st_test_spawn(delayed_writer, &dw);
    cr_assert_eq(st_read(nfd, buf, sizeof(buf), 5000000), 0);
    st_test_join(t);
    cr_assert_eq(st_netfd_close(nfd), 0);
}

Test(io, read_timeout_is_etime)
{
    st_netfd_t nfd;
    int raw;
    char buf[8];
    long long start;
    long long elapsed;

    st_test_init();
    nfd = st_test_socketpair_raw(&raw);
    start = st_test_deadline_base();
    ST_ASSERT_FAILS(st_read(nfd, buf, sizeof(buf), 20000), ETIME);
    elapsed = st_test_now_us() - start;
    cr_assert_geq(elapsed, 20000, "timed out after %lld us", elapsed);
    cr_assert_lt(elapsed, ST_TEST_LATE_US);
    /* The descriptor works normally afterwards. */
    cr_assert_eq(write(raw, "ok", 2), 2);
    cr_assert_eq(st_read(nfd, buf, sizeof(buf), 1000000), 2);
    cr_assert_eq(st_netfd_close(nfd), 0);
    close(raw);
}

Test(io, read_no_wait_without_data_is_etime)
{
    st_netfd_t nfd;
    int raw;
    char buf[8];
    long long start;

    st_test_init();
    nfd = st_test_socketpair_raw(&raw);
    start = st_test_now_us();
    ST_ASSERT_FAILS(st_read(nfd, buf, sizeof(buf), ST_UTIME_NO_WAIT), ETIME);
    cr_assert_lt(st_test_now_us() - start, ST_TEST_LATE_US);
    /* With data present, NO_WAIT reads it. */
    cr_assert_eq(write(raw, "z", 1), 1);
    cr_assert_eq(st_read(nfd, buf, sizeof(buf), ST_UTIME_NO_WAIT), 1);
    cr_assert_eq(st_netfd_close(nfd), 0);
    close(raw);
}

Test(io, interrupt_wakes_blocked_read)
{
    struct st_test_blocked r = {.call = st_test_read_forever};

    st_test_init();
    st_test_interrupt_call_on_socketpair(&r, 2000);
}

Test(io, pending_interrupt_fails_read_without_data)
{
    st_netfd_t nfd;
    int raw;
    char buf[8];

    st_test_init();
    nfd = st_test_socketpair_raw(&raw);
    st_thread_interrupt(st_thread_self());
    ST_ASSERT_FAILS(st_read(nfd, buf, sizeof(buf), 1000000), EINTR);
    /* The flag was consumed. */
    ST_ASSERT_FAILS(st_read(nfd, buf, sizeof(buf), 1000), ETIME);
    cr_assert_eq(st_netfd_close(nfd), 0);
    close(raw);
}

Test(io, read_error_is_reported)
{
    st_netfd_t r;
    st_netfd_t w;
    char buf[4];

    st_test_init();
    st_test_pipe(&r, &w);
    /* Wrong direction on each end of a pipe. */
    ST_ASSERT_FAILS(st_read(w, buf, sizeof(buf), 1000), EBADF);
    ST_ASSERT_FAILS(st_write(r, "x", 1, 1000), EBADF);
    cr_assert_eq(st_netfd_close(r), 0);
    cr_assert_eq(st_netfd_close(w), 0);
}

Test(io, pipe_round_trip)
{
    st_netfd_t r;
    st_netfd_t w;
    char buf[16] = {0};

    st_test_init();
    st_test_pipe(&r, &w);
    cr_assert_eq(st_write(w, "through", 7, 1000000), 7);
    cr_assert_eq(st_read(r, buf, sizeof(buf), 1000000), 7);
    cr_assert_str_eq(buf, "through");
    cr_assert_eq(st_netfd_close(w), 0);
    cr_assert_eq(st_read(r, buf, sizeof(buf), 1000000), 0);
    cr_assert_eq(st_netfd_close(r), 0);
}

static void *write_in_pieces(void *arg)
{
    struct delayed_write *dw = arg;
    const char *p = dw->data;

    while (*p) {
        cr_expect_eq(st_usleep(dw->delay), 0);
        cr_expect_eq(write(dw->raw, p, 1), 1);
        p++;
    }
    if (dw->close_after) {
        close(dw->raw);
    }
    return NULL;
}

Test(io, read_fully_collects_pieces)
{
    struct delayed_write dw = {0};
    st_netfd_t nfd;
    st_thread_t t;
    char buf[16] = {0};

    st_test_init();
    nfd = st_test_socketpair_raw(&dw.raw);
    dw.delay = 500;
    dw.data = "0123456789";
    t = st_test_spawn(write_in_pieces, &dw);
    cr_assert_eq(st_read_fully(nfd, buf, 10, 5000000), 10);
    cr_assert_str_eq(buf, "0123456789");
    st_test_join(t);
    cr_assert_eq(st_netfd_close(nfd), 0);
    close(dw.raw);
}

Test(io, read_fully_stops_at_eof)
{
    st_netfd_t nfd;
    int raw;
    char buf[16] = {0};

    st_test_init();
    nfd = st_test_socketpair_raw(&raw);
    cr_assert_eq(write(raw, "four", 4), 4);
    close(raw);
    cr_assert_eq(st_read_fully(nfd, buf, 10, 1000000), 4);
    cr_assert_eq(memcmp(buf, "four", 4), 0);
    cr_assert_eq(st_netfd_close(nfd), 0);
}

Test(io, read_fully_times_out)
{
    st_netfd_t nfd;
    int raw;
    char buf[16];

    st_test_init();
    nfd = st_test_socketpair_raw(&raw);
    ST_ASSERT_FAILS(st_read_fully(nfd, buf, 10, 5000), ETIME);
    cr_assert_eq(write(raw, "abc", 3), 3);
    ST_ASSERT_FAILS(st_read_fully(nfd, buf, 10, 5000), ETIME);
    cr_assert_eq(st_netfd_close(nfd), 0);
    close(raw);
}

Test(io, read_resid_reports_the_rest)
{
    st_netfd_t nfd;
    int raw;
    char buf[16] = {0};
    size_t resid;

    st_test_init();
    nfd = st_test_socketpair_raw(&raw);

    /* Complete read. */
    cr_assert_eq(write(raw, "abcdef", 6), 6);
    resid = 6;
    cr_assert_eq(st_read_resid(nfd, buf, &resid, 1000000), 0);
    cr_assert_eq(resid, 0);
    cr_assert_eq(memcmp(buf, "abcdef", 6), 0);

    /* Timeout after a partial read: -1/ETIME, resid shows the progress. */
    cr_assert_eq(write(raw, "ghij", 4), 4);
    resid = 10;
    ST_ASSERT_FAILS(st_read_resid(nfd, buf, &resid, 10000), ETIME);
    cr_assert_eq(resid, 6);
    cr_assert_eq(memcmp(buf, "ghij", 4), 0);

    /* EOF after a partial read: 0, resid is what was not read. */
    cr_assert_eq(write(raw, "kl", 2), 2);
    close(raw);
    resid = 10;
    cr_assert_eq(st_read_resid(nfd, buf, &resid, 1000000), 0);
    cr_assert_eq(resid, 8);
    cr_assert_eq(memcmp(buf, "kl", 2), 0);
    cr_assert_eq(st_netfd_close(nfd), 0);
}

Test(io, readv_scatters)
{
    st_netfd_t nfd;
    int raw;
    char a[3];
    char b[3];
    char c[4];
    struct iovec iov[3] = {{a, sizeof(a)}, {b, sizeof(b)}, {c, sizeof(c)}};

    st_test_init();
    nfd = st_test_socketpair_raw(&raw);
    cr_assert_eq(write(raw, "abcdefghij", 10), 10);
    cr_assert_eq(st_readv(nfd, iov, 3, 1000000), 10);
    cr_assert_eq(memcmp(a, "abc", 3), 0);
    cr_assert_eq(memcmp(b, "def", 3), 0);
    cr_assert_eq(memcmp(c, "ghij", 4), 0);
    /* Partial: only what is available. */
    cr_assert_eq(write(raw, "XYZW", 4), 4);
    cr_assert_eq(st_readv(nfd, iov, 3, 1000000), 4);
    cr_assert_eq(memcmp(a, "XYZ", 3), 0);
    cr_assert_eq(b[0], 'W');
    ST_ASSERT_FAILS(st_readv(nfd, iov, 3, 5000), ETIME);
    close(raw);
    cr_assert_eq(st_readv(nfd, iov, 3, 1000000), 0);
    cr_assert_eq(st_netfd_close(nfd), 0);
}

Test(io, readv_waits_for_data)
{
    struct delayed_write dw = {0};
    st_netfd_t nfd;
    st_thread_t t;
    char a[2];
    char b[8];
    struct iovec iov[2] = {{a, sizeof(a)}, {b, sizeof(b)}};

    st_test_init();
    nfd = st_test_socketpair_raw(&dw.raw);
    dw.delay = 3000;
    dw.data = "waited";
    t = st_test_spawn(delayed_writer, &dw);
    cr_assert_eq(st_readv(nfd, iov, 2, 5000000), 6);
    cr_assert_eq(memcmp(a, "wa", 2), 0);
    cr_assert_eq(memcmp(b, "ited", 4), 0);
    st_test_join(t);
    cr_assert_eq(st_netfd_close(nfd), 0);
    close(dw.raw);
}

Test(io, readv_resid_advances_the_vector)
{
    st_netfd_t nfd;
    int raw;
    char a[4];
    char b[4];
    char c[4];
    struct iovec vec[3];
    struct iovec *iov;
    int n;

    st_test_init();
    nfd = st_test_socketpair_raw(&raw);

    /* Everything arrives. */
    vec[0] = (struct iovec){a, 4};
    vec[1] = (struct iovec){b, 4};
    vec[2] = (struct iovec){c, 4};
    iov = vec;
    n = 3;
    cr_assert_eq(write(raw, "0123456789AB", 12), 12);
    cr_assert_eq(st_readv_resid(nfd, &iov, &n, 1000000), 0);
    cr_assert_eq(n, 0);
    cr_assert_eq(iov, &vec[3]);
    cr_assert_eq(memcmp(a, "0123", 4), 0);
    cr_assert_eq(memcmp(b, "4567", 4), 0);
    cr_assert_eq(memcmp(c, "89AB", 4), 0);

    /* Timeout after 5 bytes: -1/ETIME with the vector pointing at the rest. */
    vec[0] = (struct iovec){a, 4};
    vec[1] = (struct iovec){b, 4};
    vec[2] = (struct iovec){c, 4};
    iov = vec;
    n = 3;
    cr_assert_eq(write(raw, "abcde", 5), 5);
    ST_ASSERT_FAILS(st_readv_resid(nfd, &iov, &n, 10000), ETIME);
    cr_assert_eq(n, 2);
    cr_assert_eq(iov, &vec[1]);
    cr_assert_eq(iov->iov_base, b + 1);
    cr_assert_eq(iov->iov_len, 3);
    cr_assert_eq(memcmp(a, "abcd", 4), 0);
    cr_assert_eq(b[0], 'e');

    /* EOF after 6 more bytes: 0, with the vector pointing at what is left. */
    cr_assert_eq(write(raw, "fghijk", 6), 6);
    close(raw);
    cr_assert_eq(st_readv_resid(nfd, &iov, &n, 1000000), 0);
    cr_assert_eq(n, 1);
    cr_assert_eq(iov, &vec[2]);
    cr_assert_eq(iov->iov_base, c + 3);
    cr_assert_eq(iov->iov_len, 1);
    cr_assert_eq(memcmp(b, "efgh", 4), 0);
    cr_assert_eq(memcmp(c, "ijk", 3), 0);
    cr_assert_eq(st_netfd_close(nfd), 0);
}

Test(io, readv_resid_single_entry)
{
    st_netfd_t nfd;
    int raw;
    char a[8];
    struct iovec vec[1] = {{a, sizeof(a)}};
    struct iovec *iov = vec;
    int n = 1;

    st_test_init();
    nfd = st_test_socketpair_raw(&raw);
    cr_assert_eq(write(raw, "12345678", 8), 8);
    cr_assert_eq(st_readv_resid(nfd, &iov, &n, 1000000), 0);
    cr_assert_eq(n, 0);
    cr_assert_eq(memcmp(a, "12345678", 8), 0);
    cr_assert_eq(st_netfd_close(nfd), 0);
    close(raw);
}

struct sink {
    st_netfd_t nfd;
    size_t expect;
    size_t got;
    int bad;
};

/* Reads and checks the pattern, pausing now and then so writers block. */
static void *pattern_sink(void *arg)
{
    struct sink *s = arg;
    static unsigned char buf[8192];
    int rounds = 0;

    while (s->got < s->expect) {
        ssize_t n = st_read(s->nfd, buf, sizeof(buf), 5000000);
        ssize_t i;

        if (n <= 0) {
            s->bad = 1;
            return NULL;
        }
        for (i = 0; i < n; i++) {
            if (buf[i] != pattern_at(s->got + (size_t)i)) {
                s->bad = 1;
            }
        }
        s->got += (size_t)n;
        if (++rounds % 16 == 0) {
            st_usleep(100);
        }
    }
    return NULL;
}

Test(io, write_blocks_until_peer_drains)
{
    struct sink s = {0};
    unsigned char *data = make_pattern(BIG);
    st_netfd_t a;
    st_netfd_t b;
    st_thread_t t;

    st_test_init();
    st_test_socketpair(&a, &b);
    s.nfd = b;
    s.expect = BIG;
    t = st_test_spawn(pattern_sink, &s);
    cr_assert_eq(st_write(a, data, BIG, ST_UTIME_NO_TIMEOUT), BIG);
    st_test_join(t);
    cr_assert_eq(s.got, BIG);
    cr_assert_eq(s.bad, 0);
    cr_assert_eq(st_netfd_close(a), 0);
    cr_assert_eq(st_netfd_close(b), 0);
    free(data);
}

Test(io, write_resid_complete)
{
    struct sink s = {0};
    unsigned char *data = make_pattern(BIG / 2);
    st_netfd_t a;
    st_netfd_t b;
    st_thread_t t;
    size_t resid = BIG / 2;

    st_test_init();
    st_test_socketpair(&a, &b);
    s.nfd = b;
    s.expect = BIG / 2;
    t = st_test_spawn(pattern_sink, &s);
    cr_assert_eq(st_write_resid(a, data, &resid, 5000000), 0);
    cr_assert_eq(resid, 0);
    st_test_join(t);
    cr_assert_eq(s.got, BIG / 2);
    cr_assert_eq(s.bad, 0);
    cr_assert_eq(st_netfd_close(a), 0);
    cr_assert_eq(st_netfd_close(b), 0);
    free(data);
}

Test(io, write_to_stuck_peer_times_out_with_progress)
{
    enum { HUGE = 16 * 1024 * 1024 };
    unsigned char *data = make_pattern(HUGE);
    st_netfd_t nfd;
    int raw;
    size_t resid = HUGE;
    size_t offset = 0;
    size_t written;
    long long start;
    long long elapsed;

    st_test_init();
    nfd = st_test_socketpair_raw(&raw);
    start = st_test_deadline_base();
    ST_ASSERT_FAILS(st_write_resid(nfd, data, &resid, 20000), ETIME);
    elapsed = st_test_now_us() - start;
    cr_assert_geq(elapsed, 20000);
    cr_assert_lt(elapsed, ST_TEST_LATE_US);
    cr_assert_gt(resid, 0);
    cr_assert_lt(resid, HUGE);
    written = HUGE - resid;
    /* Exactly the reported progress reached the peer, in order. */
    cr_assert_eq(drain_raw(raw, &offset, 1), written);

    /* st_write reports the same condition as -1/ETIME. */
    ST_ASSERT_FAILS(st_write(nfd, data, HUGE, 5000), ETIME);
    cr_assert_eq(st_netfd_close(nfd), 0);
    close(raw);
    free(data);
}

Test(io, write_zero_bytes)
{
    st_netfd_t nfd;
    int raw;
    size_t resid = 0;

    st_test_init();
    nfd = st_test_socketpair_raw(&raw);
    cr_assert_eq(st_write(nfd, "", 0, 1000), 0);
    cr_assert_eq(st_write_resid(nfd, "", &resid, 1000), 0);
    cr_assert_eq(resid, 0);
    cr_assert_eq(st_netfd_close(nfd), 0);
    close(raw);
}

Test(io, writev_gathers)
{
    st_netfd_t nfd;
    int raw;
    char buf[32] = {0};
    struct iovec iov[3] = {{"one ", 4}, {"two ", 4}, {"three", 5}};

    st_test_init();
    nfd = st_test_socketpair_raw(&raw);
    cr_assert_eq(st_writev(nfd, iov, 3, 1000000), 13);
    cr_assert_eq(read(raw, buf, sizeof(buf)), 13);
    cr_assert_str_eq(buf, "one two three");
    /* The caller's vector is left alone. */
    cr_assert_eq(iov[0].iov_len, 4);
    cr_assert_eq(iov[2].iov_len, 5);
    cr_assert_eq(st_writev(nfd, iov, 1, 1000000), 4);
    cr_assert_eq(st_netfd_close(nfd), 0);
    close(raw);
}

static void split_into_iov(unsigned char *data, size_t total, struct iovec *iov, int n)
{
    size_t off = 0;
    int i;

    for (i = 0; i < n; i++) {
        size_t len = i == n - 1 ? total - off : total / (size_t)n + (size_t)i * 3;

        iov[i].iov_base = data + off;
        iov[i].iov_len = len;
        off += len;
    }
}

Test(io, writev_large_blocks_until_drained)
{
    struct sink s = {0};
    unsigned char *data = make_pattern(BIG);
    struct iovec iov[5];
    st_netfd_t a;
    st_netfd_t b;
    st_thread_t t;

    st_test_init();
    st_test_socketpair(&a, &b);
    split_into_iov(data, BIG, iov, 5);
    s.nfd = b;
    s.expect = BIG;
    t = st_test_spawn(pattern_sink, &s);
    cr_assert_eq(st_writev(a, iov, 5, ST_UTIME_NO_TIMEOUT), BIG);
    st_test_join(t);
    cr_assert_eq(s.got, BIG);
    cr_assert_eq(s.bad, 0);
    cr_assert_eq(st_netfd_close(a), 0);
    cr_assert_eq(st_netfd_close(b), 0);
    free(data);
}

Test(io, writev_resid_complete_consumes_the_vector)
{
    struct sink s = {0};
    unsigned char *data = make_pattern(BIG);
    struct iovec vec[4];
    struct iovec *iov = vec;
    int n = 4;
    st_netfd_t a;
    st_netfd_t b;
    st_thread_t t;

    st_test_init();
    st_test_socketpair(&a, &b);
    split_into_iov(data, BIG, vec, 4);
    s.nfd = b;
    s.expect = BIG;
    t = st_test_spawn(pattern_sink, &s);
    cr_assert_eq(st_writev_resid(a, &iov, &n, 5000000), 0);
    cr_assert_eq(n, 0);
    cr_assert_eq(iov, &vec[4]);
    st_test_join(t);
    cr_assert_eq(s.got, BIG);
    cr_assert_eq(s.bad, 0);

    /* A single small entry goes through in one call. */
    vec[0].iov_base = data;
    vec[0].iov_len = 10;
    iov = vec;
    n = 1;
    cr_assert_eq(st_writev_resid(a, &iov, &n, 5000000), 0);
    cr_assert_eq(n, 0);
    cr_assert_eq(st_netfd_close(a), 0);
    cr_assert_eq(st_netfd_close(b), 0);
    free(data);
}

Test(io, writev_resid_timeout_reports_progress)
{
    enum { HUGE = 16 * 1024 * 1024 };
    unsigned char *data = make_pattern(HUGE);
    struct iovec vec[4];
    struct iovec *iov = vec;
    int n = 4;
    int i;
    size_t left = 0;
    size_t offset = 0;
    st_netfd_t nfd;
    int raw;

    st_test_init();
    nfd = st_test_socketpair_raw(&raw);
    split_into_iov(data, HUGE, vec, 4);
    ST_ASSERT_FAILS(st_writev_resid(nfd, &iov, &n, 20000), ETIME);
    cr_assert_gt(n, 0);
    cr_assert_leq(n, 4);
    cr_assert_eq(iov, &vec[4 - n]);
    for (i = 0; i < n; i++) {
        left += iov[i].iov_len;
    }
    cr_assert_gt(left, 0);
    cr_assert_lt(left, HUGE);
    /* Exactly the reported progress reached the peer, and the first
     * remaining entry starts right after it. */
    cr_assert_eq(drain_raw(raw, &offset, 1), HUGE - left);
    cr_assert_eq((unsigned char *)iov[0].iov_base, data + (HUGE - left));

    /* st_writev reports it as -1/ETIME. */
    split_into_iov(data, HUGE, vec, 4);
    ST_ASSERT_FAILS(st_writev(nfd, vec, 4, 5000), ETIME);
    cr_assert_eq(st_netfd_close(nfd), 0);
    close(raw);
    free(data);
}

Test(io, sigpipe_is_ignored)
{
    st_netfd_t nfd;
    int raw;
    struct iovec iov[2] = {{"a", 1}, {"b", 1}};
    size_t resid = 3;

    st_test_init();
    nfd = st_test_socketpair_raw(&raw);
    close(raw);
    ST_ASSERT_FAILS(st_write(nfd, "abc", 3, 1000000), EPIPE);
    ST_ASSERT_FAILS(st_write_resid(nfd, "abc", &resid, 1000000), EPIPE);
    cr_assert_eq(resid, 3);
    ST_ASSERT_FAILS(st_writev(nfd, iov, 2, 1000000), EPIPE);
    /* Still alive. */
    cr_assert_eq(st_usleep(1000), 0);
    cr_assert_eq(st_netfd_close(nfd), 0);
}

Test(io, sigpipe_handler_is_ignore)
{
    struct sigaction sa;

    st_test_init();
    cr_assert_eq(sigaction(SIGPIPE, NULL, &sa), 0);
    cr_assert_eq(sa.sa_handler, SIG_IGN);
}

Test(io, ping_pong_between_coroutines)
{
    struct st_test_echo p = {0};
    st_netfd_t a;
    st_netfd_t b;
    st_thread_t t;
    int i;

    st_test_init();
    st_test_socketpair(&a, &b);
    p.nfd = b;
    p.rounds = 200;
    t = st_test_spawn(st_test_echo_main, &p);
    for (i = 0; i < 200; i++) {
        char msg[32];
        char buf[32];
        int len = snprintf(msg, sizeof(msg), "msg %d", i);

        cr_assert_eq(st_write(a, msg, (size_t)len, 1000000), len);
        cr_assert_eq(st_read_fully(a, buf, (size_t)len, 1000000), len);
        cr_assert_eq(memcmp(buf, msg, (size_t)len), 0);
    }
    st_test_join(t);
    cr_assert_eq(p.echoed, 200);
    cr_assert_eq(st_netfd_close(a), 0);
    cr_assert_eq(st_netfd_close(b), 0);
}

Test(io, null_netfd_is_ebadf)
{
    char buf[8];
    size_t resid = sizeof(buf);
    struct iovec vec[1] = {{buf, sizeof(buf)}};
    struct iovec *iov = vec;
    int n = 1;
    struct sockaddr_in sin;
    int len = sizeof(sin);
    struct msghdr msg;

    st_test_init();
    memset(&msg, 0, sizeof(msg));
    msg.msg_iov = vec;
    msg.msg_iovlen = 1;
    st_test_loopback(&sin, 9);
    ST_ASSERT_FAILS(st_read(NULL, buf, sizeof(buf), 1000), EBADF);
    ST_ASSERT_FAILS(st_read_fully(NULL, buf, sizeof(buf), 1000), EBADF);
    ST_ASSERT_FAILS(st_read_resid(NULL, buf, &resid, 1000), EBADF);
    ST_ASSERT_FAILS(st_readv(NULL, vec, 1, 1000), EBADF);
    ST_ASSERT_FAILS(st_readv_resid(NULL, &iov, &n, 1000), EBADF);
    ST_ASSERT_FAILS(st_write(NULL, buf, sizeof(buf), 1000), EBADF);
    ST_ASSERT_FAILS(st_write_resid(NULL, buf, &resid, 1000), EBADF);
    ST_ASSERT_FAILS(st_writev(NULL, vec, 1, 1000), EBADF);
    ST_ASSERT_FAILS(st_writev_resid(NULL, &iov, &n, 1000), EBADF);
    ST_ASSERT_FAILS(st_netfd_poll(NULL, POLLIN, 1000), EBADF);
    ST_ASSERT_FAILS_NULL(st_accept(NULL, NULL, NULL, 1000), EBADF);
    ST_ASSERT_FAILS(st_connect(NULL, (struct sockaddr *)&sin, sizeof(sin), 1000), EBADF);
    ST_ASSERT_FAILS(st_recvfrom(NULL, buf, sizeof(buf), NULL, NULL, 1000), EBADF);
    ST_ASSERT_FAILS(st_sendto(NULL, buf, sizeof(buf), (struct sockaddr *)&sin, len, 1000), EBADF);
    ST_ASSERT_FAILS(st_recvmsg(NULL, &msg, 0, 1000), EBADF);
    ST_ASSERT_FAILS(st_sendmsg(NULL, &msg, 0, 1000), EBADF);
    /* Nothing was consumed from the out-parameters. */
    cr_assert_eq(resid, sizeof(buf));
    cr_assert_eq(n, 1);
    cr_assert_eq(iov, vec);
}

Test(io, bad_sizes_are_einval)
{
    st_netfd_t nfd;
    int raw;
    char buf[8];
    struct iovec vec[1] = {{buf, sizeof(buf)}};
    struct iovec *iov = vec;
    struct iovec *null_iov = NULL;
    int n = -1;

    st_test_init();
    nfd = st_test_socketpair_raw(&raw);
    ST_ASSERT_FAILS(st_readv(nfd, vec, -1, 1000), EINVAL);
    ST_ASSERT_FAILS(st_writev(nfd, vec, -1, 1000), EINVAL);
    ST_ASSERT_FAILS(st_writev(nfd, NULL, 2, 1000), EINVAL);
    ST_ASSERT_FAILS(st_readv_resid(nfd, &iov, &n, 1000), EINVAL);
    ST_ASSERT_FAILS(st_writev_resid(nfd, &iov, &n, 1000), EINVAL);
    n = 1;
    ST_ASSERT_FAILS(st_readv_resid(nfd, &null_iov, &n, 1000), EINVAL);
    ST_ASSERT_FAILS(st_readv_resid(nfd, NULL, &n, 1000), EINVAL);
    ST_ASSERT_FAILS(st_writev_resid(nfd, &iov, NULL, 1000), EINVAL);
    ST_ASSERT_FAILS(st_read_resid(nfd, buf, NULL, 1000), EINVAL);
    ST_ASSERT_FAILS(st_write_resid(nfd, buf, NULL, 1000), EINVAL);
    /* An empty vector is a no-op. */
    n = 0;
    cr_assert_eq(st_writev_resid(nfd, &iov, &n, 1000), 0);
    cr_assert_eq(st_readv_resid(nfd, &iov, &n, 1000), 0);
    cr_assert_eq(st_writev(nfd, vec, 0, 1000), 0);
    cr_assert_eq(st_netfd_close(nfd), 0);
    close(raw);
}

Test(io, long_vectors)
{
    enum { N = 100 };
    static char out[N][3];
    static char in[N][3];
    struct iovec ov[N];
    struct iovec iv[N];
    st_netfd_t a;
    st_netfd_t b;
    int i;

    st_test_init();
    st_test_socketpair(&a, &b);
    for (i = 0; i < N; i++) {
        snprintf(out[i], sizeof(out[i]), "%02d", i);
        ov[i] = (struct iovec){out[i], 2};
        iv[i] = (struct iovec){in[i], 2};
    }
    cr_assert_eq(st_writev(a, ov, N, 1000000), 2 * N);
    {
        struct iovec *cursor = iv;
        int left = N;

        cr_assert_eq(st_readv_resid(b, &cursor, &left, 1000000), 0);
        cr_assert_eq(left, 0);
    }
    for (i = 0; i < N; i++) {
        cr_assert_eq(memcmp(in[i], out[i], 2), 0, "entry %d", i);
    }
    cr_assert_eq(st_netfd_close(a), 0);
    cr_assert_eq(st_netfd_close(b), 0);
}

/*
 * A read given up (interrupted, timed out, its netfd freed) leaves the
 * buffer alone once it has returned: on io_uring the request is cancelled
 * and its end awaited. Data that came meanwhile is returned or still there.
 */
struct io_reader {
    st_netfd_t nfd;
    st_utime_t timeout;
    ssize_t rc;
    int err;
    char buf[32];
};

static void *io_read_into(void *arg)
{
    struct io_reader *r = arg;

    r->rc = st_read(r->nfd, r->buf, sizeof(r->buf), r->timeout);
    r->err = errno;
    return NULL;
}

/* Reader r is blocked on nfd when this returns; its buffer is all '#'. */
static st_thread_t io_start_reader(struct io_reader *r, st_netfd_t nfd, st_utime_t timeout)
{
    st_thread_t t;

    memset(r, 0, sizeof(*r));
    memset(r->buf, '#', sizeof(r->buf));
    r->nfd = nfd;
    r->timeout = timeout;
    r->rc = 99;
    t = st_test_spawn(io_read_into, r);
    cr_assert_eq(st_usleep(1000), 0);
    cr_assert_eq(r->rc, 99, "the reader did not wait");
    return t;
}

/* Data sent after the reader returned lands neither in its buffer nor nowhere. */
static void io_expect_buffer_untouched(struct io_reader *r, int raw)
{
    char got[8] = {0};
    size_t i;

    cr_assert_eq(write(raw, "late", 4), 4);
    cr_assert_eq(st_usleep(10000), 0);
    for (i = 0; i < sizeof(r->buf); i++) {
        cr_assert_eq(r->buf[i], '#', "byte %zu of the buffer was written after the read returned",
                     i);
    }
    cr_assert_eq(st_read(r->nfd, got, sizeof(got), 1000000), 4);
    cr_assert_eq(memcmp(got, "late", 4), 0);
}

Test(io, interrupted_read_leaves_the_buffer_alone)
{
    struct io_reader r;
    st_thread_t t;
    int raw;

    st_test_init();
    t = io_start_reader(&r, st_test_socketpair_raw(&raw), ST_UTIME_NO_TIMEOUT);
    st_thread_interrupt(t);
    st_test_join(t);
    cr_assert_eq(r.rc, -1);
    cr_assert_eq(r.err, EINTR, "%s", strerror(r.err));
    io_expect_buffer_untouched(&r, raw);
    cr_assert_eq(st_netfd_close(r.nfd), 0);
    close(raw);
}

Test(io, timed_out_read_leaves_the_buffer_alone)
{
    struct io_reader r;
    st_thread_t t;
    int raw;

    st_test_init();
    t = io_start_reader(&r, st_test_socketpair_raw(&raw), 20000);
    st_test_join(t);
    cr_assert_eq(r.rc, -1);
    cr_assert_eq(r.err, ETIME, "%s", strerror(r.err));
    io_expect_buffer_untouched(&r, raw);
    cr_assert_eq(st_netfd_close(r.nfd), 0);
    close(raw);
}

Test(io, close_with_a_read_in_flight_is_ebusy)
{
    struct io_reader r;
    st_thread_t t;
    int raw;

    st_test_init();
    t = io_start_reader(&r, st_test_socketpair_raw(&raw), 1000000);
    ST_ASSERT_FAILS(st_netfd_close(r.nfd), EBUSY);
    cr_assert_eq(write(raw, "hi", 2), 2);
    st_test_join(t);
    cr_assert_eq(r.rc, 2, "%s", strerror(r.err));
    cr_assert_eq(memcmp(r.buf, "hi", 2), 0);
    cr_assert_eq(st_netfd_close(r.nfd), 0);
    close(raw);
}

/* Data and an interrupt reach a blocked reader in the same cycle: nothing is lost. */
Test(io, data_racing_an_interrupt_is_not_lost)
{
    enum { ROUNDS = 50 };
    struct io_reader r;
    st_thread_t t;
    int raw;
    int i;
    int returned = 0;
    st_netfd_t nfd;

    st_test_init();
    nfd = st_test_socketpair_raw(&raw);
    for (i = 0; i < ROUNDS; i++) {
        char again[32];

        t = io_start_reader(&r, nfd, ST_UTIME_NO_TIMEOUT);
        cr_assert_eq(write(raw, "abc", 3), 3);
        st_thread_interrupt(t);
        st_test_join(t);
        if (r.rc == 3) {
            returned++;
            cr_assert_eq(memcmp(r.buf, "abc", 3), 0);
            continue;
        }
        cr_assert_eq(r.rc, -1, "round %d: %zd", i, r.rc);
        cr_assert_eq(r.err, EINTR, "round %d: %s", i, strerror(r.err));
        cr_assert_eq(st_read(nfd, again, sizeof(again), 1000000), 3, "round %d: the data is gone",
                     i);
        cr_assert_eq(memcmp(again, "abc", 3), 0);
    }
    cr_assert_leq(returned, ROUNDS); /* either way is right; io_uring usually returns the data */
    cr_assert_eq(st_netfd_close(nfd), 0);
    close(raw);
}

/* st_netfd_free with a reader inside: the reader fails with EBADF and lets go of the file. */
Test(io, free_with_a_read_in_flight_fails_it_with_ebadf)
{
    struct io_reader r;
    st_thread_t t;
    int raw;
    int osfd;
    char c;

    st_test_init();
    t = io_start_reader(&r, st_test_socketpair_raw(&raw), 200000);
    osfd = st_netfd_fileno(r.nfd);
    st_netfd_free(r.nfd);
    st_test_join(t);
    cr_assert_eq(r.rc, -1);
    cr_assert_eq(r.err, EBADF, "%s", strerror(r.err));
    cr_assert_eq(close(osfd), 0);
    /* Nothing holds the file any more: the peer sees the end of the stream. */
    cr_assert_eq(read(raw, &c, 1), 0);
    close(raw);
}

Test(io, read_of_a_reset_connection_is_econnreset)
{
    struct sockaddr_in sin;
    struct linger hard = {.l_onoff = 1, .l_linger = 0};
    unsigned short port;
    st_netfd_t listener;
    st_netfd_t server;
    int client;
    char buf[8];

    st_test_init();
    listener = st_test_listener(&port, 4);
    client = socket(AF_INET, SOCK_STREAM, 0);
    cr_assert_geq(client, 0);
    st_test_loopback(&sin, port);
    cr_assert_eq(connect(client, (struct sockaddr *)&sin, sizeof(sin)), 0, "%s", strerror(errno));
    server = st_accept(listener, NULL, NULL, 1000000);
    cr_assert_not_null(server, "%s", strerror(errno));
    cr_assert(st_test_is_nonblocking(st_netfd_fileno(server)));
    cr_assert_eq(write(client, "xy", 2), 2);
    cr_assert_eq(st_read(server, buf, sizeof(buf), 1000000), 2);
    cr_assert_eq(setsockopt(client, SOL_SOCKET, SO_LINGER, &hard, sizeof(hard)), 0);
    cr_assert_eq(close(client), 0);
    ST_ASSERT_FAILS(st_read(server, buf, sizeof(buf), 1000000), ECONNRESET);
    cr_assert_eq(st_netfd_close(server), 0);
    cr_assert_eq(st_netfd_close(listener), 0);
}
