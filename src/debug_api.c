/*
 * State Threads' DEBUG-build functions, for programs and debugger sessions
 * written for State Threads built with DEBUG (its *-debug make targets):
 *
 *   set _st_iterate_threads_flag = 1     (in gdb)
 *   break _st_show_thread_stack
 *   continue                             (bt at each stop: one coroutine's stack)
 *
 * At the next switch the resumed coroutine starts an iteration: it stops
 * in _st_show_thread_stack itself ("Iteration started"), then switches to
 * every other coroutine that has run and not exited, each of which stops
 * there on its own stack, with its frames below (messg NULL), and switches
 * back; the flag is cleared and the first stops once more with thread NULL
 * ("Iteration completed"), as State Threads does. Coroutines that have not
 * run yet are skipped: State Threads would start them. tools/gdb/st.py
 * shows the same stacks without running anything (st-list, st-bt).
 *
 * Built with the debug_api option, which also sends every switch through
 * st__sched_switch_hooked, where a coroutine is resumed.
 */
#include "debug_api.h"

#include "fiber.h"
#include "scheduler.h"
#include "st.h"

ST_EXPORT int _st_iterate_threads_flag;

ST_EXPORT __attribute__((noinline)) void _st_show_thread_stack(st_thread_t thread, const char *messg)
{
    /* Nothing: the place for a debugger's breakpoint. Kept as a call. */
    __asm__ volatile("" : : "r"(thread), "r"(messg) : "memory");
}

/* Switch from `from` (running) to `to` (suspended) and back when `to` switches to it. */
static void hop(struct st__sched *sched, struct _st_thread *from, struct _st_thread *to)
{
    sched->switched_from = from;
    st__fiber_leave(&from->fiber, &to->fiber, 0);
    st__ctx_switch(&from->ctx, &to->ctx);
    st__sched_arrived(sched, from);
}

ST_EXPORT void _st_iterate_threads(void)
{
    struct st__sched *sched = st__sched_peek();
    if (_st_iterate_threads_flag == 0 || sched == NULL || !sched->initialized ||
        sched->iterating != NULL) {
        return;
    }
    struct _st_thread *me = sched->current;
    sched->iterating = me;
    _st_show_thread_stack(me, "Iteration started");
    st__list_for_each(link, &sched->threads) {
        struct _st_thread *thread = st__thread_from_all_links(link);
        if (thread != me && (thread->flags & (ST__FL_FRESH | ST__FL_DEAD)) == 0) {
            hop(sched, me, thread);
        }
    }
    sched->iterating = NULL;
    _st_iterate_threads_flag = 0;
    _st_show_thread_stack(NULL, "Iteration completed");
}

void st__debug_resumed(struct st__sched *sched, struct _st_thread *me)
{
    if (sched->iterating == NULL) {
        _st_iterate_threads();
        return;
    }
    /*
     * The iteration switched here: show this stack, go back. Suspended on
     * the hooked path again, it calls its own switch-in when the scheduler
     * resumes it (scheduler.c), so the switcher must not.
     */
    while (sched->iterating != NULL && sched->iterating != me) {
        _st_show_thread_stack(me, NULL);
        me->flags |= ST__FL_SWITCH_IN_OWN;
        hop(sched, me, sched->iterating);
        me->flags &= ~ST__FL_SWITCH_IN_OWN;
    }
}
