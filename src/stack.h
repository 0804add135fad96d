/*
 * Coroutine stack allocator.
 *
 * Each stack is one anonymous mapping: an optional inaccessible guard page
 * at the bottom (stacks grow down, so an overflow faults instead of
 * corrupting a neighbour), the usable stack, and this descriptor at the very
 * top. A pool works in one of two modes:
 *
 *   cache  released stacks are kept and handed out again (no syscalls on the
 *          create/exit fast path);
 *   free   released stacks are unmapped. A coroutine releases its stack while
 *          still running on it, so release only queues the stack and the
 *          unmapping happens later (st__stack_reclaim), from another stack.
 */
#ifndef ST__STACK_H
#define ST__STACK_H

#include <stdbool.h>
#include <stddef.h>

#include "list.h"

enum st__stack_mode {
    ST__STACK_CACHE,
    ST__STACK_FREE,
};

struct st__stack {
    struct st__list link; /* on the pool's cache or graveyard */
    char *map_base;       /* start of the mapping (the guard page, if any) */
    size_t map_size;
    char *bottom;         /* lowest usable address */
    char *top;            /* end (exclusive) of the usable stack */
    size_t size;          /* usable size that was asked for, page-rounded */
    unsigned valgrind_id; /* registration with valgrind, when built with it */
};

struct st__stack_pool {
    struct st__list cache;
    struct st__list graveyard;
    enum st__stack_mode mode;
    size_t pagesize;
    bool guard_pages;
    bool randomize;
};

void st__stack_pool_init(struct st__stack_pool *pool, enum st__stack_mode mode, bool guard_pages);

/* Unmap every stack the pool holds (cached or waiting to be unmapped). */
void st__stack_pool_fini(struct st__stack_pool *pool);

/*
 * A stack with at least `size` usable bytes (rounded up to whole pages).
 * Returns NULL with errno ENOMEM when the memory or mappings run out.
 */
struct st__stack *st__stack_acquire(struct st__stack_pool *pool, size_t size);

/* Give a stack back. May be called while running on it (see above). */
void st__stack_release(struct st__stack_pool *pool, struct st__stack *stack);

/* Unmap released stacks; the caller must not be running on any of them. */
void st__stack_reclaim(struct st__stack_pool *pool);

/* Unmap one stack now. The caller must not be running on it. */
void st__stack_unmap(struct st__stack *stack);

static inline size_t st__stack_round(const struct st__stack_pool *pool, size_t size)
{
    return (size + pool->pagesize - 1) & ~(pool->pagesize - 1);
}

#endif /* ST__STACK_H */
