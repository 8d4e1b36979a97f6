/*
 * The decimal formatter every command's numbers go through (src/base/util.c), no server: each value
 * must read back as printf("%lld") writes it, including both ends of the ranges, because a wrong
 * digit in a lease, a key count or an owner's thread id would silently change what Redis does.
 */
#include <inttypes.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "util.h"
#include "tc_redis.h"

/* got (n bytes written by rlk_fmt_*) must be exactly want, NUL included. */
static void expect_text(const char *want, const char *got, size_t n)
{
    assert_int_equal(n, strlen(want));
    assert_string_equal(got, want);
}

static void check_i64(int64_t v)
{
    char want[32];
    char got[32] = "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx";
    (void)snprintf(want, sizeof(want), "%" PRId64, v);
    expect_text(want, got, rlk_fmt_i64(got, v));
}

static void check_u64(uint64_t v)
{
    char want[32];
    char got[32] = "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx";
    (void)snprintf(want, sizeof(want), "%" PRIu64, v);
    expect_text(want, got, rlk_fmt_u64(got, v));
}

static void test_signed_edges(void **state)
{
    (void)state;
    const int64_t edges[] = {
        0,      1,         -1,        9,         10,        -10,           30000,
        -30000, INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN, INT64_MAX - 1, INT64_MIN + 1};
    for (size_t i = 0; i < sizeof(edges) / sizeof(edges[0]); i++) {
        check_i64(edges[i]);
    }
}

static void test_unsigned_edges(void **state)
{
    (void)state;
    check_u64(0);
    check_u64(UINT64_MAX);
    check_u64((uint64_t)INT64_MAX + 1);
}

/* Every power of ten and its neighbours: where a digit count changes. */
static void test_digit_boundaries(void **state)
{
    (void)state;
    uint64_t p = 1;
    for (int i = 0; i < 19; i++, p *= 10) {
        check_u64(p - 1);
        check_u64(p);
        check_u64(p + 1);
        check_i64((int64_t)p);
        check_i64(-(int64_t)p);
    }
}

TC_MAIN(NULL, NULL, cmocka_unit_test(test_signed_edges), cmocka_unit_test(test_unsigned_edges),
        cmocka_unit_test(test_digit_boundaries))
