/*
 * Batched datagrams: st_sendmmsg and st_recvmmsg (Linux sendmmsg/recvmmsg
 * with ST's I/O semantics: try first, wait while not ready, ETIME on
 * timeout, EINTR on interrupt, the number of messages on success).
 */
#include "st_test.h"

ST_TEST_SUITE(mmsg);

#define BATCH 16
#define MAX_LEN 64

/* Datagram i of a batch: i + 1 bytes (up to MAX_LEN), every byte 'A' + i. */
static size_t payload_len(int i)
{
    return (size_t)(i % MAX_LEN) + 1;
}

/* Outgoing batch: message i carries payload i, sent to `to` (NULL: connected). */
struct out_batch {
    char data[BATCH][MAX_LEN];
    struct iovec iov[BATCH];
    struct mmsghdr msgs[BATCH];
};

static void out_batch_fill(struct out_batch *o, int first, const struct sockaddr_in *to)
{
    int i;

    memset(o, 0, sizeof(*o));
    for (i = 0; i < BATCH; i++) {
        size_t len = payload_len(first + i);

        memset(o->data[i], 'A' + (first + i) % 26, len);
        o->iov[i].iov_base = o->data[i];
        o->iov[i].iov_len = len;
        o->msgs[i].msg_hdr.msg_iov = &o->iov[i];
        o->msgs[i].msg_hdr.msg_iovlen = 1;
        if (to != NULL) {
            o->msgs[i].msg_hdr.msg_name = (void *)to;
            o->msgs[i].msg_hdr.msg_namelen = sizeof(*to);
        }
    }
}

/* Incoming batch: room for BATCH datagrams of MAX_LEN bytes and their sources. */
struct in_batch {
    char data[BATCH][MAX_LEN];
    struct iovec iov[BATCH];
    struct sockaddr_in from[BATCH];
    struct mmsghdr msgs[BATCH];
};

static void in_batch_reset(struct in_batch *in)
{
    int i;

    memset(in, 0, sizeof(*in));
    for (i = 0; i < BATCH; i++) {
        in->iov[i].iov_base = in->data[i];
        in->iov[i].iov_len = MAX_LEN;
        in->msgs[i].msg_hdr.msg_iov = &in->iov[i];
        in->msgs[i].msg_hdr.msg_iovlen = 1;
        in->msgs[i].msg_hdr.msg_name = &in->from[i];
        in->msgs[i].msg_hdr.msg_namelen = sizeof(in->from[i]);
    }
}

/*
 * Whether received message k is payload `seq` from port `port`; non-fatal
 * (usable inside coroutines), each mismatch is reported.
 */
static int received_ok(const struct in_batch *in, int k, int seq, unsigned short port)
{
    size_t len = payload_len(seq);
    char expect[MAX_LEN];
    int ok = 1;

    memset(expect, 'A' + seq % 26, len);
    if (in->msgs[k].msg_len != len || memcmp(in->data[k], expect, len) != 0) {
        cr_expect_fail("message %d: %u bytes or contents differ, expected %zu bytes of '%c'", seq,
                       in->msgs[k].msg_len, len, expect[0]);
        ok = 0;
    }
    if (in->msgs[k].msg_hdr.msg_namelen != sizeof(struct sockaddr_in) ||
        in->from[k].sin_family != AF_INET || ntohs(in->from[k].sin_port) != port) {
        cr_expect_fail("message %d: wrong source address", seq);
        ok = 0;
    }
    if ((in->msgs[k].msg_hdr.msg_flags & MSG_TRUNC) != 0) {
        cr_expect_fail("message %d: truncated", seq);
        ok = 0;
    }
    return ok;
}

Test(mmsg, batch_sent_in_one_call_and_received_in_order)
{
    struct st_test_udp_pair u;
    struct out_batch out;
    struct in_batch in;
    int got = 0;
    int i;

    st_test_init();
    st_test_udp_pair_open(&u);
    cr_assert(st_test_is_nonblocking(st_netfd_fileno(u.a)));
    out_batch_fill(&out, 0, &u.sb);
    cr_assert_eq(st_sendmmsg(u.a, out.msgs, BATCH, 0, 1000000), BATCH);
    for (i = 0; i < BATCH; i++) {
        cr_assert_eq(out.msgs[i].msg_len, payload_len(i), "sent message %d: %u bytes", i,
                     out.msgs[i].msg_len);
    }
    /* The kernel may hand them over in one call or several, in order. */
    while (got < BATCH) {
        int n;
        int k;

        in_batch_reset(&in);
        n = st_recvmmsg(u.b, in.msgs, (unsigned int)(BATCH - got), 0, 1000000);
        cr_assert_gt(n, 0, "st_recvmmsg: %d (%s)", n, strerror(errno));
        cr_assert_leq(n, BATCH - got);
        for (k = 0; k < n; k++) {
            cr_assert(received_ok(&in, k, got + k, u.pa));
        }
        got += n;
    }
    /* Nothing more is queued. */
    in_batch_reset(&in);
    ST_ASSERT_FAILS(st_recvmmsg(u.b, in.msgs, BATCH, 0, ST_UTIME_NO_WAIT), ETIME);
    st_test_udp_pair_close(&u);
}

Test(mmsg, queued_datagrams_are_received_in_several_calls)
{
    struct st_test_udp_pair u;
    struct out_batch out;
    struct in_batch in;
    int i;

    st_test_init();
    st_test_udp_pair_open(&u);
    out_batch_fill(&out, 0, &u.sb);
    cr_assert_eq(st_sendmmsg(u.a, out.msgs, 10, 0, 1000000), 10);
    /* Loopback delivers at once (a pause covers a deferred softirq): all ten are queued. */
    cr_assert_eq(st_usleep(2000), 0);
    for (i = 0; i < 3; i++) {
        int want = i < 2 ? 4 : 2;
        int k;

        in_batch_reset(&in);
        cr_assert_eq(st_recvmmsg(u.b, in.msgs, 4, 0, 1000000), want, "call %d", i);
        for (k = 0; k < want; k++) {
            cr_assert(received_ok(&in, k, i * 4 + k, u.pa));
        }
    }
    in_batch_reset(&in);
    ST_ASSERT_FAILS(st_recvmmsg(u.b, in.msgs, 4, 0, ST_UTIME_NO_WAIT), ETIME);
    st_test_udp_pair_close(&u);
}

Test(mmsg, connected_socket_needs_no_address)
{
    struct st_test_udp_pair u;
    struct out_batch out;
    struct in_batch in;
    int got = 0;

    st_test_init();
    st_test_udp_pair_open(&u);
    cr_assert_eq(st_connect(u.a, (struct sockaddr *)&u.sb, sizeof(u.sb), 1000000), 0);
    out_batch_fill(&out, 3, NULL);
    cr_assert_eq(st_sendmmsg(u.a, out.msgs, 5, 0, 1000000), 5);
    while (got < 5) {
        int n;
        int k;

        in_batch_reset(&in);
        n = st_recvmmsg(u.b, in.msgs, BATCH, 0, 1000000);
        cr_assert_gt(n, 0);
        for (k = 0; k < n; k++) {
            cr_assert(received_ok(&in, k, 3 + got + k, u.pa));
        }
        got += n;
    }
    cr_assert_eq(got, 5);
    st_test_udp_pair_close(&u);
}

struct batch_receiver {
    st_netfd_t nfd;
    unsigned short from_port;
    int want;
    int got;
    int calls;
    int done;
    int err;
    long long waited_us;
};

/* Receives `want` datagrams in as many st_recvmmsg calls as it takes. */
static void *receive_batches(void *arg)
{
    struct batch_receiver *r = arg;
    struct in_batch in;
    long long start = st_test_deadline_base();

    while (r->got < r->want) {
        int n;
        int k;

        in_batch_reset(&in);
        n = st_recvmmsg(r->nfd, in.msgs, BATCH, 0, 5000000);
        r->calls++;
        if (n <= 0) {
            r->err = errno;
            break;
        }
        for (k = 0; k < n; k++) {
            if (!received_ok(&in, k, r->got + k, r->from_port)) {
                r->err = EPROTO;
            }
        }
        if (r->got == 0) {
            r->waited_us = st_test_now_us() - start;
        }
        r->got += n;
    }
    r->done = 1;
    return NULL;
}

Test(mmsg, recvmmsg_waits_until_data_arrives)
{
    struct st_test_udp_pair u;
    struct out_batch out;
    struct batch_receiver r = {0};
    st_thread_t t;

    st_test_init();
    st_test_udp_pair_open(&u);
    r.nfd = u.b;
    r.from_port = u.pa;
    r.want = 3;
    t = st_test_spawn(receive_batches, &r);
    /* The receiver runs, finds nothing and blocks; the primordial keeps running. */
    cr_assert_eq(st_usleep(10000), 0);
    cr_assert_eq(r.done, 0);
    cr_assert_eq(r.got, 0);
    cr_assert_eq(r.calls, 0, "st_recvmmsg returned without data");

    out_batch_fill(&out, 0, &u.sb);
    cr_assert_eq(st_sendmmsg(u.a, out.msgs, 3, 0, 1000000), 3);
    st_test_join(t);
    cr_assert_eq(r.err, 0, "receiver failed: %s", strerror(r.err));
    cr_assert_eq(r.got, 3);
    cr_assert_geq(r.waited_us, 10000);
    st_test_udp_pair_close(&u);
}

struct delayed_batch {
    st_netfd_t nfd;
    const struct sockaddr_in *to;
    int count;
    int rc;
};

static void *send_batch_later(void *arg)
{
    struct delayed_batch *d = arg;
    struct out_batch out;

    out_batch_fill(&out, 0, d->to);
    cr_expect_eq(st_usleep(3000), 0);
    d->rc = st_sendmmsg(d->nfd, out.msgs, (unsigned int)d->count, 0, 1000000);
    return NULL;
}

Test(mmsg, blocked_primordial_wakes_for_a_batch)
{
    struct st_test_udp_pair u;
    struct delayed_batch d = {0};
    struct in_batch in;
    st_thread_t t;
    long long start;
    int got = 0;

    st_test_init();
    st_test_udp_pair_open(&u);
    d.nfd = u.a;
    d.to = &u.sb;
    d.count = BATCH;
    t = st_test_spawn(send_batch_later, &d);
    start = st_test_deadline_base();
    while (got < BATCH) {
        int n;
        int k;

        in_batch_reset(&in);
        n = st_recvmmsg(u.b, in.msgs, BATCH, 0, 5000000);
        cr_assert_gt(n, 0, "st_recvmmsg: %s", strerror(errno));
        for (k = 0; k < n; k++) {
            cr_assert(received_ok(&in, k, got + k, u.pa));
        }
        got += n;
    }
    cr_assert_geq(st_test_now_us() - start, 3000);
    st_test_join(t);
    cr_assert_eq(d.rc, BATCH);
    st_test_udp_pair_close(&u);
}

Test(mmsg, recvmmsg_timeout_is_etime)
{
    struct st_test_udp_pair u;
    struct in_batch in;
    long long start;
    long long elapsed;

    st_test_init();
    st_test_udp_pair_open(&u);
    in_batch_reset(&in);
    start = st_test_deadline_base();
    ST_ASSERT_FAILS(st_recvmmsg(u.b, in.msgs, BATCH, 0, 20000), ETIME);
    elapsed = st_test_now_us() - start;
    cr_assert_geq(elapsed, 20000);
    cr_assert_lt(elapsed, ST_TEST_LATE_US);
    ST_ASSERT_FAILS(st_recvmmsg(u.b, in.msgs, BATCH, 0, ST_UTIME_NO_WAIT), ETIME);
    /* Nothing was written into the vector. */
    cr_assert_eq(in.msgs[0].msg_len, 0);
    st_test_udp_pair_close(&u);
}

static long long recvmmsg_forever(struct st_test_blocked *b)
{
    struct in_batch in;

    in_batch_reset(&in);
    return st_recvmmsg(b->nfd, in.msgs, BATCH, 0, ST_UTIME_NO_TIMEOUT);
}

Test(mmsg, interrupt_wakes_recvmmsg_with_eintr)
{
    struct st_test_udp_pair u;
    struct st_test_blocked b = {.call = recvmmsg_forever};
    struct in_batch in;

    st_test_init();
    st_test_udp_pair_open(&u);
    st_test_interrupt_call_on(&b, u.b, 2000);

    /* A pending interrupt fails the call once it would have to wait. */
    b.interrupt_self = 1;
    st_test_join(st_test_block(&b));
    cr_assert_eq(b.rc, -1);
    cr_assert_eq(b.err, EINTR);

    /* The socket is still usable and no longer waited on. */
    cr_assert_eq(st_sendto(u.a, "x", 1, (struct sockaddr *)&u.sb, sizeof(u.sb), 1000000), 1);
    in_batch_reset(&in);
    cr_assert_eq(st_recvmmsg(u.b, in.msgs, BATCH, 0, 1000000), 1);
    cr_assert_eq(in.data[0][0], 'x');
    st_test_udp_pair_close(&u);
}

Test(mmsg, null_netfd_is_ebadf)
{
    struct out_batch out;
    struct in_batch in;
    struct sockaddr_in sin;

    st_test_init();
    st_test_loopback(&sin, 9);
    out_batch_fill(&out, 0, &sin);
    in_batch_reset(&in);
    ST_ASSERT_FAILS(st_sendmmsg(NULL, out.msgs, BATCH, 0, 1000), EBADF);
    ST_ASSERT_FAILS(st_recvmmsg(NULL, in.msgs, BATCH, 0, 1000), EBADF);
    ST_ASSERT_FAILS(st_recvmmsg(NULL, in.msgs, BATCH, 0, ST_UTIME_NO_TIMEOUT), EBADF);
    ST_ASSERT_FAILS(st_sendmmsg(NULL, NULL, 0, 0, ST_UTIME_NO_WAIT), EBADF);
    cr_assert_eq(out.msgs[0].msg_len, 0);
}

Test(mmsg, zero_messages_return_zero_at_once)
{
    struct st_test_udp_pair u;
    struct in_batch in;
    long long start;

    st_test_init();
    st_test_udp_pair_open(&u);
    in_batch_reset(&in);
    /* Linux answers 0 for vlen 0 without waiting, data queued or not. */
    start = st_test_now_us();
    cr_assert_eq(st_recvmmsg(u.b, in.msgs, 0, 0, ST_UTIME_NO_TIMEOUT), 0);
    cr_assert_eq(st_sendmmsg(u.a, in.msgs, 0, 0, ST_UTIME_NO_TIMEOUT), 0);
    cr_assert_lt(st_test_now_us() - start, ST_TEST_LATE_US);

    cr_assert_eq(st_sendto(u.a, "kept", 4, (struct sockaddr *)&u.sb, sizeof(u.sb), 1000000), 4);
    cr_assert_eq(st_recvmmsg(u.b, in.msgs, 0, 0, 1000000), 0);
    /* The datagram is still there for the next real call. */
    cr_assert_eq(st_recvmmsg(u.b, in.msgs, BATCH, 0, 1000000), 1);
    cr_assert_eq(in.msgs[0].msg_len, 4);
    cr_assert_eq(memcmp(in.data[0], "kept", 4), 0);
    st_test_udp_pair_close(&u);
}

/* vlen 0 needs no vector at all: NULL is accepted, as by Linux. */
Test(mmsg, zero_messages_need_no_vector)
{
    struct st_test_udp_pair u;
    long long start;

    st_test_skip_under_emulator(
        "qemu-user fails st_recvmmsg and st_sendmmsg given a NULL message vector");
    st_test_init();
    st_test_udp_pair_open(&u);
    start = st_test_now_us();
    cr_assert_eq(st_recvmmsg(u.b, NULL, 0, 0, 1000000), 0);
    cr_assert_eq(st_sendmmsg(u.a, NULL, 0, 0, ST_UTIME_NO_TIMEOUT), 0);
    cr_assert_lt(st_test_now_us() - start, ST_TEST_LATE_US);
    st_test_udp_pair_close(&u);
}

Test(mmsg, failure_part_way_returns_the_count_sent)
{
    struct st_test_udp_pair u;
    struct out_batch out;
    struct in_batch in;
    int got = 0;

    st_test_init();
    st_test_udp_pair_open(&u);
    out_batch_fill(&out, 0, &u.sb);
    /* Message 2 has an address too short to use. */
    out.msgs[2].msg_hdr.msg_namelen = 2;
    cr_assert_eq(st_sendmmsg(u.a, out.msgs, 4, 0, 1000000), 2);
    while (got < 2) {
        int n;

        in_batch_reset(&in);
        n = st_recvmmsg(u.b, in.msgs, BATCH, 0, 1000000);
        cr_assert_gt(n, 0);
        got += n;
    }
    cr_assert_eq(got, 2);
    /* Failing on the first message is an error, reported at once. */
    ST_ASSERT_FAILS(st_sendmmsg(u.a, &out.msgs[2], 2, 0, 1000000), EINVAL);
    st_test_udp_pair_close(&u);
}

Test(mmsg, truncated_datagram_is_flagged)
{
    struct st_test_udp_pair u;
    char big[MAX_LEN];
    char small[8];
    struct iovec iov = {small, sizeof(small)};
    struct mmsghdr msg;

    st_test_init();
    st_test_udp_pair_open(&u);
    memset(big, 'z', sizeof(big));
    cr_assert_eq(st_sendto(u.a, big, sizeof(big), (struct sockaddr *)&u.sb, sizeof(u.sb), 1000000),
                 (int)sizeof(big));
    memset(&msg, 0, sizeof(msg));
    msg.msg_hdr.msg_iov = &iov;
    msg.msg_hdr.msg_iovlen = 1;
    cr_assert_eq(st_recvmmsg(u.b, &msg, 1, 0, 1000000), 1);
    cr_assert_eq(msg.msg_len, sizeof(small));
    cr_assert_neq(msg.msg_hdr.msg_flags & MSG_TRUNC, 0);
    st_test_udp_pair_close(&u);
}

/*
 * A full socket: an AF_UNIX datagram pair refuses more datagrams (EAGAIN)
 * once the peer's queue is full, which a UDP socket over loopback never does.
 */
static void unix_dgram_pair(st_netfd_t *a, st_netfd_t *b)
{
    int sv[2];
    int small = 4096;

    cr_assert_eq(socketpair(AF_UNIX, SOCK_DGRAM, 0, sv), 0, "socketpair: %s", strerror(errno));
    cr_assert_eq(setsockopt(sv[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)), 0);
    *a = st_netfd_open_socket(sv[0]);
    *b = st_netfd_open_socket(sv[1]);
    cr_assert_not_null(*a);
    cr_assert_not_null(*b);
}

/* Fills message i with the 4-byte sequence number first + i. */
static void seq_batch_fill(struct out_batch *o, int first)
{
    int i;

    memset(o, 0, sizeof(*o));
    for (i = 0; i < BATCH; i++) {
        int seq = first + i;

        memcpy(o->data[i], &seq, sizeof(seq));
        o->iov[i].iov_base = o->data[i];
        o->iov[i].iov_len = sizeof(seq);
        o->msgs[i].msg_hdr.msg_iov = &o->iov[i];
        o->msgs[i].msg_hdr.msg_iovlen = 1;
    }
}

struct drainer {
    st_netfd_t nfd;
    int want;
    int got;
    int in_order;
};

/* After a pause, reads sequence-numbered datagrams until `want` arrived. */
static void *drain_later(void *arg)
{
    struct drainer *d = arg;
    struct in_batch in;

    d->in_order = 1;
    cr_expect_eq(st_usleep(5000), 0);
    while (d->got < d->want) {
        int n;
        int k;

        in_batch_reset(&in);
        n = st_recvmmsg(d->nfd, in.msgs, BATCH, 0, 2000000);
        if (n <= 0) {
            break;
        }
        for (k = 0; k < n; k++) {
            int seq = -1;

            memcpy(&seq, in.data[k], sizeof(seq));
            if (in.msgs[k].msg_len != sizeof(seq) || seq != d->got + k) {
                d->in_order = 0;
            }
        }
        d->got += n;
    }
    return NULL;
}

Test(mmsg, sendmmsg_waits_for_room)
{
    st_netfd_t a;
    st_netfd_t b;
    struct out_batch out;
    struct drainer d = {0};
    st_thread_t t;
    int sent = 0;
    int n;
    long long start;

    st_test_init();
    unix_dgram_pair(&a, &b);
    /* Fill the peer's queue; a partly accepted batch reports its count. */
    for (;;) {
        seq_batch_fill(&out, sent);
        n = st_sendmmsg(a, out.msgs, BATCH, 0, ST_UTIME_NO_WAIT);
        if (n < 0) {
            cr_assert_eq(errno, ETIME, "st_sendmmsg: %s", strerror(errno));
            break;
        }
        cr_assert_gt(n, 0);
        cr_assert_leq(n, BATCH);
        sent += n;
        cr_assert_lt(sent, 1000000, "the queue never filled up");
    }
    cr_assert_gt(sent, 0);
    ST_ASSERT_FAILS(st_sendmmsg(a, out.msgs, BATCH, 0, 10000), ETIME);

    /* A reader makes room; the blocked sender wakes and sends. */
    d.nfd = b;
    d.want = sent + BATCH;
    t = st_test_spawn(drain_later, &d);
    start = st_test_deadline_base();
    seq_batch_fill(&out, sent);
    n = st_sendmmsg(a, out.msgs, BATCH, 0, 2000000);
    cr_assert_gt(n, 0, "st_sendmmsg: %s", strerror(errno));
    cr_assert_geq(st_test_now_us() - start, 5000);
    sent += n;
    while (sent < d.want) {
        seq_batch_fill(&out, sent);
        n = st_sendmmsg(a, out.msgs, (unsigned int)(d.want - sent), 0, 2000000);
        cr_assert_gt(n, 0, "st_sendmmsg: %s", strerror(errno));
        sent += n;
    }
    st_test_join(t);
    cr_assert_eq(d.got, d.want);
    cr_assert(d.in_order, "datagrams arrived out of order or damaged");
    cr_assert_eq(st_netfd_close(a), 0);
    cr_assert_eq(st_netfd_close(b), 0);
}

/* Many coroutines each receive their own batches on their own sockets. */
struct peer {
    struct st_test_udp_pair u;
    struct batch_receiver r;
    st_thread_t t;
};

Test(mmsg, many_receivers_each_get_their_batches)
{
    enum { PEERS = 20 };
    static struct peer peers[PEERS];
    struct out_batch out;
    int i;

    st_test_init();
    for (i = 0; i < PEERS; i++) {
        st_test_udp_pair_open(&peers[i].u);
        memset(&peers[i].r, 0, sizeof(peers[i].r));
        peers[i].r.nfd = peers[i].u.b;
        peers[i].r.from_port = peers[i].u.pa;
        peers[i].r.want = BATCH;
        peers[i].t = st_test_spawn(receive_batches, &peers[i].r);
    }
    cr_assert_eq(st_usleep(2000), 0);
    /* Send in reverse order of waiting. */
    for (i = PEERS - 1; i >= 0; i--) {
        out_batch_fill(&out, 0, &peers[i].u.sb);
        cr_assert_eq(st_sendmmsg(peers[i].u.a, out.msgs, BATCH, 0, 1000000), BATCH);
    }
    for (i = 0; i < PEERS; i++) {
        st_test_join(peers[i].t);
        cr_assert_eq(peers[i].r.got, BATCH, "receiver %d got %d (%s)", i, peers[i].r.got,
                     strerror(peers[i].r.err));
        cr_assert_eq(peers[i].r.err, 0);
        st_test_udp_pair_close(&peers[i].u);
    }
}
