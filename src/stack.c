#include "stack.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "fiber.h"
#include "st_config.h"
#ifdef ST__ASAN
#include <sanitizer/lsan_interface.h>
#endif
#if ST__HAVE_VALGRIND
#include <valgrind/valgrind.h>
#endif

/* Space the descriptor takes at the top of the mapping, cache-line aligned. */
#define DESCRIPTOR_SPACE ((sizeof(struct st__stack) + 63) & ~(size_t)63)

/* How much address space one slab of guard-less stacks spans, at least. */
#define SLAB_BYTES ((size_t)8 << 20)

#define MAP_FLAGS (MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK | MAP_NORESERVE)

void st__stack_pool_init(struct st__stack_pool *pool, enum st__stack_mode mode, bool guard_pages)
{
    st__list_init(&pool->cache);
    st__list_init(&pool->graveyard);
    st__list_init(&pool->slabs);
    pool->carve_next = NULL;
    pool->carve_end = NULL;
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
    struct st__list *link = pool->slabs.next;
    while (link != &pool->slabs) {
        struct st__slab *slab = ST__CONTAINER_OF(link, struct st__slab, link);
        link = link->next;
        (void)munmap(slab->base, slab->size);
        free(slab);
    }
    st__list_init(&pool->slabs);
    pool->carve_next = NULL;
    pool->carve_end = NULL;
}

void st__stack_reclaim(struct st__stack_pool *pool)
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
        /* Everything below the page that holds the descriptor. */
        size_t keep = (size_t)((char *)stack - base) & ~((size_t)sysconf(_SC_PAGESIZE) - 1);
        (void)madvise(base, keep, MADV_DONTNEED);
        return;
    }
    (void)munmap(base, size);
}

static struct st__stack *take_cached(struct st__stack_pool *pool, size_t size)
{
    for (struct st__list *link = pool->cache.next; link != &pool->cache; link = link->next) {
        struct st__stack *stack = stack_from_link(link);
        if (stack->size >= size) {
            st__list_remove(link);
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

static struct st__stack *map_new(struct st__stack_pool *pool, size_t size)
{
    size_t guard = pool->guard_pages ? pool->pagesize : 0;
    /* One extra page holds the descriptor and the randomisation headroom. */
    size_t map_size = guard + size + pool->pagesize;
    char *base = guard > 0 ? map_guarded(pool, map_size) : carve(pool, map_size);
    if (base == NULL) {
        errno = ENOMEM;
        return NULL;
    }
    struct st__stack *stack = (struct st__stack *)(void *)(base + map_size - DESCRIPTOR_SPACE);
    stack->map_base = base;
    stack->map_size = map_size;
    stack->bottom = base + guard;
    stack->size = size;
    stack->top = (char *)stack - (pool->randomize ? random_offset(pool) : 0);
    stack->in_slab = guard == 0;
    stack->lsan_root = false;
    st__list_init(&stack->link);
    stack->valgrind_id = 0;
    return stack;
}

struct st__stack *st__stack_acquire(struct st__stack_pool *pool, size_t size)
{
    size = st__stack_round(pool, size);
    if (size == 0 || size > SIZE_MAX / 2) {
        errno = ENOMEM;
        return NULL;
    }
    st__stack_reclaim(pool);
    struct st__stack *stack = take_cached(pool, size);
    if (stack == NULL) {
        stack = map_new(pool, size);
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
}
