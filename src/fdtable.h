/*
 * Per-descriptor records of the backends that keep state for each fd they
 * watch (epoll, io_uring), indexed by the descriptor number.
 *
 * The records live in fixed chunks of ST__FDTABLE_CHUNK descriptors that
 * never move once allocated, because waiter lists point into them; only the
 * table of chunk pointers grows (doubling). A chunk is allocated the first
 * time one of its descriptors is reserved, so a process whose descriptors
 * are numbered in the thousands pays for the chunks in use only.
 */
#ifndef ST__FDTABLE_H
#define ST__FDTABLE_H

#include <stddef.h>

#define ST__FDTABLE_SHIFT 8
#define ST__FDTABLE_CHUNK (1 << ST__FDTABLE_SHIFT)

struct st__fdtable {
    void **chunks;   /* nchunks pointers; NULL for a chunk not allocated yet */
    int nchunks;
    size_t record_size;
    /* Called once for every record of a new chunk (zeroed before). */
    void (*record_init)(void *record, int fd);
};

void st__fdtable_init(struct st__fdtable *table, size_t record_size,
                      void (*record_init)(void *record, int fd));

/* Free every chunk and the table. */
void st__fdtable_fini(struct st__fdtable *table);

/* Allocate the chunk of `fd` (>= 0): 0, or -1 with errno ENOMEM. */
int st__fdtable_grow(struct st__fdtable *table, int fd);

/* Make the record of `fd` (>= 0) exist: 0, or -1 with errno ENOMEM. */
static inline int st__fdtable_reserve(struct st__fdtable *table, int fd)
{
    int chunk = fd >> ST__FDTABLE_SHIFT;
    if (chunk < table->nchunks && table->chunks[chunk] != NULL) {
        return 0; /* every wait after a descriptor's first */
    }
    return st__fdtable_grow(table, fd);
}

/* The record of `fd`, or NULL if `fd` is negative or was never reserved. */
static inline void *st__fdtable_find(const struct st__fdtable *table, int fd)
{
    int chunk = fd >> ST__FDTABLE_SHIFT;
    if (fd < 0 || chunk >= table->nchunks || table->chunks[chunk] == NULL) {
        return NULL;
    }
    return (char *)table->chunks[chunk] +
           (size_t)(fd & (ST__FDTABLE_CHUNK - 1)) * table->record_size;
}

/* The record of a descriptor known to be reserved. */
static inline void *st__fdtable_at(const struct st__fdtable *table, int fd)
{
    return (char *)table->chunks[fd >> ST__FDTABLE_SHIFT] +
           (size_t)(fd & (ST__FDTABLE_CHUNK - 1)) * table->record_size;
}

#endif /* ST__FDTABLE_H */
