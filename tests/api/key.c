/*
 * Per-coroutine data: st_key_create, st_key_getlimit, st_thread_setspecific,
 * st_thread_getspecific, st_thread_setspecific2.
 */
#include "st_test.h"

ST_TEST_SUITE(key);

#define MAX_LOG 64

static void *destroyed[MAX_LOG];
static int ndestroyed;

static void record_destroy(void *value)
{
    if (ndestroyed < MAX_LOG) {
        destroyed[ndestroyed] = value;
    }
    ndestroyed++;
}

static int ndestroyed2;

static void record_destroy2(void *value)
{
    (void)value;
    ndestroyed2++;
}

Test(key, limit_is_16)
{
    cr_assert_eq(st_key_getlimit(), 16);
    st_test_init();
    cr_assert_eq(st_key_getlimit(), 16);
}

Test(key, keys_are_numbered_and_limited)
{
    int i;
    int k = -1;

    st_test_init();
    for (i = 0; i < 16; i++) {
        cr_assert_eq(st_key_create(&k, i % 2 ? record_destroy : NULL), 0, "key %d: %s", i,
                     strerror(errno));
        cr_assert_eq(k, i);
    }
    k = 1234;
    ST_ASSERT_FAILS(st_key_create(&k, NULL), EAGAIN);
    cr_assert_eq(k, 1234, "failed st_key_create changed *keyp");
    ST_ASSERT_FAILS(st_key_create(&k, record_destroy), EAGAIN);
    /* Every one of the 16 keys works. */
    for (i = 0; i < 16; i++) {
        cr_assert_eq(st_thread_setspecific(i, &destroyed[i]), 0);
        cr_assert_eq(st_thread_getspecific(i), &destroyed[i]);
    }
}

Test(key, null_keyp_is_einval)
{
    int k = -1;

    st_test_init();
    ST_ASSERT_FAILS(st_key_create(NULL, NULL), EINVAL);
    ST_ASSERT_FAILS(st_key_create(NULL, record_destroy), EINVAL);
    /* No key was used up. */
    cr_assert_eq(st_key_create(&k, NULL), 0);
    cr_assert_eq(k, 0);
}

Test(key, invalid_keys)
{
    int value;
    int k;

    st_test_init();
    /* No key created yet: even 0 is invalid. */
    ST_ASSERT_FAILS(st_thread_setspecific(0, &value), EINVAL);
    cr_assert_null(st_thread_getspecific(0));
    cr_assert_eq(st_key_create(&k, NULL), 0);
    cr_assert_eq(k, 0);
    ST_ASSERT_FAILS(st_thread_setspecific(-1, &value), EINVAL);
    ST_ASSERT_FAILS(st_thread_setspecific(1, &value), EINVAL);
    ST_ASSERT_FAILS(st_thread_setspecific(16, &value), EINVAL);
    ST_ASSERT_FAILS(st_thread_setspecific(1 << 20, &value), EINVAL);
    cr_assert_null(st_thread_getspecific(-1));
    cr_assert_null(st_thread_getspecific(1));
    cr_assert_null(st_thread_getspecific(16));
    cr_assert_null(st_thread_getspecific(-1000000));
    ST_ASSERT_FAILS(st_thread_setspecific2(st_thread_self(), -1, &value), EINVAL);
    ST_ASSERT_FAILS(st_thread_setspecific2(st_thread_self(), 1, &value), EINVAL);
    ST_ASSERT_FAILS(st_thread_setspecific2(st_thread_self(), 16, &value), EINVAL);
    cr_assert_eq(st_thread_setspecific(0, &value), 0);
    cr_assert_eq(st_thread_getspecific(0), &value);
}

struct seen {
    int key;
    void *initial;
    void *after_set;
};

static void *check_own_slot(void *arg)
{
    struct seen *s = arg;
    int local;

    s->initial = st_thread_getspecific(s->key);
    cr_expect_eq(st_thread_setspecific(s->key, &local), 0);
    st_thread_yield();
    s->after_set = st_thread_getspecific(s->key) == &local ? &local : NULL;
    cr_expect_eq(st_thread_setspecific(s->key, NULL), 0);
    return NULL;
}

Test(key, values_are_per_coroutine)
{
    int mine;
    int k;
    struct seen s[2] = {{0}, {0}};
    st_thread_t t[2];
    int i;

    st_test_init();
    cr_assert_eq(st_key_create(&k, NULL), 0);
    cr_assert_null(st_thread_getspecific(k));
    cr_assert_eq(st_thread_setspecific(k, &mine), 0);
    for (i = 0; i < 2; i++) {
        s[i].key = k;
        s[i].initial = &mine;
        t[i] = st_test_spawn(check_own_slot, &s[i]);
    }
    for (i = 0; i < 2; i++) {
        st_test_join(t[i]);
        cr_assert_null(s[i].initial, "a new coroutine inherited a value");
        cr_assert_not_null(s[i].after_set, "coroutine %d lost its own value", i);
    }
    cr_assert_eq(st_thread_getspecific(k), &mine);
}

Test(key, replacing_a_value_destroys_the_old_one)
{
    int a;
    int b;
    int k;

    st_test_init();
    ndestroyed = 0;
    cr_assert_eq(st_key_create(&k, record_destroy), 0);
    cr_assert_eq(st_thread_setspecific(k, &a), 0);
    cr_assert_eq(ndestroyed, 0);
    /* Same value again: nothing to destroy. */
    cr_assert_eq(st_thread_setspecific(k, &a), 0);
    cr_assert_eq(ndestroyed, 0);
    cr_assert_eq(st_thread_setspecific(k, &b), 0);
    cr_assert_eq(ndestroyed, 1);
    cr_assert_eq(destroyed[0], &a);
    cr_assert_eq(st_thread_getspecific(k), &b);
    cr_assert_eq(st_thread_setspecific(k, NULL), 0);
    cr_assert_eq(ndestroyed, 2);
    cr_assert_eq(destroyed[1], &b);
    /* Replacing NULL destroys nothing. */
    cr_assert_eq(st_thread_setspecific(k, &a), 0);
    cr_assert_eq(ndestroyed, 2);
}

static int slot_values[4];

static void *set_some_values(void *arg)
{
    int *keys = arg;

    cr_expect_eq(st_thread_setspecific(keys[0], &slot_values[0]), 0);
    cr_expect_eq(st_thread_setspecific(keys[1], &slot_values[1]), 0);
    /* keys[2] stays NULL; keys[3] has no destructor. */
    cr_expect_eq(st_thread_setspecific(keys[3], &slot_values[3]), 0);
    st_usleep(500);
    return NULL;
}

Test(key, destructors_run_once_at_exit)
{
    int keys[4];
    int i;

    st_test_init();
    ndestroyed = 0;
    ndestroyed2 = 0;
    cr_assert_eq(st_key_create(&keys[0], record_destroy), 0);
    cr_assert_eq(st_key_create(&keys[1], record_destroy2), 0);
    cr_assert_eq(st_key_create(&keys[2], record_destroy), 0);
    cr_assert_eq(st_key_create(&keys[3], NULL), 0);
    st_test_run(set_some_values, keys);
    cr_assert_eq(ndestroyed, 1);
    cr_assert_eq(destroyed[0], &slot_values[0]);
    cr_assert_eq(ndestroyed2, 1);
    /* Later scheduling does not run them again. */
    cr_assert_eq(st_usleep(1000), 0);
    cr_assert_eq(ndestroyed, 1);
    cr_assert_eq(ndestroyed2, 1);

    /* Non-joinable coroutines run them too. */
    for (i = 0; i < 3; i++) {
        cr_assert_not_null(st_thread_create(set_some_values, keys, 0, 0));
    }
    cr_assert_eq(st_usleep(5000), 0);
    cr_assert_eq(ndestroyed, 4);
    cr_assert_eq(ndestroyed2, 4);
}

static void *exit_with_value(void *arg)
{
    int k = *(int *)arg;

    cr_expect_eq(st_thread_setspecific(k, &slot_values[2]), 0);
    st_thread_exit(NULL);
    return NULL;
}

Test(key, destructors_run_on_explicit_exit)
{
    int k;

    st_test_init();
    ndestroyed = 0;
    cr_assert_eq(st_key_create(&k, record_destroy), 0);
    st_test_run(exit_with_value, &k);
    cr_assert_eq(ndestroyed, 1);
    cr_assert_eq(destroyed[0], &slot_values[2]);
}

static void *read_slot(void *arg)
{
    int k = *(int *)arg;

    return st_thread_getspecific(k);
}

Test(key, setspecific2_sets_another_coroutine)
{
    int k;
    int value;
    int other;
    void *ret = NULL;
    st_thread_t t;

    st_test_init();
    ndestroyed = 0;
    cr_assert_eq(st_key_create(&k, record_destroy), 0);
    t = st_test_spawn(read_slot, &k);
    cr_assert_eq(st_thread_setspecific2(t, k, &other), 0);
    cr_assert_eq(st_thread_setspecific2(t, k, &value), 0);
    /* The replaced value was destroyed; the primordial's slot is untouched. */
    cr_assert_eq(ndestroyed, 1);
    cr_assert_eq(destroyed[0], &other);
    cr_assert_null(st_thread_getspecific(k));
    cr_assert_eq(st_thread_join(t, &ret), 0);
    cr_assert_eq(ret, &value);
    /* The value set from outside is destroyed when the coroutine exits. */
    cr_assert_eq(ndestroyed, 2);
    cr_assert_eq(destroyed[1], &value);

    /* On itself it behaves like st_thread_setspecific. */
    cr_assert_eq(st_thread_setspecific2(st_thread_self(), k, &value), 0);
    cr_assert_eq(st_thread_getspecific(k), &value);
}

static void *set_every_key(void *arg)
{
    int n = *(int *)arg;

    for (int k = 0; k < n; k++) {
        cr_expect_eq(st_thread_setspecific(k, &slot_values[k % 3]), 0);
    }
    return NULL;
}

/* Returns the number of keys below *arg that do not read NULL. */
static void *count_set_keys(void *arg)
{
    int n = *(int *)arg;
    intptr_t set = 0;

    for (int k = 0; k < n; k++) {
        set += st_thread_getspecific(k) != NULL;
    }
    return (void *)set;
}

/* Sets only the last of *arg keys, then counts the others that do not read NULL. */
static void *set_last_then_count(void *arg)
{
    int n = *(int *)arg;
    int others = n - 1;

    cr_expect_eq(st_thread_setspecific(n - 1, &slot_values[0]), 0);
    return count_set_keys(&others);
}

Test(key, a_new_coroutine_on_a_reused_stack_starts_with_every_value_null)
{
    int n = 8;
    void *ret = (void *)1;

    st_test_init();
    ndestroyed = 0;
    for (int k = 0; k < n; k++) {
        int key;
        cr_assert_eq(st_key_create(&key, NULL), 0);
    }
    /* Same stack size, joined in between: the second takes the first's cached stack. */
    st_test_run(set_every_key, &n);
    cr_assert_eq(st_thread_join(st_thread_create(count_set_keys, &n, 1, 0), &ret), 0);
    cr_assert_eq(ret, NULL, "a new coroutine saw %ld values of a finished one", (long)(intptr_t)ret);
    /* Setting a later key first leaves the earlier ones NULL. */
    st_test_run(set_every_key, &n);
    cr_assert_eq(st_thread_join(st_thread_create(set_last_then_count, &n, 1, 0), &ret), 0);
    cr_assert_eq(ret, NULL, "%ld earlier keys kept a finished coroutine's values",
                 (long)(intptr_t)ret);
}

static void *values_of_later_keys(void *arg)
{
    (void)arg;
    int first;
    int later;

    cr_expect_eq(st_key_create(&first, record_destroy), 0);
    cr_expect_eq(st_thread_setspecific(first, &slot_values[0]), 0);
    st_thread_yield();
    /* Keys created since (by main) read NULL; setting the last leaves the others NULL. */
    later = st_key_getlimit() - 1;
    cr_expect_null(st_thread_getspecific(later));
    cr_expect_eq(st_thread_setspecific(later, &slot_values[1]), 0);
    for (int k = first + 1; k < later; k++) {
        cr_expect_null(st_thread_getspecific(k), "key %d", k);
    }
    cr_expect_eq(st_thread_getspecific(first), &slot_values[0]);
    cr_expect_eq(st_thread_getspecific(later), &slot_values[1]);
    return NULL;
}

Test(key, keys_created_after_a_coroutine_read_null_in_it)
{
    st_test_init();
    ndestroyed = 0;
    st_thread_t t = st_test_spawn(values_of_later_keys, NULL);
    st_thread_yield(); /* it creates key 0 and sets it */
    int key;
    do {
        cr_assert_eq(st_key_create(&key, record_destroy), 0);
    } while (key < st_key_getlimit() - 1);
    cr_assert_eq(st_thread_join(t, NULL), 0);
    /* Both values it set were destroyed at its exit, nothing else. */
    cr_assert_eq(ndestroyed, 2);
}
