/*
 * Timeout heap: a binary min-heap of nodes keyed by due time.
 *
 * Nodes are embedded in their owners (coroutines); the heap itself is an
 * array of node pointers, which is compact and cache friendly. Equal due
 * times are ordered by insertion sequence, so sleepers with the same
 * deadline wake in the order they went to sleep.
 *
 * Insertion never allocates: the owner of the heap reserves one slot per
 * potential sleeper up front (st__heap_reserve), so a coroutine going to
 * sleep can never fail for lack of memory.
 */
#ifndef ST__HEAP_H
#define ST__HEAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "st.h"

#define ST__HEAP_NOT_QUEUED SIZE_MAX

struct st__heap_node {
    st_utime_t due;
    uint64_t seq;  /* tie-breaker: insertion order */
    size_t index;  /* position in the heap array, or ST__HEAP_NOT_QUEUED */
};

struct st__heap {
    struct st__heap_node **slots;
    size_t size;
    size_t capacity;
    uint64_t next_seq;
};

void st__heap_init(struct st__heap *heap);
void st__heap_fini(struct st__heap *heap);

/* Grow the array to hold at least `count` nodes: 0, or -1 with errno ENOMEM. */
int st__heap_grow(struct st__heap *heap, size_t count);

/* Make room for at least `count` nodes. Returns 0, or -1 with errno ENOMEM. */
static inline int st__heap_reserve(struct st__heap *heap, size_t count)
{
    return count <= heap->capacity ? 0 : st__heap_grow(heap, count);
}

/* Insert `node` with deadline `due`; capacity must have been reserved. */
void st__heap_insert(struct st__heap *heap, struct st__heap_node *node, st_utime_t due);

/* Remove a queued node. */
void st__heap_remove(struct st__heap *heap, struct st__heap_node *node);

static inline void st__heap_node_init(struct st__heap_node *node)
{
    node->index = ST__HEAP_NOT_QUEUED;
}

static inline bool st__heap_node_queued(const struct st__heap_node *node)
{
    return node->index != ST__HEAP_NOT_QUEUED;
}

/* The node with the earliest deadline, or NULL if the heap is empty. */
static inline struct st__heap_node *st__heap_min(const struct st__heap *heap)
{
    return heap->size > 0 ? heap->slots[0] : NULL;
}

static inline size_t st__heap_size(const struct st__heap *heap)
{
    return heap->size;
}

#endif /* ST__HEAP_H */
