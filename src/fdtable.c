#include "fdtable.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>

void st__fdtable_init(struct st__fdtable *table, size_t record_size,
                      void (*record_init)(void *record, int fd))
{
    table->chunks = NULL;
    table->nchunks = 0;
    table->record_size = record_size;
    table->record_init = record_init;
}

void st__fdtable_fini(struct st__fdtable *table)
{
    for (int i = 0; i < table->nchunks; i++) {
        free(table->chunks[i]);
    }
    free((void *)table->chunks);
    table->chunks = NULL;
    table->nchunks = 0;
}

/* Room in the table of chunks for chunk number `chunk`. */
static int grow(struct st__fdtable *table, int chunk)
{
    int n = table->nchunks > 0 ? table->nchunks : 4;
    while (n <= chunk) {
        n = n > INT_MAX / 2 ? chunk + 1 : n * 2;
    }
    void **chunks = realloc((void *)table->chunks, (size_t)n * sizeof(*chunks));
    if (chunks == NULL) {
        errno = ENOMEM;
        return -1;
    }
    for (int i = table->nchunks; i < n; i++) {
        chunks[i] = NULL;
    }
    table->chunks = chunks;
    table->nchunks = n;
    return 0;
}

int st__fdtable_grow(struct st__fdtable *table, int fd)
{
    int chunk = fd >> ST__FDTABLE_SHIFT;
    if (chunk >= table->nchunks && grow(table, chunk) != 0) {
        return -1;
    }
    char *records = calloc(ST__FDTABLE_CHUNK, table->record_size);
    if (records == NULL) {
        errno = ENOMEM;
        return -1;
    }
    if (table->record_init != NULL) {
        for (int i = 0; i < ST__FDTABLE_CHUNK; i++) {
            table->record_init(records + (size_t)i * table->record_size,
                               chunk * ST__FDTABLE_CHUNK + i);
        }
    }
    table->chunks[chunk] = records;
    return 0;
}
