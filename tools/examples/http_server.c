/*
 * http_server: a static file HTTP/1.1 server on st, one coroutine per
 * connection.
 *
 * usage: http_server [-p port] [-r root] [-w workers] [-t seconds]
 *                    [-i idle_seconds] [-T request_seconds]
 *
 *   -p  TCP port on 127.0.0.1 (default 0: pick a free one)
 *   -r  directory to serve (default: the current directory)
 *   -w  worker processes (default 1: serve in this process). With N > 1 the
 *       process forks N workers; each has its own SO_REUSEPORT listener on
 *       the same port and its own st scheduler, so the kernel spreads the
 *       connections over them and each can run on its own CPU. The parent
 *       only waits for them and forwards SIGINT and SIGTERM.
 *   -t  stop after this many seconds (default 0: run until SIGINT/SIGTERM)
 *   -i  keep-alive idle timeout: a connection that sends no new request
 *       for this long is closed (default 15)
 *   -T  request timeout: a request head that is not complete this many
 *       seconds after its first byte gets 408 and the connection closes; a
 *       request body gets as long again (default 10)
 *
 * Prints `listening on 127.0.0.1:<port>` once every worker accepts
 * connections, and when a worker stops, one line
 * `worker <pid>: <c> connections, <r> requests`.
 *
 * What it speaks: GET and HEAD of regular files under the root (a
 * directory serves its index.html), with Content-Length, Content-Type by
 * extension, Date and Last-Modified. HTTP/1.1 connections stay open unless
 * the request says `Connection: close`; HTTP/1.0 ones close unless it says
 * `Connection: keep-alive`. Pipelined requests are answered in order.
 * Errors: 400 (malformed request, missing Host in HTTP/1.1, a ".." path
 * segment), 403 (a path that leaves the root through a symlink, or an
 * unreadable file), 404, 405 (other methods; Allow: GET, HEAD), 408, 413
 * (request body over 64 KiB), 414, 431 (request head over 8 KiB), 501
 * (Transfer-Encoding), 505 (not HTTP/1.x).
 *
 * Paths: the target is percent-decoded, split on '/', and refused if a
 * segment is ".."; the file is then opened relative to the root with
 * openat2(RESOLVE_BENEATH), so that no symlink leads out of the root either
 * (on kernels without openat2, the resolved path is checked instead).
 *
 * File reads are ordinary blocking read(2) calls on the page cache; the
 * socket side is st's. The body goes out in 64 KiB chunks, the first one
 * together with the header in one writev.
 *
 * The listening socket, the accept loop, the stop and the list of live
 * connections are shared with the other example servers (example_net.c,
 * example_stop.c, example_conns.c); this file is HTTP and the workers.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/prctl.h>
#endif
#if defined(SYS_openat2) && defined(__has_include)
#if __has_include(<linux/openat2.h>)
#include <linux/openat2.h>
#define HAVE_OPENAT2 1
#endif
#endif

#include "example_args.h"
#include "example_conns.h"
#include "example_net.h"
#include "example_stop.h"
#include "st.h"

enum {
    HEAD_MAX = 8192,           /* request line and header fields */
    BODY_MAX = 64 * 1024,      /* largest request body read (and dropped) */
    CHUNK = 64 * 1024,         /* file read and socket write unit */
    SMALL_CHUNK = 8192,        /* files up to this size need no heap buffer */
    CONN_STACK = 64 * 1024,    /* coroutine stack: SMALL_CHUNK plus headroom */
    HEADER_CAP = 1024,         /* formatted response header */
    BACKLOG = 4096,
    WRITE_TIMEOUT_S = 30,
    LINGER_TIMEOUT_S = 2,
    LINGER_MAX = 256 * 1024,
    DRAIN_TIMEOUT_S = 5,
    READY_TIMEOUT_MS = 10000,
    MAX_WORKERS = 256,
    MAX_PORT = 65535,
    US_PER_S = 1000000,
};

/* Outcomes of reading a request head, besides an HTTP status. */
enum { READ_OK = 0, READ_CLOSED = -1 };

struct conn {
    struct example_conn link; /* in server.conns */
    st_netfd_t fd;
    st_thread_t thread;
    int busy;     /* between a complete request head and the end of its response */
    size_t len;   /* bytes in buf */
    char buf[HEAD_MAX];
};

struct request {
    const char *method;
    const char *target;
    int minor;                 /* HTTP/1.<minor> */
    int head;                  /* the method is HEAD: no body in the response */
    int conn_close;            /* Connection: close */
    int conn_keep_alive;       /* Connection: keep-alive */
    int hosts;                 /* number of Host fields */
    int transfer_encoding;     /* a Transfer-Encoding field was present */
    int expect;                /* an Expect field was present */
    long long content_length;  /* -1: none */
    int keep_alive;            /* the verdict */
};

struct options {
    long port;
    const char *root;
    long workers;
    long seconds;
    long idle_s;
    long request_s;
};

struct server {
    struct options opt;
    int root_fd;
    char root_real[PATH_MAX];
    st_netfd_t listener;
    struct example_conns conns; /* live connections, for the shutdown */
    long connections;
    long requests;
};

static struct server server;

/* ---- options ---------------------------------------------------------------------- */

static int parse_options(int argc, char **argv, struct options *opt)
{
    int c = 0;
    *opt = (struct options){0, ".", 1, 0, 15, 10};
    while ((c = getopt(argc, argv, "p:r:w:t:i:T:")) != -1) {
        int rc = 0;
        switch (c) {
        case 'p':
            rc = example_parse_long(optarg, 0, MAX_PORT, &opt->port);
            break;
        case 'r':
            opt->root = optarg;
            break;
        case 'w':
            rc = example_parse_long(optarg, 1, MAX_WORKERS, &opt->workers);
            break;
        case 't':
            rc = example_parse_long(optarg, 0, 365L * 24 * 3600, &opt->seconds);
            break;
        case 'i':
            rc = example_parse_long(optarg, 1, 24L * 3600, &opt->idle_s);
            break;
        case 'T':
            rc = example_parse_long(optarg, 1, 24L * 3600, &opt->request_s);
            break;
        default:
            rc = -1;
            break;
        }
        if (rc != 0) {
            return -1;
        }
    }
    return optind == argc ? 0 : -1;
}

/* ---- time strings -------------------------------------------------------------------- */

static void http_date(time_t t, char *out, size_t cap)
{
    struct tm tm;
    if (gmtime_r(&t, &tm) == NULL || strftime(out, cap, "%a, %d %b %Y %H:%M:%S GMT", &tm) == 0) {
        (void)snprintf(out, cap, "Thu, 01 Jan 1970 00:00:00 GMT");
    }
}

/* The Date header value, formatted once per second. */
static const char *date_now(void)
{
    static char text[64];
    static time_t cached = -1;
    time_t now = st_time();
    if (now != cached) {
        http_date(now, text, sizeof text);
        cached = now;
    }
    return text;
}

/* ---- responses ----------------------------------------------------------------------- */

static const char *reason(int status)
{
    switch (status) {
    case 200: return "OK";
    case 400: return "Bad Request";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 431: return "Request Header Fields Too Large";
    case 501: return "Not Implemented";
    case 505: return "HTTP Version Not Supported";
    default: return "Internal Server Error";
    }
}

static const char *content_type(const char *path)
{
    static const struct {
        const char *ext;
        const char *type;
    } types[] = {
        {"html", "text/html; charset=utf-8"}, {"htm", "text/html; charset=utf-8"},
        {"txt", "text/plain; charset=utf-8"}, {"css", "text/css"},
        {"js", "text/javascript"},            {"json", "application/json"},
        {"xml", "application/xml"},           {"svg", "image/svg+xml"},
        {"png", "image/png"},                 {"jpg", "image/jpeg"},
        {"jpeg", "image/jpeg"},               {"gif", "image/gif"},
        {"ico", "image/x-icon"},              {"pdf", "application/pdf"},
        {"wasm", "application/wasm"},
    };
    const char *slash = strrchr(path, '/');
    const char *dot = strrchr(slash != NULL ? slash : path, '.');
    if (dot != NULL) {
        for (size_t i = 0; i < sizeof types / sizeof types[0]; i++) {
            if (strcasecmp(dot + 1, types[i].ext) == 0) {
                return types[i].type;
            }
        }
    }
    return "application/octet-stream";
}

/* Formats a response head; returns its length (it always fits). */
static size_t format_head(char *out, int status, const char *type, long long length,
                          int keep_alive, const char *extra)
{
    int n = snprintf(out, HEADER_CAP,
                     "HTTP/1.1 %d %s\r\n"
                     "Server: st-http\r\n"
                     "Date: %s\r\n"
                     "Content-Type: %s\r\n"
                     "Content-Length: %lld\r\n"
                     "%s"
                     "Connection: %s\r\n"
                     "\r\n",
                     status, reason(status), date_now(), type, length, extra,
                     keep_alive ? "keep-alive" : "close");
    return n > 0 && n < HEADER_CAP ? (size_t)n : 0;
}

static int send_iov(struct conn *c, const struct iovec *iov, int n)
{
    size_t total = 0;
    for (int i = 0; i < n; i++) {
        total += iov[i].iov_len;
    }
    return st_writev(c->fd, iov, n, (st_utime_t)WRITE_TIMEOUT_S * US_PER_S) == (ssize_t)total ? 0
                                                                                            : -1;
}

/* A short text/plain response for an error status. */
static int send_error(struct conn *c, int status, int head_only, int keep_alive)
{
    char head[HEADER_CAP];
    char body[64];
    const char *extra = status == 405 ? "Allow: GET, HEAD\r\n" : "";
    int blen = snprintf(body, sizeof body, "%d %s\n", status, reason(status));
    size_t hlen = format_head(head, status, "text/plain; charset=utf-8", blen, keep_alive, extra);
    struct iovec iov[2] = {{head, hlen}, {body, (size_t)blen}};
    return send_iov(c, iov, head_only ? 1 : 2);
}

/* ---- request heads ---------------------------------------------------------------------- */

/* Length of the head (through its empty line) at the start of buf, or 0. */
static size_t head_end(const char *buf, size_t len)
{
    for (size_t i = 0; i + 1 < len; i++) {
        if (buf[i] != '\n') {
            continue;
        }
        if (buf[i + 1] == '\n') {
            return i + 2;
        }
        if (buf[i + 1] == '\r' && i + 2 < len && buf[i + 2] == '\n') {
            return i + 3;
        }
    }
    return 0;
}

static st_utime_t remaining(st_utime_t deadline)
{
    st_utime_t now = st_utime();
    return now < deadline ? deadline - now : 0;
}

/*
 * Reads until c->buf holds a complete head; returns its length in *head_len
 * and READ_OK, READ_CLOSED (peer gone, idle timeout, error, or stop), or an
 * HTTP error status (408, 431). Blank lines before a request are skipped.
 */
static int read_head(struct conn *c, size_t *head_len)
{
    st_utime_t deadline = 0;
    for (;;) {
        size_t skip = 0;
        while (skip < c->len && (c->buf[skip] == '\r' || c->buf[skip] == '\n')) {
            skip++;
        }
        if (skip > 0) {
            memmove(c->buf, c->buf + skip, c->len - skip);
            c->len -= skip;
        }
        *head_len = head_end(c->buf, c->len);
        if (*head_len > 0) {
            return READ_OK;
        }
        if (c->len == sizeof c->buf) {
            return 431;
        }
        st_utime_t timeout = (st_utime_t)server.opt.idle_s * US_PER_S;
        if (c->len > 0) {
            if (deadline == 0) {
                deadline = st_utime() + (st_utime_t)server.opt.request_s * US_PER_S;
            }
            timeout = remaining(deadline);
        }
        if (example_stopping() && c->len == 0) {
            return READ_CLOSED;
        }
        ssize_t n = st_read(c->fd, c->buf + c->len, sizeof c->buf - c->len, timeout);
        if (n > 0) {
            c->len += (size_t)n;
        } else if (n < 0 && errno == ETIME && c->len > 0) {
            return 408;
        } else {
            return READ_CLOSED;
        }
    }
}

/* Does a comma-separated header value contain this token (any case)? */
static int has_token(const char *value, const char *token)
{
    size_t tlen = strlen(token);
    const char *p = value;
    while (*p != '\0') {
        while (*p == ' ' || *p == '\t' || *p == ',') {
            p++;
        }
        size_t n = strcspn(p, ",");
        size_t m = n;
        while (m > 0 && (p[m - 1] == ' ' || p[m - 1] == '\t')) {
            m--;
        }
        if (m == tlen && strncasecmp(p, token, tlen) == 0) {
            return 1;
        }
        p += n;
    }
    return 0;
}

static int is_tchar(int ch)
{
    return isalnum(ch) || (ch != '\0' && strchr("!#$%&'*+-.^_`|~", ch) != NULL);
}

/* Splits off the next line (without CR LF), NUL-terminating it in place. */
static char *next_line(char **cursor)
{
    char *line = *cursor;
    char *nl = strchr(line, '\n');
    if (nl == NULL) {
        *cursor = line + strlen(line);
    } else {
        *nl = '\0';
        *cursor = nl + 1;
    }
    size_t n = strlen(line);
    if (n > 0 && line[n - 1] == '\r') {
        line[n - 1] = '\0';
    }
    return line;
}

static int parse_request_line(char *line, struct request *req)
{
    char *sp1 = strchr(line, ' ');
    char *sp2 = sp1 != NULL ? strchr(sp1 + 1, ' ') : NULL;
    if (sp1 == NULL || sp2 == NULL || sp1 == line || sp2 == sp1 + 1 || strchr(sp2 + 1, ' ') != NULL) {
        return 400;
    }
    *sp1 = '\0';
    *sp2 = '\0';
    for (const char *p = line; *p != '\0'; p++) {
        if (!is_tchar((unsigned char)*p)) {
            return 400;
        }
    }
    const char *version = sp2 + 1;
    if (strncmp(version, "HTTP/", 5) != 0 || !isdigit((unsigned char)version[5]) ||
        version[6] != '.' || !isdigit((unsigned char)version[7]) || version[8] != '\0') {
        return 400;
    }
    if (version[5] != '1') {
        return 505;
    }
    req->method = line;
    req->target = sp1 + 1;
    req->minor = version[7] - '0';
    req->head = strcmp(line, "HEAD") == 0;
    return 0;
}

static int parse_content_length(const char *value, struct request *req)
{
    long long v = 0;
    if (*value == '\0') {
        return 400;
    }
    for (const char *p = value; *p != '\0'; p++) {
        if (!isdigit((unsigned char)*p)) {
            return 400;
        }
        if (v > (LLONG_MAX - 9) / 10) {
            return 413;
        }
        v = v * 10 + (*p - '0');
    }
    if (req->content_length >= 0 && req->content_length != v) {
        return 400;
    }
    req->content_length = v;
    return 0;
}

static int parse_field(char *line, struct request *req)
{
    char *colon = strchr(line, ':');
    if (colon == NULL || colon == line) {
        return 400;
    }
    *colon = '\0';
    for (const char *p = line; *p != '\0'; p++) {
        if (!is_tchar((unsigned char)*p)) {
            return 400; /* also whitespace before the colon, and obsolete line folding */
        }
    }
    char *value = colon + 1;
    while (*value == ' ' || *value == '\t') {
        value++;
    }
    size_t n = strlen(value);
    while (n > 0 && (value[n - 1] == ' ' || value[n - 1] == '\t')) {
        value[--n] = '\0';
    }
    if (strcasecmp(line, "Connection") == 0) {
        req->conn_close |= has_token(value, "close");
        req->conn_keep_alive |= has_token(value, "keep-alive");
    } else if (strcasecmp(line, "Content-Length") == 0) {
        return parse_content_length(value, req);
    } else if (strcasecmp(line, "Transfer-Encoding") == 0) {
        req->transfer_encoding = 1;
    } else if (strcasecmp(line, "Host") == 0) {
        req->hosts++;
    } else if (strcasecmp(line, "Expect") == 0) {
        req->expect = 1;
    }
    return 0;
}

/* Parses the head in c->buf[0, head_len); returns 0 or an HTTP error status. */
static int parse_request(struct conn *c, size_t head_len, struct request *req)
{
    char *cursor = c->buf;
    int status = 0;
    *req = (struct request){.content_length = -1};
    if (memchr(c->buf, '\0', head_len) != NULL) {
        return 400;
    }
    c->buf[head_len - 1] = '\0'; /* the final LF: the head is now one string */
    status = parse_request_line(next_line(&cursor), req);
    while (status == 0 && *cursor != '\0') {
        char *line = next_line(&cursor);
        if (*line != '\0') {
            status = parse_field(line, req);
        }
    }
    if (status != 0) {
        return status;
    }
    req->keep_alive = req->minor >= 1 ? !req->conn_close : req->conn_keep_alive && !req->conn_close;
    if (req->transfer_encoding) {
        return 501;
    }
    if ((req->minor >= 1 && req->hosts == 0) || req->hosts > 1) {
        return 400;
    }
    if (req->content_length > BODY_MAX) {
        return 413;
    }
    return 0;
}

/* Removes n bytes at offset `at` of c->buf. */
static void consume(struct conn *c, size_t at, size_t n)
{
    memmove(c->buf + at, c->buf + at + n, c->len - at - n);
    c->len -= n;
}

/*
 * Reads and drops a request body of `length` bytes that follows the head
 * (of head_len bytes, left in place: the parsed request points into it).
 */
static int discard_body(struct conn *c, size_t head_len, long long length)
{
    st_utime_t deadline = st_utime() + (st_utime_t)server.opt.request_s * US_PER_S;
    size_t buffered = c->len - head_len;
    size_t have = buffered < (size_t)length ? buffered : (size_t)length;
    size_t left = (size_t)length - have;
    consume(c, head_len, have);
    while (left > 0) {
        char sink[4096];
        ssize_t n = st_read(c->fd, sink, left < sizeof sink ? left : sizeof sink, remaining(deadline));
        if (n <= 0) {
            return -1;
        }
        left -= (size_t)n;
    }
    return 0;
}

/* ---- paths ------------------------------------------------------------------------------ */

static int hex_value(int ch)
{
    if (ch >= '0' && ch <= '9') {
        return ch - '0';
    }
    ch = tolower(ch);
    return ch >= 'a' && ch <= 'f' ? ch - 'a' + 10 : -1;
}

/* Percent-decodes the path part of a request target (up to '?' or '#'). */
static int decode_target(const char *target, char *out, size_t cap)
{
    size_t n = 0;
    if (strncasecmp(target, "http://", 7) == 0) { /* absolute form: drop the authority */
        target = strchr(target + 7, '/');
        if (target == NULL) {
            target = "/";
        }
    }
    if (target[0] != '/') {
        return 400;
    }
    for (const char *p = target; *p != '\0' && *p != '?' && *p != '#'; p++) {
        int ch = (unsigned char)*p;
        if (ch == '%') {
            int hi = hex_value((unsigned char)p[1]);
            int lo = hi < 0 ? -1 : hex_value((unsigned char)p[2]);
            if (lo < 0) {
                return 400;
            }
            ch = hi * 16 + lo;
            p += 2;
        }
        if (ch == '\0') {
            return 400;
        }
        if (n + 1 >= cap) {
            return 414;
        }
        out[n++] = (char)ch;
    }
    out[n] = '\0';
    return 0;
}

/*
 * Maps a request target to a path relative to the root: decoded, "." and
 * empty segments dropped, no leading '/'; "." for the root itself. A ".."
 * segment is refused (400), before any file system access.
 */
static int map_path(const char *target, char *out, size_t cap)
{
    char decoded[PATH_MAX];
    char *save = NULL;
    size_t n = 0;
    int status = decode_target(target, decoded, sizeof decoded);
    if (status != 0) {
        return status;
    }
    for (char *seg = strtok_r(decoded, "/", &save); seg != NULL; seg = strtok_r(NULL, "/", &save)) {
        size_t len = strlen(seg);
        if (strcmp(seg, ".") == 0) {
            continue;
        }
        if (strcmp(seg, "..") == 0) {
            return 400;
        }
        if (n + len + 2 > cap) {
            return 414;
        }
        if (n > 0) {
            out[n++] = '/';
        }
        memcpy(out + n, seg, len);
        n += len;
    }
    if (n == 0) {
        out[n++] = '.';
    }
    out[n] = '\0';
    return 0;
}

/* Is `path` (absolute, resolved) the root or below it? */
static int inside_root(const char *path)
{
    size_t n = strlen(server.root_real);
    if (strncmp(path, server.root_real, n) != 0) {
        return 0;
    }
    return path[n] == '\0' || path[n] == '/' || (n > 0 && server.root_real[n - 1] == '/');
}

/* Opens a path relative to the root without leaving it, symlinks included. */
static int open_beneath(const char *rel)
{
    int flags = O_RDONLY | O_CLOEXEC | O_NONBLOCK; /* O_NONBLOCK: never hang on a FIFO */
#ifdef HAVE_OPENAT2
    struct open_how how;
    memset(&how, 0, sizeof how);
    how.flags = (unsigned long long)flags;
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
    long fd = syscall(SYS_openat2, server.root_fd, rel, &how, sizeof how);
    if (fd >= 0 || errno != ENOSYS) {
        return (int)fd;
    }
#endif
    char full[PATH_MAX];
    char *resolved = NULL;
    if (snprintf(full, sizeof full, "%s/%s", server.root_real, rel) >= (int)sizeof full) {
        errno = ENAMETOOLONG;
        return -1;
    }
    resolved = realpath(full, NULL);
    if (resolved == NULL) {
        return -1;
    }
    int ok = inside_root(resolved);
    int fd2 = ok ? open(resolved, flags) : -1;
    free(resolved);
    if (!ok) {
        errno = EXDEV;
    }
    return fd2;
}

static int errno_status(int err)
{
    switch (err) {
    case ENOENT:
    case ENOTDIR:
        return 404;
    case ENAMETOOLONG:
        return 414;
    case EACCES:
    case EPERM:
    case EXDEV:
    case ELOOP:
        return 403;
    default:
        return 500;
    }
}

/* Opens the regular file for a request path; a directory gives its index.html. */
static int open_file(char *rel, size_t cap, struct stat *st, int *status)
{
    int fd = open_beneath(rel);
    if (fd >= 0 && fstat(fd, st) == 0 && S_ISDIR(st->st_mode)) {
        (void)close(fd);
        size_t n = strlen(rel);
        if (strcmp(rel, ".") == 0) {
            n = 0;
        }
        if (n + sizeof "/index.html" > cap) {
            *status = 414;
            return -1;
        }
        (void)snprintf(rel + n, cap - n, "%sindex.html", n > 0 ? "/" : "");
        fd = open_beneath(rel);
        if (fd >= 0 && fstat(fd, st) != 0) {
            (void)close(fd);
            fd = -1;
        }
    }
    if (fd < 0) {
        *status = errno_status(errno);
        return -1;
    }
    if (!S_ISREG(st->st_mode)) {
        (void)close(fd);
        *status = 404;
        return -1;
    }
    return fd;
}

/* ---- serving files ------------------------------------------------------------------------- */

/* Reads exactly n bytes at the file's current offset; -1 if it shrank or failed. */
static int read_chunk(int fd, char *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r <= 0) {
            return -1;
        }
        got += (size_t)r;
    }
    return 0;
}

/*
 * Sends the header and the body of a file: the first chunk together with the
 * header. Returns 0, or -1 if the connection must close (the response is
 * broken off).
 */
static int send_file(struct conn *c, int fd, const char *head, size_t hlen, long long size)
{
    char small[SMALL_CHUNK];
    char *buf = small;
    size_t cap = sizeof small;
    int rc = 0;
    if (size > SMALL_CHUNK) {
        buf = malloc(CHUNK);
        cap = CHUNK;
        if (buf == NULL) {
            return -1;
        }
    }
    struct iovec iov[2] = {{(void *)head, hlen}, {buf, 0}};
    long long left = size;
    int first = 1;
    while (rc == 0 && (left > 0 || first)) {
        size_t n = left < (long long)cap ? (size_t)left : cap;
        if (read_chunk(fd, buf, n) != 0) {
            rc = -1;
            break;
        }
        iov[1].iov_len = n;
        rc = first ? send_iov(c, iov, 2) : send_iov(c, &iov[1], 1);
        first = 0;
        left -= (long long)n;
    }
    if (buf != small) {
        free(buf);
    }
    return rc;
}

/* Answers a GET or HEAD; returns 0, or -1 if the connection must close. */
static int serve_file(struct conn *c, const struct request *req)
{
    char rel[PATH_MAX];
    char head[HEADER_CAP];
    char extra[128];
    char modified[64];
    struct stat st;
    int status = map_path(req->target, rel, sizeof rel);
    int fd = -1;
    if (status == 0) {
        fd = open_file(rel, sizeof rel, &st, &status);
    }
    if (fd < 0) {
        /* 400 and 414 describe the request itself; the connection survives them. */
        return send_error(c, status, req->head, req->keep_alive);
    }
    http_date(st.st_mtime, modified, sizeof modified);
    (void)snprintf(extra, sizeof extra, "Last-Modified: %s\r\n", modified);
    size_t hlen = format_head(head, 200, content_type(rel), (long long)st.st_size,
                              req->keep_alive, extra);
    int rc = 0;
    if (req->head) {
        struct iovec iov = {head, hlen};
        rc = send_iov(c, &iov, 1);
    } else {
        rc = send_file(c, fd, head, hlen, (long long)st.st_size);
    }
    (void)close(fd);
    return rc;
}

/* ---- connections ------------------------------------------------------------------------- */

/*
 * Answers one request whose head is at the start of c->buf; returns 0 or -1
 * (the connection must close). The head stays in the buffer meanwhile: the
 * parsed request points into it.
 */
static int answer_request(struct conn *c, size_t head_len, struct request *req)
{
    int status = parse_request(c, head_len, req);
    if (status != 0) {
        req->keep_alive = 0;
        return send_error(c, status, req->head, 0);
    }
    if (req->content_length > 0) {
        /* A client that waits for 100 Continue gets the final answer instead. */
        if (req->expect || discard_body(c, head_len, req->content_length) != 0) {
            req->keep_alive = 0;
        }
    }
    if (example_stopping()) {
        req->keep_alive = 0;
    }
    server.requests++;
    if (strcmp(req->method, "GET") != 0 && !req->head) {
        return send_error(c, 405, 0, req->keep_alive);
    }
    return serve_file(c, req);
}

/*
 * Handles one request and drops it from the buffer, leaving any pipelined
 * request behind it. Returns 1 to go on with the next request on this
 * connection, 0 to close it.
 */
static int handle_request(struct conn *c, size_t head_len)
{
    struct request req;
    int rc = answer_request(c, head_len, &req);
    consume(c, 0, head_len);
    return rc == 0 && req.keep_alive;
}

/*
 * Closes the connection after a response the server decided to end it with:
 * the write side first, then whatever the client still sends is read and
 * dropped for a moment, so that the response is not lost to a TCP reset.
 */
static void lingering_close(struct conn *c)
{
    char sink[4096];
    size_t dropped = 0;
    st_utime_t deadline = st_utime() + (st_utime_t)LINGER_TIMEOUT_S * US_PER_S;
    if (shutdown(st_netfd_fileno(c->fd), SHUT_WR) == 0) {
        ssize_t n = 0;
        while (dropped < LINGER_MAX && (n = st_read(c->fd, sink, sizeof sink, remaining(deadline))) > 0) {
            dropped += (size_t)n;
        }
    }
    (void)st_netfd_close(c->fd);
}

static void *serve_connection(void *arg)
{
    struct conn *c = arg;
    int status = READ_OK;
    for (;;) {
        size_t head_len = 0;
        status = read_head(c, &head_len);
        if (status != READ_OK) {
            break;
        }
        c->busy = 1;
        int again = handle_request(c, head_len);
        c->busy = 0;
        if (!again) {
            break;
        }
    }
    if (status > 0) {
        (void)send_error(c, status, 0, 0);
    }
    /* Off the list before the lingering close: a stop need not wait for it. */
    example_conns_remove(&server.conns, &c->link);
    if (status == READ_CLOSED) {
        (void)st_netfd_close(c->fd);
    } else {
        lingering_close(c);
    }
    free(c);
    return NULL;
}

static void start_connection(st_netfd_t fd)
{
    struct conn *c = malloc(sizeof *c);
    if (c == NULL) {
        (void)st_netfd_close(fd);
        return;
    }
    c->fd = fd;
    c->busy = 0;
    c->len = 0;
    c->thread = st_thread_create(serve_connection, c, 0, CONN_STACK);
    if (c->thread == NULL) {
        (void)st_netfd_close(fd);
        free(c);
        return;
    }
    example_conns_add(&server.conns, &c->link, c);
    server.connections++;
}

/* ---- stopping --------------------------------------------------------------------------- */

/*
 * On stop (example_stop.h): idle connections close at once; a connection in
 * the middle of a response finishes it (and then closes), for at most
 * DRAIN_TIMEOUT_S.
 */
static void drain_connections(void)
{
    for (struct example_conn *l = server.conns.head; l != NULL; l = l->next) {
        const struct conn *c = l->owner;
        if (!c->busy) {
            st_thread_interrupt(c->thread);
        }
    }
    (void)example_conns_wait(&server.conns, (st_utime_t)DRAIN_TIMEOUT_S * US_PER_S);
    for (struct example_conn *l = server.conns.head; l != NULL; l = l->next) {
        const struct conn *c = l->owner;
        st_thread_interrupt(c->thread);
    }
    /* Give the interrupted coroutines a moment to close their connections. */
    if (example_conns_wait(&server.conns, US_PER_S) != 0) {
        fprintf(stderr, "http_server: %ld connections did not finish\n", server.conns.active);
    }
}

/* ---- workers -------------------------------------------------------------------------------- */

/* Sets up one worker: st, its own listener, signals, the stop timer. */
static int worker_start(long port, unsigned *bound_port)
{
    sigset_t set;
    (void)st_set_eventsys(ST_EVENTSYS_ALT); /* epoll where st has it */
    if (st_init() != 0 || example_conns_init(&server.conns) != 0) {
        perror("http_server: st_init");
        return -1;
    }
    (void)st_timecache_set(1);
    server.listener =
        example_open_loopback(SOCK_STREAM, port, EXAMPLE_REUSEPORT, BACKLOG, bound_port);
    if (server.listener == NULL) {
        fprintf(stderr, "http_server: cannot listen on 127.0.0.1:%ld: %s\n", port, strerror(errno));
        return -1;
    }
    /* The stop interrupts this coroutine, the acceptor, out of st_accept. */
    if (example_stop_init(st_thread_self(), server.opt.seconds) != 0) {
        perror("http_server: signals");
        return -1;
    }
    /* A worker starts with the parent's signals blocked: unblock them now
     * that the handlers are in place. */
    (void)sigemptyset(&set);
    return sigprocmask(SIG_SETMASK, &set, NULL);
}

static void worker_run(void)
{
    example_accept_loop(server.listener, start_connection, "http_server");
    (void)st_netfd_close(server.listener);
    drain_connections();
    printf("worker %ld: %ld connections, %ld requests\n", (long)getpid(), server.connections,
           server.requests);
    (void)fflush(stdout);
}

/* ---- the parent of several workers ------------------------------------------------------ */

struct workers {
    pid_t pids[MAX_WORKERS];
    long count;
    long alive;
    int failed;
};

static void signal_workers(const struct workers *w, int sig)
{
    for (long i = 0; i < w->count; i++) {
        if (w->pids[i] > 0) {
            (void)kill(w->pids[i], sig);
        }
    }
}

/* Collects every worker that has exited; returns how many are left. */
static long reap_workers(struct workers *w, int options)
{
    int status = 0;
    pid_t pid = 0;
    while (w->alive > 0 && (pid = waitpid(-1, &status, options)) > 0) {
        for (long i = 0; i < w->count; i++) {
            if (w->pids[i] == pid) {
                w->pids[i] = 0;
                w->alive--;
            }
        }
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "http_server: worker %ld ended with %s %d\n", (long)pid,
                    WIFEXITED(status) ? "status" : "signal",
                    WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
            w->failed = 1;
        }
    }
    return w->alive;
}

/* In a freshly forked worker: serve, tell the parent when ready, exit. */
static void worker_main(unsigned port, int reserve_fd, int ready_fd)
{
    unsigned bound = 0;
    char verdict = 'f';
    (void)close(reserve_fd);
#ifdef __linux__
    (void)prctl(PR_SET_PDEATHSIG, SIGTERM); /* never outlive the parent */
#endif
    if (worker_start((long)port, &bound) == 0) {
        verdict = 'r';
    }
    ssize_t sent = write(ready_fd, &verdict, 1);
    (void)close(ready_fd);
    if (verdict != 'r' || sent != 1) {
        _exit(1);
    }
    worker_run();
    exit(0);
}

/* Waits until every worker has reported; 0 if all are listening. */
static int await_ready(int ready_fd, long count)
{
    long ready = 0;
    struct pollfd pfd = {ready_fd, POLLIN, 0};
    while (ready < count) {
        char verdict = 0;
        int rc = poll(&pfd, 1, READY_TIMEOUT_MS);
        if (rc < 0 && errno == EINTR) {
            continue;
        }
        if (rc <= 0 || read(ready_fd, &verdict, 1) != 1 || verdict != 'r') {
            return -1;
        }
        ready++;
    }
    return 0;
}

/* Waits for signals and for the workers' ends; forwards SIGINT and SIGTERM. */
static void supervise(struct workers *w, const sigset_t *set)
{
    while (reap_workers(w, WNOHANG) > 0) {
        int sig = sigwaitinfo(set, NULL);
        if (sig == SIGINT || sig == SIGTERM) {
            signal_workers(w, SIGTERM);
        }
    }
}

static int run_workers(const struct options *opt)
{
    static struct workers w;
    sigset_t set;
    unsigned port = 0;
    int ready[2] = {-1, -1};
    /* The parent holds the port (bound, never listening) so that every worker gets the same one. */
    int reserve_fd = example_bind_loopback(SOCK_STREAM, opt->port, EXAMPLE_REUSEPORT, 0, &port);
    if (reserve_fd < 0 || pipe(ready) != 0) {
        fprintf(stderr, "http_server: cannot bind 127.0.0.1:%ld: %s\n", opt->port, strerror(errno));
        return 1;
    }
    (void)sigemptyset(&set);
    (void)sigaddset(&set, SIGINT);
    (void)sigaddset(&set, SIGTERM);
    (void)sigaddset(&set, SIGCHLD);
    (void)sigprocmask(SIG_BLOCK, &set, NULL);
    (void)fflush(stdout);
    for (w.count = 0; w.count < opt->workers; w.count++) {
        pid_t pid = fork();
        if (pid == 0) {
            (void)close(ready[0]);
            worker_main(port, reserve_fd, ready[1]);
        }
        if (pid < 0) {
            perror("http_server: fork");
            break;
        }
        w.pids[w.count] = pid;
        w.alive++;
    }
    (void)close(ready[1]);
    if (w.count < opt->workers || await_ready(ready[0], w.count) != 0) {
        fprintf(stderr, "http_server: not every worker started\n");
        signal_workers(&w, SIGTERM);
        w.failed = 1;
    } else {
        printf("listening on 127.0.0.1:%u\n", port);
        (void)fflush(stdout);
        fprintf(stderr, "http_server: %ld workers, pid %ld, root %s\n", w.count, (long)getpid(),
                opt->root);
    }
    (void)close(ready[0]);
    supervise(&w, &set);
    (void)close(reserve_fd);
    return w.failed ? 1 : 0;
}

/* ---- main ------------------------------------------------------------------------------------ */

static int open_root(const char *root)
{
    server.root_fd = open(root, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (server.root_fd < 0 || realpath(root, server.root_real) == NULL) {
        fprintf(stderr, "http_server: root %s: %s\n", root, strerror(errno));
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    unsigned port = 0;
    if (parse_options(argc, argv, &server.opt) != 0) {
        fprintf(stderr,
                "usage: %s [-p port] [-r root] [-w workers] [-t seconds] [-i idle_seconds] "
                "[-T request_seconds]\n",
                argv[0]);
        return 2;
    }
    if (open_root(server.opt.root) != 0) {
        return 1;
    }
    if (server.opt.workers > 1) {
        return run_workers(&server.opt);
    }
    if (worker_start(server.opt.port, &port) != 0) {
        return 1;
    }
    printf("listening on 127.0.0.1:%u\n", port);
    (void)fflush(stdout);
    fprintf(stderr, "http_server: event system %s, pid %ld, root %s\n", st_get_eventsys_name(),
            (long)getpid(), server.opt.root);
    worker_run();
    return 0;
}
