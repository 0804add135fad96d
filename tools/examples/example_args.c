/*
 * example_args: reading numbers from the command line (see example_args.h).
 */
#include "example_args.h"

#include <errno.h>
#include <stdlib.h>

int example_parse_long(const char *s, long min, long max, long *out)
{
    char *end = NULL;
    long v = 0;
    errno = 0; /* strtol reports overflow only through errno */
    v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < min || v > max) {
        return -1;
    }
    *out = v;
    return 0;
}
