/*
 * dns_fake_server: a tiny DNS server on st with fixed records, for testing
 * dns_lookup without a network.
 *
 * usage: dns_fake_server [-p port] [-t seconds] [-d delay_ms] [-n]
 *
 *   -p  UDP port on 127.0.0.1 (default 0: pick a free one)
 *   -t  stop after this many seconds (default 0: run until SIGINT/SIGTERM)
 *   -d  how long the slow names wait before their answer (default 500 ms)
 *   -n  never answer anything (to test timeouts)
 *
 * Prints `listening on 127.0.0.1:<port>`, and on stop one line
 * `stopped: <q> queries, <a> answered, <d> dropped`.
 *
 * The zone (names match in any case; class IN only):
 *
 *   one.test       A 192.0.2.1
 *   multi.test     A 192.0.2.10, A 192.0.2.11, AAAA 2001:db8::10
 *   v6.test        AAAA 2001:db8::6
 *   alias.test     CNAME one.test (and one.test's records after it)
 *   empty.test     exists, no records
 *   retry.test     A 192.0.2.2, but the first query with a given ID is
 *                  dropped: only a retransmission gets the answer
 *   slow*.test     A 192.0.2.3 (any first label starting with "slow"),
 *                  answered after the -d delay, each in its own coroutine
 *   silent.test    never answered
 *   servfail.test  SERVFAIL
 *   anything else  NXDOMAIN
 *
 * Answers are authoritative, with the question copied and compression
 * pointers for the owner names, as real servers send them.
 *
 * The socket and the stop on a signal or -t are shared with the other
 * example servers (example_net.c, example_stop.c).
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "example_args.h"
#include "example_net.h"
#include "example_stop.h"
#include "st.h"

enum {
    HEADER_LEN = 12,
    MSG_MAX = 512,
    NAME_TEXT = 256,
    LABEL_MAX = 63,
    TYPE_A = 1,
    TYPE_CNAME = 5,
    TYPE_AAAA = 28,
    CLASS_IN = 1,
    TTL = 300,
    RCODE_FORMERR = 1,
    RCODE_SERVFAIL = 2,
    RCODE_NXDOMAIN = 3,
    RCODE_NOTIMP = 4,
    RETRY_IDS = 256, /* IDs of retry.test queries remembered */
    US_PER_S = 1000000,
    MAX_PORT = 65535,
};

struct record {
    const char *owner;
    int type;
    const char *data; /* address text, or the CNAME target */
};

static const struct record zone[] = {
    {"one.test", TYPE_A, "192.0.2.1"},
    {"multi.test", TYPE_A, "192.0.2.10"},
    {"multi.test", TYPE_A, "192.0.2.11"},
    {"multi.test", TYPE_AAAA, "2001:db8::10"},
    {"v6.test", TYPE_AAAA, "2001:db8::6"},
    {"alias.test", TYPE_CNAME, "one.test"},
    {"retry.test", TYPE_A, "192.0.2.2"},
    {"slow.test", TYPE_A, "192.0.2.3"},
};

/* Names that exist without records of their own. */
static const char *const empty_names[] = {"empty.test"};

struct options {
    long port;
    long seconds;
    long delay_ms;
    int never;
};

struct server {
    struct options opt;
    st_netfd_t sock;
    long queries;
    long answered;
    long dropped;
    unsigned short retry_ids[RETRY_IDS];
    int retry_count;
};

static struct server server;

/* A query waiting to be answered late. */
struct delayed {
    unsigned char msg[MSG_MAX];
    size_t len;
    struct sockaddr_storage to;
    int tolen;
};

/* ---- options ---------------------------------------------------------------------- */

static int parse_options(int argc, char **argv, struct options *opt)
{
    int c = 0;
    *opt = (struct options){0, 0, 500, 0};
    while ((c = getopt(argc, argv, "p:t:d:n")) != -1) {
        int rc = 0;
        if (c == 'p') {
            rc = example_parse_long(optarg, 0, MAX_PORT, &opt->port);
        } else if (c == 't') {
            rc = example_parse_long(optarg, 0, 365L * 24 * 3600, &opt->seconds);
        } else if (c == 'd') {
            rc = example_parse_long(optarg, 0, 60000, &opt->delay_ms);
        } else if (c == 'n') {
            opt->never = 1;
        } else {
            rc = -1;
        }
        if (rc != 0) {
            return -1;
        }
    }
    return optind == argc ? 0 : -1;
}

/* ---- the wire format -------------------------------------------------------------- */

static void put16(unsigned char *p, unsigned v)
{
    p[0] = (unsigned char)(v >> 8);
    p[1] = (unsigned char)v;
}

static unsigned get16(const unsigned char *p)
{
    return (unsigned)p[0] << 8 | p[1];
}

/*
 * Reads the question's name (queries carry no compression) as dotted
 * lower-case text; returns the offset after it, or 0.
 */
static size_t read_qname(const unsigned char *msg, size_t len, char *out)
{
    size_t pos = HEADER_LEN;
    size_t n = 0;
    while (pos < len && msg[pos] != 0) {
        size_t label = msg[pos];
        if (label > LABEL_MAX || pos + 1 + label >= len || n + label + 2 > NAME_TEXT) {
            return 0;
        }
        if (n > 0) {
            out[n++] = '.';
        }
        for (size_t i = 0; i < label; i++) {
            out[n++] = (char)tolower(msg[pos + 1 + i]);
        }
        pos += 1 + label;
    }
    out[n] = '\0';
    return pos < len ? pos + 1 : 0;
}

/* Appends a dotted name as labels; returns the new length, or 0 if it does not fit. */
static size_t put_name(unsigned char *msg, size_t n, const char *name)
{
    const char *p = name;
    while (*p != '\0') {
        size_t len = strcspn(p, ".");
        if (len == 0 || len > LABEL_MAX || n + 1 + len + 1 > MSG_MAX) {
            return 0;
        }
        msg[n++] = (unsigned char)len;
        memcpy(msg + n, p, len);
        n += len;
        p += len + (p[len] == '.');
    }
    msg[n++] = 0;
    return n;
}

/*
 * Appends one record whose owner is the name at offset `owner` (a
 * compression pointer). For a CNAME, *target is set to the offset of its
 * target name, the owner of the records that follow it.
 */
static size_t put_record(unsigned char *msg, size_t n, size_t owner, const struct record *r,
                         size_t *target)
{
    unsigned char addr[16];
    size_t rdlen = 0;
    if (n + 12 > MSG_MAX) {
        return 0;
    }
    put16(msg + n, 0xC000 | (unsigned)owner);
    put16(msg + n + 2, (unsigned)r->type);
    put16(msg + n + 4, CLASS_IN);
    put16(msg + n + 6, 0);
    put16(msg + n + 8, TTL);
    n += 12;
    if (r->type == TYPE_CNAME) {
        size_t end = put_name(msg, n, r->data);
        if (end == 0) {
            return 0;
        }
        *target = n;
        rdlen = end - n;
    } else {
        rdlen = r->type == TYPE_A ? 4 : 16;
        if (inet_pton(r->type == TYPE_A ? AF_INET : AF_INET6, r->data, addr) != 1 ||
            n + rdlen > MSG_MAX) {
            return 0;
        }
        memcpy(msg + n, addr, rdlen);
    }
    put16(msg + n - 2, (unsigned)rdlen);
    return n + rdlen;
}

/* The zone's name for a query name: every slow* name is slow.test. */
static const char *zone_name(const char *qname)
{
    const char *dot = strchr(qname, '.');
    if (strncmp(qname, "slow", 4) == 0 && dot != NULL && strcmp(dot, ".test") == 0) {
        return "slow.test";
    }
    return qname;
}

/*
 * Appends the answers for (name, type), following a CNAME; sets *exists if
 * the name has any record. Returns the new length and counts the answers.
 */
static size_t put_answers(unsigned char *msg, size_t n, const char *qname, int type,
                          unsigned *count, int *exists)
{
    const char *name = zone_name(qname);
    size_t owner = HEADER_LEN;
    for (int hop = 0; hop < 8 && n != 0; hop++) {
        const char *next = NULL;
        size_t target = 0;
        for (size_t i = 0; i < sizeof zone / sizeof zone[0] && n != 0; i++) {
            const struct record *r = &zone[i];
            if (strcmp(r->owner, name) != 0) {
                continue;
            }
            *exists = 1;
            if (r->type == type || r->type == TYPE_CNAME) {
                n = put_record(msg, n, owner, r, &target);
                (*count)++;
            }
            if (r->type == TYPE_CNAME) {
                next = r->data;
            }
        }
        if (next == NULL) {
            break;
        }
        name = next;
        owner = target;
    }
    return n;
}

static int name_exists(const char *name)
{
    for (size_t i = 0; i < sizeof empty_names / sizeof empty_names[0]; i++) {
        if (strcmp(empty_names[i], name) == 0) {
            return 1;
        }
    }
    return 0;
}

/* Turns the query in msg (of qlen bytes, question ending at qend) into its response. */
static size_t answer(unsigned char *msg, size_t qend, const char *qname, int type)
{
    unsigned count = 0;
    int exists = name_exists(qname);
    int rcode = 0;
    size_t n = qend;
    if (strcmp(qname, "servfail.test") == 0) {
        rcode = RCODE_SERVFAIL;
    } else {
        n = put_answers(msg, n, qname, type, &count, &exists);
        if (n == 0) {
            n = qend;
            count = 0;
            rcode = RCODE_SERVFAIL;
        } else if (!exists) {
            rcode = RCODE_NXDOMAIN;
        }
    }
    msg[2] = (unsigned char)(0x84 | (msg[2] & 0x01)); /* QR, AA, the query's RD */
    msg[3] = (unsigned char)(0x80 | rcode);          /* RA */
    put16(msg + 6, count);
    put16(msg + 8, 0);
    put16(msg + 10, 0);
    return n;
}

/* A response with only a header and the error code (for queries we cannot parse). */
static size_t error_response(unsigned char *msg, size_t len, int rcode)
{
    if (len < HEADER_LEN) {
        return 0;
    }
    msg[2] = (unsigned char)(0x80 | (msg[2] & 0x79));
    msg[3] = (unsigned char)(0x80 | rcode);
    memset(msg + 4, 0, HEADER_LEN - 4);
    return HEADER_LEN;
}

/* Is this the first time a retry.test query with this ID arrives? */
static int first_retry_query(unsigned id)
{
    for (int i = 0; i < server.retry_count && i < RETRY_IDS; i++) {
        if (server.retry_ids[i] == id) {
            return 0;
        }
    }
    server.retry_ids[server.retry_count % RETRY_IDS] = (unsigned short)id;
    server.retry_count++;
    return 1;
}

/* ---- serving -------------------------------------------------------------------------- */

static void send_reply(const unsigned char *msg, size_t len, const struct sockaddr *to, int tolen)
{
    if (st_sendto(server.sock, msg, (int)len, to, tolen, ST_UTIME_NO_TIMEOUT) == (int)len) {
        server.answered++;
    }
}

static void *answer_later(void *arg)
{
    struct delayed *d = arg;
    if (st_usleep((st_utime_t)server.opt.delay_ms * 1000) == 0) {
        send_reply(d->msg, d->len, (const struct sockaddr *)&d->to, d->tolen);
    }
    free(d);
    return NULL;
}

static void delay_reply(const unsigned char *msg, size_t len, const struct sockaddr_storage *to,
                        int tolen)
{
    struct delayed *d = malloc(sizeof *d);
    if (d == NULL) {
        return;
    }
    memcpy(d->msg, msg, len);
    d->len = len;
    d->to = *to;
    d->tolen = tolen;
    if (st_thread_create(answer_later, d, 0, 0) == NULL) {
        free(d);
    }
}

/* Handles one datagram: answers it now, later, or never. */
static void handle(unsigned char *msg, size_t len, const struct sockaddr_storage *from, int fromlen)
{
    char qname[NAME_TEXT];
    size_t qend = 0;
    size_t n = 0;
    if (server.opt.never || len < HEADER_LEN || (msg[2] & 0x80) != 0) {
        server.dropped++; /* -n, runts, and responses */
        return;
    }
    if ((msg[2] & 0x78) != 0) {
        n = error_response(msg, len, RCODE_NOTIMP);
    } else if (get16(msg + 4) != 1 || (qend = read_qname(msg, len, qname)) == 0 ||
               qend + 4 > len || get16(msg + qend + 2) != CLASS_IN) {
        n = error_response(msg, len, RCODE_FORMERR);
    } else if (strcmp(qname, "silent.test") == 0 ||
               (strcmp(qname, "retry.test") == 0 && first_retry_query(get16(msg)))) {
        server.dropped++;
        return;
    } else {
        n = answer(msg, qend + 4, qname, (int)get16(msg + qend));
        if (strcmp(zone_name(qname), "slow.test") == 0 && server.opt.delay_ms > 0) {
            delay_reply(msg, n, from, fromlen);
            return;
        }
    }
    send_reply(msg, n, (const struct sockaddr *)from, fromlen);
}

static void serve(void)
{
    for (;;) {
        unsigned char msg[MSG_MAX];
        struct sockaddr_storage from;
        int fromlen = (int)sizeof from;
        int n = st_recvfrom(server.sock, msg, (int)sizeof msg, (struct sockaddr *)&from, &fromlen,
                            ST_UTIME_NO_TIMEOUT);
        if (n < 0) {
            if (errno == EINTR) {
                return; /* stopping */
            }
            perror("dns_fake_server: recvfrom");
            continue;
        }
        server.queries++;
        handle(msg, (size_t)n, &from, fromlen);
    }
}

/* ---- start and stop ------------------------------------------------------------------- */

int main(int argc, char **argv)
{
    unsigned port = 0;
    if (parse_options(argc, argv, &server.opt) != 0) {
        fprintf(stderr, "usage: %s [-p port] [-t seconds] [-d delay_ms] [-n]\n", argv[0]);
        return 2;
    }
    (void)st_set_eventsys(ST_EVENTSYS_ALT); /* epoll where st has it */
    if (st_init() != 0) {
        perror("dns_fake_server: st_init");
        return 1;
    }
    server.sock = example_open_loopback(SOCK_DGRAM, server.opt.port, 0, 0, &port);
    if (server.sock == NULL) {
        fprintf(stderr, "dns_fake_server: cannot bind 127.0.0.1:%ld: %s\n", server.opt.port,
                strerror(errno));
        return 1;
    }
    /* The stop interrupts this coroutine out of st_recvfrom in serve(). */
    if (example_stop_init(st_thread_self(), server.opt.seconds) != 0) {
        perror("dns_fake_server: signals");
        return 1;
    }
    printf("listening on 127.0.0.1:%u\n", port);
    (void)fflush(stdout);
    serve();
    (void)st_netfd_close(server.sock);
    printf("stopped: %ld queries, %ld answered, %ld dropped\n", server.queries, server.answered,
           server.dropped);
    (void)fflush(stdout);
    return 0;
}
