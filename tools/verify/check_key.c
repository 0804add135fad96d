/* verify: per-coroutine keys and their destructors. */
#include "verify.h"

#include <errno.h>
#include <string.h>

enum { KEYS_MAX = 16 };

struct destructed {
    void *values[8];
    int count;
};

static struct destructed destructed;

static void record_destruction(void *value)
{
    if (destructed.count < (int)(sizeof destructed.values / sizeof destructed.values[0])) {
        destructed.values[destructed.count] = value;
    }
    destructed.count++;
}

struct key_job {
    int key;
    int other_key;
    char own; /* the address is this coroutine's value */
};

static void *use_keys(void *arg)
{
    struct key_job *job = arg;
    VF_CO_CHECK(st_thread_getspecific(job->key) == NULL); /* fresh coroutine: empty */
    VF_CO_CHECK(st_thread_setspecific(job->key, &job->own) == 0);
    st_thread_yield();
    VF_CO_CHECK(st_thread_getspecific(job->key) == &job->own);
    /* the other key stays NULL: no destructor call for it */
    VF_CO_CHECK(st_thread_getspecific(job->other_key) == NULL);
    return NULL;
}

static int check_keys(void)
{
    static char primordial_value;
    struct key_job jobs[2];
    st_thread_t threads[2];
    int key = -1;
    int other = -1;

    memset(&destructed, 0, sizeof destructed);
    VF_CHECK(st_key_getlimit() == KEYS_MAX);
    VF_CHECK(st_key_create(&key, record_destruction) == 0);
    VF_CHECK(st_key_create(&other, record_destruction) == 0);
    VF_CHECK(key >= 0 && key < KEYS_MAX && other >= 0 && other < KEYS_MAX && key != other);
    VF_CHECK(st_thread_setspecific(key, &primordial_value) == 0);
    for (int i = 0; i < 2; i++) {
        jobs[i].key = key;
        jobs[i].other_key = other;
        threads[i] = vf_spawn(use_keys, &jobs[i]);
        VF_CHECK(threads[i] != NULL);
    }
    for (int i = 0; i < 2; i++) {
        VF_CHECK(vf_join_ok(threads[i]) == 0);
    }
    /* Each exit ran the destructor once, with that coroutine's value. */
    VF_CHECK(destructed.count == 2);
    VF_CHECK(destructed.values[0] == &jobs[0].own);
    VF_CHECK(destructed.values[1] == &jobs[1].own);
    VF_CHECK(st_thread_getspecific(key) == &primordial_value);
    return 0;
}

static int check_key_errors(void)
{
    int key = -1;
    errno = 0;
    VF_CHECK(st_thread_setspecific(0, &key) == -1 && errno == EINVAL); /* no key yet */
    VF_CHECK(st_thread_getspecific(0) == NULL);
    VF_CHECK(st_thread_getspecific(-1) == NULL);
    for (int i = 0; i < KEYS_MAX; i++) {
        VF_CHECK(st_key_create(&key, NULL) == 0);
        VF_CHECK(key == i);
    }
    errno = 0;
    VF_CHECK(st_key_create(&key, NULL) == -1 && errno == EAGAIN);
    errno = 0;
    VF_CHECK(st_thread_setspecific(-1, &key) == -1 && errno == EINVAL);
    errno = 0;
    VF_CHECK(st_thread_setspecific(KEYS_MAX, &key) == -1 && errno == EINVAL);
    VF_CHECK(st_thread_getspecific(KEYS_MAX) == NULL);
    VF_CHECK(st_thread_setspecific(KEYS_MAX - 1, &key) == 0);
    VF_CHECK(st_thread_getspecific(KEYS_MAX - 1) == &key);
    return 0;
}

/* Replacing a value destroys the old one; setspecific2 sets another's value. */
static char given_value;

static void *wait_and_read_key(void *arg)
{
    const int *key = arg;
    st_thread_yield();
    VF_CO_CHECK(st_thread_getspecific(*key) == &given_value);
    return NULL;
}

static int check_key_replace(void)
{
    static char first;
    static char second;
    int key = -1;
    st_thread_t thread = NULL;

    memset(&destructed, 0, sizeof destructed);
    VF_CHECK(st_key_create(&key, record_destruction) == 0);
    VF_CHECK(st_thread_setspecific(key, &first) == 0);
    VF_CHECK(st_thread_setspecific(key, &first) == 0); /* same value: no destructor */
    VF_CHECK(destructed.count == 0);
    VF_CHECK(st_thread_setspecific(key, &second) == 0);
    VF_CHECK(destructed.count == 1 && destructed.values[0] == &first);
    VF_CHECK(st_thread_setspecific(key, NULL) == 0);
    VF_CHECK(destructed.count == 2 && destructed.values[1] == &second);

    thread = vf_spawn(wait_and_read_key, &key);
    VF_CHECK(thread != NULL);
    VF_CHECK(st_thread_setspecific2(thread, key, &given_value) == 0);
    errno = 0;
    VF_CHECK(st_thread_setspecific2(thread, KEYS_MAX, NULL) == -1 && errno == EINVAL);
    VF_CHECK(vf_join_ok(thread) == 0);
    VF_CHECK(destructed.count == 3 && destructed.values[2] == &given_value);
    return 0;
}

const struct vf_check vf_checks_key[] = {
    {"keys_destructors", check_keys, VF_AFTER_INIT},
    {"key_errors", check_key_errors, VF_AFTER_INIT},
    {"key_replace", check_key_replace, VF_AFTER_INIT},
    {NULL, NULL, VF_AFTER_INIT},
};
