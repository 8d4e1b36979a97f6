/*
 * Unit tests for src/base/cluster_slot.c: no server. The expected slots were read from a
 * cluster-enabled redis-server 7.0 with CLUSTER KEYSLOT; they cover plain keys, hash tags, the
 * empty tag, nested and unbalanced braces, and Redisson's own key and channel names. The
 * companion test test_cluster_slot_redis compares random keys with a live server.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "cluster_slot.h"

typedef struct slot_vector {
    const char *key;
    int slot;
} slot_vector;

static const slot_vector vectors[] = {
    {"123456789", 12739}, /* CRC16/XMODEM's check value 0x31C3. */
    {"foo", 12182},
    {"bar", 5061},
    {"hello", 866},
    {"{user1000}.following", 3443},
    {"{user1000}.followers", 3443},
    {"foo{}{bar}", 8363},    /* The first tag is empty: the whole key is hashed. */
    {"foo{{bar}}zap", 4015}, /* The tag is "{bar". */
    {"foo{bar}{zap}", 5061}, /* Only the first tag counts: "bar". */
    {"redisson_lock__channel:{mylock}", 1711},
    {"", 0},
    {"{}", 15257},
    {"{a}", 15495},
    {"a{b", 13340}, /* No closing brace: the whole key. */
    {"}{x}", 16287},
};

static void test_crc16_check_value(void **state)
{
    (void)state;
    assert_int_equal(rlk_crc16("123456789", 9), 0x31C3);
    assert_int_equal(rlk_crc16("", 0), 0);
}

static void test_known_slots(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(vectors) / sizeof(vectors[0]); i++) {
        int got = rlk_cluster_key_slot(vectors[i].key, strlen(vectors[i].key));
        if (got != vectors[i].slot) {
            fail_msg("key '%s': slot %d, Redis says %d", vectors[i].key, got, vectors[i].slot);
        }
    }
}

static void test_tag_decides_slot(void **state)
{
    (void)state;
    /* Every key of one Redisson lock carries the tag {name}, so all land in name's slot. */
    int name_slot = rlk_cluster_key_slot("job-42", 6);
    const char *keys[] = {"{job-42}", "redisson_lock__channel:{job-42}",
                          "redisson_lock_queue:{job-42}", "redisson_lock_timeout:{job-42}",
                          "{job-42}:write"};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        assert_int_equal(rlk_cluster_key_slot(keys[i], strlen(keys[i])), name_slot);
    }
}

static void test_binary_keys(void **state)
{
    (void)state;
    /* A NUL byte is part of the key, not its end. */
    const char with_nul[] = {'a', '\0', 'b'};
    assert_int_not_equal(rlk_cluster_key_slot(with_nul, 3), rlk_cluster_key_slot("a", 1));
    const char tagged[] = {'x', '{', '\0', '}', 'y'};
    assert_int_equal(rlk_cluster_key_slot(tagged, 5), rlk_crc16("\0", 1) & 16383);
}

/* rlk_cluster_has_tag() agrees with the slot rule: a key with a tag hashes as its tag. */
static void test_has_tag(void **state)
{
    (void)state;
    const char *tagged[] = {"{t}", "{t}x", "a{t}b", "}{t}", "{t}{", "{{}"};
    const char *untagged[] = {"plain", "{}e", "{", "}{", "a{b", "x{}y{z}", "}", "a}b", ""};
    for (size_t i = 0; i < sizeof(tagged) / sizeof(tagged[0]); i++) {
        assert_int_equal(rlk_cluster_has_tag(tagged[i], strlen(tagged[i])), 1);
    }
    for (size_t i = 0; i < sizeof(untagged) / sizeof(untagged[0]); i++) {
        const char *k = untagged[i];
        assert_int_equal(rlk_cluster_has_tag(k, strlen(k)), 0);
        assert_int_equal(rlk_cluster_key_slot(k, strlen(k)), rlk_crc16(k, strlen(k)) & 16383);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc16_check_value), cmocka_unit_test(test_known_slots),
        cmocka_unit_test(test_tag_decides_slot),  cmocka_unit_test(test_binary_keys),
        cmocka_unit_test(test_has_tag),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
