/*
 * RedLock with cluster clients (issue 14, point 5). A RedLock's majority must be one of
 * independent deployments, so its members are on separate clients (rlock.h): names of one
 * cluster client are refused (RLOCK_EINVAL), since a reshard may put two of them on one master.
 * Over three cluster clients each member goes to the master of its own name's slot (names on the
 * three masters of the program's cluster here: two of them are not on a client's home node); a
 * second RedLock over the same names waits; a RedLock over a cluster client and two single servers
 * works; the watchdog keeps the hold past its lease; across a
 * CLUSTER FAILOVER of one member's master the hold is still renewed and released, and the next
 * RedLock is granted.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "tc_cluster.h"
#include "tc_redis.h"

#define MEMBERS  3
#define WATCH_MS 1500

/* Three cluster clients and a RedLock whose member k is the name prefix-k on the k-th master. */
typedef struct rl_set {
    rlock_client *c[MEMBERS];
    rlock *m[MEMBERS];
    char names[MEMBERS][32];
    rlock *g;
} rl_set;

static void rl_open(rl_set *s, const char *prefix)
{
    rlock_options o;
    tc_options_url(&o, rc_seed_url(tc_cl));
    o.watchdog_timeout_ms = WATCH_MS;
    for (int k = 0; k < MEMBERS; k++) {
        s->c[k] = tc_client(&o);
        tc_cluster_name_on(k, prefix, s->names[k], sizeof(s->names[k]));
        s->m[k] = rlock_open(s->c[k], RLOCK_REENTRANT, s->names[k]);
        assert_non_null(s->m[k]);
    }
    s->g = rlock_redlock_new(s->m, MEMBERS);
    assert_non_null(s->g);
}

static void rl_close(rl_set *s)
{
    rlock_free(s->g);
    for (int k = 0; k < MEMBERS; k++) {
        rlock_free(s->m[k]);
        rlock_client_free(s->c[k]);
    }
}

/* How many of the set's names exist on the masters that serve them. */
static int rl_keys(const rl_set *s)
{
    int n = 0;
    for (int k = 0; k < MEMBERS; k++) {
        n += tc_cluster_exists(s->names[k]) == 1;
    }
    return n;
}

static void test_one_cluster_client_is_not_a_quorum(void **state)
{
    (void)state;
    rlock_client *c = tc_cluster_client(0);
    rlock *m[MEMBERS];
    for (int k = 0; k < MEMBERS; k++) {
        char name[32];
        tc_cluster_name_on(k, "rl-one-", name, sizeof(name));
        m[k] = rlock_open(c, RLOCK_REENTRANT, name);
    }
    assert_null(rlock_redlock_new(m, MEMBERS));
    assert_non_null(strstr(rlock_last_error(), "share a client"));
    for (int k = 0; k < MEMBERS; k++) {
        rlock_free(m[k]);
    }
    rlock_client_free(c);
}

static void test_members_go_to_their_masters(void **state)
{
    (void)state;
    rl_set a, b;
    rl_open(&a, "rl-");
    rl_open(&b, "rl-");
    assert_int_equal(rlock_try_lock(a.g, 0, 10000), RLOCK_OK);
    assert_int_equal(rl_keys(&a), MEMBERS);
    assert_true(rlock_token(a.g) > 0);
    assert_int_equal(rlock_is_locked(b.g), 1);
    assert_int_equal(rlock_try_lock(b.g, 200, 10000), RLOCK_ETIMEDOUT);
    assert_int_equal(rlock_unlock(a.g), RLOCK_OK);
    assert_int_equal(rl_keys(&a), 0);

    /* Under the watchdog, past its lease. */
    assert_int_equal(rlock_try_lock(b.g, 0, -1), RLOCK_OK);
    rh_sleep_ms(WATCH_MS * 2);
    assert_int_equal(rl_keys(&b), MEMBERS);
    assert_int_equal(rlock_is_held(b.g), 1);
    assert_int_equal(rlock_unlock(b.g), RLOCK_OK);
    assert_int_equal(rl_keys(&b), 0);
    rl_close(&a);
    rl_close(&b);
}

static void test_redlock_across_cluster_failover(void **state)
{
    (void)state;
    rl_set a, b;
    rl_open(&a, "rl-fo-");
    rl_open(&b, "rl-fo-");
    assert_int_equal(rlock_try_lock(a.g, 0, -1), RLOCK_OK);
    rh_server *replica = rc_replica_of(tc_cl, tc_cluster_owner(a.names[0]));
    assert_non_null(replica);
    assert_int_equal(rc_failover(tc_cl, replica, 30000), 0);
    /* Past the lease: member 0's grant lives on only if its renewals followed the new master. */
    rh_sleep_ms(WATCH_MS * 2);
    assert_int_equal(rl_keys(&a), MEMBERS);
    assert_int_equal(rlock_is_held(a.g), 1);
    assert_int_equal(rlock_unlock(a.g), RLOCK_OK);
    assert_int_equal(rl_keys(&a), 0);
    /* b's client of member 0 still maps the slot to the old master: its first answer is MOVED,
     * the majority of the other two grants the RedLock or the next attempt goes to the new
     * master; either way b gets it and releases it everywhere. */
    assert_int_equal(rlock_try_lock(b.g, 5000, 10000), RLOCK_OK);
    assert_true(rl_keys(&b) >= MEMBERS - 1);
    assert_int_equal(rlock_unlock(b.g), RLOCK_OK);
    assert_int_equal(rl_keys(&b), 0);
    assert_int_equal(rlock_try_lock(b.g, 5000, 10000), RLOCK_OK);
    assert_int_equal(rl_keys(&b), MEMBERS);
    assert_int_equal(rlock_unlock(b.g), RLOCK_OK);
    rl_close(&a);
    rl_close(&b);
}

/* A RedLock over a cluster client and two single servers: the cluster member's name lives on a
 * master that is not its client's home node. */
static void test_cluster_and_single_servers(void **state)
{
    (void)state;
    rh_server *srv[2] = {tc_start(), tc_start()};
    rlock_client *c[MEMBERS];
    rlock *m[MEMBERS];
    char name[32];
    tc_cluster_name_on(1, "rl-mix-", name, sizeof(name));
    c[0] = tc_cluster_client(0);
    for (int k = 1; k < MEMBERS; k++) {
        rlock_options o;
        tc_options(&o, srv[k - 1]);
        c[k] = tc_client(&o);
    }
    for (int k = 0; k < MEMBERS; k++) {
        m[k] = rlock_open(c[k], RLOCK_REENTRANT, name);
    }
    rlock *g = rlock_redlock_new(m, MEMBERS);
    assert_non_null(g);
    assert_int_equal(rlock_try_lock(g, 0, 10000), RLOCK_OK);
    assert_int_equal(tc_cluster_exists(name), 1);
    assert_int_equal(rlock_unlock(g), RLOCK_OK);
    assert_int_equal(tc_cluster_exists(name), 0);
    rlock_free(g);
    for (int k = 0; k < MEMBERS; k++) {
        rlock_free(m[k]);
        rlock_client_free(c[k]);
    }
    rh_free(srv[0]);
    rh_free(srv[1]);
}

TC_MAIN(tc_cluster_setup, tc_cluster_teardown,
        cmocka_unit_test(test_one_cluster_client_is_not_a_quorum),
        cmocka_unit_test(test_members_go_to_their_masters),
        cmocka_unit_test(test_cluster_and_single_servers),
        cmocka_unit_test(test_redlock_across_cluster_failover))
