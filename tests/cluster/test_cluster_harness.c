/*
 * The cluster harness builds a real 3 masters + 3 replicas cluster, and rlock's slot function
 * agrees with the cluster's routing: the owner that rc_slot_owner() names for
 * rlk_cluster_key_slot(key) accepts a write of key, and every other master answers MOVED with
 * that slot. The maps rlock builds from CLUSTER SHARDS and CLUSTER SLOTS agree with each other
 * and with that routing.
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

#include "cluster_map.h"
#include "cluster_slot.h"
#include "rlock.h"
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

static rh_server *node_at_port(int port)
{
    for (int i = 0; i < rc_node_count(cluster); i++) {
        if (rh_port(rc_node(cluster, i)) == port) {
            return rc_node(cluster, i);
        }
    }
    return NULL;
}

static void test_maps_agree_with_routing(void **state)
{
    (void)state;
    const char *shards_argv[] = {"CLUSTER", "SHARDS", NULL};
    const char *slots_argv[] = {"CLUSTER", "SLOTS", NULL};
    redisReply *shards = rh_cmd(rc_node(cluster, 0), shards_argv);
    redisReply *slots = rh_cmd(rc_node(cluster, 0), slots_argv);
    rlk_cluster_map a, b;
    assert_int_equal(rlk_cluster_map_from_shards(shards, "127.0.0.1", &a), RLOCK_OK);
    assert_int_equal(rlk_cluster_map_from_slots(slots, "127.0.0.1", &b), RLOCK_OK);
    assert_int_equal(a.n_nodes, 3);
    assert_int_equal(rlk_cluster_map_covered(&a), RLK_CLUSTER_SLOTS);
    for (int s = 0; s < RLK_CLUSTER_SLOTS; s++) {
        assert_int_equal(a.nodes[a.owner[s]].port, b.nodes[b.owner[s]].port);
    }
    for (int k = 0; k < 200; k++) {
        char key[32];
        snprintf(key, sizeof(key), "{lock-%d}", k);
        const rlk_cluster_node *n = &a.nodes[a.owner[rlk_cluster_key_slot(key, strlen(key))]];
        rh_server *owner = node_at_port(n->port);
        assert_non_null(owner);
        const char *argv[] = {"SET", key, "1", NULL};
        redisReply *r = rh_cmd(owner, argv);
        assert_non_null(r);
        assert_int_equal(r->type, REDIS_REPLY_STATUS);
        freeReplyObject(r);
    }
    rlk_cluster_map_free(&a);
    rlk_cluster_map_free(&b);
    freeReplyObject(shards);
    freeReplyObject(slots);
}

int main(void)
{
    rh_skip_if_unavailable();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shape),
        cmocka_unit_test(test_owner_accepts_others_redirect),
        cmocka_unit_test(test_maps_agree_with_routing),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
