/*
 * Compares rlk_cluster_key_slot() with CLUSTER KEYSLOT of a real cluster-enabled redis-server
 * over random binary keys, biased toward braces so that every hash-tag rule is exercised.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <cmocka.h>
#include <hiredis.h>

#include "cluster_slot.h"
#include "redis_harness.h"

#define KEYS 4000

static uint64_t rng_state = 0x5EED;

static uint64_t rng_next(void)
{
    uint64_t z = (rng_state += UINT64_C(0x9E3779B97F4A7C15));

    z = (z ^ (z >> 30)) * UINT64_C(0xBF58476D1CE4E5B9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94D049BB133111EB);
    return z ^ (z >> 31);
}

/* A key of 0..24 bytes where about a third of the bytes are '{' or '}'. */
static size_t random_key(char *buf)
{
    size_t len = (size_t)(rng_next() % 25);
    for (size_t i = 0; i < len; i++) {
        uint64_t r = rng_next() % 9;
        buf[i] = r == 0 ? '{' : r == 1 ? '}' : r == 2 ? '\0' : (char)(rng_next() % 256);
    }
    return len;
}

static void test_random_keys_match_server(void **state)
{
    (void)state;
    const char *args[] = {"--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", NULL};
    rh_server *srv = rh_start(args);
    assert_non_null(srv);
    redisContext *ctx = rh_connect(srv);
    assert_non_null(ctx);

    char key[32];
    for (int i = 0; i < KEYS; i++) {
        size_t len = random_key(key);
        const char *argv[] = {"CLUSTER", "KEYSLOT", key};
        size_t lens[] = {7, 7, len};
        redisReply *r = redisCommandArgv(ctx, 3, argv, lens);
        assert_non_null(r);
        assert_int_equal(r->type, REDIS_REPLY_INTEGER);
        if (r->integer != rlk_cluster_key_slot(key, len)) {
            fail_msg("key #%d (%zu bytes): rlock slot %d, Redis %lld", i, len,
                     rlk_cluster_key_slot(key, len), r->integer);
        }
        freeReplyObject(r);
    }
    redisFree(ctx);
    rh_free(srv);
}

int main(void)
{
    rh_skip_if_unavailable();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_keys_match_server),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
