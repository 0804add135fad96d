/*
 * Telling the dynamic analysis tools about stack switches.
 *
 * AddressSanitizer keeps shadow state per stack (and fake stacks for
 * detect_stack_use_after_return), ThreadSanitizer keeps a shadow call stack
 * per thread: both must be told when execution moves to another coroutine's
 * stack, or they report nonsense. Built without the sanitizers, every
 * function here is empty and the switch costs nothing extra. (Valgrind only
 * needs the stacks registered, which the stack module does.)
 */
#ifndef ST__FIBER_H
#define ST__FIBER_H

#include <stddef.h>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ST__ASAN 1
#endif
#if __has_feature(thread_sanitizer)
#define ST__TSAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) && !defined(ST__ASAN)
#define ST__ASAN 1
#endif
#if defined(__SANITIZE_THREAD__) && !defined(ST__TSAN)
#define ST__TSAN 1
#endif

#ifdef ST__ASAN
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif
#ifdef ST__TSAN
#include <sanitizer/tsan_interface.h>
#endif

/* Per-coroutine state the tools need; embedded in struct _st_thread. */
struct st__fiber {
    const void *stack_lo;  /* lowest address of the stack, NULL while unknown */
    size_t stack_size;
    void *fake_stack;      /* ASan: this coroutine's fake stack while it is switched out */
    void *tsan_fiber;      /* TSan: its fiber */
};

/*
 * A created coroutine: record its stack and create its TSan fiber. Only the
 * sanitizers read these fields, so other builds skip the stores.
 */
static inline void st__fiber_init(struct st__fiber *fiber, const void *lo, size_t size)
{
#if defined(ST__ASAN) || defined(ST__TSAN)
    fiber->stack_lo = lo;
    fiber->stack_size = size;
    fiber->fake_stack = NULL;
    fiber->tsan_fiber = NULL;
#else
    (void)fiber;
    (void)lo;
    (void)size;
#endif
#ifdef ST__TSAN
    fiber->tsan_fiber = __tsan_create_fiber(0);
#endif
}

/* The primordial coroutine: the pthread's own stack and fiber. */
static inline void st__fiber_init_primordial(struct st__fiber *fiber)
{
    fiber->stack_lo = NULL; /* learnt at the first switch away from it */
    fiber->stack_size = 0;
    fiber->fake_stack = NULL;
#ifdef ST__TSAN
    fiber->tsan_fiber = __tsan_get_current_fiber();
#else
    fiber->tsan_fiber = NULL;
#endif
}

/*
 * About to leave `from` for `to`. `final` says `from` never runs again, so
 * ASan may drop its fake stack.
 */
static inline void st__fiber_leave(struct st__fiber *from, const struct st__fiber *to, int final)
{
#ifdef ST__ASAN
    __sanitizer_start_switch_fiber(final ? NULL : &from->fake_stack, to->stack_lo, to->stack_size);
#else
    (void)from;
    (void)final;
#endif
#ifdef ST__TSAN
    __tsan_switch_to_fiber(to->tsan_fiber, 0);
#else
    (void)to;
#endif
}

/*
 * Arrived in `self`, coming from `prev`. The tools report the stack we came
 * from, which is how the primordial coroutine's stack becomes known.
 */
static inline void st__fiber_arrive(struct st__fiber *self, struct st__fiber *prev)
{
#ifdef ST__ASAN
    const void *lo = NULL;
    size_t size = 0;
    __sanitizer_finish_switch_fiber(self->fake_stack, &lo, &size);
    if (prev != NULL && prev->stack_lo == NULL) {
        prev->stack_lo = lo;
        prev->stack_size = size;
    }
#else
    (void)self;
    (void)prev;
#endif
}

/* A finished coroutine's fiber, once nothing runs on it any more. */
static inline void st__fiber_destroy(struct st__fiber *fiber)
{
#ifdef ST__TSAN
    if (fiber->tsan_fiber != NULL) {
        __tsan_destroy_fiber(fiber->tsan_fiber);
    }
    fiber->tsan_fiber = NULL;
#else
    (void)fiber;
#endif
}

#endif /* ST__FIBER_H */
