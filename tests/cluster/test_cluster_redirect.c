/*
 * A slot migration while a lock on it is held and waited for, done as `redis-cli --cluster
 * reshard` does it (SETSLOT IMPORTING/MIGRATING, MIGRATE of the slot's keys, SETSLOT NODE):
 * during the migration the client follows ASK to the importing node without changing its map;
 * after it, MOVED refreshes the map; the holder releases on the new owner, and the waiter is
 * woken there and gets the lock. A slot nobody serves (CLUSTERDOWN) is RLOCK_ECONN after the
 * command timeout.
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

#include "client.h"
#include "cluster.h"
#include "cluster_slot.h"
#include "tc_cluster.h"
#include "tc_redis.h"
#include "tc_thread.h"

static int lock_wait(void *arg)
{
    int r = rlock_try_lock(arg, 20000, 10000);
    return r == RLOCK_OK ? rlock_unlock(arg) : r;
}

static void test_migration_mid_hold(void **state)
{
    (void)state;
    const char *name = "migrating-lock";
    char slot[16];
    snprintf(slot, sizeof(slot), "%d", rlk_cluster_key_slot(name, strlen(name)));
    rh_server *src = tc_cluster_owner(name);
    rh_server *dst = tc_cluster_other_master(src);
    char *src_id = tc_cluster_node_id(src), *dst_id = tc_cluster_node_id(dst);

    rlock_client *holder = tc_cluster_client(0);
    rlock_client *waiter = tc_cluster_client(0);
    rlock *h = rlock_open(holder, RLOCK_REENTRANT, name);
    rlock *w = rlock_open(waiter, RLOCK_REENTRANT, name);
    assert_int_equal(rlock_try_lock(h, 0, 60000), RLOCK_OK);
    tc_bg bg;
    tc_bg_start(&bg, lock_wait, w);

    tc_cluster_setslot(dst, slot, "IMPORTING", src_id);
    tc_cluster_setslot(src, slot, "MIGRATING", dst_id);
    tc_cluster_migrate_keys(src, dst, slot);
    /* The key has left the old owner: a question about it is answered with ASK. */
    rlock *probe = rlock_open(waiter, RLOCK_REENTRANT, name);
    assert_int_equal(rlock_is_locked(probe), 1);
    rlk_cluster_stats st;
    rlk_cluster_get_stats(waiter->cluster, &st);
    assert_true(st.ask >= 1);
    assert_int_equal(st.refreshes, 0);

    /* As redis-cli: the new owner first, then the old one; gossip tells the rest. */
    tc_cluster_setslot(dst, slot, "NODE", dst_id);
    tc_cluster_setslot(src, slot, "NODE", dst_id);
    assert_int_equal(rlock_is_held(h), 1);
    /* The holder's map still names the old owner: MOVED, a refresh, the release on the new. */
    assert_int_equal(rlock_unlock(h), RLOCK_OK);
    rlk_cluster_get_stats(holder->cluster, &st);
    assert_true(st.moved >= 1);
    assert_true(st.refreshes >= 1);
    assert_int_equal(tc_bg_join(&bg), RLOCK_OK);
    assert_ptr_equal(tc_cluster_owner(name), dst);
    assert_int_equal(rlock_is_locked(probe), 0);

    rlock_free(probe);
    rlock_free(h);
    rlock_free(w);
    rlock_client_free(holder);
    rlock_client_free(waiter);
    free(src_id);
    free(dst_id);
}

/* CLUSTER DELSLOTS / ADDSLOTS of slot on s. */
static void slots_cmd(rh_server *s, const char *cmd, const char *slot)
{
    const char *argv[] = {"CLUSTER", cmd, slot, NULL};
    tc_cluster_cmd_ok(s, argv);
}

/* A master that serves no more the slot it is asked about answers CLUSTERDOWN: the call keeps
 * trying for command_timeout_ms and then fails with RLOCK_ECONN and the server's message; once
 * the slot is served again the same client locks it. */
static void test_clusterdown_is_econn_after_the_timeout(void **state)
{
    (void)state;
    const char *name = "down-lock";
    char slot[16];
    snprintf(slot, sizeof(slot), "%d", rlk_cluster_key_slot(name, strlen(name)));
    rh_server *owner = tc_cluster_owner(name);
    rlock_client *c = tc_cluster_client(300);
    rlock *l = rlock_open(c, RLOCK_REENTRANT, name);
    slots_cmd(owner, "DELSLOTS", slot);
    int64_t t0 = rh_now_ms();
    assert_int_equal(rlock_try_lock(l, 0, 10000), RLOCK_ECONN);
    assert_non_null(strstr(rlock_last_error(), "CLUSTERDOWN"));
    /* Retried until the command timeout, not refused at the first reply. */
    assert_true(rh_now_ms() - t0 >= 300);
    rlk_cluster_stats st;
    rlk_cluster_get_stats(c->cluster, &st);
    assert_true(st.tryagain >= 2);
    slots_cmd(owner, "ADDSLOTS", slot);
    assert_int_equal(rc_wait_ok(tc_cl, 20000), 0);
    assert_int_equal(rlock_try_lock(l, 0, 10000), RLOCK_OK);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    rlock_free(l);
    rlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_migration_mid_hold),
        cmocka_unit_test(test_clusterdown_is_econn_after_the_timeout),
    };
    return cmocka_run_group_tests(tests, tc_cluster_setup, tc_cluster_teardown);
}
