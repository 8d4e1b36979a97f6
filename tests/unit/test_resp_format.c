/*
 * rlock's RESP request writer (src/transport/resp_format.c), no server: it must write byte for byte
 * what hiredis' redisFormatCommandArgv() writes, which Redis has always read, for every shape of
 * request rlock sends: no argument, empty and binary arguments (NUL, CR, LF), lengths at every
 * digit-count boundary and argument counts of one and several digits.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <hiredis.h>

#include "resp_format.h"
#include "tc_redis.h"

/* rlock's bytes for argv must equal hiredis' bytes. */
static void expect_same(int argc, const char *const *argv, const size_t *lens)
{
    char *want = NULL;
    char *got = NULL;
    int wn = redisFormatCommandArgv(&want, argc, (const char **)argv, lens);
    long long gn = rlk_resp_format(argc, argv, lens, &got);
    assert_true(wn >= 0);
    assert_int_equal(gn, wn);
    assert_memory_equal(got, want, (size_t)wn);
    free(got);
    free(want);
}

static void test_shapes(void **state)
{
    (void)state;
    static const char bin[] = {'a', '\0', '\r', '\n', 'b', '\xff'};
    const char *argv[] = {"EVALSHA", "", bin, "1", "rlock_lock_wake:{x}"};
    size_t lens[] = {7, 0, sizeof(bin), 1, 19};
    expect_same(0, argv, lens);
    expect_same(1, argv, lens);
    expect_same(5, argv, lens);
    const char *text[] = {"ASKING", "PING", ""};
    expect_same(3, text, NULL); /* no lengths: NUL-terminated strings */
}

/* Lengths 0..10001 cover each digit count's first and last value; one long argument list
 * covers a two-digit count. */
static void test_lengths_and_counts(void **state)
{
    (void)state;
    enum { MAX = 10001, MANY = 12 };
    char *big = malloc(MAX);
    assert_non_null(big);
    memset(big, 'k', MAX);
    const char *one[1] = {big};
    for (size_t len = 0; len <= MAX; len += (len < 120 || len > 9980) ? 1 : 97) {
        size_t lens[1] = {len};
        expect_same(1, one, lens);
    }
    const char *many[MANY];
    size_t lens[MANY];
    for (int i = 0; i < MANY; i++) {
        many[i] = big;
        lens[i] = (size_t)i * 11;
    }
    expect_same(MANY, many, lens);
    free(big);
}

TC_MAIN(NULL, NULL, cmocka_unit_test(test_shapes), cmocka_unit_test(test_lengths_and_counts))
