/*
 * dns_lookup: resolves many host names at once over UDP, with st: one
 * resolver coroutine per name, each with its own socket.
 *
 * usage: dns_lookup [-s server[:port]] [-t timeout_ms] [-r retries]
 *                   [-c concurrency] [-4 | -6] name...
 *
 *   -s  DNS server: an IPv4 or IPv6 address, with an optional port
 *       (a.b.c.d:port, [v6]:port; default: the first nameserver in
 *       /etc/resolv.conf, else 127.0.0.1, port 53)
 *   -t  time to wait for the answers to one attempt (default 2000 ms)
 *   -r  attempts after the first one for unanswered queries (default 2)
 *   -c  names resolved at the same time (default 100)
 *   -4  ask for A records only; -6 for AAAA only (default both)
 *
 * For every name the resolver sends an A and an AAAA query (recursion
 * desired) and waits for both answers; queries still unanswered when the
 * attempt times out are sent again, with the same ID. Answers are accepted
 * only from the server's address, with a matching ID and question, and are
 * parsed from the wire format (RFC 1035: name compression, CNAME chains).
 *
 * Output, in the order of the arguments, on stdout:
 *
 *   <name> <address>       one line per address, A records first
 *   <name> NXDOMAIN        the name does not exist
 *   <name> no address      it exists but has no A/AAAA record
 *   <name> timeout         no answer after all attempts
 *   <name> SERVFAIL, REFUSED, ...   the server's error
 *   <name> truncated       the answer did not fit a UDP datagram
 *   <name> invalid name    not a valid host name
 *
 * and a summary on stderr. Exit status 0 if every name has an address,
 * 1 if not, 2 on a usage error.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "example_args.h"
#include "st.h"

enum {
    DNS_PORT = 53,
    HEADER_LEN = 12,
    MSG_MAX = 512,        /* a DNS message over UDP without EDNS */
    NAME_MAX_WIRE = 255,
    NAME_TEXT = 256,      /* a name in dotted form, with its NUL */
    LABEL_MAX = 63,
    MAX_JUMPS = 64,       /* compression pointers followed in one name */
    MAX_ADDRS = 16,       /* addresses kept per query */
    TYPE_A = 1,
    TYPE_CNAME = 5,
    TYPE_AAAA = 28,
    CLASS_IN = 1,
    RCODE_NXDOMAIN = 3,
    RESOLVER_STACK = 64 * 1024,
    US_PER_MS = 1000,
    MAX_PORT = 65535,
};

/* The state of one query (one record type of one name). */
enum query_state { Q_PENDING, Q_ANSWERED, Q_TRUNCATED };

struct query {
    int type;                  /* TYPE_A or TYPE_AAAA */
    unsigned short id;
    enum query_state state;
    int rcode;
    int naddrs;
    unsigned char addrs[MAX_ADDRS][16];
    unsigned char msg[MSG_MAX];
    size_t msg_len;
};

struct lookup {
    const char *name;
    int valid;
    int nqueries;
    struct query queries[2];
};

struct options {
    struct sockaddr_storage server;
    socklen_t server_len;
    long timeout_ms;
    long retries;
    long concurrency;
    int want_a;
    int want_aaaa;
};

static struct options opt;
static struct lookup *lookups;
static int nlookups;
static int next_lookup;

/* ---- options ---------------------------------------------------------------------- */

/* Parses "addr", "addr:port", "[v6]" or "[v6]:port" into opt.server. */
static int parse_server(const char *spec)
{
    char host[INET6_ADDRSTRLEN + 1];
    long port = DNS_PORT;
    const char *port_text = NULL;
    size_t hlen = strlen(spec);
    const char *colon = strchr(spec, ':');
    if (spec[0] == '[') {
        const char *close = strchr(spec, ']');
        if (close == NULL || (close[1] != '\0' && close[1] != ':')) {
            return -1;
        }
        hlen = (size_t)(close - spec - 1);
        port_text = close[1] == ':' ? close + 2 : NULL;
        spec++;
    } else if (colon != NULL && strchr(colon + 1, ':') == NULL) { /* exactly one colon */
        hlen = (size_t)(colon - spec);
        port_text = colon + 1;
    }
    if (hlen == 0 || hlen >= sizeof host ||
        (port_text != NULL && example_parse_long(port_text, 1, MAX_PORT, &port) != 0)) {
        return -1;
    }
    memcpy(host, spec, hlen);
    host[hlen] = '\0';
    struct sockaddr_in *v4 = (struct sockaddr_in *)&opt.server;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)&opt.server;
    memset(&opt.server, 0, sizeof opt.server);
    if (inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons((unsigned short)port);
        opt.server_len = sizeof *v4;
    } else if (inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons((unsigned short)port);
        opt.server_len = sizeof *v6;
    } else {
        return -1;
    }
    return 0;
}

/* The first usable nameserver of /etc/resolv.conf, else 127.0.0.1. */
static void default_server(void)
{
    char line[256];
    FILE *f = fopen("/etc/resolv.conf", "r");
    while (f != NULL && fgets(line, sizeof line, f) != NULL) {
        char addr[128];
        if (sscanf(line, " nameserver %127s", addr) == 1 && parse_server(addr) == 0) {
            (void)fclose(f);
            return;
        }
    }
    if (f != NULL) {
        (void)fclose(f);
    }
    (void)parse_server("127.0.0.1");
}

static int parse_options(int argc, char **argv)
{
    int c = 0;
    int have_server = 0;
    opt.timeout_ms = 2000;
    opt.retries = 2;
    opt.concurrency = 100;
    opt.want_a = 1;
    opt.want_aaaa = 1;
    while ((c = getopt(argc, argv, "s:t:r:c:46")) != -1) {
        int rc = 0;
        switch (c) {
        case 's':
            rc = parse_server(optarg);
            have_server = 1;
            break;
        case 't':
            rc = example_parse_long(optarg, 1, 60000, &opt.timeout_ms);
            break;
        case 'r':
            rc = example_parse_long(optarg, 0, 10, &opt.retries);
            break;
        case 'c':
            rc = example_parse_long(optarg, 1, 10000, &opt.concurrency);
            break;
        case '4':
            opt.want_aaaa = 0;
            break;
        case '6':
            opt.want_a = 0;
            break;
        default:
            rc = -1;
            break;
        }
        if (rc != 0) {
            return -1;
        }
    }
    if (!have_server) {
        default_server();
    }
    return (optind < argc && (opt.want_a || opt.want_aaaa)) ? 0 : -1;
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

/* Encodes a dotted name as labels; returns the length, or 0 if invalid. */
static size_t encode_name(const char *name, unsigned char *out)
{
    size_t n = 0;
    const char *p = name;
    if (*p == '\0' || strcmp(p, ".") == 0) {
        return 0;
    }
    while (*p != '\0') {
        size_t len = strcspn(p, ".");
        if (len == 0 || len > LABEL_MAX || n + 1 + len + 1 > NAME_MAX_WIRE) {
            return 0;
        }
        out[n++] = (unsigned char)len;
        memcpy(out + n, p, len);
        n += len;
        p += len;
        if (*p == '.') {
            p++;
        }
    }
    out[n++] = 0;
    return n;
}

/* A query message: header (RD set), one question of class IN. */
static size_t build_query(unsigned char *msg, unsigned id, const char *name, int type)
{
    size_t n = 0;
    memset(msg, 0, HEADER_LEN);
    put16(msg, id);
    put16(msg + 2, 0x0100); /* standard query, recursion desired */
    put16(msg + 4, 1);      /* QDCOUNT */
    n = encode_name(name, msg + HEADER_LEN);
    if (n == 0) {
        return 0;
    }
    n += HEADER_LEN;
    put16(msg + n, (unsigned)type);
    put16(msg + n + 2, CLASS_IN);
    return n + 4;
}

/*
 * Reads the (possibly compressed) name at *off into dotted lower-case
 * text, and moves *off past it. Returns 0, or -1 on a malformed name.
 */
static int read_name(const unsigned char *msg, size_t len, size_t *off, char *out)
{
    size_t pos = *off;
    size_t n = 0;
    int jumps = 0;
    for (;;) {
        if (pos >= len) {
            return -1;
        }
        unsigned label = msg[pos];
        if ((label & 0xC0) == 0xC0) {
            if (pos + 1 >= len || ++jumps > MAX_JUMPS) {
                return -1;
            }
            size_t target = (label & 0x3F) << 8 | msg[pos + 1];
            if (jumps == 1) {
                *off = pos + 2;
            }
            if (target >= pos) {
                return -1; /* pointers go backwards: no loops */
            }
            pos = target;
            continue;
        }
        if (label > LABEL_MAX) {
            return -1;
        }
        if (label == 0) {
            if (jumps == 0) {
                *off = pos + 1;
            }
            out[n] = '\0';
            return 0;
        }
        if (pos + 1 + label > len || n + label + 2 > NAME_TEXT) {
            return -1;
        }
        if (n > 0) {
            out[n++] = '.';
        }
        for (unsigned i = 0; i < label; i++) {
            out[n++] = (char)tolower(msg[pos + 1 + i]);
        }
        pos += 1 + label;
    }
}

/* Does the name match, ignoring case and a trailing dot? */
static int same_name(const char *wire_text, const char *name)
{
    size_t n = strlen(name);
    if (n > 0 && name[n - 1] == '.') {
        n--;
    }
    return strlen(wire_text) == n && strncasecmp(wire_text, name, n) == 0;
}

/* Checks the question section against the query; moves *off past it. */
static int check_question(const unsigned char *msg, size_t len, size_t *off, const char *name,
                          int type)
{
    char qname[NAME_TEXT];
    if (get16(msg + 4) != 1 || read_name(msg, len, off, qname) != 0 || *off + 4 > len ||
        !same_name(qname, name) || get16(msg + *off) != (unsigned)type ||
        get16(msg + *off + 2) != CLASS_IN) {
        return -1;
    }
    *off += 4;
    return 0;
}

/*
 * Walks the answer section: follows CNAMEs from the query name and keeps
 * the addresses of the record type asked for that belong to the chain.
 */
static int parse_answers(const unsigned char *msg, size_t len, size_t off, const char *name,
                         struct query *q)
{
    char owner[NAME_TEXT];
    char current[NAME_TEXT];
    unsigned count = get16(msg + 6);
    size_t want = q->type == TYPE_A ? 4 : 16;
    (void)snprintf(current, sizeof current, "%s", name);
    for (unsigned i = 0; i < count; i++) {
        if (read_name(msg, len, &off, owner) != 0 || off + 10 > len) {
            return -1;
        }
        unsigned type = get16(msg + off);
        unsigned klass = get16(msg + off + 2);
        size_t rdlen = get16(msg + off + 8);
        size_t rdata = off + 10;
        if (rdata + rdlen > len) {
            return -1;
        }
        off = rdata + rdlen;
        if (klass != CLASS_IN || !same_name(owner, current)) {
            continue;
        }
        if (type == TYPE_CNAME) {
            size_t at = rdata;
            if (read_name(msg, len, &at, current) != 0) {
                return -1;
            }
        } else if (type == (unsigned)q->type && rdlen == want && q->naddrs < MAX_ADDRS) {
            memcpy(q->addrs[q->naddrs++], msg + rdata, want);
        }
    }
    return 0;
}

/*
 * Matches a datagram to one of the name's pending queries and records its
 * answer. Returns 0 if it was one, -1 to ignore it.
 */
static int take_response(struct lookup *l, const unsigned char *msg, size_t len)
{
    if (len < HEADER_LEN || (msg[2] & 0x80) == 0 || (msg[2] & 0x78) != 0) {
        return -1; /* not a response to a standard query */
    }
    for (int i = 0; i < l->nqueries; i++) {
        struct query *q = &l->queries[i];
        size_t off = HEADER_LEN;
        if (q->state != Q_PENDING || get16(msg) != q->id ||
            check_question(msg, len, &off, l->name, q->type) != 0) {
            continue;
        }
        q->rcode = msg[3] & 0x0F;
        if ((msg[2] & 0x02) != 0) {
            q->state = Q_TRUNCATED;
        } else {
            q->naddrs = 0;
            if (q->rcode == 0 && parse_answers(msg, len, off, l->name, q) != 0) {
                return -1; /* malformed: keep waiting for a good one */
            }
            q->state = Q_ANSWERED;
        }
        return 0;
    }
    return -1;
}

/* ---- resolving -------------------------------------------------------------------- */

static int same_address(const struct sockaddr_storage *a, socklen_t alen)
{
    if (alen != opt.server_len || a->ss_family != opt.server.ss_family) {
        return 0;
    }
    if (a->ss_family == AF_INET) {
        const struct sockaddr_in *x = (const struct sockaddr_in *)a;
        const struct sockaddr_in *y = (const struct sockaddr_in *)&opt.server;
        return x->sin_port == y->sin_port && x->sin_addr.s_addr == y->sin_addr.s_addr;
    }
    const struct sockaddr_in6 *x = (const struct sockaddr_in6 *)a;
    const struct sockaddr_in6 *y = (const struct sockaddr_in6 *)&opt.server;
    return x->sin6_port == y->sin6_port &&
           memcmp(&x->sin6_addr, &y->sin6_addr, sizeof x->sin6_addr) == 0;
}

/* Is the lookup over: every query answered, or the name known not to exist? */
static int lookup_done(const struct lookup *l)
{
    int pending = 0;
    for (int i = 0; i < l->nqueries; i++) {
        if (l->queries[i].state == Q_ANSWERED && l->queries[i].rcode == RCODE_NXDOMAIN) {
            return 1;
        }
        pending += l->queries[i].state == Q_PENDING;
    }
    return pending == 0;
}

/* One attempt: (re)send the pending queries, collect answers until done or timeout. */
static int attempt(struct lookup *l, st_netfd_t fd)
{
    for (int i = 0; i < l->nqueries; i++) {
        struct query *q = &l->queries[i];
        if (q->state == Q_PENDING &&
            st_sendto(fd, q->msg, (int)q->msg_len, (const struct sockaddr *)&opt.server,
                      (int)opt.server_len, ST_UTIME_NO_TIMEOUT) < 0) {
            return -1;
        }
    }
    st_utime_t deadline = st_utime() + (st_utime_t)opt.timeout_ms * US_PER_MS;
    while (!lookup_done(l)) {
        unsigned char msg[MSG_MAX];
        struct sockaddr_storage from;
        int fromlen = (int)sizeof from;
        st_utime_t now = st_utime();
        if (now >= deadline) {
            return 0;
        }
        int n = st_recvfrom(fd, msg, (int)sizeof msg, (struct sockaddr *)&from, &fromlen,
                            deadline - now);
        if (n < 0) {
            return errno == ETIME ? 0 : -1;
        }
        if (same_address(&from, (socklen_t)fromlen)) {
            (void)take_response(l, msg, (size_t)n);
        }
    }
    return 0;
}

static unsigned short random_id(void)
{
    unsigned short id = 0;
    if (getrandom(&id, sizeof id, 0) != (ssize_t)sizeof id) {
        id = (unsigned short)(st_utime() ^ (st_utime_t)getpid());
    }
    return id;
}

static void resolve(struct lookup *l)
{
    int types[2];
    int ntypes = 0;
    if (opt.want_a) {
        types[ntypes++] = TYPE_A;
    }
    if (opt.want_aaaa) {
        types[ntypes++] = TYPE_AAAA;
    }
    for (int i = 0; i < ntypes; i++) {
        struct query *q = &l->queries[i];
        q->type = types[i];
        q->id = random_id();
        if (i > 0 && q->id == l->queries[0].id) {
            q->id ^= 1;
        }
        q->msg_len = build_query(q->msg, q->id, l->name, q->type);
        if (q->msg_len == 0) {
            return; /* invalid name */
        }
    }
    l->valid = 1;
    l->nqueries = ntypes;
    int sock = socket(opt.server.ss_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    st_netfd_t fd = sock >= 0 ? st_netfd_open_socket(sock) : NULL;
    if (fd == NULL) {
        perror("dns_lookup: socket");
        if (sock >= 0) {
            (void)close(sock);
        }
        return;
    }
    for (long a = 0; a <= opt.retries && !lookup_done(l); a++) {
        if (attempt(l, fd) != 0) {
            perror("dns_lookup: send/receive");
            break;
        }
    }
    (void)st_netfd_close(fd);
}

/* A resolver coroutine: takes names off the shared list until none is left. */
static void *resolver(void *arg)
{
    (void)arg;
    while (next_lookup < nlookups) {
        resolve(&lookups[next_lookup++]);
    }
    return NULL;
}

/* ---- output -------------------------------------------------------------------------- */

static const char *rcode_name(int rcode)
{
    static const char *const names[] = {"NOERROR", "FORMERR", "SERVFAIL", "NXDOMAIN",
                                        "NOTIMP",  "REFUSED", "YXDOMAIN", "YXRRSET",
                                        "NXRRSET", "NOTAUTH", "NOTZONE"};
    return rcode >= 0 && rcode < (int)(sizeof names / sizeof names[0]) ? names[rcode] : "RCODE?";
}

/* Prints a name's result lines; returns 1 if it has an address. */
static int report(const struct lookup *l)
{
    int addresses = 0;
    int answered = 0;
    const char *problem = NULL;
    if (!l->valid) {
        printf("%s invalid name\n", l->name);
        return 0;
    }
    for (int i = 0; i < l->nqueries; i++) {
        const struct query *q = &l->queries[i];
        for (int k = 0; k < q->naddrs; k++) {
            char text[INET6_ADDRSTRLEN];
            (void)inet_ntop(q->type == TYPE_A ? AF_INET : AF_INET6, q->addrs[k], text, sizeof text);
            printf("%s %s\n", l->name, text);
            addresses++;
        }
        if (q->state == Q_ANSWERED && q->rcode == RCODE_NXDOMAIN) {
            problem = "NXDOMAIN";
        } else if (q->state == Q_ANSWERED && q->rcode == 0) {
            answered++;
        } else if (problem == NULL) {
            problem = q->state == Q_PENDING     ? "timeout"
                      : q->state == Q_TRUNCATED ? "truncated"
                                                : rcode_name(q->rcode);
        }
    }
    if (addresses == 0) {
        printf("%s %s\n", l->name, problem != NULL ? problem : "no address");
    }
    return addresses > 0;
}

int main(int argc, char **argv)
{
    char server[INET6_ADDRSTRLEN];
    const void *server_addr = NULL;
    int resolved = 0;
    if (parse_options(argc, argv) != 0) {
        fprintf(stderr,
                "usage: %s [-s server[:port]] [-t timeout_ms] [-r retries] [-c concurrency] "
                "[-4 | -6] name...\n",
                argv[0]);
        return 2;
    }
    nlookups = argc - optind;
    lookups = calloc((size_t)nlookups, sizeof *lookups);
    (void)st_set_eventsys(ST_EVENTSYS_ALT); /* epoll where st has it */
    if (lookups == NULL || st_init() != 0) {
        perror("dns_lookup: start");
        free(lookups);
        return 1;
    }
    for (int i = 0; i < nlookups; i++) {
        lookups[i].name = argv[optind + i];
    }
    st_utime_t start = st_utime();
    long workers = opt.concurrency < nlookups ? opt.concurrency : nlookups;
    st_thread_t *threads = calloc((size_t)workers, sizeof(st_thread_t));
    long started = 0;
    while (threads != NULL && started < workers &&
           (threads[started] = st_thread_create(resolver, NULL, 1, RESOLVER_STACK)) != NULL) {
        started++;
    }
    if (started == 0) {
        perror("dns_lookup: st_thread_create");
        free(threads);
        free(lookups);
        return 1;
    }
    for (long i = 0; i < started; i++) {
        (void)st_thread_join(threads[i], NULL);
    }
    free(threads);
    double elapsed = (double)(st_utime() - start) / 1e6;

    for (int i = 0; i < nlookups; i++) {
        resolved += report(&lookups[i]);
    }
    (void)fflush(stdout);
    if (opt.server.ss_family == AF_INET) {
        server_addr = &((const struct sockaddr_in *)&opt.server)->sin_addr;
    } else {
        server_addr = &((const struct sockaddr_in6 *)&opt.server)->sin6_addr;
    }
    (void)inet_ntop(opt.server.ss_family, server_addr, server, sizeof server);
    fprintf(stderr, "dns_lookup: %d of %d names resolved in %.2f s (server %s port %u)\n",
            resolved, nlookups, elapsed, server,
            ntohs(opt.server.ss_family == AF_INET
                      ? ((const struct sockaddr_in *)&opt.server)->sin_port
                      : ((const struct sockaddr_in6 *)&opt.server)->sin6_port));
    free(lookups);
    return resolved == nlookups ? 0 : 1;
}
