/*
 * The cluster harness builds a real 3 masters + 3 replicas cluster, and rlock's slot function
 * agrees with the cluster's routing: the owner that rc_slot_owner() names for
 * rlk_cluster_key_slot(key) accepts a write of key, and every other master answers MOVED with
 * that slot.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <hiredis.h>

#include "cluster_slot.h"
#include "redis_cluster.h"

static rc_cluster *cluster;

static int setup(void **state)
{
    (void)state;
    cluster = rc_start(3, 1);
    return cluster != NULL ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    rc_free(cluster);
    return 0;
}

static int is_master(rh_server *s)
{
    const char *argv[] = {"INFO", "replication", NULL};
    char *info = rh_cmd_str(s, argv);
    int master = info != NULL && strstr(info, "role:master") != NULL;
    free(info);
    return master;
}

static void test_shape(void **state)
{
    (void)state;
    int masters = 0;
    assert_int_equal(rc_node_count(cluster), 6);
    for (int i = 0; i < rc_node_count(cluster); i++) {
        masters += is_master(rc_node(cluster, i));
    }
    assert_int_equal(masters, 3);
    assert_non_null(strstr(rc_seed_url(cluster), "redis-cluster://127.0.0.1:"));
}

static void test_owner_accepts_others_redirect(void **state)
{
    (void)state;
    const char *names[] = {"{job-1}", "redisson_lock__channel:{job-2}", "orders", "a", "zz"};
    for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
        int slot = rlk_cluster_key_slot(names[k], strlen(names[k]));
        rh_server *owner = rc_slot_owner(cluster, slot);
        assert_non_null(owner);
        assert_true(is_master(owner));
        for (int i = 0; i < rc_node_count(cluster); i++) {
            rh_server *node = rc_node(cluster, i);
            if (!is_master(node)) {
                continue;
            }
            const char *argv[] = {"SET", names[k], "1", NULL};
            redisReply *r = rh_cmd(node, argv);
            assert_non_null(r);
            if (node == owner) {
                assert_int_equal(r->type, REDIS_REPLY_STATUS);
            } else {
                char want[32];
                snprintf(want, sizeof(want), "MOVED %d ", slot);
                assert_int_equal(r->type, REDIS_REPLY_ERROR);
                assert_memory_equal(r->str, want, strlen(want));
            }
            freeReplyObject(r);
        }
    }
}

int main(void)
{
    rh_skip_if_unavailable();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shape),
        cmocka_unit_test(test_owner_accepts_others_redirect),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
