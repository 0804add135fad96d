#include <criterion/criterion.h>

#include "list.h"

struct item {
    int value;
    struct st__list link;
};

static struct item *item_of(struct st__list *link)
{
    return ST__CONTAINER_OF(link, struct item, link);
}

static void expect_order(struct st__list *head, const int *values, int count)
{
    int i = 0;
    for (struct st__list *l = head->next; l != head; l = l->next, i++) {
        cr_assert_lt(i, count, "list longer than expected");
        cr_expect_eq(item_of(l)->value, values[i], "position %d", i);
        cr_expect_eq(l->next->prev, l, "broken back link at %d", i);
    }
    cr_assert_eq(i, count, "list has %d elements, expected %d", i, count);
}

Test(list, starts_empty)
{
    struct st__list head;
    st__list_init(&head);
    cr_expect(st__list_empty(&head));
    cr_expect_null(st__list_first(&head));
}

Test(list, insert_tail_keeps_fifo_order)
{
    struct st__list head;
    struct item items[3] = {{.value = 1}, {.value = 2}, {.value = 3}};
    st__list_init(&head);
    for (int i = 0; i < 3; i++) {
        st__list_insert_tail(&head, &items[i].link);
    }
    cr_expect_not(st__list_empty(&head));
    cr_expect_eq(st__list_first(&head), &items[0].link);
    expect_order(&head, (const int[]){1, 2, 3}, 3);
}

Test(list, insert_head_prepends)
{
    struct st__list head;
    struct item items[3] = {{.value = 1}, {.value = 2}, {.value = 3}};
    st__list_init(&head);
    for (int i = 0; i < 3; i++) {
        st__list_insert_head(&head, &items[i].link);
    }
    expect_order(&head, (const int[]){3, 2, 1}, 3);
}

Test(list, remove_unlinks_and_is_idempotent)
{
    struct st__list head;
    struct item items[3] = {{.value = 1}, {.value = 2}, {.value = 3}};
    st__list_init(&head);
    for (int i = 0; i < 3; i++) {
        st__list_insert_tail(&head, &items[i].link);
    }
    st__list_remove(&items[1].link);
    expect_order(&head, (const int[]){1, 3}, 2);
    st__list_remove(&items[1].link); /* already out: must not disturb the list */
    expect_order(&head, (const int[]){1, 3}, 2);
    st__list_remove(&items[0].link);
    st__list_remove(&items[2].link);
    cr_expect(st__list_empty(&head));
}

Test(list, splice_head_moves_batch_in_order)
{
    struct st__list to;
    struct st__list from;
    struct item items[5] = {{.value = 1}, {.value = 2}, {.value = 3}, {.value = 4}, {.value = 5}};
    st__list_init(&to);
    st__list_init(&from);
    st__list_insert_tail(&to, &items[3].link);
    st__list_insert_tail(&to, &items[4].link);
    for (int i = 0; i < 3; i++) {
        st__list_insert_tail(&from, &items[i].link);
    }
    st__list_splice_head(&to, &from);
    cr_expect(st__list_empty(&from));
    expect_order(&to, (const int[]){1, 2, 3, 4, 5}, 5);
}

Test(list, splice_of_empty_list_changes_nothing)
{
    struct st__list to;
    struct st__list from;
    struct item one = {.value = 7};
    st__list_init(&to);
    st__list_init(&from);
    st__list_insert_tail(&to, &one.link);
    st__list_splice_head(&to, &from);
    expect_order(&to, (const int[]){7}, 1);
    st__list_splice_head(&from, &from);
    cr_expect(st__list_empty(&from));
}
