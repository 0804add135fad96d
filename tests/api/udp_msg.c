/*
 * Datagram I/O: st_recvfrom, st_sendto, st_recvmsg, st_sendmsg.
 */
#include "st_test.h"

ST_TEST_SUITE(udp_msg);

/* A msghdr with no address and the one buffer iov. */
static void one_iov_msghdr(struct msghdr *msg, struct iovec *iov)
{
    memset(msg, 0, sizeof(*msg));
    msg->msg_iov = iov;
    msg->msg_iovlen = 1;
}

Test(udp_msg, sendto_recvfrom)
{
    struct st_test_udp_pair u;
    struct sockaddr_in from;
    int fromlen = sizeof(from);
    char buf[32] = {0};

    st_test_init();
    st_test_udp_pair_open(&u);
    cr_assert(st_test_is_nonblocking(st_netfd_fileno(u.a)));
    cr_assert_eq(st_sendto(u.a, "datagram", 8, (struct sockaddr *)&u.sb, sizeof(u.sb), 1000000), 8);
    cr_assert_eq(st_recvfrom(u.b, buf, sizeof(buf), (struct sockaddr *)&from, &fromlen, 1000000),
                 8);
    cr_assert_str_eq(buf, "datagram");
    cr_assert_eq(fromlen, (int)sizeof(struct sockaddr_in));
    cr_assert_eq(from.sin_family, AF_INET);
    cr_assert_eq(ntohs(from.sin_port), u.pa);
    /* Datagram boundaries are kept. */
    cr_assert_eq(st_sendto(u.b, "one", 3, (struct sockaddr *)&u.sa, sizeof(u.sa), 1000000), 3);
    cr_assert_eq(st_sendto(u.b, "two", 3, (struct sockaddr *)&u.sa, sizeof(u.sa), 1000000), 3);
    cr_assert_eq(st_recvfrom(u.a, buf, sizeof(buf), NULL, NULL, 1000000), 3);
    cr_assert_eq(memcmp(buf, "one", 3), 0);
    cr_assert_eq(st_recvfrom(u.a, buf, sizeof(buf), NULL, NULL, 1000000), 3);
    cr_assert_eq(memcmp(buf, "two", 3), 0);
    st_test_udp_pair_close(&u);
}

struct delayed_send {
    st_netfd_t nfd;
    struct sockaddr_in to;
};

static void *send_later(void *arg)
{
    struct delayed_send *d = arg;

    cr_expect_eq(st_usleep(3000), 0);
    cr_expect_eq(st_sendto(d->nfd, "later", 5, (struct sockaddr *)&d->to, sizeof(d->to), 1000000),
                 5);
    return NULL;
}

Test(udp_msg, recvfrom_waits_for_a_datagram)
{
    struct st_test_udp_pair u;
    struct delayed_send d;
    st_thread_t t;
    char buf[16] = {0};

    st_test_init();
    st_test_udp_pair_open(&u);
    d.nfd = u.a;
    d.to = u.sb;
    t = st_test_spawn(send_later, &d);
    cr_assert_eq(st_recvfrom(u.b, buf, sizeof(buf), NULL, NULL, 5000000), 5);
    cr_assert_str_eq(buf, "later");
    st_test_join(t);
    st_test_udp_pair_close(&u);
}

Test(udp_msg, recvfrom_timeout_is_etime)
{
    struct st_test_udp_pair u;
    char buf[16];
    long long start;
    long long elapsed;

    st_test_init();
    st_test_udp_pair_open(&u);
    start = st_test_deadline_base();
    ST_ASSERT_FAILS(st_recvfrom(u.b, buf, sizeof(buf), NULL, NULL, 20000), ETIME);
    elapsed = st_test_now_us() - start;
    cr_assert_geq(elapsed, 20000);
    cr_assert_lt(elapsed, ST_TEST_LATE_US);
    ST_ASSERT_FAILS(st_recvfrom(u.b, buf, sizeof(buf), NULL, NULL, ST_UTIME_NO_WAIT), ETIME);
    st_test_udp_pair_close(&u);
}

Test(udp_msg, negative_length_is_einval)
{
    struct st_test_udp_pair u;
    char buf[16];

    st_test_init();
    st_test_udp_pair_open(&u);
    ST_ASSERT_FAILS(st_recvfrom(u.b, buf, -1, NULL, NULL, 1000), EINVAL);
    ST_ASSERT_FAILS(st_sendto(u.a, buf, -5, (struct sockaddr *)&u.sb, sizeof(u.sb), 1000), EINVAL);
    st_test_udp_pair_close(&u);
}

Test(udp_msg, sendto_errors_are_reported)
{
    struct st_test_udp_pair u;

    st_test_init();
    st_test_udp_pair_open(&u);
    /* Too short an address. */
    ST_ASSERT_FAILS(st_sendto(u.a, "x", 1, (struct sockaddr *)&u.sb, 2, 1000), EINVAL);
    st_test_udp_pair_close(&u);
}

static long long recvfrom_forever(struct st_test_blocked *b)
{
    return st_recvfrom(b->nfd, b->buf, sizeof(b->buf), NULL, NULL, ST_UTIME_NO_TIMEOUT);
}

Test(udp_msg, interrupt_wakes_recvfrom)
{
    struct st_test_udp_pair u;
    struct st_test_blocked r = {.call = recvfrom_forever};

    st_test_init();
    st_test_udp_pair_open(&u);
    st_test_interrupt_call_on(&r, u.b, 1000);
    st_test_udp_pair_close(&u);
}

Test(udp_msg, two_receivers_share_a_socket)
{
    struct st_test_udp_pair u;
    struct st_test_blocked r[2] = {{.call = recvfrom_forever}, {.call = recvfrom_forever}};
    st_thread_t t[2];
    int i;

    st_test_init();
    st_test_udp_pair_open(&u);
    for (i = 0; i < 2; i++) {
        r[i].nfd = u.b;
        t[i] = st_test_block(&r[i]);
    }
    cr_assert_eq(st_usleep(1000), 0);
    cr_assert_eq(st_sendto(u.a, "1", 1, (struct sockaddr *)&u.sb, sizeof(u.sb), 1000000), 1);
    cr_assert_eq(st_sendto(u.a, "2", 1, (struct sockaddr *)&u.sb, sizeof(u.sb), 1000000), 1);
    for (i = 0; i < 2; i++) {
        st_test_join(t[i]);
        cr_assert_eq(r[i].rc, 1, "receiver %d: rc %lld errno %d", i, r[i].rc, r[i].err);
    }
    st_test_udp_pair_close(&u);
}

Test(udp_msg, sendmsg_recvmsg)
{
    struct st_test_udp_pair u;
    struct iovec out[2] = {{"head-", 5}, {"tail", 4}};
    char h[5];
    char t[16] = {0};
    struct iovec in[2] = {{h, sizeof(h)}, {t, sizeof(t) - 1}};
    struct sockaddr_in from;
    struct msghdr msg;

    st_test_init();
    st_test_udp_pair_open(&u);
    memset(&msg, 0, sizeof(msg));
    msg.msg_name = &u.sb;
    msg.msg_namelen = sizeof(u.sb);
    msg.msg_iov = out;
    msg.msg_iovlen = 2;
    cr_assert_eq(st_sendmsg(u.a, &msg, 0, 1000000), 9);

    memset(&msg, 0, sizeof(msg));
    memset(&from, 0, sizeof(from));
    msg.msg_name = &from;
    msg.msg_namelen = sizeof(from);
    msg.msg_iov = in;
    msg.msg_iovlen = 2;
    cr_assert_eq(st_recvmsg(u.b, &msg, 0, 1000000), 9);
    cr_assert_eq(memcmp(h, "head-", 5), 0);
    cr_assert_str_eq(t, "tail");
    cr_assert_eq(msg.msg_namelen, sizeof(struct sockaddr_in));
    cr_assert_eq(ntohs(from.sin_port), u.pa);
    cr_assert_eq(msg.msg_flags & MSG_TRUNC, 0);
    st_test_udp_pair_close(&u);
}

static void *sendmsg_later(void *arg)
{
    struct delayed_send *d = arg;
    struct iovec iov = {"msg", 3};
    struct msghdr msg;

    memset(&msg, 0, sizeof(msg));
    msg.msg_name = &d->to;
    msg.msg_namelen = sizeof(d->to);
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    cr_expect_eq(st_usleep(3000), 0);
    cr_expect_eq(st_sendmsg(d->nfd, &msg, 0, 1000000), 3);
    return NULL;
}

Test(udp_msg, recvmsg_waits_and_times_out)
{
    struct st_test_udp_pair u;
    struct delayed_send d;
    char buf[8] = {0};
    struct iovec iov = {buf, sizeof(buf) - 1};
    struct msghdr msg;
    st_thread_t t;
    long long start;

    st_test_init();
    st_test_udp_pair_open(&u);
    one_iov_msghdr(&msg, &iov);
    start = st_test_deadline_base();
    ST_ASSERT_FAILS(st_recvmsg(u.b, &msg, 0, 10000), ETIME);
    cr_assert_geq(st_test_now_us() - start, 10000);

    d.nfd = u.a;
    d.to = u.sb;
    t = st_test_spawn(sendmsg_later, &d);
    cr_assert_eq(st_recvmsg(u.b, &msg, 0, 5000000), 3);
    cr_assert_str_eq(buf, "msg");
    st_test_join(t);
    st_test_udp_pair_close(&u);
}

Test(udp_msg, recvmsg_with_flags)
{
    struct st_test_udp_pair u;
    char buf[8] = {0};
    struct iovec iov = {buf, sizeof(buf) - 1};
    struct msghdr msg;

    st_test_init();
    st_test_udp_pair_open(&u);
    cr_assert_eq(st_sendto(u.a, "peek", 4, (struct sockaddr *)&u.sb, sizeof(u.sb), 1000000), 4);
    one_iov_msghdr(&msg, &iov);
    /* MSG_PEEK leaves the datagram queued. */
    cr_assert_eq(st_recvmsg(u.b, &msg, MSG_PEEK, 1000000), 4);
    cr_assert_str_eq(buf, "peek");
    memset(buf, 0, sizeof(buf));
    cr_assert_eq(st_recvmsg(u.b, &msg, 0, 1000000), 4);
    cr_assert_str_eq(buf, "peek");
    ST_ASSERT_FAILS(st_recvmsg(u.b, &msg, 0, ST_UTIME_NO_WAIT), ETIME);
    st_test_udp_pair_close(&u);
}

Test(udp_msg, sendmsg_error_is_reported)
{
    struct st_test_udp_pair u;
    struct iovec iov = {"x", 1};
    struct msghdr msg;

    st_test_init();
    st_test_udp_pair_open(&u);
    one_iov_msghdr(&msg, &iov);
    /* No destination on an unconnected datagram socket. */
    ST_ASSERT_FAILS(st_sendmsg(u.a, &msg, 0, 1000), EDESTADDRREQ);
    st_test_udp_pair_close(&u);
}

static void *send_burst(void *arg)
{
    struct delayed_send *d = arg;
    char buf[1024];
    int i;

    memset(buf, 'u', sizeof(buf));
    for (i = 0; i < 200; i++) {
        if (st_sendto(d->nfd, buf, sizeof(buf), (struct sockaddr *)&d->to, sizeof(d->to),
                      1000000) != (int)sizeof(buf)) {
            return NULL;
        }
        if (i % 20 == 19) {
            st_usleep(200);
        }
    }
    return (void *)1;
}

Test(udp_msg, burst_of_datagrams)
{
    struct st_test_udp_pair u;
    struct delayed_send d;
    st_thread_t t;
    char buf[2048];
    int got = 0;
    int rc;
    void *ret = NULL;

    st_test_init();
    st_test_udp_pair_open(&u);
    d.nfd = u.a;
    d.to = u.sb;
    t = st_test_spawn(send_burst, &d);
    while ((rc = st_recvfrom(u.b, buf, sizeof(buf), NULL, NULL, 200000)) > 0) {
        cr_assert_eq(rc, 1024);
        got++;
        if (got == 200) {
            break;
        }
    }
    cr_assert_eq(st_thread_join(t, &ret), 0);
    cr_assert_eq(ret, (void *)1);
    cr_assert_eq(got, 200);
    st_test_udp_pair_close(&u);
}
