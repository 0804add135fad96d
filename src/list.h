/*
 * Typed intrusive doubly linked circular list.
 *
 * A list head and a list link are the same structure: the head is a sentinel
 * whose next/prev point at the first/last element, or at itself when the
 * list is empty. Elements embed a link and are recovered with a container-of
 * helper defined next to the owning type, so call sites never cast.
 */
#ifndef ST__LIST_H
#define ST__LIST_H

#include <stdbool.h>
#include <stddef.h>

struct st__list {
    struct st__list *next;
    struct st__list *prev;
};

/* Recover the structure that embeds `ptr` as its member `member`. */
#define ST__CONTAINER_OF(ptr, type, member) \
    ((type *)(void *)((char *)(ptr) - offsetof(type, member)))

static inline void st__list_init(struct st__list *head)
{
    head->next = head;
    head->prev = head;
}

static inline bool st__list_empty(const struct st__list *head)
{
    return head->next == head;
}

/* Link `node` between two adjacent links. */
static inline void st__list_link_between(struct st__list *node, struct st__list *prev,
                                         struct st__list *next)
{
    node->prev = prev;
    node->next = next;
    prev->next = node;
    next->prev = node;
}

static inline void st__list_insert_tail(struct st__list *head, struct st__list *node)
{
    st__list_link_between(node, head->prev, head);
}

static inline void st__list_insert_head(struct st__list *head, struct st__list *node)
{
    st__list_link_between(node, head, head->next);
}

/* Unlink `node`; it is left pointing at itself so a second removal is harmless. */
static inline void st__list_remove(struct st__list *node)
{
    node->prev->next = node->next;
    node->next->prev = node->prev;
    node->next = node;
    node->prev = node;
}

/*
 * Walk the links of `head` in order, `link` naming each in turn. The body
 * must leave `link` on the list (it may unlink it and stop at once).
 */
#define st__list_for_each(link, head) \
    for (struct st__list *(link) = (head)->next; (link) != (head); (link) = (link)->next)

/*
 * The same, for a body that may unlink or free `link`: `next` is read
 * before the body runs. The body must not unlink `next`.
 */
#define st__list_for_each_safe(link, next, head)                                   \
    for (struct st__list *(link) = (head)->next, *(next) = (link)->next; (link) != (head); \
         (link) = (next), (next) = (link)->next)

/* The first element's link, or NULL when empty. */
static inline struct st__list *st__list_first(const struct st__list *head)
{
    return st__list_empty(head) ? NULL : head->next;
}

/* Move every element of `from` (in order) to the front of `to`; `from` ends empty. */
static inline void st__list_splice_head(struct st__list *to, struct st__list *from)
{
    if (st__list_empty(from)) {
        return;
    }
    struct st__list *first = from->next;
    struct st__list *last = from->prev;
    last->next = to->next;
    to->next->prev = last;
    to->next = first;
    first->prev = to;
    st__list_init(from);
}

#endif /* ST__LIST_H */
