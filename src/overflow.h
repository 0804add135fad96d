/*
 * Stack overflow diagnostics. A coroutine that runs off the bottom of its
 * stack hits the guard page below it; the SIGSEGV handler installed here
 * (on an alternate signal stack, since the faulting stack is exhausted)
 * names the coroutine and its stack bounds on stderr, then hands the signal
 * on to whatever handler was there before, so the process still dies of
 * SIGSEGV, or the application's own handler still runs.
 */
#ifndef ST__OVERFLOW_H
#define ST__OVERFLOW_H

struct st__sched;

/* Install the handler (once per process) and this pthread's signal stack. */
void st__overflow_init(struct st__sched *sched);

/* Release this pthread's signal stack, if st__overflow_init made it. */
void st__overflow_fini(struct st__sched *sched);

#endif /* ST__OVERFLOW_H */
