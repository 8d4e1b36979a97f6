/*
 * rediss-cluster:// on a real TLS cluster (3 masters x 1 replica, every node with tls-port,
 * tls-cluster and tls-replication on; the program runs with RH_TLS_DIR, so the harness builds it
 * over TLS and the client trusts the test CA): the client dials the TLS port of every master
 * (each node also keeps a plain port for the harness, which CLUSTER SHARDS announces too, so a
 * client that took it would fail its handshake); every lock kind and a multi-lock work on names
 * over all three masters; a waiter is woken by a release through sharded pub/sub over TLS; a
 * MOVED (a migrated slot, and a map made stale by hand) names the TLS port and is followed; a
 * wrong CA is RLOCK_ECONN with a message.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "client.h"
#include "cluster.h"
#include "cluster_slot.h"
#include "pubsub.h"
#include "tc_cluster.h"
#include "tc_redis.h"
#include "tc_thread.h"

/* The cluster of tc_cluster_setup, which must be a TLS one: without RH_TLS_DIR this program
 * would test plain TCP and prove nothing about TLS. */
static int tls_setup(void **state)
{
    if (rh_tls_dir() == NULL) {
        fprintf(stderr, "test_cluster_tls: %s is not set\n", RH_ENV_TLS_DIR);
        return -1;
    }
    return tc_cluster_setup(state);
}

static void test_seed_url_is_tls(void **state)
{
    (void)state;
    assert_int_equal(strncmp(rc_seed_url(tc_cl), "rediss-cluster://", 17), 0);
    for (int i = 0; i < rc_node_count(tc_cl); i++) {
        assert_true(rh_tls_port(rc_node(tc_cl, i)) > 0);
    }
}

/* Reentrant, fair, read and write locks on a name of each master, then a multi-lock over all
 * three: every node pool dialled the node's TLS port. */
static void test_every_kind_on_every_master(void **state)
{
    (void)state;
    rlock_client *c = tc_cluster_client(0);
    rlock_client *d = tc_cluster_client(0);
    rlock_kind kinds[] = {RLOCK_REENTRANT, RLOCK_FAIR, RLOCK_READ, RLOCK_WRITE};
    rlock *m[3];
    for (int i = 0; i < 3; i++) {
        char name[32];
        tc_cluster_name_on(i, "tls-kind-", name, sizeof(name));
        for (size_t k = 0; k < sizeof(kinds) / sizeof(kinds[0]); k++) {
            rlock *l = tc_open(c, kinds[k], name);
            assert_int_equal(rlock_try_lock(l, 0, 10000), RLOCK_OK);
            assert_int_equal(tc_cluster_exists(name), 1);
            assert_int_equal(rlock_unlock(l), RLOCK_OK);
            rlock_free(l);
        }
        m[i] = tc_open(c, RLOCK_REENTRANT, name);
    }
    rlock *multi = rlock_multi_new(m, 3);
    assert_non_null(multi);
    assert_int_equal(rlock_try_lock(multi, 0, 10000), RLOCK_OK);
    /* Another client cannot take a member while the multi-lock holds all three. */
    char name[32];
    tc_cluster_name_on(2, "tls-kind-", name, sizeof(name));
    rlock *other = tc_open(d, RLOCK_REENTRANT, name);
    assert_int_equal(rlock_try_lock(other, 0, 10000), RLOCK_ETIMEDOUT);
    assert_int_equal(rlock_unlock(multi), RLOCK_OK);
    assert_int_equal(rlock_try_lock(other, 0, 10000), RLOCK_OK);
    assert_int_equal(rlock_unlock(other), RLOCK_OK);
    rlock_free(other);
    rlock_free(multi);
    for (int i = 0; i < 3; i++) {
        rlock_free(m[i]);
    }
    rlock_client_free(d);
    rlock_client_free(c);
}

/* Shard channels of master s whose name contains {name}, as PUBSUB SHARDCHANNELS lists them. */
static long long shard_channels(rh_server *s, const char *name)
{
    char pat[96];
    snprintf(pat, sizeof(pat), "*{%s}*", name);
    const char *argv[] = {"PUBSUB", "SHARDCHANNELS", pat, NULL};
    return tc_array_len(s, argv);
}

/* A waiter SSUBSCRIBEs on the lock's master over TLS and is woken by the holder's release (a
 * message read; the holder's lease outlasts the wait), on each master. */
static void test_waiter_woken_by_sharded_release(void **state)
{
    (void)state;
    rlock_client *h = tc_cluster_client(0);
    rlock_client *w = tc_cluster_client(0);
    for (int i = 0; i < 3; i++) {
        char name[32];
        tc_cluster_name_on(i, "tls-wake-", name, sizeof(name));
        rlock *hl = tc_open(h, RLOCK_REENTRANT, name);
        rlock *wl = tc_open(w, RLOCK_REENTRANT, name);
        assert_int_equal(rlock_try_lock(hl, 0, 60000), RLOCK_OK);
        tc_holder wh;
        tc_holder_start(&wh, wl, 20000, 30000, 0);
        rh_server *owner = tc_cluster_owner(name);
        int64_t until = rh_now_ms() + 10000;
        while (shard_channels(owner, name) < 1 && rh_now_ms() < until) {
            rh_sleep_ms(10);
        }
        assert_true(shard_channels(owner, name) >= 1);
        rh_sleep_ms(100); /* the subscription's confirmation re-attempt found the lock busy */
        uint64_t before = rlk_pubsub_messages(w->pubsub);
        assert_int_equal(tc_holder_wait(&wh, 0), TC_BG_RUNNING);
        assert_int_equal(rlock_unlock(hl), RLOCK_OK);
        assert_int_equal(tc_holder_wait(&wh, 20000), RLOCK_OK);
        assert_int_equal(tc_holder_join(&wh), RLOCK_OK);
        assert_true(rlk_pubsub_messages(w->pubsub) > before);
        rlock_free(wl);
        rlock_free(hl);
    }
    rlock_client_free(w);
    rlock_client_free(h);
}

/* c's redirection and refresh counts now. */
static rlk_cluster_stats stats_of(rlock_client *c)
{
    rlk_cluster_stats st;
    rlk_cluster_get_stats(c->cluster, &st);
    return st;
}

/* The slot of a held lock migrates (MIGRATE over the TLS cluster): the release is answered
 * MOVED by the old owner, which names the new owner's TLS port to a TLS client; the client
 * follows it and the lock is released there. */
static void test_moved_after_migration_followed(void **state)
{
    (void)state;
    const char *name = "tls-moving-lock";
    rlock_client *c = tc_cluster_client(0);
    rlock *l = tc_open(c, RLOCK_REENTRANT, name);
    assert_int_equal(rlock_try_lock(l, 0, 60000), RLOCK_OK);
    rh_server *src = tc_cluster_owner(name);
    rh_server *dst = tc_cluster_other_master(src);
    tc_cluster_move_slot(name, dst);
    assert_ptr_equal(tc_cluster_owner(name), dst);
    rlk_cluster_stats before = stats_of(c);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    assert_true(stats_of(c).moved > before.moved);
    assert_int_equal(tc_cluster_exists(name), 0);
    assert_int_equal(rlock_try_lock(l, 0, 10000), RLOCK_OK);
    assert_int_equal(tc_cluster_exists(name), 1);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    rlock_free(l);
    rlock_client_free(c);
}

/* A client whose map names the wrong master (its TLS port) for a slot is answered MOVED there,
 * reads the map again over TLS and locks on the owner. */
static void test_stale_map_followed(void **state)
{
    (void)state;
    char name[32];
    tc_cluster_name_on(0, "tls-stale-", name, sizeof(name));
    rlock_client *c = tc_cluster_client(0);
    rh_server *owner = tc_cluster_owner(name);
    rh_server *other = tc_cluster_other_master(owner);
    rlk_cluster_note_moved(c->cluster, rlk_cluster_key_slot(name, strlen(name)), "127.0.0.1",
                           rh_tls_port(other));
    rlk_cluster_stats before = stats_of(c);
    rlock *l = tc_open(c, RLOCK_FAIR, name);
    assert_int_equal(rlock_try_lock(l, 0, 10000), RLOCK_OK);
    rlk_cluster_stats after = stats_of(c);
    assert_true(after.moved > before.moved);
    assert_true(after.refreshes > before.refreshes);
    assert_int_equal(tc_cluster_exists(name), 1);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    rlock_free(l);
    rlock_client_free(c);
}

/* A client that trusts another CA cannot verify any node: RLOCK_ECONN with a message, from the
 * client's creation (which reads the topology) or at the latest from its first lock. */
static void test_wrong_ca_is_econn(void **state)
{
    (void)state;
    static char ca[4096];
    snprintf(ca, sizeof(ca), "%s/other_ca.crt", rh_tls_dir());
    rlock_options o;
    tc_options_url(&o, rc_seed_url(tc_cl));
    o.tls_ca_file = ca;
    o.command_timeout_ms = 2000;
    o.connect_timeout_ms = 2000;
    rlock_client *c = NULL;
    int r = rlock_client_new(&o, &c);
    if (r == RLOCK_OK) {
        rlock *l = tc_open(c, RLOCK_REENTRANT, "tls-wrong-ca");
        r = rlock_try_lock(l, 0, 10000);
        rlock_free(l);
        rlock_client_free(c);
    }
    assert_int_equal(r, RLOCK_ECONN);
    assert_true(strlen(rlock_last_error()) > 0);
}

TC_MAIN(tls_setup, tc_cluster_teardown, cmocka_unit_test(test_seed_url_is_tls),
        cmocka_unit_test(test_every_kind_on_every_master),
        cmocka_unit_test(test_waiter_woken_by_sharded_release),
        cmocka_unit_test(test_moved_after_migration_followed),
        cmocka_unit_test(test_stale_map_followed), cmocka_unit_test(test_wrong_ca_is_econn))
