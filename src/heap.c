#include "heap.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>

void st__heap_init(struct st__heap *heap)
{
    heap->slots = NULL;
    heap->size = 0;
    heap->capacity = 0;
    heap->next_seq = 0;
}

void st__heap_fini(struct st__heap *heap)
{
    for (size_t i = 0; i < heap->size; i++) {
        heap->slots[i]->index = ST__HEAP_NOT_QUEUED;
    }
    free((void *)heap->slots);
    st__heap_init(heap);
}

int st__heap_grow(struct st__heap *heap, size_t count)
{
    if (count > SIZE_MAX / 2 / sizeof(struct st__heap_node *)) {
        errno = ENOMEM;
        return -1;
    }
    size_t capacity = heap->capacity > 0 ? heap->capacity : 64;
    while (capacity < count) {
        capacity *= 2;
    }
    /* An array of node pointers, so sizeof a pointer is meant. */
    struct st__heap_node **slots =
        realloc((void *)heap->slots, capacity * sizeof(*slots)); // NOLINT(bugprone-sizeof-expression)
    if (slots == NULL) {
        errno = ENOMEM;
        return -1;
    }
    heap->slots = slots;
    heap->capacity = capacity;
    return 0;
}

static bool node_before(const struct st__heap_node *a, const struct st__heap_node *b)
{
    return a->due < b->due || (a->due == b->due && a->seq < b->seq);
}

static void place(struct st__heap *heap, size_t index, struct st__heap_node *node)
{
    heap->slots[index] = node;
    node->index = index;
}

/* Move `node` up from `index` until its parent is earlier. */
static void sift_up(struct st__heap *heap, size_t index, struct st__heap_node *node)
{
    while (index > 0) {
        size_t parent = (index - 1) / 2;
        if (!node_before(node, heap->slots[parent])) {
            break;
        }
        place(heap, index, heap->slots[parent]);
        index = parent;
    }
    place(heap, index, node);
}

/* Move `node` down from `index` until both children are later. */
static void sift_down(struct st__heap *heap, size_t index, struct st__heap_node *node)
{
    for (;;) {
        size_t child = 2 * index + 1;
        if (child >= heap->size) {
            break;
        }
        if (child + 1 < heap->size && node_before(heap->slots[child + 1], heap->slots[child])) {
            child++;
        }
        if (!node_before(heap->slots[child], node)) {
            break;
        }
        place(heap, index, heap->slots[child]);
        index = child;
    }
    place(heap, index, node);
}

void st__heap_insert(struct st__heap *heap, struct st__heap_node *node, st_utime_t due)
{
    node->due = due;
    node->seq = heap->next_seq++;
    sift_up(heap, heap->size++, node);
}

void st__heap_remove(struct st__heap *heap, struct st__heap_node *node)
{
    assert(st__heap_node_queued(node) && heap->slots[node->index] == node);
    size_t index = node->index;
    struct st__heap_node *last = heap->slots[--heap->size];
    node->index = ST__HEAP_NOT_QUEUED;
    if (last == node) {
        return;
    }
    /* The last node fills the hole; it may belong above or below it. */
    if (index > 0 && node_before(last, heap->slots[(index - 1) / 2])) {
        sift_up(heap, index, last);
    } else {
        sift_down(heap, index, last);
    }
}
