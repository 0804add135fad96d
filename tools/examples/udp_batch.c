/*
 * udp_batch: batched UDP sends (st_sendmmsg) against one st_sendto per
 * packet, over loopback to a receiver coroutine.
 *
 * usage: udp_batch [-n packets] [-b batch] [-s bytes] [-r rounds] [-e eventsys]
 *
 *   -n  datagrams per measurement (default 200000)
 *   -b  datagrams per st_sendmmsg call (default 32)
 *   -s  datagram size in bytes, 8 to 1472 (default 64)
 *   -r  rounds; each round measures both ways, the best of each is kept (default 3)
 *   -e  epoll, poll, select or io_uring (default epoll)
 *
 * One pthread, one scheduler: a sender (the primordial coroutine) and a
 * receiver coroutine on two UDP sockets bound to 127.0.0.1. The receiver
 * drains its socket with st_recvmmsg (64 per call) in both modes, so the
 * two figures differ only in how the packets are sent. UDP never blocks the
 * sender, so it keeps at most a window of datagrams in flight (below what
 * the receive buffer holds) and waits for the receiver to catch up: nothing
 * is dropped, and every datagram's sequence number and size are checked.
 *
 * Two rates per mode: "delivered", datagrams per second of wall time from
 * the first send to the last datagram received (sender, receiver and
 * scheduler together), and "in send calls", datagrams per second of the
 * time spent inside st_sendto/st_sendmmsg alone (on loopback that time
 * includes the kernel handing each datagram to the receiving socket).
 *
 * Prints one line per mode, the ratios, and the same figures as
 * `RESULT <key> <value> pkt/s <base> <description>` lines (the format of
 * tools/bench). Exits 0 when every datagram arrived intact and in order.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "example_args.h"
#include "example_eventsys.h"
#include "st.h"

enum {
    DEFAULT_PACKETS = 200000,
    DEFAULT_BATCH = 32,
    DEFAULT_SIZE = 64,
    DEFAULT_ROUNDS = 3,
    MAX_BATCH = 1024, /* UIO_MAXIOV: the kernel's cap per sendmmsg call */
    MIN_SIZE = 8,     /* room for the sequence number */
    MAX_SIZE = 1472,  /* one Ethernet-sized UDP payload */
    RECV_BATCH = 64,
    MAX_WINDOW = 256,
    RCVBUF_BYTES = 4 << 20,
    TRUESIZE_GUESS = 2048, /* kernel memory charged per small datagram, generously */
    WARMUP_PACKETS = 2000,
};

static const st_utime_t STALL_TIMEOUT = 2000000; /* no progress for 2 s: a datagram was lost */

struct options {
    long packets;
    long batch;
    long size;
    long rounds;
    const char *eventsys;
};

/* What the sender and the receiver share (one pthread: no locking). */
struct net {
    st_netfd_t tx;
    st_netfd_t rx;
    struct sockaddr_in rx_addr;
    long size;
    long window;
    long sent;       /* datagrams handed to the kernel in this measurement */
    long received;   /* datagrams the receiver checked */
    long bad;        /* wrong size or sequence number */
    int sender_waits;
    st_cond_t progress;
};

static struct net net;

/* ---- options ------------------------------------------------------------------------ */

static int parse_options(int argc, char **argv, struct options *opt)
{
    int c = 0;
    opt->packets = DEFAULT_PACKETS;
    opt->batch = DEFAULT_BATCH;
    opt->size = DEFAULT_SIZE;
    opt->rounds = DEFAULT_ROUNDS;
    opt->eventsys = "epoll";
    while ((c = getopt(argc, argv, "n:b:s:r:e:")) != -1) {
        int rc = 0;
        if (c == 'n') {
            rc = example_parse_long(optarg, 1, 1000L * 1000 * 1000, &opt->packets);
        } else if (c == 'b') {
            rc = example_parse_long(optarg, 1, MAX_BATCH, &opt->batch);
        } else if (c == 's') {
            rc = example_parse_long(optarg, MIN_SIZE, MAX_SIZE, &opt->size);
        } else if (c == 'r') {
            rc = example_parse_long(optarg, 1, 100, &opt->rounds);
        } else if (c == 'e') {
            opt->eventsys = optarg;
        } else {
            rc = -1;
        }
        if (rc != 0) {
            return -1;
        }
    }
    return optind == argc ? 0 : -1;
}

/* ---- sockets ------------------------------------------------------------------------ */

static st_netfd_t udp_socket(struct sockaddr_in *bound)
{
    socklen_t len = sizeof *bound;
    st_netfd_t nfd = NULL;
    int fd = socket(AF_INET, SOCK_DGRAM, 0);
    if (fd < 0) {
        return NULL;
    }
    memset(bound, 0, sizeof *bound);
    bound->sin_family = AF_INET;
    bound->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)bound, sizeof *bound) != 0 ||
        getsockname(fd, (struct sockaddr *)bound, &len) != 0 ||
        (nfd = st_netfd_open_socket(fd)) == NULL) {
        int err = errno;
        (void)close(fd);
        errno = err;
        return NULL;
    }
    return nfd;
}

/* The window: what the receive buffer surely holds, at most MAX_WINDOW. */
static long pick_window(int rx_fd)
{
    int want = RCVBUF_BYTES;
    int got = 0;
    socklen_t len = sizeof got;
    (void)setsockopt(rx_fd, SOL_SOCKET, SO_RCVBUF, &want, sizeof want); /* capped by rmem_max */
    if (getsockopt(rx_fd, SOL_SOCKET, SO_RCVBUF, &got, &len) != 0 || got <= 0) {
        got = 0;
    }
    long window = got / TRUESIZE_GUESS;
    if (window > MAX_WINDOW) {
        window = MAX_WINDOW;
    }
    return window < 1 ? 1 : window;
}

/* ---- the receiver coroutine ------------------------------------------------------------ */

static void *receiver(void *arg)
{
    struct mmsghdr msgs[RECV_BATCH];
    struct iovec iov[RECV_BATCH];
    static unsigned char bufs[RECV_BATCH][MAX_SIZE + 1];
    (void)arg;
    memset(msgs, 0, sizeof msgs);
    for (int i = 0; i < RECV_BATCH; i++) {
        iov[i].iov_base = bufs[i];
        iov[i].iov_len = sizeof bufs[i];
        msgs[i].msg_hdr.msg_iov = &iov[i];
        msgs[i].msg_hdr.msg_iovlen = 1;
    }
    for (;;) {
        int n = st_recvmmsg(net.rx, msgs, RECV_BATCH, 0, ST_UTIME_NO_TIMEOUT);
        if (n < 0) {
            if (errno != EINTR) {
                perror("udp_batch: st_recvmmsg");
            }
            return NULL; /* interrupted: the program is done */
        }
        for (int i = 0; i < n; i++) {
            uint64_t seq = 0;
            memcpy(&seq, bufs[i], sizeof seq);
            if (msgs[i].msg_len != (unsigned)net.size || seq != (uint64_t)net.received) {
                net.bad++;
            }
            net.received++;
        }
        if (net.sender_waits) {
            (void)st_cond_signal(net.progress);
        }
    }
}

/* ---- the sender ------------------------------------------------------------------------- */

static double now_seconds(void)
{
    struct timespec ts;
    (void)clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Waits until at most `in_flight` datagrams are unreceived; -1 on a stall. */
static int wait_for_receiver(long in_flight)
{
    while (net.sent - net.received > in_flight) {
        net.sender_waits = 1;
        int rc = st_cond_timedwait(net.progress, STALL_TIMEOUT);
        net.sender_waits = 0;
        if (rc != 0) {
            fprintf(stderr, "udp_batch: %ld datagrams not received after 2 s\n",
                    net.sent - net.received);
            return -1;
        }
    }
    return 0;
}

struct sender {
    int mmsg;   /* 0: one st_sendto per datagram; 1: st_sendmmsg */
    long batch; /* datagrams per call */
    unsigned char (*bufs)[MAX_SIZE];
    struct iovec *iov;
    struct mmsghdr *msgs;
    long calls;
    double in_calls; /* seconds spent inside the send calls */
};

/* One mode's best figures over the rounds. */
struct figures {
    double delivered; /* datagrams per second, first send to last receive */
    double sending;   /* datagrams per second of time inside the send calls */
    long calls;       /* send calls per measurement */
};

static int send_some(struct sender *s, long count)
{
    if (!s->mmsg) {
        uint64_t seq = (uint64_t)net.sent;
        memcpy(s->bufs[0], &seq, sizeof seq);
        double t0 = now_seconds();
        int n = st_sendto(net.tx, s->bufs[0], (int)net.size, (struct sockaddr *)&net.rx_addr,
                          sizeof net.rx_addr, ST_UTIME_NO_TIMEOUT);
        s->in_calls += now_seconds() - t0;
        s->calls++;
        if (n != (int)net.size) {
            perror("udp_batch: st_sendto");
            return -1;
        }
        net.sent++;
        return 0;
    }
    for (long i = 0; i < count; i++) {
        uint64_t seq = (uint64_t)(net.sent + i);
        memcpy(s->bufs[i], &seq, sizeof seq);
    }
    double t0 = now_seconds();
    int n = st_sendmmsg(net.tx, s->msgs, (unsigned)count, 0, ST_UTIME_NO_TIMEOUT);
    s->in_calls += now_seconds() - t0;
    s->calls++;
    if (n <= 0) {
        perror("udp_batch: st_sendmmsg");
        return -1;
    }
    net.sent += n; /* a short count is resent from the next sequence number */
    return 0;
}

/* Sends `packets` datagrams; returns the delivery rate, or -1. */
static double measure(struct sender *s, long packets)
{
    net.sent = 0;
    net.received = 0;
    net.bad = 0;
    s->calls = 0;
    s->in_calls = 0;
    double start = now_seconds();
    while (net.sent < packets) {
        /* Room for a whole call before sending again. */
        long need = s->batch < net.window ? s->batch : net.window;
        if (wait_for_receiver(net.window - need) != 0) {
            return -1;
        }
        long count = packets - net.sent;
        long room = net.window - (net.sent - net.received);
        if (count > s->batch) {
            count = s->batch;
        }
        if (count > room) {
            count = room;
        }
        if (send_some(s, count) != 0) {
            return -1;
        }
    }
    if (wait_for_receiver(0) != 0) {
        return -1;
    }
    double elapsed = now_seconds() - start;
    if (net.bad != 0) {
        fprintf(stderr, "udp_batch: %ld datagrams damaged or out of order\n", net.bad);
        return -1;
    }
    return elapsed > 0 ? (double)packets / elapsed : 0;
}

static int sender_init(struct sender *s, int mmsg, long batch)
{
    s->mmsg = mmsg;
    s->batch = batch;
    s->calls = 0;
    s->bufs = calloc((size_t)batch, sizeof *s->bufs);
    s->iov = calloc((size_t)batch, sizeof *s->iov);
    s->msgs = calloc((size_t)batch, sizeof *s->msgs);
    if (s->bufs == NULL || s->iov == NULL || s->msgs == NULL) {
        return -1;
    }
    for (long i = 0; i < batch; i++) {
        memset(s->bufs[i], 'u', sizeof s->bufs[i]);
        s->iov[i].iov_base = s->bufs[i];
        s->iov[i].iov_len = (size_t)net.size;
        s->msgs[i].msg_hdr.msg_name = &net.rx_addr;
        s->msgs[i].msg_hdr.msg_namelen = sizeof net.rx_addr;
        s->msgs[i].msg_hdr.msg_iov = &s->iov[i];
        s->msgs[i].msg_hdr.msg_iovlen = 1;
    }
    return 0;
}

static void sender_fini(struct sender *s)
{
    free(s->bufs);
    free(s->iov);
    free(s->msgs);
}

/* ---- main ----------------------------------------------------------------------------- */

static int setup(const struct options *opt)
{
    struct sockaddr_in tx_addr;
    if (example_set_eventsys(opt->eventsys) != 0) {
        fprintf(stderr, "udp_batch: event system '%s': %s\n", opt->eventsys, strerror(errno));
        return -1;
    }
    if (st_init() != 0 || (net.progress = st_cond_new()) == NULL) {
        perror("udp_batch: st_init");
        return -1;
    }
    net.size = opt->size;
    net.tx = udp_socket(&tx_addr);
    net.rx = udp_socket(&net.rx_addr);
    if (net.tx == NULL || net.rx == NULL) {
        perror("udp_batch: UDP socket on 127.0.0.1");
        return -1;
    }
    net.window = pick_window(st_netfd_fileno(net.rx));
    return 0;
}

static void keep_best(struct figures *best, const struct sender *s, double delivered,
                      long packets)
{
    double sending = s->in_calls > 0 ? (double)packets / s->in_calls : 0;
    best->delivered = delivered > best->delivered ? delivered : best->delivered;
    best->sending = sending > best->sending ? sending : best->sending;
    best->calls = s->calls;
}

static int run(const struct options *opt, struct figures *single_best,
               struct figures *batch_best)
{
    struct sender single = {0};
    struct sender batched = {0};
    int rc = -1;
    if (sender_init(&single, 0, 1) != 0 || sender_init(&batched, 1, opt->batch) != 0) {
        perror("udp_batch: malloc");
        goto out;
    }
    if (measure(&single, WARMUP_PACKETS) < 0 || measure(&batched, WARMUP_PACKETS) < 0) {
        goto out;
    }
    memset(single_best, 0, sizeof *single_best);
    memset(batch_best, 0, sizeof *batch_best);
    for (long r = 0; r < opt->rounds; r++) {
        double pps = measure(&single, opt->packets);
        if (pps < 0) {
            goto out;
        }
        keep_best(single_best, &single, pps, opt->packets);
        pps = measure(&batched, opt->packets);
        if (pps < 0) {
            goto out;
        }
        keep_best(batch_best, &batched, pps, opt->packets);
    }
    rc = 0;
out:
    sender_fini(&single);
    sender_fini(&batched);
    return rc;
}

int main(int argc, char **argv)
{
    struct options opt;
    struct figures single;
    struct figures batched;
    if (parse_options(argc, argv, &opt) != 0) {
        fprintf(stderr,
                "usage: %s [-n packets] [-b batch] [-s bytes] [-r rounds]"
                " [-e epoll|poll|select|io_uring]\n",
                argv[0]);
        return 2;
    }
    if (setup(&opt) != 0) {
        return 1;
    }
    st_thread_t rx = st_thread_create(receiver, NULL, 1, 0);
    if (rx == NULL) {
        perror("udp_batch: st_thread_create");
        return 1;
    }
    int rc = run(&opt, &single, &batched);
    st_thread_interrupt(rx);
    (void)st_thread_join(rx, NULL);
    (void)st_netfd_close(net.tx);
    (void)st_netfd_close(net.rx);
    (void)st_cond_destroy(net.progress);
    if (rc != 0) {
        st_destroy();
        return 1;
    }
    printf("udp_batch: %ld datagrams of %ld bytes over 127.0.0.1, best of %ld rounds, %s, "
           "window %ld, receiver st_recvmmsg x%d\n",
           opt.packets, opt.size, opt.rounds, st_get_eventsys_name(), net.window, RECV_BATCH);
    printf("                           delivered     in send calls\n");
    printf("st_sendto      1 per call: %10.0f pkt/s %10.0f pkt/s (%ld calls)\n",
           single.delivered, single.sending, single.calls);
    printf("st_sendmmsg %4ld per call: %10.0f pkt/s %10.0f pkt/s (%ld calls)\n", opt.batch,
           batched.delivered, batched.sending, batched.calls);
    printf("ratio sendmmsg/sendto: %.2fx delivered, %.2fx in send calls\n",
           single.delivered > 0 ? batched.delivered / single.delivered : 0.0,
           single.sending > 0 ? batched.sending / single.sending : 0.0);
    printf("RESULT udp_sendto_%ld %.6g pkt/s - UDP %ld B over loopback to a coroutine, "
           "one st_sendto per packet, delivered\n",
           opt.size, single.delivered, opt.size);
    printf("RESULT udp_sendmmsg_%ld_%ld %.6g pkt/s udp_sendto_%ld UDP %ld B over loopback to a "
           "coroutine, st_sendmmsg batches of %ld, delivered\n",
           opt.size, opt.batch, batched.delivered, opt.size, opt.size, opt.batch);
    printf("RESULT udp_sendto_%ld_calls %.6g pkt/s - the same, time inside st_sendto only\n",
           opt.size, single.sending);
    printf("RESULT udp_sendmmsg_%ld_%ld_calls %.6g pkt/s udp_sendto_%ld_calls the same, time "
           "inside st_sendmmsg only\n",
           opt.size, opt.batch, batched.sending, opt.size);
    st_destroy();
    return 0;
}
