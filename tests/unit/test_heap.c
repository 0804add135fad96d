#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>

#include "heap.h"
#include "list.h"

#define COUNT 2000

struct sleeper {
    int id;
    struct st__heap_node node;
};

static struct sleeper *sleeper_of(struct st__heap_node *node)
{
    return ST__CONTAINER_OF(node, struct sleeper, node);
}

/* Pop everything, checking (due, insertion) order; returns how many came out. */
static int drain_in_order(struct st__heap *heap)
{
    int popped = 0;
    st_utime_t last_due = 0;
    int last_id = -1;
    struct st__heap_node *node;
    while ((node = st__heap_min(heap)) != NULL) {
        st__heap_remove(heap, node);
        cr_assert_not(st__heap_node_queued(node));
        cr_assert_geq(node->due, last_due, "popped out of order");
        if (popped > 0 && node->due == last_due) {
            cr_assert_gt(sleeper_of(node)->id, last_id, "equal deadlines out of insertion order");
        }
        last_due = node->due;
        last_id = sleeper_of(node)->id;
        popped++;
    }
    return popped;
}

Test(heap, empty_heap_has_no_min)
{
    struct st__heap heap;
    st__heap_init(&heap);
    cr_expect_null(st__heap_min(&heap));
    cr_expect_eq(st__heap_size(&heap), 0);
    st__heap_fini(&heap);
}

Test(heap, pops_random_deadlines_in_order)
{
    static struct sleeper s[COUNT];
    struct st__heap heap;
    st__heap_init(&heap);
    cr_assert_eq(st__heap_reserve(&heap, COUNT), 0);
    srandom(42);
    for (int i = 0; i < COUNT; i++) {
        s[i].id = i;
        st__heap_node_init(&s[i].node);
        st__heap_insert(&heap, &s[i].node, (st_utime_t)(random() % 500));
        cr_assert(st__heap_node_queued(&s[i].node));
    }
    cr_expect_eq(st__heap_size(&heap), COUNT);
    cr_expect_eq(drain_in_order(&heap), COUNT);
    st__heap_fini(&heap);
}

Test(heap, equal_deadlines_keep_insertion_order)
{
    static struct sleeper s[64];
    struct st__heap heap;
    st__heap_init(&heap);
    cr_assert_eq(st__heap_reserve(&heap, 64), 0);
    for (int i = 0; i < 64; i++) {
        s[i].id = i;
        st__heap_insert(&heap, &s[i].node, 1000);
    }
    for (int i = 0; i < 64; i++) {
        struct st__heap_node *node = st__heap_min(&heap);
        cr_assert_eq(sleeper_of(node)->id, i);
        st__heap_remove(&heap, node);
    }
    st__heap_fini(&heap);
}

Test(heap, removing_arbitrary_nodes_keeps_the_heap_valid)
{
    static struct sleeper s[COUNT];
    struct st__heap heap;
    st__heap_init(&heap);
    cr_assert_eq(st__heap_reserve(&heap, COUNT), 0);
    srandom(7);
    for (int i = 0; i < COUNT; i++) {
        s[i].id = i;
        st__heap_insert(&heap, &s[i].node, (st_utime_t)(random() % 100000));
    }
    int removed = 0;
    for (int i = 0; i < COUNT; i += 3) {
        st__heap_remove(&heap, &s[i].node);
        cr_assert_not(st__heap_node_queued(&s[i].node));
        removed++;
    }
    cr_expect_eq(st__heap_size(&heap), (size_t)(COUNT - removed));
    cr_expect_eq(drain_in_order(&heap), COUNT - removed);
    st__heap_fini(&heap);
}

Test(heap, removing_the_last_slot_and_reinserting)
{
    struct sleeper a = {.id = 0};
    struct sleeper b = {.id = 1};
    struct st__heap heap;
    st__heap_init(&heap);
    cr_assert_eq(st__heap_reserve(&heap, 2), 0);
    st__heap_insert(&heap, &a.node, 5);
    st__heap_insert(&heap, &b.node, 9);
    st__heap_remove(&heap, &b.node);
    cr_expect_eq(st__heap_min(&heap), &a.node);
    st__heap_insert(&heap, &b.node, 1);
    cr_expect_eq(st__heap_min(&heap), &b.node);
    st__heap_fini(&heap);
    cr_expect_not(st__heap_node_queued(&a.node), "fini unqueues what is left");
    cr_expect_not(st__heap_node_queued(&b.node));
}

Test(heap, reserve_grows_and_never_shrinks)
{
    struct st__heap heap;
    st__heap_init(&heap);
    cr_assert_eq(st__heap_reserve(&heap, 1), 0);
    size_t first = heap.capacity;
    cr_expect_geq(first, 1);
    cr_assert_eq(st__heap_reserve(&heap, first * 4 + 1), 0);
    cr_expect_geq(heap.capacity, first * 4 + 1);
    size_t grown = heap.capacity;
    cr_assert_eq(st__heap_reserve(&heap, 1), 0);
    cr_expect_eq(heap.capacity, grown);
    st__heap_fini(&heap);
    cr_expect_eq(heap.capacity, 0);
}

Test(heap, reserve_reports_enomem)
{
    struct st__heap heap;
    st__heap_init(&heap);
    errno = 0;
    cr_expect_eq(st__heap_reserve(&heap, SIZE_MAX / 4), -1);
    cr_expect_eq(errno, ENOMEM);
    st__heap_fini(&heap);
}
