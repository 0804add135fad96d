#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "scheduler.h"
#include "stack.h"

static size_t page(void)
{
    return (size_t)sysconf(_SC_PAGESIZE);
}

/* Whether [addr, addr+len) is mapped: msync fails with ENOMEM on a hole. */
static bool mapped(void *addr, size_t len)
{
    return msync(addr, len, MS_ASYNC) == 0;
}

Test(stack, acquire_rounds_up_to_whole_pages)
{
    struct st__stack_pool pool;
    st__stack_pool_init(&pool, ST__STACK_CACHE, true);
    struct st__stack *stack = st__stack_acquire(&pool, 1);
    cr_assert_not_null(stack);
    cr_expect_eq(stack->size, page());
    cr_expect_geq((size_t)(stack->top - stack->bottom), page());
    cr_expect_eq((uintptr_t)stack->bottom % page(), 0);
    stack->bottom[0] = 1; /* usable at both ends */
    stack->top[-1] = 1;
    st__stack_release(&pool, stack);
    st__stack_pool_fini(&pool);
}

Test(stack, zero_or_absurd_sizes_fail_with_enomem)
{
    struct st__stack_pool pool;
    st__stack_pool_init(&pool, ST__STACK_CACHE, false);
    errno = 0;
    cr_expect_null(st__stack_acquire(&pool, 0));
    cr_expect_eq(errno, ENOMEM);
    errno = 0;
    cr_expect_null(st__stack_acquire(&pool, SIZE_MAX - 100));
    cr_expect_eq(errno, ENOMEM);
    st__stack_pool_fini(&pool);
}

static int mapping_count(void)
{
    FILE *maps = fopen("/proc/self/maps", "r");
    cr_assert_not_null(maps);
    int lines = 0;
    int c;
    while ((c = fgetc(maps)) != EOF) {
        lines += c == '\n';
    }
    fclose(maps);
    return lines;
}

/* Skips the calling test, saying why, on a kernel without guard markers. */
static void require_guard_markers(void)
{
    if (!st__stack_guard_markers_supported()) {
        cr_skip_test("this kernel has no page-table guard markers (MADV_GUARD_INSTALL, Linux 6.13)");
    }
}

/*
 * Skips the calling test, saying why, where st__stack_acquire_quick makes
 * stacks alone: without guard markers, and under valgrind.
 */
static void require_quick_stacks(void)
{
    require_guard_markers();
    if (!st__stack_quick_in_slabs()) {
        cr_skip_test("under valgrind, quick stacks are made alone (st__stack_quick_in_slabs)");
    }
}

Test(stack, guard_page_faults_on_overflow, .signal = SIGSEGV)
{
    struct st__stack_pool pool;
    st__stack_pool_init(&pool, ST__STACK_CACHE, true);
    struct st__stack *stack = st__stack_acquire(&pool, 4 * page());
    cr_assert_not_null(stack);
    /* The first stacks of a process are mappings of their own, guarded with mprotect. */
    cr_assert_not(stack->in_slab);
    volatile char *below = stack->bottom - 1;
    *below = 1; /* must fault */
}

Test(stack, guard_markers_fault_below_a_slab_stack, .signal = SIGSEGV)
{
    require_guard_markers();
    struct st__stack_pool pool;
    st__stack_pool_init(&pool, ST__STACK_CACHE, true);
    st__stacks_alone_max = 0; /* from slabs at once */
    struct st__stack *first = st__stack_acquire(&pool, 4 * page());
    struct st__stack *second = st__stack_acquire(&pool, 4 * page());
    cr_assert_not_null(first);
    cr_assert_not_null(second);
    cr_assert(second->in_slab);
    cr_assert_eq(second->map_base, first->map_base + first->map_size, "carved side by side");
    first->top[-1] = 1; /* the neighbour's memory is usable right up to the guard */
    volatile char *below = second->bottom - 1;
    *below = 1; /* must fault */
}

Test(stack, free_mode_keeps_the_guard_marker_of_a_reused_slab_stack, .signal = SIGSEGV)
{
    require_guard_markers();
    struct st__stack_pool pool;
    st__stack_pool_init(&pool, ST__STACK_FREE, true);
    st__stacks_alone_max = 0; /* from slabs at once */
    struct st__stack *a = st__stack_acquire(&pool, 4 * page());
    cr_assert_not_null(a);
    cr_assert(a->in_slab);
    a->bottom[0] = 42;
    st__stack_release(&pool, a);
    st__stack_reclaim(&pool);
    cr_assert_eq(a->bottom[0], 0, "its memory went back to the OS (reads as zero)");
    struct st__stack *b = st__stack_acquire(&pool, 4 * page());
    cr_assert_eq(b, a, "the range is handed out again");
    volatile char *below = b->bottom - 1;
    *below = 1; /* must fault: handing the memory back kept the guard */
}

Test(stack, guarded_stacks_come_from_slabs_past_the_mappings_budget)
{
    require_guard_markers();
    enum { ALONE = ST__STACKS_ALONE_MAX, MORE = 10000, COUNT = ALONE + MORE };
    static struct st__stack *stacks[COUNT];
    struct st__stack_pool pool;
    st__stack_pool_init(&pool, ST__STACK_CACHE, true);
    int before = mapping_count();
    for (int i = 0; i < ALONE; i++) {
        stacks[i] = st__stack_acquire(&pool, page());
        cr_assert_not_null(stacks[i]);
        cr_assert_not(stacks[i]->in_slab, "stack %d: gcore copies stacks of their own whole", i);
    }
    int alone = mapping_count() - before;
    cr_expect_geq(alone, 2 * ALONE, "a stack and its mprotect'ed guard page");
    for (int i = ALONE; i < COUNT; i++) {
        stacks[i] = st__stack_acquire(&pool, page());
        cr_assert_not_null(stacks[i]);
        cr_assert(stacks[i]->in_slab, "stack %d", i);
        stacks[i]->bottom[0] = (char)i; /* each is its own memory */
    }
    int grown = mapping_count() - before - alone;
    cr_expect_lt(grown, MORE / 20, "%d guarded slab stacks took %d new mappings", MORE, grown);
    for (int i = 0; i < COUNT; i++) {
        cr_assert(i < ALONE || stacks[i]->bottom[0] == (char)i);
        st__stack_release(&pool, stacks[i]);
    }
    st__stack_pool_fini(&pool);
}

/* Whether a mapping of /proc/self/maps starts at `addr`. */
static bool mapping_starts_at(const void *addr)
{
    FILE *maps = fopen("/proc/self/maps", "r");
    cr_assert_not_null(maps);
    char line[512];
    bool found = false;
    while (!found && fgets(line, sizeof line, maps) != NULL) {
        found = strtoull(line, NULL, 16) == (uintptr_t)addr;
    }
    fclose(maps);
    return found;
}

Test(stack, quick_stacks_come_from_slabs_then_get_mappings_of_their_own)
{
    require_quick_stacks();
    enum { COUNT = 100 };
    struct st__stack *stacks[COUNT];
    struct st__stack_pool pool;
    st__stack_pool_init(&pool, ST__STACK_CACHE, true);
    int before = mapping_count();
    for (int i = 0; i < COUNT; i++) {
        stacks[i] = st__stack_acquire_quick(&pool, 4 * page());
        cr_assert_not_null(stacks[i]);
        cr_assert(stacks[i]->in_slab, "stack %d", i);
        stacks[i]->bottom[0] = (char)i;
    }
    int grown = mapping_count() - before;
    cr_expect_leq(grown, 2, "a burst of %d stacks took %d new mappings", COUNT, grown);
    st__stack_split(&pool, COUNT / 2);
    /* Two mappings each (the guard, the stack), but the first guard starts the slab. */
    cr_expect_geq(mapping_count() - before - grown, COUNT - 1, "half of them split off");
    st__stack_split(&pool, COUNT);
    cr_expect(st__list_empty(&pool.unsplit));
    for (int i = 0; i < COUNT; i++) {
        cr_expect(mapping_starts_at(stacks[i]->bottom), "stack %d is a mapping of its own", i);
        cr_expect_eq(stacks[i]->bottom[0], (char)i, "its memory is untouched");
        st__stack_release(&pool, stacks[i]);
    }
    st__stack_pool_fini(&pool);
}

Test(stack, a_split_quick_stack_keeps_its_guard, .signal = SIGSEGV)
{
    require_guard_markers();
    struct st__stack_pool pool;
    st__stack_pool_init(&pool, ST__STACK_CACHE, true);
    struct st__stack *stack = st__stack_acquire_quick(&pool, 4 * page());
    cr_assert_not_null(stack);
    st__stack_split(&pool, 1);
    cr_assert(mapping_starts_at(stack->bottom));
    volatile char *below = stack->bottom - 1;
    *below = 1; /* must fault */
}

Test(stack, an_unsplit_quick_stack_is_guarded_by_its_marker, .signal = SIGSEGV)
{
    require_guard_markers();
    struct st__stack_pool pool;
    st__stack_pool_init(&pool, ST__STACK_CACHE, true);
    struct st__stack *first = st__stack_acquire_quick(&pool, 4 * page());
    struct st__stack *second = st__stack_acquire_quick(&pool, 4 * page());
    cr_assert_not_null(first);
    cr_assert_not_null(second);
    /* Under valgrind it is made alone, guarded by its page: it faults all the same. */
    if (st__stack_quick_in_slabs()) {
        cr_assert_not(mapping_starts_at(second->bottom), "not split yet");
    }
    volatile char *below = second->bottom - 1;
    *below = 1; /* must fault */
}

Test(stack, splitting_stops_at_the_mappings_budget)
{
    require_quick_stacks();
    enum { COUNT = 10 };
    struct st__stack *stacks[COUNT];
    struct st__stack_pool pool;
    st__stack_pool_init(&pool, ST__STACK_CACHE, true);
    for (int i = 0; i < COUNT; i++) {
        stacks[i] = st__stack_acquire_quick(&pool, 4 * page());
        cr_assert_not_null(stacks[i]);
    }
    st__stacks_alone_max = 3; /* none alone so far: three may split */
    st__stack_split(&pool, COUNT);
    cr_expect(st__list_empty(&pool.unsplit), "past the budget the queue is dropped");
    int split = 0;
    for (int i = 0; i < COUNT; i++) {
        split += mapping_starts_at(stacks[i]->bottom);
    }
    cr_expect_eq(split, 3);
    struct st__stack *more = st__stack_acquire_quick(&pool, 4 * page());
    cr_assert_not_null(more);
    cr_expect(st__list_empty(&pool.unsplit), "nor does a new one queue past it");
    st__stack_pool_fini(&pool);
}

/* Whether the page below a stack is a guard: the kernel cannot copy from it. */
static bool guarded_below(const struct st__stack *stack)
{
    int fds[2];
    cr_assert_eq(pipe(fds), 0);
    errno = 0;
    bool guarded = write(fds[1], stack->bottom - 1, 1) == -1 && errno == EFAULT;
    close(fds[0]);
    close(fds[1]);
    return guarded;
}

Test(stack, a_burst_gets_its_new_stacks_a_batch_at_a_time)
{
    require_quick_stacks();
    enum { COUNT = ST__STACK_BATCH + 1 };
    struct st__stack *stacks[COUNT];
    struct st__stack_pool pool;
    st__stack_pool_init(&pool, ST__STACK_CACHE, true);
    stacks[0] = st__stack_acquire_quick(&pool, 4 * page());
    cr_assert_not_null(stacks[0]);
    cr_expect_eq(pool.made, ST__STACK_BATCH, "the first new stack of a burst brings a batch");
    for (int i = 1; i < ST__STACK_BATCH; i++) {
        stacks[i] = st__stack_acquire_quick(&pool, 4 * page());
        cr_assert_not_null(stacks[i]);
        cr_expect_eq(stacks[i]->map_base, stacks[i - 1]->map_base + stacks[i - 1]->map_size,
                     "stack %d: carved in a row, handed out in order", i);
    }
    cr_expect_eq(pool.made, ST__STACK_BATCH, "the rest of the burst takes the spares");
    stacks[ST__STACK_BATCH] = st__stack_acquire_quick(&pool, 4 * page());
    cr_assert_not_null(stacks[ST__STACK_BATCH]);
    cr_expect_eq(pool.made, 2 * ST__STACK_BATCH, "then the next batch");
    for (int i = 0; i < COUNT; i++) {
        cr_expect(guarded_below(stacks[i]), "stack %d has its guard", i);
        stacks[i]->top[-1] = 1; /* and is usable up to its top */
        st__stack_release(&pool, stacks[i]);
    }
    st__stack_pool_fini(&pool);
}

Test(stack, a_batch_ends_with_its_slab)
{
    require_quick_stacks();
    struct st__stack_pool pool;
    st__stack_pool_init(&pool, ST__STACK_CACHE, true);
    struct st__stack *first = st__stack_acquire_quick(&pool, 4 * page());
    cr_assert_not_null(first);
    const struct st__slab *slab = ST__CONTAINER_OF(st__list_first(&pool.slabs), struct st__slab, link);
    size_t per_slab = slab->size / first->map_size;
    cr_assert_neq(per_slab % ST__STACK_BATCH, 0, "the last batch of the slab is a short one");
    for (size_t i = 1; i < per_slab; i++) {
        struct st__stack *stack = st__stack_acquire_quick(&pool, 4 * page());
        cr_assert_not_null(stack);
        cr_assert(stack->map_base >= slab->base && stack->map_base + stack->map_size <= slab->base + slab->size,
                  "stack %zu lies in the first slab", i);
    }
    cr_expect_eq(pool.made, per_slab, "no batch reaches past the slab's end");
    struct st__stack *next = st__stack_acquire_quick(&pool, 4 * page());
    cr_assert_not_null(next);
    const struct st__slab *second = ST__CONTAINER_OF(pool.slabs.prev, struct st__slab, link);
    cr_expect_neq(second, slab);
    cr_expect_eq(next->map_base, second->base, "the next one starts a new slab");
    cr_expect_eq(pool.made, per_slab + ST__STACK_BATCH);
    st__stack_pool_fini(&pool);
}

Test(stack, free_mode_makes_a_bursts_stacks_one_at_a_time)
{
    require_quick_stacks();
    struct st__stack_pool pool;
    st__stack_pool_init(&pool, ST__STACK_FREE, true);
    struct st__stack *stack = st__stack_acquire_quick(&pool, 4 * page());
    cr_assert_not_null(stack);
    cr_expect_eq(pool.made, 1, "no spares: free mode holds no memory ahead of need");
    cr_expect(guarded_below(stack));
    st__stack_release(&pool, stack);
    st__stack_pool_fini(&pool);
}

Test(stack, quick_stacks_without_guard_pages_are_plain_slab_stacks)
{
    struct st__stack_pool pool;
    st__stack_pool_init(&pool, ST__STACK_CACHE, false);
    struct st__stack *stack = st__stack_acquire_quick(&pool, 4 * page());
    cr_assert_not_null(stack);
    cr_expect(stack->in_slab);
    cr_expect_eq(stack->bottom, stack->map_base);
    cr_expect(st__list_empty(&pool.unsplit));
    st__stack_pool_fini(&pool);
}

static void *return_null(void *arg)
{
    (void)arg;
    return NULL;
}

Test(stack, a_burst_of_coroutines_maps_no_stack_apiece_until_the_scheduler_has_time)
{
    require_quick_stacks();
    enum { COUNT = 200 };
    st_thread_t threads[COUNT];
    cr_assert_eq(st_init(), 0);
    struct st__stack_pool *pool = &st__sched_peek()->stacks;
    int before = mapping_count();
    for (int i = 0; i < COUNT; i++) {
        threads[i] = st_thread_create(return_null, NULL, 1, 0);
        cr_assert_not_null(threads[i]);
    }
    int grown = mapping_count() - before;
    /* The scheduler's first few stacks are mappings of their own at once, two each. */
    cr_expect_lt(grown, 2 * (int)ST__STACKS_AT_ONCE + 8,
                 "%d coroutines created at once took %d new mappings", COUNT, grown);
    /* A short wait leaves them be: the process may be busy. */
    cr_assert_eq(st_usleep(ST__QUIET_US / 2), 0);
    cr_expect_lt(mapping_count() - before, 2 * (int)ST__STACKS_AT_ONCE + 8);
    /* Each quiet spell gives a few of them mappings of their own. */
    for (int i = 0; i < COUNT && !st__list_empty(&pool->unsplit); i++) {
        cr_assert_eq(st_usleep(2 * ST__QUIET_US), 0);
    }
    cr_expect(st__list_empty(&pool->unsplit));
    cr_expect_geq(mapping_count() - before, 2 * COUNT - 8, "then every stack is a mapping of its own");
    for (int i = 0; i < COUNT; i++) {
        cr_assert_eq(st_thread_join(threads[i], NULL), 0);
    }
}

/* A moved top stays 16-byte aligned, below the descriptor, with the asked size under it. */
static void expect_sound_top(const struct st__stack *s)
{
    cr_expect_eq((uintptr_t)s->top % 16, 0);
    cr_expect_leq(s->top, (const char *)s);
    cr_expect_geq((size_t)(s->top - s->bottom), s->size);
}

Test(stack, tops_stay_in_the_top_page_and_keep_the_asked_size)
{
    enum { COUNT = 64 };
    struct st__stack *stacks[COUNT];
    for (int guard = 0; guard <= 1; guard++) {
        struct st__stack_pool pool;
        st__stack_pool_init(&pool, ST__STACK_CACHE, guard != 0);
        for (int i = 0; i < COUNT; i++) {
            struct st__stack *s = stacks[i] = st__stack_acquire(&pool, 16 * page());
            cr_assert_not_null(s);
            expect_sound_top(s);
            cr_expect_eq(s->map_size / page() % 2, 1, "an odd number of pages");
            cr_expect_eq((uintptr_t)s->top / page(), ((uintptr_t)s - 1) / page(),
                         "the top stays in the descriptor's page");
        }
        for (int i = 0; i < COUNT; i++) {
            st__stack_release(&pool, stacks[i]);
        }
        st__stack_pool_fini(&pool);
    }
}

Test(stack, neighbouring_stack_tops_fall_in_different_cache_sets)
{
    enum { COUNT = 64 };
    uintptr_t sets[COUNT];
    struct st__stack_pool pool;
    st__stack_pool_init(&pool, ST__STACK_CACHE, false); /* slab stacks: placed side by side */
    for (int i = 0; i < COUNT; i++) {
        struct st__stack *s = st__stack_acquire(&pool, 16 * page());
        cr_assert_not_null(s);
        /* The set of a 512 KiB 8-way cache with 64-byte lines: address bits 6-15. */
        sets[i] = ((uintptr_t)s->top >> 6) & 1023;
        for (int j = 0; j < i; j++) {
            cr_expect_neq(sets[i], sets[j], "stacks %d and %d: top lines in one cache set", j, i);
        }
    }
    st__stack_pool_fini(&pool);
}

Test(stack, without_guard_pages_the_mapping_starts_at_the_bottom)
{
    struct st__stack_pool pool;
    st__stack_pool_init(&pool, ST__STACK_CACHE, false);
    struct st__stack *stack = st__stack_acquire(&pool, 4 * page());
    cr_assert_not_null(stack);
    cr_expect_eq(stack->bottom, stack->map_base);
    st__stack_pool_fini(&pool);
}

Test(stack, cache_mode_reuses_released_stacks)
{
    struct st__stack_pool pool;
    st__stack_pool_init(&pool, ST__STACK_CACHE, true);
    struct st__stack *a = st__stack_acquire(&pool, 8 * page());
    cr_assert_not_null(a);
    char *a_base = a->map_base;
    st__stack_release(&pool, a);
    struct st__stack *b = st__stack_acquire(&pool, 4 * page());
    cr_expect_eq(b, a, "a big enough cached stack is handed out again");
    struct st__stack *c = st__stack_acquire(&pool, 4 * page());
    cr_expect_neq(c, a, "a stack in use is never handed out twice");
    st__stack_release(&pool, b);
    struct st__stack *d = st__stack_acquire(&pool, 16 * page());
    cr_expect_neq(d, a, "a cached stack that is too small is not used");
    cr_expect_geq(d->size, 16 * page());
    st__stack_release(&pool, c);
    st__stack_release(&pool, d);
    st__stack_pool_fini(&pool);
    cr_expect_not(mapped(a_base, page()), "fini unmaps cached stacks");
}

Test(stack, free_mode_defers_unmapping_until_reclaim)
{
    struct st__stack_pool pool;
    st__stack_pool_init(&pool, ST__STACK_FREE, true);
    struct st__stack *a = st__stack_acquire(&pool, 4 * page());
    cr_assert_not_null(a);
    char *base = a->map_base;
    size_t size = a->map_size;
    st__stack_release(&pool, a);
    cr_expect(mapped(base, size), "release must not unmap the stack it may run on");
    st__stack_reclaim(&pool);
    cr_expect_not(mapped(base, size), "reclaim returns it to the OS");
    st__stack_pool_fini(&pool);
}

Test(stack, free_mode_acquire_reclaims_the_previous_release)
{
    struct st__stack_pool pool;
    st__stack_pool_init(&pool, ST__STACK_FREE, false);
    struct st__stack *a = st__stack_acquire(&pool, 4 * page());
    cr_assert_not_null(a);
    char *base = a->map_base;
    size_t size = a->map_size;
    st__stack_release(&pool, a);
    struct st__stack *b = st__stack_acquire(&pool, 4 * page());
    cr_assert_not_null(b);
    if (b->map_base != base) {
        cr_expect_not(mapped(base, size));
    }
    st__stack_release(&pool, b);
    st__stack_pool_fini(&pool);
}

Test(stack, randomised_tops_stay_aligned_and_inside_the_mapping)
{
    struct st__stack_pool pool;
    st__stack_pool_init(&pool, ST__STACK_FREE, true);
    pool.randomize = true;
    bool moved = false;
    for (int i = 0; i < 32; i++) {
        struct st__stack *s = st__stack_acquire(&pool, 4 * page());
        cr_assert_not_null(s);
        expect_sound_top(s);
        moved = moved || s->top != (char *)s;
        st__stack_release(&pool, s);
        st__stack_reclaim(&pool);
    }
    cr_expect(moved, "randomisation never moved the top of the stack");
    st__stack_pool_fini(&pool);
}

Test(stack, guardless_stacks_share_slabs_instead_of_one_mapping_each)
{
    enum { COUNT = 10000 };
    static struct st__stack *stacks[COUNT];
    struct st__stack_pool pool;
    st__stack_pool_init(&pool, ST__STACK_CACHE, false);
    int before = mapping_count();
    for (int i = 0; i < COUNT; i++) {
        stacks[i] = st__stack_acquire(&pool, 4 * page());
        cr_assert_not_null(stacks[i]);
        cr_assert(stacks[i]->in_slab);
        stacks[i]->bottom[0] = (char)i; /* each is its own memory */
    }
    cr_expect_eq(stacks[1]->map_base, stacks[0]->map_base + stacks[0]->map_size,
                 "consecutive stacks are carved next to each other");
    int grown = mapping_count() - before;
    cr_expect_lt(grown, COUNT / 20, "%d stacks took %d new mappings", COUNT, grown);
    for (int i = 0; i < COUNT; i++) {
        cr_assert_eq(stacks[i]->bottom[0], (char)i);
        st__stack_release(&pool, stacks[i]);
    }
    char *first = stacks[0]->map_base;
    st__stack_pool_fini(&pool);
    cr_expect_not(mapped(first, page()), "fini unmaps the slabs");
}

Test(stack, free_mode_hands_slab_memory_back_and_reuses_the_range)
{
    struct st__stack_pool pool;
    st__stack_pool_init(&pool, ST__STACK_FREE, false);
    struct st__stack *a = st__stack_acquire(&pool, 4 * page());
    cr_assert_not_null(a);
    a->bottom[0] = 42;
    st__stack_release(&pool, a);
    st__stack_reclaim(&pool);
    cr_expect(mapped(a->map_base, a->map_size), "a slab stack's range stays mapped");
    cr_expect_eq(a->bottom[0], 0, "but its memory went back to the OS (reads as zero)");
    struct st__stack *b = st__stack_acquire(&pool, 4 * page());
    cr_expect_eq(b, a, "the range is handed out again");
    st__stack_release(&pool, b);
    st__stack_pool_fini(&pool);
}
