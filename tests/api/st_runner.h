/*
 * st_runner.h - a small stand-in for the part of Criterion the api suite
 * uses, so that the same test files also build without Criterion: for the
 * foreign CPUs run under qemu-user, and under ThreadSanitizer.
 *
 * st_test.h includes this file instead of <criterion/criterion.h> when the
 * build defines ST_TEST_RUNNER. It provides Test(), TestSuite() with the
 * .init, .fini, .timeout and .disabled options, the cr_assert_* / cr_expect_*
 * assertions the suite uses, cr_skip_test() and cr_assert_fail(). Tests
 * register themselves through constructors; st_runner.c holds main(), which
 * runs every test in a forked process of its own with a time limit and
 * prints one PASS, FAIL or SKIP line per test and a final
 * `N passed, N failed` line.
 *
 * As with Criterion, a failed cr_assert_* ends the test, a failed
 * cr_expect_* marks it failed and carries on, and a failure in any process
 * the test forked (or any pthread it started) fails the test too.
 */
#ifndef ST_RUNNER_H
#define ST_RUNNER_H

#include <stdbool.h>
#include <stddef.h>
#include <string.h>

/*
 * A test, or a suite's options (suite set, name and fn NULL). The options
 * are designated initialisers, as with Criterion.
 */
struct st_runner_test {
    const char *suite;
    const char *name;
    void (*fn)(void);
    void (*init)(void);
    void (*fini)(void);
    double timeout; /* seconds; 0 takes the suite's, then the runner's default */
    bool disabled;
    const char *description;
};

void st_runner_add_test(const struct st_runner_test *test);
void st_runner_add_suite(const struct st_runner_test *suite);

/*
 * Record a failure at file:line. `expr` says what was checked; `fmt` is the
 * test's own message (printf-style, possibly empty) followed by its
 * arguments and one extra, unused argument. st_runner_assert() then ends the
 * test, st_runner_expect() returns.
 */
_Noreturn void st_runner_assert(const char *file, int line, const char *expr, const char *fmt,
                                ...);
void st_runner_expect(const char *file, int line, const char *expr, const char *fmt, ...);
/* Ends the test as skipped; fmt says why. */
_Noreturn void st_runner_skip(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define ST_RUNNER_CAT_(a, b) a##b
#define ST_RUNNER_CAT(a, b) ST_RUNNER_CAT_(a, b)

/* TestSuite(name, .init = f, .fini = g, .timeout = s) */
#define TestSuite(...) ST_RUNNER_SUITE_(__VA_ARGS__, )
#define ST_RUNNER_SUITE_(sname, ...)                                                               \
    static const struct st_runner_test ST_RUNNER_CAT(st_runner_suite_, sname) = {.suite = #sname, \
                                                                                 __VA_ARGS__};    \
    __attribute__((constructor)) static void ST_RUNNER_CAT(st_runner_add_suite_, sname)(void)      \
    {                                                                                              \
        st_runner_add_suite(&ST_RUNNER_CAT(st_runner_suite_, sname));                              \
    }                                                                                              \
    _Static_assert(1, "a TestSuite() is a declaration")

/* Test(suite, name, .timeout = s) { body } */
#define Test(...) ST_RUNNER_TEST_(__VA_ARGS__, )
#define ST_RUNNER_TEST_(sname, tname, ...)                                                         \
    static void st_runner_fn_##sname##_##tname(void);                                              \
    static const struct st_runner_test st_runner_test_##sname##_##tname = {                        \
        .suite = #sname,                                                                           \
        .name = #tname,                                                                            \
        .fn = st_runner_fn_##sname##_##tname,                                                      \
        __VA_ARGS__};                                                                              \
    __attribute__((constructor)) static void st_runner_add_##sname##_##tname(void)                 \
    {                                                                                              \
        st_runner_add_test(&st_runner_test_##sname##_##tname);                                     \
    }                                                                                              \
    static void st_runner_fn_##sname##_##tname(void)

/*
 * Every assertion takes an optional printf-style message. The macros append
 * an empty string argument so that the message may be left out; printf
 * ignores arguments its format does not use.
 */
#define ST_RUNNER_CHECK_(kind, cond, text, ...)                                                    \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            st_runner_##kind(__FILE__, __LINE__, (text), __VA_ARGS__);                             \
        }                                                                                          \
    } while (0)

#define ST_RUNNER_BOOL_(kind, cond, ...) ST_RUNNER_CHECK_(kind, cond, #cond, __VA_ARGS__)
#define ST_RUNNER_CMP_(kind, op, a, b, ...)                                                       \
    ST_RUNNER_CHECK_(kind, (a)op(b), #a " " #op " " #b, __VA_ARGS__)
#define ST_RUNNER_NULL_(kind, p, ...)                                                             \
    ST_RUNNER_CHECK_(kind, (p) == NULL, #p " is NULL", __VA_ARGS__)
#define ST_RUNNER_NOT_NULL_(kind, p, ...)                                                         \
    ST_RUNNER_CHECK_(kind, (p) != NULL, #p " is not NULL", __VA_ARGS__)
#define ST_RUNNER_STR_EQ_(kind, a, b, ...)                                                        \
    ST_RUNNER_CHECK_(kind, strcmp((a), (b)) == 0, #a " equals " #b, __VA_ARGS__)

#define cr_assert(...) ST_RUNNER_BOOL_(assert, __VA_ARGS__, "")
#define cr_expect(...) ST_RUNNER_BOOL_(expect, __VA_ARGS__, "")
#define cr_assert_eq(...) ST_RUNNER_CMP_(assert, ==, __VA_ARGS__, "")
#define cr_expect_eq(...) ST_RUNNER_CMP_(expect, ==, __VA_ARGS__, "")
#define cr_assert_neq(...) ST_RUNNER_CMP_(assert, !=, __VA_ARGS__, "")
#define cr_expect_neq(...) ST_RUNNER_CMP_(expect, !=, __VA_ARGS__, "")
#define cr_assert_lt(...) ST_RUNNER_CMP_(assert, <, __VA_ARGS__, "")
#define cr_expect_lt(...) ST_RUNNER_CMP_(expect, <, __VA_ARGS__, "")
#define cr_assert_leq(...) ST_RUNNER_CMP_(assert, <=, __VA_ARGS__, "")
#define cr_expect_leq(...) ST_RUNNER_CMP_(expect, <=, __VA_ARGS__, "")
#define cr_assert_gt(...) ST_RUNNER_CMP_(assert, >, __VA_ARGS__, "")
#define cr_expect_gt(...) ST_RUNNER_CMP_(expect, >, __VA_ARGS__, "")
#define cr_assert_geq(...) ST_RUNNER_CMP_(assert, >=, __VA_ARGS__, "")
#define cr_expect_geq(...) ST_RUNNER_CMP_(expect, >=, __VA_ARGS__, "")
#define cr_assert_null(...) ST_RUNNER_NULL_(assert, __VA_ARGS__, "")
#define cr_expect_null(...) ST_RUNNER_NULL_(expect, __VA_ARGS__, "")
#define cr_assert_not_null(...) ST_RUNNER_NOT_NULL_(assert, __VA_ARGS__, "")
#define cr_expect_not_null(...) ST_RUNNER_NOT_NULL_(expect, __VA_ARGS__, "")
#define cr_assert_str_eq(...) ST_RUNNER_STR_EQ_(assert, __VA_ARGS__, "")
#define cr_expect_str_eq(...) ST_RUNNER_STR_EQ_(expect, __VA_ARGS__, "")
#define cr_assert_fail(...) st_runner_assert(__FILE__, __LINE__, "cr_assert_fail", __VA_ARGS__, "")
#define cr_expect_fail(...)                                                                        \
    st_runner_expect(__FILE__, __LINE__, "cr_expect_fail", __VA_ARGS__, "")
#define cr_skip_test(...) st_runner_skip(__FILE__, __LINE__, __VA_ARGS__)
#define cr_skip(...) st_runner_skip(__FILE__, __LINE__, __VA_ARGS__)

#endif /* ST_RUNNER_H */
