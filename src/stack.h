/*
 * Coroutine stack allocator.
 *
 * Each stack is an anonymous mapping: an optional inaccessible guard page
 * at the bottom (stacks grow down, so an overflow faults instead of
 * corrupting a neighbour), the usable stack, and this descriptor at the very
 * top. A pool works in one of two modes:
 *
 *   cache  released stacks are kept and handed out again (no syscalls on the
 *          create/exit fast path);
 *   free   released stacks are unmapped. A coroutine releases its stack while
 *          still running on it, so release only queues the stack and the
 *          unmapping happens later (st__stack_reclaim), from another stack.
 *
 * Without guard pages, stacks are carved from shared "slabs" of many stacks
 * each: the kernel limits a process's mappings (vm.max_map_count, 65530 by
 * default), and one mapping per stack would cap a process far below a
 * million coroutines. A slab's stacks are never unmapped one by one; in free
 * mode their memory is handed back with madvise(MADV_DONTNEED) instead and
 * the address range is reused.
 *
 * A guard page made with mprotect splits a mapping, so a guarded stack
 * needs two mappings of its own. Linux 6.13 and later can mark pages as
 * guards in the page tables instead (madvise MADV_GUARD_INSTALL), which
 * splits nothing, so guarded stacks can come from slabs too. They do only
 * once the process has ST__STACKS_ALONE_MAX guarded stacks of their own:
 * gdb's gcore (13.1) stops copying a mapping at its first guard marker, so a
 * core file made that way would lack every stack of the slab. (The kernel's
 * own core dumps skip just the guard pages.)
 *
 * The split costs about as much as the rest of a new stack together (a
 * mapping, its first page fault), and a server that accepts a burst of
 * connections pays it once per connection while the accept queue waits. So
 * st__stack_acquire_quick takes new guarded stacks from slabs with guard
 * markers, and queues them: st__stack_split later mprotects their guard
 * pages, which gives each its own mapping, as if it had been made alone. The
 * scheduler creates its coroutines' stacks so, past its first few, and
 * splits them when it has been idle for a while; the budget of
 * ST__STACKS_ALONE_MAX counts these stacks too.
 *
 * A fresh server that meets a burst of connections still pays, per
 * connection and while the accept queue waits, the guard marker and the
 * first page fault of the new stack's top page, where the coroutine object
 * lives. So a pool can be given a reserve (st__stack_reserve): a number of
 * stacks to have made ahead of need, which the scheduler makes a few at a
 * time (st__stack_prepare) when it has nothing else to do, and keeps in
 * the cache. The scheduler asks for one the size of a listener's accept
 * queue the first time it accepts on that listener.
 *
 * Stacks of the same size would put their hot top-of-stack lines (the
 * coroutine object, the frames of a blocked call) at the same address
 * modulo the cache's way size, so that a few hundred coroutines fight over
 * a handful of cache sets. Neighbouring stacks therefore get different
 * "colours": they lie an odd number of pages apart, and each one's top
 * moves down by 0 to 31 cache lines, chosen from its address, within the
 * spare room of the top page.
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
    struct st__list split_link; /* on the pool's `unsplit` list, while there */
    char *map_base;       /* start of the mapping (the guard page, if any) */
    size_t map_size;
    char *bottom;         /* lowest usable address */
    char *top;            /* end (exclusive) of the usable stack */
    size_t size;          /* usable size that was asked for, page-rounded */
    unsigned valgrind_id; /* registration with valgrind, when built with it */
    bool in_slab;         /* carved from a slab: never unmapped alone */
    bool lsan_root;       /* registered as a LeakSanitizer root region (ASan builds) */
};

/* A mapping that holds many guard-less stacks (see above). */
struct st__slab {
    struct st__list link;
    char *base;
    size_t size;
};

/*
 * Guarded stacks that get mappings of their own, in the whole process, before
 * slabs take over where the kernel has guard markers: 16384 mappings, a
 * quarter of Linux's default vm.max_map_count.
 */
#define ST__STACKS_ALONE_MAX 8192u

/*
 * The budget in force: ST__STACKS_ALONE_MAX. A variable rather than the
 * constant only so that unit tests can reach the slab path at once; the
 * library never changes it.
 */
extern size_t st__stacks_alone_max;

struct st__stack_pool {
    struct st__list cache;
    struct st__list graveyard;
    struct st__list slabs;
    char *carve_next;     /* the free part of the newest slab */
    char *carve_end;
    struct st__list unsplit; /* slab stacks of a burst, still to get mappings of their own */
    size_t split;         /* slab stacks that got them (in the process-wide count of alone ones) */
    size_t made;          /* stacks mapped or carved, and not unmapped since */
    size_t reserve;       /* how many stacks to have made ahead of need (cache mode) */
    size_t reserve_size;  /* and their usable size */
    enum st__stack_mode mode;
    size_t pagesize;
    bool guard_pages;
    bool randomize;       /* st_randomize_stacks(): random tops instead of colours */
};

void st__stack_pool_init(struct st__stack_pool *pool, enum st__stack_mode mode, bool guard_pages);

/*
 * Whether this kernel makes guard pages with madvise(MADV_GUARD_INSTALL),
 * asked once per process, the first time a pool has spent its budget of
 * stacks with mappings of their own or a burst wants a stack quickly.
 */
bool st__stack_guard_markers_supported(void);

/* Unmap every stack the pool holds (cached, waiting to be unmapped, slabs). */
void st__stack_pool_fini(struct st__stack_pool *pool);

/*
 * A stack with at least `size` usable bytes (rounded up to whole pages).
 * Returns NULL with errno ENOMEM when the memory or mappings run out.
 */
struct st__stack *st__stack_acquire(struct st__stack_pool *pool, size_t size);

/*
 * st__stack_acquire for a burst: a new guarded stack comes from a slab with
 * a guard marker, where the kernel has them, and waits on the pool's
 * `unsplit` list for st__stack_split (see above). Cached stacks come first,
 * as always; without markers or guard pages it is st__stack_acquire. In
 * cache mode a new one comes with up to ST__STACK_BATCH - 1 more, which go
 * to the cache for the rest of the burst.
 */
/*
 * How many stacks a burst has made at once when it needs a new one: carved
 * in a row from a slab, with their guard markers made by one system call
 * (process_madvise, Linux 6.15) instead of one each (the saving is in
 * docs/performance.md, "Fairness under CPU starvation"). The spares wait
 * in the cache and cost a page each, where their descriptors go.
 */
#define ST__STACK_BATCH 16

/* Do quick stacks come from slabs with guard markers here? (Not without markers, nor under valgrind.) */
bool st__stack_quick_in_slabs(void);

struct st__stack *st__stack_acquire_quick(struct st__stack_pool *pool, size_t size);

/* Whether stacks wait for st__stack_split. */
static inline bool st__stack_unsplit(const struct st__stack_pool *pool)
{
    return !st__list_empty(&pool->unsplit);
}

/* The work of st__stack_split, when there is some. */
void st__stack_split_queued(struct st__stack_pool *pool, int count);

/*
 * Give up to `count` stacks of the `unsplit` list mappings of their own by
 * mprotecting their guard pages, while the process has fewer than
 * ST__STACKS_ALONE_MAX; once it has that many, or the kernel refuses (out
 * of mappings), the rest keep their guard markers and the list is dropped.
 */
static inline void st__stack_split(struct st__stack_pool *pool, int count)
{
    if (st__stack_unsplit(pool)) {
        st__stack_split_queued(pool, count);
    }
}

/*
 * The most a reserve holds: 1024 stacks, one resident page each (4 MiB
 * with 4 KiB pages), however long the accept queue that asked for it.
 */
#define ST__STACK_RESERVE_MAX 1024u

/*
 * Have `count` stacks (at most ST__STACK_RESERVE_MAX, counting those the
 * pool has made already) of `size` usable bytes made ahead of need. A pool
 * in free mode keeps no reserve: it gives memory back rather than hold it.
 */
void st__stack_reserve(struct st__stack_pool *pool, size_t count, size_t size);

/* Whether the reserve still wants stacks made. */
static inline bool st__stack_reserve_short(const struct st__stack_pool *pool)
{
    return pool->made < pool->reserve;
}

/*
 * Make up to `count` stacks of the reserve: quick ones (they wait for
 * st__stack_split like a burst's), with their top page touched, into the
 * cache. When the memory or mappings run out, the reserve shrinks to what
 * was made, errno unchanged.
 */
void st__stack_prepare(struct st__stack_pool *pool, int count);

/* Give a stack back. May be called while running on it (see above). */
void st__stack_release(struct st__stack_pool *pool, struct st__stack *stack);

/* The work of st__stack_reclaim, when there is some. */
void st__stack_reclaim_queued(struct st__stack_pool *pool);

/*
 * Unmap released stacks; the caller must not be running on any of them.
 * Inline, because every coroutine creation and idle pass asks, and only
 * free mode ever has anything queued.
 */
static inline void st__stack_reclaim(struct st__stack_pool *pool)
{
    if (!st__list_empty(&pool->graveyard)) {
        st__stack_reclaim_queued(pool);
    }
}

/*
 * Give one stack's memory back now (a slab stack's mapping stays until the
 * pool goes). The caller must not be running on it.
 */
void st__stack_unmap(struct st__stack *stack);

static inline size_t st__stack_round(const struct st__stack_pool *pool, size_t size)
{
    return (size + pool->pagesize - 1) & ~(pool->pagesize - 1);
}

#endif /* ST__STACK_H */
