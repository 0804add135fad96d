/*
 * The libuv peer of the echo benchmark (README.md here): one loop,
 * uv_read_start and uv_write, as libuv's guide writes an echo server.
 *
 * Each read gets a block that holds the data and the write request that
 * sends it back; the block returns to its connection when the write is done,
 * and the connection keeps one spare, so the steady state allocates nothing
 * (one request in flight per connection). Writes go out from the block
 * itself: libuv tries the write at once and calls back on the next turn of
 * the loop.
 *
 * Built only where libuv's headers are (meson.build here); the fallback
 * below keeps the file a valid program for clang-tidy without them.
 */
#if __has_include(<uv.h>)

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <uv.h>

#include "peer.h"

struct conn;

struct block {
    uv_write_t req; /* first: a request's address is its block's */
    struct conn *conn;
    char data[PEER_BUF];
};

struct conn {
    uv_tcp_t tcp;
    struct block *spare;
};

static bool serve_once;

static struct block *block_of_data(char *data)
{
    return (struct block *)(void *)(data - offsetof(struct block, data));
}

static void block_release(struct block *b)
{
    struct conn *c = b->conn;
    if (c->spare == NULL) {
        c->spare = b;
    } else {
        free(b);
    }
}

static void on_close(uv_handle_t *handle)
{
    struct conn *c = handle->data;
    free(c->spare);
    free(c);
    if (serve_once) {
        exit(0);
    }
}

static void conn_close(struct conn *c)
{
    if (!uv_is_closing((uv_handle_t *)&c->tcp)) {
        uv_close((uv_handle_t *)&c->tcp, on_close);
    }
}

static void on_alloc(uv_handle_t *handle, size_t suggested, uv_buf_t *buf)
{
    struct conn *c = handle->data;
    struct block *b = c->spare;
    (void)suggested;
    if (b != NULL) {
        c->spare = NULL;
    } else if ((b = malloc(sizeof *b)) == NULL) {
        *buf = uv_buf_init(NULL, 0); /* libuv reports UV_ENOBUFS to on_read */
        return;
    }
    b->conn = c;
    *buf = uv_buf_init(b->data, sizeof b->data);
}

static void on_written(uv_write_t *req, int status)
{
    struct block *b = (struct block *)(void *)req;
    struct conn *c = b->conn;
    block_release(b);
    if (status < 0) {
        conn_close(c);
    }
}

static void on_read(uv_stream_t *stream, ssize_t nread, const uv_buf_t *buf)
{
    struct conn *c = stream->data;
    struct block *b = buf->base != NULL ? block_of_data(buf->base) : NULL;
    if (nread > 0) {
        uv_buf_t out = uv_buf_init(b->data, (unsigned)nread);
        if (uv_write(&b->req, stream, &out, 1, on_written) == 0) {
            return;
        }
        nread = UV_EPIPE;
    }
    if (b != NULL) {
        block_release(b);
    }
    if (nread < 0) { /* UV_EOF or an error; 0 is "nothing to read now" */
        conn_close(c);
    }
}

static void on_connection(uv_stream_t *server, int status)
{
    if (status < 0) {
        fprintf(stderr, "uv_echo: accept: %s\n", uv_strerror(status));
        return;
    }
    struct conn *c = calloc(1, sizeof *c);
    if (c == NULL) {
        fprintf(stderr, "uv_echo: out of memory\n");
        return;
    }
    (void)uv_tcp_init(server->loop, &c->tcp);
    c->tcp.data = c;
    if (uv_accept(server, (uv_stream_t *)&c->tcp) != 0) {
        conn_close(c);
        return;
    }
    (void)uv_tcp_nodelay(&c->tcp, 1);
    if (uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) != 0) {
        conn_close(c);
    }
}

int main(int argc, char **argv)
{
    struct peer_args args;
    uv_tcp_t server;
    if (peer_parse_args(argc, argv, &args) != 0) {
        return 2;
    }
    if (args.probe) {
        printf("NOTE uv peer: libuv %s, one loop, uv_read_start/uv_write, a %d-byte block per "
               "read (kept per connection)\n",
               uv_version_string(), PEER_BUF);
        return 0;
    }
    serve_once = args.once;
    uv_loop_t *loop = uv_default_loop();
    int rc = uv_tcp_init(loop, &server);
    if (rc == 0) {
        rc = uv_tcp_open(&server, PEER_LISTEN_FD);
    }
    if (rc == 0) {
        rc = uv_listen((uv_stream_t *)&server, SOMAXCONN, on_connection);
    }
    if (rc == 0) {
        rc = uv_run(loop, UV_RUN_DEFAULT);
    }
    fprintf(stderr, "uv_echo: %s\n", rc != 0 ? uv_strerror(rc) : "loop ended");
    return 1;
}

#else /* no <uv.h> */

#include <stdio.h>

int main(void)
{
    fprintf(stderr, "uv_echo: built without libuv (Debian package libuv1-dev)\n");
    return 1;
}

#endif
