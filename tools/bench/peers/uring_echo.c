/*
 * The hand-written io_uring peer of the echo benchmark (README.md here):
 * the floor an io_uring event loop can reach, against which st's io_uring
 * engine is measured. Single-threaded, one io_uring_submit_and_wait per
 * turn of the loop, then every completion it brought.
 *
 * It uses what the kernel offers, probed at start on a scratch ring:
 *   - IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN (completion
 *     work runs only when the loop asks for completions), else
 *     COOP_TASKRUN, else nothing;
 *   - a provided-buffer ring (io_uring_register_buf_ring), from which each
 *     receive takes a buffer; the echo is sent from that buffer, which goes
 *     back to the ring when the send completes;
 *   - multishot receive (one request per connection for its whole life)
 *     when the buffer ring is there, else a receive per message;
 *   - multishot accept, else an accept per connection.
 * Without a buffer ring each connection receives into a buffer of its own.
 * `--probe` prints what was found as a NOTE line.
 *
 * A connection sends one buffer at a time, in the order received (a queue
 * of buffer ids), so echoes never overtake each other. It is closed once
 * its receive has ended (end of stream, or an error) and nothing is being
 * sent; a failed send shuts the socket down so the receive ends too.
 */
#include <errno.h>
#include <liburing.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "peer.h"

enum {
    SQ_ENTRIES = 4096,
    CQ_ENTRIES = 32768,
    /* More than the requests in flight at 10 000 connections; 32 768 at most. */
    BUF_COUNT = 16384,
    BUF_SIZE = 2048, /* a 64-byte request uses one; two share a page */
    BGID = 1,
    PROBE_BUFS = 8,
    MAX_FDS = 1 << 20,
};

enum op { OP_ACCEPT = 1, OP_RECV, OP_SEND };

struct features {
    unsigned setup_flags;
    bool buf_ring;
    bool recv_multishot;
    bool accept_multishot;
};

struct conn {
    char *own;          /* without a buffer ring: this connection's buffer */
    unsigned own_len;   /* bytes in it */
    int q_head;         /* buffers received, not yet sent back: ids, -1 if none */
    int q_tail;
    unsigned off;       /* bytes of the head buffer (or of `own`) already sent */
    bool open;
    bool recv_armed;
    bool sending;
    bool closing;       /* no more receives: close when the sends are done */
};

struct server {
    struct io_uring ring;
    struct features feat;
    struct io_uring_buf_ring *br;
    char *bufs;
    int next[BUF_COUNT];         /* per buffer id: the next in its connection's queue */
    unsigned len[BUF_COUNT];     /* per buffer id: bytes received into it */
    int returned;                /* buffers given back since the last advance */
    struct conn *conns;          /* by fd */
    int nfds;
    bool once;
};

static uint64_t tag(enum op op, int fd)
{
    return ((uint64_t)op << 32) | (uint32_t)fd;
}

/* ---- set-up and probing ---------------------------------------------------------------- */

/* The ring with the best setup flags the kernel takes; 0 or -errno. */
static int ring_init(struct io_uring *ring, unsigned *flags_used)
{
    static const unsigned tries[] = {
        IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_DEFER_TASKRUN,
        IORING_SETUP_SINGLE_ISSUER | IORING_SETUP_COOP_TASKRUN,
        IORING_SETUP_COOP_TASKRUN,
        0,
    };
    int rc = -EINVAL;
    for (size_t i = 0; i < sizeof tries / sizeof tries[0] && rc == -EINVAL; i++) {
        struct io_uring_params p;
        memset(&p, 0, sizeof p);
        p.flags = tries[i] | IORING_SETUP_CQSIZE;
        p.cq_entries = CQ_ENTRIES;
        rc = io_uring_queue_init_params(SQ_ENTRIES, ring, &p);
        if (rc == 0) {
            *flags_used = tries[i];
        }
    }
    return rc;
}

/* Register a buffer ring of `entries` ids at `ring_mem` (page-aligned); 0 or -errno. */
static int buf_ring_register(struct io_uring *ring, struct io_uring_buf_ring *ring_mem,
                             unsigned entries)
{
    struct io_uring_buf_reg reg;
    memset(&reg, 0, sizeof reg);
    reg.ring_addr = (uint64_t)(uintptr_t)ring_mem;
    reg.ring_entries = entries;
    reg.bgid = BGID;
    io_uring_buf_ring_init(ring_mem);
    return io_uring_register_buf_ring(ring, &reg, 0);
}

/* Fill a registered ring with `count` buffers of `size` bytes from `mem`. */
static void buf_ring_fill(struct io_uring_buf_ring *br, char *mem, unsigned count, unsigned size)
{
    int mask = io_uring_buf_ring_mask(count);
    for (unsigned i = 0; i < count; i++) {
        io_uring_buf_ring_add(br, mem + (size_t)i * size, size, (unsigned short)i, mask, (int)i);
    }
    io_uring_buf_ring_advance(br, (int)count);
}

/* Submit what is queued and wait up to a second for one completion: its res and flags. */
static int probe_wait(struct io_uring *ring, unsigned *flags)
{
    struct io_uring_cqe *cqe = NULL;
    struct __kernel_timespec ts = {.tv_sec = 1, .tv_nsec = 0};
    if (io_uring_submit_and_wait_timeout(ring, &cqe, 1, &ts, NULL) < 0 || cqe == NULL) {
        return -ETIME;
    }
    int res = cqe->res;
    *flags = cqe->flags;
    io_uring_cqe_seen(ring, cqe);
    return res;
}

/* A connected pair over a scratch loopback listener: lfd, client and nothing accepted yet. */
static int probe_pair(int *lfd, int *client)
{
    struct sockaddr_in addr;
    socklen_t len = sizeof addr;
    memset(&addr, 0, sizeof addr);
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    *lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    *client = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (*lfd < 0 || *client < 0 || bind(*lfd, (struct sockaddr *)&addr, sizeof addr) != 0 ||
        listen(*lfd, 4) != 0 || getsockname(*lfd, (struct sockaddr *)&addr, &len) != 0 ||
        connect(*client, (struct sockaddr *)&addr, sizeof addr) != 0) {
        return -1;
    }
    return 0;
}

/*
 * Which accept and receive forms work, on a scratch ring and a scratch
 * connection: a multishot accept must deliver the connection and stay armed,
 * a multishot receive must deliver a byte into a provided buffer and stay
 * armed. Tearing the ring down cancels what is still armed.
 */
static void probe_ops(struct io_uring *ring, struct features *f)
{
    int lfd = -1;
    int client = -1;
    int conn = -1;
    unsigned flags = 0;
    size_t ring_bytes = PROBE_BUFS * sizeof(struct io_uring_buf);
    static char mem[PROBE_BUFS][64];
    void *br = mmap(NULL, ring_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (br != MAP_FAILED && buf_ring_register(ring, br, PROBE_BUFS) == 0) {
        f->buf_ring = true;
        buf_ring_fill(br, &mem[0][0], PROBE_BUFS, sizeof mem[0]);
    }
    if (probe_pair(&lfd, &client) == 0) {
        io_uring_prep_multishot_accept(io_uring_get_sqe(ring), lfd, NULL, NULL, 0);
        conn = probe_wait(ring, &flags);
        f->accept_multishot = conn >= 0 && (flags & IORING_CQE_F_MORE) != 0;
        if (conn < 0) {
            conn = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        }
    }
    if (f->buf_ring && conn >= 0) {
        struct io_uring_sqe *sqe = io_uring_get_sqe(ring);
        io_uring_prep_recv_multishot(sqe, conn, NULL, 0, 0);
        sqe->flags |= IOSQE_BUFFER_SELECT;
        sqe->buf_group = BGID;
        f->recv_multishot = send(client, "x", 1, MSG_NOSIGNAL) == 1 &&
                            probe_wait(ring, &flags) == 1 &&
                            (flags & (IORING_CQE_F_MORE | IORING_CQE_F_BUFFER)) ==
                                (IORING_CQE_F_MORE | IORING_CQE_F_BUFFER);
    }
    io_uring_queue_exit(ring);
    const int fds[] = {lfd, client, conn};
    for (size_t i = 0; i < sizeof fds / sizeof fds[0]; i++) {
        if (fds[i] >= 0) {
            (void)close(fds[i]);
        }
    }
    if (br != MAP_FAILED) {
        (void)munmap(br, ring_bytes);
    }
}

static int probe(struct features *f)
{
    struct io_uring scratch;
    memset(f, 0, sizeof *f);
    int rc = ring_init(&scratch, &f->setup_flags);
    if (rc != 0) {
        fprintf(stderr, "uring_echo: io_uring_queue_init_params: %s\n", strerror(-rc));
        return -1;
    }
    probe_ops(&scratch, f);
    return 0;
}

static void print_features(const struct features *f)
{
    const char *setup = "no setup flags";
    if (f->setup_flags & IORING_SETUP_DEFER_TASKRUN) {
        setup = "SINGLE_ISSUER|DEFER_TASKRUN";
    } else if (f->setup_flags & IORING_SETUP_SINGLE_ISSUER) {
        setup = "SINGLE_ISSUER|COOP_TASKRUN";
    } else if (f->setup_flags & IORING_SETUP_COOP_TASKRUN) {
        setup = "COOP_TASKRUN";
    }
    printf("NOTE uring peer: %s, CQ %d entries; ", setup, CQ_ENTRIES);
    if (f->buf_ring) {
        printf("provided-buffer ring, %d x %d B; %s recv; ", BUF_COUNT, BUF_SIZE,
               f->recv_multishot ? "multishot" : "one-shot");
    } else {
        printf("no buffer ring: one-shot recv into a %d-byte buffer per connection; ", PEER_BUF);
    }
    printf("%s accept; send from the received buffer; one io_uring_submit_and_wait per loop\n",
           f->accept_multishot ? "multishot" : "one-shot");
}

/* ---- the server ---------------------------------------------------------------------------- */

static struct io_uring_sqe *sqe_get(struct server *s)
{
    struct io_uring_sqe *sqe = io_uring_get_sqe(&s->ring);
    if (sqe == NULL) { /* the submission queue is full: hand it over, no waiting */
        (void)io_uring_submit(&s->ring);
        sqe = io_uring_get_sqe(&s->ring);
    }
    if (sqe == NULL) {
        fprintf(stderr, "uring_echo: no submission queue entry\n");
        exit(1);
    }
    return sqe;
}

static void arm_accept(struct server *s)
{
    struct io_uring_sqe *sqe = sqe_get(s);
    if (s->feat.accept_multishot) {
        io_uring_prep_multishot_accept(sqe, PEER_LISTEN_FD, NULL, NULL, SOCK_CLOEXEC);
    } else {
        io_uring_prep_accept(sqe, PEER_LISTEN_FD, NULL, NULL, SOCK_CLOEXEC);
    }
    io_uring_sqe_set_data64(sqe, tag(OP_ACCEPT, PEER_LISTEN_FD));
}

static void arm_recv(struct server *s, int fd)
{
    struct conn *c = &s->conns[fd];
    struct io_uring_sqe *sqe = sqe_get(s);
    if (s->feat.recv_multishot) {
        io_uring_prep_recv_multishot(sqe, fd, NULL, 0, 0);
    } else if (s->feat.buf_ring) {
        io_uring_prep_recv(sqe, fd, NULL, BUF_SIZE, 0);
    } else {
        io_uring_prep_recv(sqe, fd, c->own, PEER_BUF, 0);
    }
    if (s->feat.buf_ring) {
        sqe->flags |= IOSQE_BUFFER_SELECT;
        sqe->buf_group = BGID;
    }
    io_uring_sqe_set_data64(sqe, tag(OP_RECV, fd));
    c->recv_armed = true;
}

/* Send the rest of the connection's head buffer. */
static void send_head(struct server *s, int fd)
{
    struct conn *c = &s->conns[fd];
    const char *data = c->own;
    unsigned len = c->own_len;
    if (s->feat.buf_ring) {
        data = s->bufs + (size_t)c->q_head * BUF_SIZE;
        len = s->len[c->q_head];
    }
    struct io_uring_sqe *sqe = sqe_get(s);
    io_uring_prep_send(sqe, fd, data + c->off, len - c->off, MSG_NOSIGNAL);
    io_uring_sqe_set_data64(sqe, tag(OP_SEND, fd));
    c->sending = true;
}

/* Give a buffer back to the ring (made visible at the end of the batch). */
static void buf_return(struct server *s, int bid)
{
    io_uring_buf_ring_add(s->br, s->bufs + (size_t)bid * BUF_SIZE, BUF_SIZE, (unsigned short)bid,
                          io_uring_buf_ring_mask(BUF_COUNT), s->returned++);
}

/* Drop the connection's head buffer; the next one is sent if there is one. */
static void queue_pop(struct server *s, int fd)
{
    struct conn *c = &s->conns[fd];
    int bid = c->q_head;
    c->q_head = s->next[bid];
    if (c->q_head < 0) {
        c->q_tail = -1;
    }
    c->off = 0;
    buf_return(s, bid);
}

static void maybe_close(struct server *s, int fd)
{
    struct conn *c = &s->conns[fd];
    if (!c->closing || c->recv_armed || c->sending) {
        return;
    }
    while (s->feat.buf_ring && c->q_head >= 0) {
        queue_pop(s, fd);
    }
    free(c->own);
    memset(c, 0, sizeof *c);
    (void)close(fd);
    if (s->once) {
        exit(0);
    }
}

static void on_accept(struct server *s, int res, unsigned flags)
{
    if ((flags & IORING_CQE_F_MORE) == 0) {
        arm_accept(s);
    }
    if (res < 0) {
        if (res != -ECONNABORTED && res != -EINTR) {
            fprintf(stderr, "uring_echo: accept: %s\n", strerror(-res));
        }
        return;
    }
    struct conn *c = res < s->nfds ? &s->conns[res] : NULL;
    if (c == NULL || (!s->feat.buf_ring && (c->own = malloc(PEER_BUF)) == NULL)) {
        fprintf(stderr, "uring_echo: connection fd %d dropped\n", res);
        (void)close(res);
        return;
    }
    c->open = true;
    c->q_head = c->q_tail = -1;
    peer_nodelay(res);
    arm_recv(s, res);
}

static void on_recv(struct server *s, int fd, int res, unsigned flags)
{
    struct conn *c = &s->conns[fd];
    bool more = (flags & IORING_CQE_F_MORE) != 0;
    c->recv_armed = more;
    if (res > 0 && !s->feat.buf_ring) {
        c->own_len = (unsigned)res;
        c->off = 0;
        send_head(s, fd); /* the next receive is armed when this send is done */
        return;
    }
    if (res > 0) {
        int bid = (int)(flags >> IORING_CQE_BUFFER_SHIFT);
        if (c->closing) {
            buf_return(s, bid);
        } else {
            s->len[bid] = (unsigned)res;
            s->next[bid] = -1;
            if (c->q_tail >= 0) {
                s->next[c->q_tail] = bid;
            } else {
                c->q_head = bid;
            }
            c->q_tail = bid;
            if (!c->sending) {
                send_head(s, fd);
            }
        }
    }
    if (res > 0 || res == -ENOBUFS) { /* ENOBUFS: the sends in flight give buffers back */
        if (!more && !c->closing) {
            arm_recv(s, fd);
        }
        maybe_close(s, fd);
        return;
    }
    c->closing = true; /* end of stream, or an error */
    maybe_close(s, fd);
}

static void on_send(struct server *s, int fd, int res)
{
    struct conn *c = &s->conns[fd];
    c->sending = false;
    if (res <= 0) {
        c->closing = true;
        if (c->recv_armed) {
            (void)shutdown(fd, SHUT_RDWR); /* ends the receive; then it closes */
        }
        maybe_close(s, fd);
        return;
    }
    c->off += (unsigned)res;
    unsigned len = s->feat.buf_ring ? s->len[c->q_head] : c->own_len;
    if (c->off < len) {
        send_head(s, fd); /* a short send: the rest */
        return;
    }
    if (s->feat.buf_ring) {
        queue_pop(s, fd);
        if (c->q_head >= 0) {
            send_head(s, fd);
        }
    } else if (!c->closing) {
        c->off = 0;
        arm_recv(s, fd);
    }
    maybe_close(s, fd);
}

static void on_cqe(struct server *s, const struct io_uring_cqe *cqe)
{
    uint64_t data = io_uring_cqe_get_data64(cqe);
    int fd = (int)(uint32_t)data;
    switch ((enum op)(data >> 32)) {
    case OP_ACCEPT:
        on_accept(s, cqe->res, cqe->flags);
        break;
    case OP_RECV:
        on_recv(s, fd, cqe->res, cqe->flags);
        break;
    case OP_SEND:
        on_send(s, fd, cqe->res);
        break;
    }
}

static int server_init(struct server *s)
{
    struct rlimit rl;
    unsigned flags = 0;
    int rc = ring_init(&s->ring, &flags);
    if (rc != 0 || flags != s->feat.setup_flags) {
        fprintf(stderr, "uring_echo: io_uring_queue_init_params: %s\n",
                rc != 0 ? strerror(-rc) : "other setup flags than the probe's");
        return -1;
    }
    s->nfds = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < MAX_FDS ? (int)rl.rlim_cur
                                                                          : MAX_FDS;
    s->conns = calloc((size_t)s->nfds, sizeof *s->conns);
    if (s->conns == NULL) {
        fprintf(stderr, "uring_echo: out of memory\n");
        return -1;
    }
    if (s->feat.buf_ring) {
        size_t ring_bytes = BUF_COUNT * sizeof(struct io_uring_buf);
        void *br = mmap(NULL, ring_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1,
                        0);
        void *bufs = mmap(NULL, (size_t)BUF_COUNT * BUF_SIZE, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (br == MAP_FAILED || bufs == MAP_FAILED ||
            (rc = buf_ring_register(&s->ring, br, BUF_COUNT)) != 0) {
            fprintf(stderr, "uring_echo: buffer ring: %s\n", strerror(rc != 0 ? -rc : errno));
            return -1;
        }
        s->br = br;
        s->bufs = bufs;
        buf_ring_fill(s->br, s->bufs, BUF_COUNT, BUF_SIZE);
    }
    return 0;
}

static int serve(struct server *s)
{
    arm_accept(s);
    for (;;) {
        int rc = io_uring_submit_and_wait(&s->ring, 1);
        if (rc < 0 && rc != -EINTR && rc != -EAGAIN && rc != -EBUSY) {
            fprintf(stderr, "uring_echo: io_uring_submit_and_wait: %s\n", strerror(-rc));
            return -1;
        }
        unsigned head = 0;
        unsigned seen = 0;
        struct io_uring_cqe *cqe = NULL;
        io_uring_for_each_cqe(&s->ring, head, cqe)
        {
            on_cqe(s, cqe);
            seen++;
        }
        io_uring_cq_advance(&s->ring, seen);
        if (s->returned > 0) {
            io_uring_buf_ring_advance(s->br, s->returned);
            s->returned = 0;
        }
    }
}

int main(int argc, char **argv)
{
    struct peer_args args;
    static struct server s;
    if (peer_parse_args(argc, argv, &args) != 0) {
        return 2;
    }
    if (probe(&s.feat) != 0) {
        return 1;
    }
    if (args.probe) {
        print_features(&s.feat);
        return 0;
    }
    s.once = args.once;
    if (server_init(&s) != 0) {
        return 1;
    }
    return serve(&s) == 0 ? 0 : 1;
}
