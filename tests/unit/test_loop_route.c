/*
 * The slot a loop client's script request goes to in a cluster (src/loop/loop_route.c), no
 * server: requests formatted by rlk_script_format() name their first key's slot (hash tags
 * applied), requests without a key or of another command name none, and no cut or damaged
 * request is read past its end (each one is an exact-size copy, which ASan guards).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "cluster_slot.h"
#include "loop_route.h"
#include "scripts.h"
#include "tc_redis.h"

/* rlk_loop_request_slot() of an exact-size heap copy of the n bytes at cmd. */
static int slot_of(const char *cmd, size_t n)
{
    char *copy = malloc(n > 0 ? n : 1);
    assert_non_null(copy);
    memcpy(copy, cmd, n);
    int s = rlk_loop_request_slot(copy, n);
    free(copy);
    return s;
}

/* A script formatted as the loop clients format them, with keys k1 (and k2). */
static size_t format(int script, const char *k1, const char *k2, char **cmd)
{
    rlk_args keys, args;
    rlk_args_init(&keys);
    rlk_args_init(&args);
    rlk_args_add(&keys, k1, strlen(k1));
    if (k2 != NULL) {
        rlk_args_add(&keys, k2, strlen(k2));
    }
    rlk_args_add(&args, "30000", 5);
    size_t len = 0;
    assert_int_equal(rlk_script_format(script, &keys, &args, cmd, &len), RLOCK_OK);
    return len;
}

static void test_script_slots(void **state)
{
    (void)state;
    static const char *const names[] = {"foo", "lock-a", "{user1000}.following", "a{}b", "x{y"};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        char *cmd = NULL;
        size_t len = format(RLK_SCRIPT_LOCK_ACQUIRE, names[i], NULL, &cmd);
        assert_int_equal(slot_of(cmd, len), rlk_cluster_key_slot(names[i], strlen(names[i])));
        free(cmd);
    }
    /* CLUSTER KEYSLOT foo is 12182; the second key does not count. */
    char *cmd = NULL;
    size_t len = format(RLK_SCRIPT_LOCK_RELEASE, "foo", "redisson_lock__channel:{bar}", &cmd);
    assert_int_equal(slot_of(cmd, len), 12182);
    /* A cut before the end of KEYS[1] names no slot (and reads nothing past the cut); one
     * after it names the slot, as only the first four elements are read. */
    const char *key = memmem(cmd, len, "$3\r\nfoo\r\n", 9);
    assert_non_null(key);
    size_t key_end = (size_t)(key - cmd) + 9;
    for (size_t n = 0; n < len; n++) {
        assert_int_equal(slot_of(cmd, n), n < key_end ? -1 : 12182);
    }
    free(cmd);
}

static void test_no_slot(void **state)
{
    (void)state;
    static const char *const reqs[] = {
        "*3\r\n$4\r\nWAIT\r\n$1\r\n1\r\n$3\r\n100\r\n",
        "*4\r\n$4\r\nEVAL\r\n$8\r\nreturn 1\r\n$1\r\n0\r\n$3\r\nfoo\r\n",
        "*4\r\n$3\r\nGET\r\n$1\r\nx\r\n$1\r\n1\r\n$3\r\nfoo\r\n",
        "*4\r\n$4\r\nEVAL\r\n$8\r\nreturn 1\r\n$1\r\nx\r\n$3\r\nfoo\r\n",
        "*4\r\n$4\r\nEVAL\r\n$8\r\nreturn 1\r\n$1\r\n1\r\n$9\r\nfoo\r\n",
        "*4\r\n$4\r\nEVAL\r\n$99999999999999999999\r\n",
        "$4\r\nEVAL\r\n",
        "",
    };
    for (size_t i = 0; i < sizeof(reqs) / sizeof(reqs[0]); i++) {
        assert_int_equal(slot_of(reqs[i], strlen(reqs[i])), -1);
    }
    assert_int_equal(rlk_loop_request_slot(NULL, 0), -1);
    /* EVAL in lower case, as Redis takes it, names its key's slot. */
    const char *eval = "*4\r\n$4\r\neval\r\n$8\r\nreturn 1\r\n$1\r\n1\r\n$3\r\nfoo\r\n";
    assert_int_equal(slot_of(eval, strlen(eval)), 12182);
}

TC_MAIN(NULL, NULL, cmocka_unit_test(test_script_slots), cmocka_unit_test(test_no_slot))
