#include "stack.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include "fiber.h"
#include "st_config.h"
#include "stats.h"
#ifdef ST__ASAN
#include <sanitizer/lsan_interface.h>
#endif
#if ST__HAVE_VALGRIND
#include <valgrind/memcheck.h>
#include <valgrind/valgrind.h>
#endif

/* Space the descriptor takes at the top of the mapping, cache-line aligned. */
#define DESCRIPTOR_SPACE ((sizeof(struct st__stack) + 63) & ~(size_t)63)

/* How much address space one slab of guard-less stacks spans, at least. */
#define SLAB_BYTES ((size_t)8 << 20)

#define MAP_FLAGS (MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK | MAP_NORESERVE)

/* Page-table guard markers (Linux 6.13); older headers lack the name. */
#ifndef MADV_GUARD_INSTALL
#define MADV_GUARD_INSTALL 102
#endif

/*
 * process_madvise(2) takes a list of ranges: one call marks the guards of a
 * whole batch of burst stacks (glibc 2.36 has the wrapper). PIDFD_SELF_PROCESS
 * (Linux 6.15) names the calling process without a pidfd to open, or to
 * leak into a child after fork.
 */
#if defined(__linux__) && defined(__GLIBC__) && (__GLIBC__ > 2 || __GLIBC_MINOR__ >= 36)
#define HAVE_PROCESS_MADVISE 1
#else
#define HAVE_PROCESS_MADVISE 0
#endif
#ifndef PIDFD_SELF_PROCESS
#define PIDFD_SELF_PROCESS (-10001)
#endif

/*
 * How many cache-line offsets stack tops take (see colour_offset). The shift
 * comes out of the top page's spare room, which also holds the coroutine
 * object and the frames of a blocked call: up to 31 lines leaves half the
 * page for them, so an idle coroutine still fits in one page (all the lines
 * of the page would spread further, but push the frames of a blocked call
 * onto a second page, which costs memory for every waiting coroutine).
 */
#define TOP_COLOURS 32u
#define COLOUR_STEP 64u

/* Stacks with a mapping of their own (guarded ones), in all pools. */
static atomic_size_t stacks_alone;

size_t st__stacks_alone_max = ST__STACKS_ALONE_MAX;

bool st__stack_guard_markers_supported(void)
{
    static atomic_int known; /* 0: not asked yet, 1: supported, 2: not */
    int answer = atomic_load_explicit(&known, memory_order_relaxed);
    if (answer != 0) {
        return answer == 1;
    }
    int saved_errno = errno;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    bool supported = false;
    char *probe = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_FLAGS, -1, 0);
    if (probe != MAP_FAILED) {
        /*
         * Success alone proves nothing: an emulator such as qemu-user takes
         * advice it does not know for a hint and ignores it. A real guard
         * makes the kernel's copy into the page fail, so getcwd(2) into it
         * fails with EFAULT.
         */
        supported = madvise(probe, page, MADV_GUARD_INSTALL) == 0 && getcwd(probe, page) == NULL &&
                    errno == EFAULT;
        (void)munmap(probe, page);
        atomic_store_explicit(&known, supported ? 1 : 2, memory_order_relaxed);
    }
    errno = saved_errno;
    return supported;
}

void st__stack_pool_init(struct st__stack_pool *pool, enum st__stack_mode mode, bool guard_pages)
{
    st__list_init(&pool->cache);
    st__list_init(&pool->graveyard);
    st__list_init(&pool->slabs);
    pool->carve_next = NULL;
    pool->carve_end = NULL;
    st__list_init(&pool->unsplit);
    pool->split = 0;
    pool->made = 0;
    pool->reserve = 0;
    pool->reserve_size = 0;
    pool->mode = mode;
    pool->pagesize = (size_t)sysconf(_SC_PAGESIZE);
    pool->guard_pages = guard_pages;
    pool->randomize = false;
}

static struct st__stack *stack_from_link(struct st__list *link)
{
    return ST__CONTAINER_OF(link, struct st__stack, link);
}

static void unmap_all(struct st__list *list)
{
    struct st__list *link;
    while ((link = st__list_first(list)) != NULL) {
        st__list_remove(link);
        st__stack_unmap(stack_from_link(link));
    }
}

void st__stack_pool_fini(struct st__stack_pool *pool)
{
    unmap_all(&pool->cache);
    unmap_all(&pool->graveyard);
    ST__STAT_SET(num_free_stacks, 0);
    st__list_for_each_safe(link, next, &pool->slabs) {
        struct st__slab *slab = ST__CONTAINER_OF(link, struct st__slab, link);
        (void)munmap(slab->base, slab->size);
        free(slab);
    }
    st__list_init(&pool->slabs);
    pool->carve_next = NULL;
    pool->carve_end = NULL;
    /* The split stacks' mappings went with their slabs. */
    st__list_init(&pool->unsplit);
    atomic_fetch_sub_explicit(&stacks_alone, pool->split, memory_order_relaxed);
    pool->split = 0;
    pool->made = 0;
    pool->reserve = 0;
}

void st__stack_reclaim_queued(struct st__stack_pool *pool)
{
    struct st__list *link;
    while ((link = st__list_first(&pool->graveyard)) != NULL) {
        st__list_remove(link);
        struct st__stack *stack = stack_from_link(link);
        bool in_slab = stack->in_slab; /* the descriptor may be unmapped below */
        st__stack_unmap(stack);
        if (in_slab) {
            /* Its memory went back to the OS; its address range is reused. */
            st__list_insert_tail(&pool->cache, &stack->link);
        } else {
            ST__STAT_ADD(num_free_stacks, -1);
            pool->made--;
        }
    }
}

void st__stack_unmap(struct st__stack *stack)
{
    /* The descriptor lives inside the mapping: read it before unmapping. */
    char *base = stack->map_base;
    size_t size = stack->map_size;
#if ST__HAVE_VALGRIND
    VALGRIND_STACK_DEREGISTER(stack->valgrind_id);
    stack->valgrind_id = 0;
#endif
#ifdef ST__ASAN
    /*
     * st_destroy unmaps the stacks of coroutines that never finished: stop
     * scanning them, and clear the redzone poison of their last frames, or a
     * later mapping at this address would inherit it.
     */
    if (stack->lsan_root) {
        __lsan_unregister_root_region(stack->bottom, (size_t)(stack->top - stack->bottom));
        stack->lsan_root = false;
    }
    ASAN_UNPOISON_MEMORY_REGION(base, size);
#endif
    if (stack->in_slab) {
        /* The usable stack below the page that holds the descriptor; a guard stays. */
        size_t keep = (size_t)((char *)stack - stack->bottom) & ~((size_t)sysconf(_SC_PAGESIZE) - 1);
        (void)madvise(stack->bottom, keep, MADV_DONTNEED);
        return;
    }
    (void)munmap(base, size);
    atomic_fetch_sub_explicit(&stacks_alone, 1, memory_order_relaxed);
}

static struct st__stack *take_cached(struct st__stack_pool *pool, size_t size)
{
    st__list_for_each(link, &pool->cache) {
        struct st__stack *stack = stack_from_link(link);
        if (stack->size >= size) {
            st__list_remove(link);
            ST__STAT_ADD(num_free_stacks, -1);
            return stack;
        }
    }
    return NULL;
}

/*
 * A random, 16-byte aligned offset below the top of the mapping. Coroutines
 * with equal stack sizes would otherwise have their hot top-of-stack lines
 * map to the same cache sets.
 */
static size_t random_offset(const struct st__stack_pool *pool)
{
    size_t room = pool->pagesize - DESCRIPTOR_SPACE;
    return ((size_t)random() % room) & ~(size_t)15;
}

/*
 * How far below the descriptor a stack's top goes, from the address where
 * its mapping ends. Bits 12-15 of that address (the page's "colour") already
 * differ between neighbours, since they lie an odd number of pages apart;
 * the next five bits pick the cache line. Together the two spread the hot
 * top-of-stack lines of 512 neighbouring stacks over 512 cache sets, so a
 * server with many connections keeps their tops in the cache.
 */
static size_t colour_offset(const struct st__stack_pool *pool, const char *end)
{
    uintptr_t page = (uintptr_t)end / pool->pagesize;
    return (size_t)(page / 16 % TOP_COLOURS) * COLOUR_STEP;
}

/* One mapping per stack, with the guard page at its bottom. */
static char *map_guarded(const struct st__stack_pool *pool, size_t map_size)
{
    char *base = mmap(NULL, map_size, PROT_READ | PROT_WRITE, MAP_FLAGS, -1, 0);
    if (base == MAP_FAILED) {
        return NULL;
    }
    if (mprotect(base, pool->pagesize, PROT_NONE) != 0) {
        (void)munmap(base, map_size);
        return NULL;
    }
    atomic_fetch_add_explicit(&stacks_alone, 1, memory_order_relaxed);
    return base;
}

/* The next `map_size` bytes of a slab, starting a new slab when needed. */
static char *carve(struct st__stack_pool *pool, size_t map_size)
{
    if (pool->carve_next == NULL || (size_t)(pool->carve_end - pool->carve_next) < map_size) {
        size_t slab_size = map_size > SLAB_BYTES ? map_size : SLAB_BYTES / map_size * map_size;
        struct st__slab *slab = malloc(sizeof(*slab));
        if (slab == NULL) {
            return NULL;
        }
        char *base = mmap(NULL, slab_size, PROT_READ | PROT_WRITE, MAP_FLAGS, -1, 0);
        if (base == MAP_FAILED) {
            free(slab);
            return NULL;
        }
        slab->base = base;
        slab->size = slab_size;
        st__list_insert_tail(&pool->slabs, &slab->link);
        pool->carve_next = base;
        pool->carve_end = base + slab_size;
    }
    char *base = pool->carve_next;
    pool->carve_next += map_size;
    return base;
}

/* Whether process_madvise takes guard markers for this process: 0 not asked yet, 1 yes, 2 no. */
static atomic_int list_advice;

/*
 * Guard markers on the bottom page of `count` ranges of `map_size` bytes
 * in a row from `base`. Returns how many ranges, from the first, have theirs.
 */
static int install_guards(const struct st__stack_pool *pool, char *base, size_t map_size, int count)
{
    int done = 0;
#if HAVE_PROCESS_MADVISE
    if (count > 1 && atomic_load_explicit(&list_advice, memory_order_relaxed) != 2) {
        struct iovec ranges[ST__STACK_BATCH];
        for (int i = 0; i < count; i++) {
            ranges[i].iov_base = base + (size_t)i * map_size;
            ranges[i].iov_len = pool->pagesize;
        }
        int saved_errno = errno;
        ssize_t advised = process_madvise(PIDFD_SELF_PROCESS, ranges, (size_t)count, MADV_GUARD_INSTALL, 0);
        if (advised >= 0) {
            atomic_store_explicit(&list_advice, 1, memory_order_relaxed);
            done = (int)((size_t)advised / pool->pagesize);
        } else if (atomic_load_explicit(&list_advice, memory_order_relaxed) == 0) {
            /* Before Linux 6.15 (no PIDFD_SELF), or a seccomp filter: one call a range. */
            atomic_store_explicit(&list_advice, 2, memory_order_relaxed);
        }
        errno = saved_errno;
    }
#endif
    /* What the list left undone, a range at a time (a failure there says why). */
    while (done < count && madvise(base + (size_t)done * map_size, pool->pagesize, MADV_GUARD_INSTALL) == 0) {
        done++;
    }
    return done;
}

/*
 * Up to `*count` slab stacks of `map_size` bytes in a row, their guard pages
 * page-table markers; as many as the current slab has room for, at least
 * one. Sets *count to how many; NULL if none.
 */
static char *carve_guarded(struct st__stack_pool *pool, size_t map_size, int *count)
{
    char *base = carve(pool, map_size);
    if (base == NULL) {
        return NULL;
    }
    size_t room = 1 + (size_t)(pool->carve_end - pool->carve_next) / map_size;
    int want = (size_t)*count < room ? *count : (int)room;
    *count = install_guards(pool, base, map_size, want);
    /* The slab goes on after the ranges that got their guards. */
    pool->carve_next = base + (size_t)*count * map_size;
    return *count > 0 ? base : NULL;
}

bool st__stack_quick_in_slabs(void)
{
#if ST__HAVE_VALGRIND
    /*
     * Under valgrind the slab path costs several times what it saves: 9000
     * quick stacks took 20 s there against 6 s made alone, nearly all of it
     * system time. Burst stacks are made alone there.
     */
    if (RUNNING_ON_VALGRIND) {
        return false;
    }
#endif
    return st__stack_guard_markers_supported();
}

/* Whether the process may still give guarded stacks mappings of their own. */
static bool alone_allowed(void)
{
    return atomic_load_explicit(&stacks_alone, memory_order_relaxed) < st__stacks_alone_max;
}

/*
 * Where new stacks' ranges come from: a slab, or a mapping of their own.
 * `quick` (a burst): from a slab with guard markers where the kernel has
 * them, up to *count stacks in a row (one otherwise; *count says how many),
 * and *unsplit set if they are to get mappings of their own later.
 */
static char *map_range(struct st__stack_pool *pool, size_t map_size, bool quick, int *count,
                       bool *in_slab, bool *unsplit)
{
    *in_slab = true;
    *unsplit = false;
    int wanted = *count;
    *count = 1;
    if (!pool->guard_pages) {
        return carve(pool, map_size);
    }
    bool alone = alone_allowed();
    if ((quick && st__stack_quick_in_slabs()) || (!alone && st__stack_guard_markers_supported())) {
        *unsplit = alone;
        *count = quick ? wanted : 1;
        return carve_guarded(pool, map_size, count);
    }
    *in_slab = false;
    return map_guarded(pool, map_size);
}

/* Lay out the stack whose range is [base, base + map_size). */
static struct st__stack *stack_at(struct st__stack_pool *pool, char *base, size_t map_size,
                                  size_t size, bool in_slab, bool unsplit)
{
    size_t guard = pool->guard_pages ? pool->pagesize : 0;
    struct st__stack *stack = (struct st__stack *)(void *)(base + map_size - DESCRIPTOR_SPACE);
    stack->map_base = base;
    stack->map_size = map_size;
    stack->bottom = base + guard;
    stack->size = size;
    size_t shift = pool->randomize ? random_offset(pool) : colour_offset(pool, base + map_size);
    stack->top = (char *)stack - shift;
    stack->in_slab = in_slab;
    stack->lsan_root = false;
    st__list_init(&stack->link);
    st__list_init(&stack->split_link);
    if (unsplit) {
        st__list_insert_tail(&pool->unsplit, &stack->split_link);
    }
    stack->valgrind_id = 0;
    pool->made++;
    return stack;
}

/*
 * Make up to `count` stacks of `size` usable bytes, more than one only where
 * new stacks are quick ones carved from slabs with guard markers. Writing
 * each descriptor faults its top page in, where the coroutine object goes.
 * Returns the first, the others (if any) at the tail of the cache, behind
 * the stacks released already, which are warmer in the caches.
 */
static struct st__stack *map_new(struct st__stack_pool *pool, size_t size, bool quick, int count)
{
    size_t guard = pool->guard_pages ? pool->pagesize : 0;
    /* One extra page holds the descriptor and the colour or randomisation headroom. */
    size_t map_size = guard + size + pool->pagesize;
    if ((map_size / pool->pagesize) % 2 == 0) {
        map_size += pool->pagesize; /* an odd number of pages from one stack to the next */
    }
    bool in_slab = false;
    bool unsplit = false;
    char *base = map_range(pool, map_size, quick, &count, &in_slab, &unsplit);
    if (base == NULL) {
        errno = ENOMEM;
        return NULL;
    }
    struct st__stack *first = stack_at(pool, base, map_size, size, in_slab, unsplit);
    for (int i = 1; i < count; i++) {
        struct st__stack *spare =
            stack_at(pool, base + (size_t)i * map_size, map_size, size, in_slab, unsplit);
        st__list_insert_tail(&pool->cache, &spare->link);
        ST__STAT_ADD(num_free_stacks, 1);
    }
    return first;
}

void st__stack_split_queued(struct st__stack_pool *pool, int count)
{
    struct st__list *link;
    while (count-- > 0 && (link = st__list_first(&pool->unsplit)) != NULL) {
        struct st__stack *stack = ST__CONTAINER_OF(link, struct st__stack, split_link);
        /* The marker stays under the PROT_NONE page; it does no harm there. */
        if (!alone_allowed() || mprotect(stack->map_base, pool->pagesize, PROT_NONE) != 0) {
            /* The budget is spent, or the kernel's: the rest keep their markers. */
            st__list_for_each_safe(node, next, &pool->unsplit) {
                st__list_init(node);
            }
            st__list_init(&pool->unsplit);
            return;
        }
        st__list_remove(link);
        atomic_fetch_add_explicit(&stacks_alone, 1, memory_order_relaxed);
        pool->split++;
    }
}

static struct st__stack *acquire(struct st__stack_pool *pool, size_t size, bool quick)
{
    size = st__stack_round(pool, size);
    if (size == 0 || size > SIZE_MAX / 2) {
        errno = ENOMEM;
        return NULL;
    }
    st__stack_reclaim(pool);
    struct st__stack *stack = take_cached(pool, size);
    if (stack != NULL && pool->randomize) {
        /* A new random top for every coroutine: a reused stack would keep its last one. */
        stack->top = (char *)stack - random_offset(pool);
#if ST__HAVE_VALGRIND
        /*
         * The coroutine object goes below the new top, maybe where the last
         * coroutine's frames were, which valgrind made inaccessible as they
         * returned.
         */
        VALGRIND_MAKE_MEM_UNDEFINED(stack->bottom, (size_t)(stack->top - stack->bottom));
#endif
    }
    if (stack == NULL) {
        /* A burst's stacks come a batch at a time; free mode keeps no spares. */
        int count = quick && pool->mode == ST__STACK_CACHE ? ST__STACK_BATCH : 1;
        stack = map_new(pool, size, quick, count);
    }
#if ST__HAVE_VALGRIND
    /* Without this, valgrind takes every switch for a wild stack-pointer jump. */
    if (stack != NULL && stack->valgrind_id == 0) {
        stack->valgrind_id = VALGRIND_STACK_REGISTER(stack->bottom, (char *)stack);
    }
#endif
#ifdef ST__ASAN
    /*
     * A reused stack may still carry the redzone poison of frames that never
     * returned (a finished coroutine's last switch). A suspended coroutine's
     * locals are live: LeakSanitizer must scan them.
     */
    if (stack != NULL) {
        ASAN_UNPOISON_MEMORY_REGION(stack->bottom, (size_t)(stack->top - stack->bottom));
        __lsan_register_root_region(stack->bottom, (size_t)(stack->top - stack->bottom));
        stack->lsan_root = true;
    }
#endif
    return stack;
}

struct st__stack *st__stack_acquire(struct st__stack_pool *pool, size_t size)
{
    return acquire(pool, size, false);
}

struct st__stack *st__stack_acquire_quick(struct st__stack_pool *pool, size_t size)
{
    return acquire(pool, size, true);
}

void st__stack_reserve(struct st__stack_pool *pool, size_t count, size_t size)
{
    if (pool->mode != ST__STACK_CACHE) {
        return;
    }
    count = count < ST__STACK_RESERVE_MAX ? count : ST__STACK_RESERVE_MAX;
    if (count > pool->reserve) {
        pool->reserve = count;
        pool->reserve_size = st__stack_round(pool, size);
    }
}

void st__stack_prepare(struct st__stack_pool *pool, int count)
{
    while (count > 0 && st__stack_reserve_short(pool)) {
        size_t short_by = pool->reserve - pool->made;
        int batch = count < ST__STACK_BATCH ? count : ST__STACK_BATCH;
        batch = (size_t)batch < short_by ? batch : (int)short_by;
        int saved_errno = errno;
        size_t made_before = pool->made;
        struct st__stack *stack = map_new(pool, pool->reserve_size, true, batch);
        if (stack == NULL) {
            pool->reserve = pool->made;
            errno = saved_errno;
            return;
        }
        /* Behind the stacks released already, which are warmer in the caches. */
        st__list_insert_tail(&pool->cache, &stack->link);
        ST__STAT_ADD(num_free_stacks, 1);
        count -= (int)(pool->made - made_before);
    }
}

void st__stack_release(struct st__stack_pool *pool, struct st__stack *stack)
{
#ifdef ST__ASAN
    __lsan_unregister_root_region(stack->bottom, (size_t)(stack->top - stack->bottom));
    stack->lsan_root = false;
#endif
    if (pool->mode == ST__STACK_CACHE) {
        st__list_insert_head(&pool->cache, &stack->link);
    } else {
        st__list_insert_tail(&pool->graveyard, &stack->link);
    }
    ST__STAT_ADD(num_free_stacks, 1);
}
