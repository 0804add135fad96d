/* Coroutine-specific data: up to ST__KEYS_MAX keys per pthread. */
#include <errno.h>

#include "scheduler.h"

int st_key_create(int *keyp, void (*destructor)(void *))
{
    if (keyp == NULL) {
        errno = EINVAL;
        return -1;
    }
    struct st__sched *sched = st__sched_get();
    if (sched == NULL) {
        return -1;
    }
    if (sched->key_count >= ST__KEYS_MAX) {
        errno = EAGAIN;
        return -1;
    }
    sched->key_destructors[sched->key_count] = destructor;
    *keyp = sched->key_count++;
    return 0;
}

int st_key_getlimit(void)
{
    return ST__KEYS_MAX;
}

static bool key_valid(const struct st__sched *sched, int key)
{
    return sched != NULL && key >= 0 && key < sched->key_count;
}

int st_thread_setspecific2(st_thread_t thread, int key, void *value)
{
    const struct st__sched *sched = st__sched_peek();
    if (thread == NULL || !key_valid(sched, key)) {
        errno = EINVAL;
        return -1;
    }
    while (thread->keys_set <= key) {
        thread->keys[thread->keys_set++] = NULL;
    }
    void *old = thread->keys[key];
    if (value != old) {
        /* Replacing a value releases the previous one, as at exit. */
        if (old != NULL && sched->key_destructors[key] != NULL) {
            sched->key_destructors[key](old);
        }
        thread->keys[key] = value;
    }
    return 0;
}

int st_thread_setspecific(int key, void *value)
{
    return st_thread_setspecific2(st_thread_self(), key, value);
}

void *st_thread_getspecific(int key)
{
    const struct st__sched *sched = st__sched_peek();
    if (!key_valid(sched, key) || sched->current == NULL || key >= sched->current->keys_set) {
        return NULL;
    }
    return sched->current->keys[key];
}

void st__keys_run_destructors(struct st__sched *sched, struct _st_thread *thread)
{
    int set = thread->keys_set < sched->key_count ? thread->keys_set : sched->key_count;
    for (int key = 0; key < set; key++) {
        void *value = thread->keys[key];
        if (value != NULL && sched->key_destructors[key] != NULL) {
            thread->keys[key] = NULL;
            sched->key_destructors[key](value);
        }
    }
}
