/*
 * example_conns: the live connections of an example server in
 * tools/examples/, kept so that a stop can reach every one of them and wait
 * until they have all ended.
 *
 * Each server embeds a struct example_conn in its own connection record;
 * `owner` leads back from the list to that record. How a connection is
 * ended on stop (interrupted at once, allowed to finish its response, reset)
 * stays the server's own choice: it walks the list from `head`.
 */
#ifndef EXAMPLE_CONNS_H
#define EXAMPLE_CONNS_H

#include "st.h"

struct example_conn {
    struct example_conn *prev;
    struct example_conn *next;
    void *owner; /* the server's record that holds this link */
};

struct example_conns {
    struct example_conn *head;
    long active; /* connections added and not yet removed */
    st_cond_t drained; /* signalled when the last one is removed */
};

/* After st_init(). Returns 0, or -1 with errno set. */
int example_conns_init(struct example_conns *set);

/* Puts `link`, part of `owner`, on the list. */
void example_conns_add(struct example_conns *set, struct example_conn *link, void *owner);

/* Takes `link` off the list; the coroutine that served it calls this at its end. */
void example_conns_remove(struct example_conns *set, struct example_conn *link);

/*
 * Waits until the list is empty, for at most `timeout` microseconds.
 * Returns 0 when it is (at once if it already was), -1 if time ran out.
 */
int example_conns_wait(struct example_conns *set, st_utime_t timeout);

#endif
