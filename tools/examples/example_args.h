/*
 * example_args: reading numbers from the command line, shared by the
 * example programs in tools/examples/.
 *
 * Plain libc, no st: load_client, which must not link st, uses it too.
 */
#ifndef EXAMPLE_ARGS_H
#define EXAMPLE_ARGS_H

/*
 * Parses s as a whole decimal number in [min, max] into *out. Returns 0, or
 * -1 (and leaves *out alone) for anything else: an empty string, trailing
 * characters, overflow or a value out of range, so that a typo in an option
 * is a usage error instead of a silent 0.
 */
int example_parse_long(const char *s, long min, long max, long *out);

#endif
