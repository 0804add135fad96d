/*
 * example_conns: the live connections of an example server (see
 * example_conns.h).
 */
#include "example_conns.h"

#include <stddef.h>

int example_conns_init(struct example_conns *set)
{
    set->head = NULL;
    set->active = 0;
    set->drained = st_cond_new();
    return set->drained != NULL ? 0 : -1;
}

void example_conns_add(struct example_conns *set, struct example_conn *link, void *owner)
{
    link->owner = owner;
    link->prev = NULL;
    link->next = set->head;
    if (set->head != NULL) {
        set->head->prev = link;
    }
    set->head = link;
    set->active++;
}

void example_conns_remove(struct example_conns *set, struct example_conn *link)
{
    if (link->prev != NULL) {
        link->prev->next = link->next;
    } else {
        set->head = link->next;
    }
    if (link->next != NULL) {
        link->next->prev = link->prev;
    }
    set->active--;
    /* Only a stop waits for this, but signalling a condition nobody waits
     * on costs nothing, so the list need not know about the stop. */
    if (set->active == 0) {
        (void)st_cond_signal(set->drained);
    }
}

int example_conns_wait(struct example_conns *set, st_utime_t timeout)
{
    st_utime_t deadline = st_utime() + timeout;
    while (set->active > 0) {
        st_utime_t now = st_utime();
        if (now >= deadline || st_cond_timedwait(set->drained, deadline - now) != 0) {
            return -1;
        }
    }
    return 0;
}
