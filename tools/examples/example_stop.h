/*
 * example_stop: stopping an example server on SIGINT or SIGTERM, or after a
 * given number of seconds, shared by the servers in tools/examples/.
 *
 * The stop does two things: example_stopping() becomes true, and the
 * coroutine named at example_stop_init() is interrupted once, so that its
 * blocking call (st_accept, st_recvfrom) returns -1 with errno EINTR and it
 * can leave its loop. What to do with open connections after that is each
 * server's own business. The signal part is the self-pipe pattern that
 * docs/signals.md explains and graceful_shutdown.c shows on its own.
 */
#ifndef EXAMPLE_STOP_H
#define EXAMPLE_STOP_H

#include "st.h"

/*
 * Installs the SIGINT and SIGTERM handlers and, if seconds > 0, a timer
 * coroutine; call it after st_init(), once. `loop` is the coroutine to
 * interrupt on stop, usually the caller's own (st_thread_self()). Returns 0,
 * or -1 with errno set.
 */
int example_stop_init(st_thread_t loop, long seconds);

/* Has a signal come or the time run out? */
int example_stopping(void);

#endif
