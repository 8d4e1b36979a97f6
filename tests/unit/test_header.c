/*
 * The public header's promises that a program compiles against, no server: the error codes and
 * log levels keep their names and values as enums and as macros (#ifdef works), the version
 * compares as one number both at compile time and against the library actually linked, the
 * options' reserved space starts zeroed, and the two lock enums keep their values and convert.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "rlock.h"

/* A program built against an older header tests for a newer code with #ifdef. */
#if !defined(RLOCK_OK) || !defined(RLOCK_ETLS) || !defined(RLOCK_EREPLICA) ||                      \
    !defined(RLOCK_ECANCELED) || !defined(RLOCK_LOG_DEBUG)
#error "error codes and log levels must stay visible to #ifdef"
#endif
#if RLOCK_VERSION_HEX < 0x000100
#error "RLOCK_VERSION_HEX must be usable in #if"
#endif

typedef struct {
    int code;
    int want;
} code_value;

/* The values are the ABI: a program compiled against any earlier header compares against them. */
static void test_error_values(void **state)
{
    (void)state;
    const code_value codes[] = {
        {RLOCK_OK, 0},       {RLOCK_ETIMEDOUT, -1}, {RLOCK_ENOTOWNER, -2}, {RLOCK_ELOST, -3},
        {RLOCK_EINVAL, -4},  {RLOCK_ENOMEM, -5},    {RLOCK_ECONN, -6},     {RLOCK_EREDIS, -7},
        {RLOCK_ECLOSED, -8}, {RLOCK_EDEADLK, -9},   {RLOCK_ENOTSUP, -10},  {RLOCK_EPROTO, -11},
        {RLOCK_EAUTH, -12},  {RLOCK_ETLS, -13},     {RLOCK_EREPLICA, -14}, {RLOCK_ECANCELED, -15},
    };
    for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
        assert_int_equal(codes[i].code, codes[i].want);
        assert_string_not_equal(rlock_strerror(codes[i].code), "unknown error code");
    }
    rlock_error e = RLOCK_ETLS;
    assert_int_equal((int)e, -13);
    assert_true(sizeof(rlock_error) == sizeof(int));
}

static void test_log_levels(void **state)
{
    (void)state;
    rlock_log_level l = RLOCK_LOG_DEBUG;
    assert_int_equal((int)l, 3);
    assert_int_equal(RLOCK_LOG_ERROR, 0);
    assert_int_equal(RLOCK_LOG_WARN, 1);
    assert_int_equal(RLOCK_LOG_INFO, 2);
    rlock_options o;
    rlock_options_init(&o);
    assert_int_equal(o.log_level, RLOCK_LOG_WARN);
    assert_null(o.reserved[0]);
    assert_null(o.reserved[1]);
}

/* The number, the macros and the linked library's string all name one version. */
static void test_version(void **state)
{
    (void)state;
    assert_int_equal(RLOCK_VERSION_HEX, (RLOCK_VERSION_MAJOR << 16) | (RLOCK_VERSION_MINOR << 8) |
                                            RLOCK_VERSION_PATCH);
    assert_int_equal(rlock_version(), (unsigned long)RLOCK_VERSION_HEX);
    unsigned maj = 0;
    unsigned min = 0;
    unsigned pat = 0;
    assert_int_equal(sscanf(rlock_version_string(), "%u.%u.%u", &maj, &min, &pat), 3);
    assert_int_equal((maj << 16) | (min << 8) | pat, rlock_version());
    /* One byte per part, so a later minor version always compares greater. */
    assert_true(RLOCK_VERSION_MINOR < 256 && RLOCK_VERSION_PATCH < 256);
}

/* rlock_kind (what rlock_open() takes) and rlock_lock_type (what rlock_inspect() reports) keep
 * their own values; rlock_kind_type() maps a kind to the layout its data has. */
static void test_kind_types(void **state)
{
    (void)state;
    const code_value kinds[] = {
        {RLOCK_REENTRANT, 0}, {RLOCK_FAIR, 1},           {RLOCK_READ, 2},
        {RLOCK_WRITE, 3},     {RLOCK_SPIN, 4},           {RLOCK_TYPE_FREE, 0},
        {RLOCK_TYPE_FAIR, 2}, {RLOCK_TYPE_REENTRANT, 1}, {RLOCK_TYPE_RW, 3},
    };
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
        assert_int_equal(kinds[i].code, kinds[i].want);
    }
    assert_int_equal(rlock_kind_type(RLOCK_REENTRANT), RLOCK_TYPE_REENTRANT);
    assert_int_equal(rlock_kind_type(RLOCK_SPIN), RLOCK_TYPE_REENTRANT);
    assert_int_equal(rlock_kind_type(RLOCK_FAIR), RLOCK_TYPE_FAIR);
    assert_int_equal(rlock_kind_type(RLOCK_READ), RLOCK_TYPE_RW);
    assert_int_equal(rlock_kind_type(RLOCK_WRITE), RLOCK_TYPE_RW);
    assert_int_equal(rlock_kind_type((rlock_kind)99), RLOCK_TYPE_FREE);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_error_values),
        cmocka_unit_test(test_log_levels),
        cmocka_unit_test(test_version),
        cmocka_unit_test(test_kind_types),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
