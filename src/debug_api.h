/*
 * State Threads' DEBUG-build functions (build option debug_api; State
 * Threads' *-debug make targets build them, and tools/make/st_make.sh turns
 * the option on for those targets). src/debug_api.c has what they do.
 */
#ifndef ST__DEBUG_API_H
#define ST__DEBUG_API_H

#include "st.h"

struct st__sched;

#if ST__DEBUG_API
/* Declared by st.h only for programs built with DEBUG, as State Threads' st.h does. */
ST_EXPORT void _st_show_thread_stack(st_thread_t thread, const char *messg);
ST_EXPORT void _st_iterate_threads(void);

/* Set from a debugger: the next switch shows every coroutine's stack once. */
extern int _st_iterate_threads_flag;

/*
 * A coroutine resumed on the hooked path (every switch, in these builds):
 * one that the iteration switched to shows its stack and switches back;
 * otherwise, with the flag set, an iteration starts from it.
 */
void st__debug_resumed(struct st__sched *sched, struct _st_thread *me);
#endif

#endif /* ST__DEBUG_API_H */
