/*
 * example_eventsys: choosing st's event system by the name given on the
 * command line, shared by the example programs in tools/examples/.
 */
#ifndef EXAMPLE_EVENTSYS_H
#define EXAMPLE_EVENTSYS_H

/*
 * Calls st_set_eventsys() for "epoll", "poll", "select" or "io_uring"; must
 * run before st_init(). NULL asks for epoll where st has it and quietly
 * keeps st's default where it has not, so that a program without the option
 * still runs everywhere. Returns 0, or -1 with errno set: EINVAL for an
 * unknown name, or st_set_eventsys()'s error (the backend is not built in).
 */
int example_set_eventsys(const char *name);

#endif
