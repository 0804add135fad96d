/*
 * st_test_order.h - the order in which coroutines reached a point, as a
 * string of one letter each (order_add('a') ... cr_assert_str_eq(order, "ab")),
 * for the cond, mutex and sched_order suites.
 */
#ifndef ST_TEST_ORDER_H
#define ST_TEST_ORDER_H

static char order[128];
static int order_len;

static inline void order_reset(void)
{
    order_len = 0;
    order[0] = '\0';
}

static inline void order_add(char c)
{
    if (order_len < (int)sizeof(order) - 1) {
        order[order_len++] = c;
    }
    order[order_len] = '\0';
}

#endif /* ST_TEST_ORDER_H */
