/*
 * Replica sync per cluster node: a synced grant waits for the replicas of the master that
 * served it, not for those of another master. With the replica of one master stopped (by PID),
 * a client that counted it gets RLOCK_EREPLICA for a lock, a semaphore acquire, a latch
 * count-down and a multi-lock on that master's slots (nothing left held), while the other
 * masters still grant after waiting for their own replica; a client made afterwards locks on that
 * master without waiting for anyone and still waits for one replica elsewhere; the replica back,
 * the count rises again. After kill -9 of a master, a client that knew its count starts the
 * promoted replica from it (grants fail closed until the old master is back as its replica).
 * The number waited for is read from the thread's last synced outcome
 * (replica.h), which the library keeps for its own undo of unsynced grants. Direct grants reach
 * synced cluster clients too: a waiting thread of another client takes each release's grant,
 * confirmed after its master's replica acknowledged it (issue 33).
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "lock.h"
#include "lock_wait.h"
#include "replica.h"
#include "tc_cluster.h"
#include "tc_redis.h"

/* The default: shorter ones were seen to expire on a loaded machine with every replica up. */
#define SYNC_TIMEOUT_MS 1000

static rlock_client *sync_client_mode(int pubsub)
{
    rlock_options o;
    tc_options_url(&o, rc_seed_url(tc_cl));
    o.replica_sync = 1;
    o.replica_sync_timeout_ms = SYNC_TIMEOUT_MS;
    o.cluster_pubsub = pubsub;
    return tc_client(&o);
}

static rlock_client *sync_client(void)
{
    return sync_client_mode(RLOCK_CLUSTER_PUBSUB_AUTO);
}

/* How many replicas the calling thread's last synced script waited for. */
static int waited_for(void)
{
    int acked = 0, n = 0;
    (void)rlk_sync_short(&acked, &n);
    return n;
}

/* Locks and unlocks name on c; the number of replicas the grant waited for, or the error. */
static int lock_once(rlock_client *c, const char *name)
{
    rlock *l = rlock_open(c, RLOCK_REENTRANT, name);
    assert_non_null(l);
    int r = rlock_try_lock(l, 0, 10000);
    int n = waited_for();
    if (r == RLOCK_OK) {
        assert_int_equal(rlock_unlock(l), RLOCK_OK);
    }
    rlock_free(l);
    return r == RLOCK_OK ? n : r;
}

/* Stops the replica of the i-th master and waits until that master no longer lists it. */
static rh_server *stop_replica_of(int i, char *name, size_t len)
{
    tc_cluster_name_on(i, "rs-", name, len);
    rh_server *master = tc_cluster_owner(name);
    rh_server *replica = rc_replica_of(tc_cl, master);
    assert_non_null(replica);
    assert_int_equal(rh_stop(replica), 0);
    for (int64_t end = rh_now_ms() + 5000; rc_online_replicas(master) != 0;) {
        assert_true(rh_now_ms() < end);
        rh_sleep_ms(20);
    }
    return replica;
}

static void restart_replica(rh_server *replica)
{
    assert_int_equal(rh_restart(replica), 0);
    assert_int_equal(rc_wait_ok(tc_cl, 30000), 0);
}

/* Semaphore and latch on master i: RLOCK_EREPLICA when that master's replica is gone (want 0),
 * else granted after waiting for want replicas. */
static void check_sem_and_latch(rlock_client *c, int i, int want)
{
    char name[32];
    tc_cluster_name_on(i, "rs-sem-", name, sizeof(name));
    rlock_semaphore *sem = rlock_semaphore_open(c, name);
    (void)rlock_semaphore_try_set_permits(sem, 1);
    int r = rlock_semaphore_acquire(sem, 1, 0);
    if (want == 0) {
        assert_int_equal(r, RLOCK_EREPLICA);
        /* The permit was given back. */
        assert_int_equal(rlock_semaphore_available(sem), 1);
    } else {
        assert_int_equal(r, RLOCK_OK);
        assert_int_equal(waited_for(), want);
        assert_int_equal(rlock_semaphore_release(sem, 1), RLOCK_OK);
    }
    rlock_semaphore_free(sem);
    tc_cluster_name_on(i, "rs-latch-", name, sizeof(name));
    rlock_latch *latch = rlock_latch_open(c, name);
    (void)rlock_latch_try_set_count(latch, 5);
    r = rlock_latch_count_down(latch);
    assert_int_equal(r, want == 0 ? RLOCK_EREPLICA : RLOCK_OK);
    assert_int_equal(waited_for(), 1);
    rlock_latch_free(latch);
}

/* A multi-lock over one name on each master fails as a whole with RLOCK_EREPLICA when one
 * master's replica is gone, and holds nothing afterwards. */
static void check_multi_refused(rlock_client *c)
{
    rlock *m[3];
    char names[3][32];
    for (int i = 0; i < 3; i++) {
        tc_cluster_name_on(i, "rs-multi-", names[i], sizeof(names[i]));
        m[i] = rlock_open(c, RLOCK_REENTRANT, names[i]);
    }
    rlock *multi = rlock_multi_new(m, 3);
    assert_non_null(multi);
    assert_int_equal(rlock_try_lock(multi, 0, 10000), RLOCK_EREPLICA);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(tc_cluster_exists(names[i]), 0);
    }
    rlock_free(multi);
    for (int i = 0; i < 3; i++) {
        rlock_free(m[i]);
    }
}

/* A waiting thread of the grants case: its lock call, its token and the replicas it waited for. */
typedef struct grant_waiter {
    rlock *l;
    const char *grants; /* the grant hash, where the waiter registers */
    int rc;
    uint64_t token;
    int waited;
} grant_waiter;

static void *grant_waiter_main(void *p)
{
    grant_waiter *w = p;
    w->rc = rlock_try_lock(w->l, 10000, 10000);
    w->waited = waited_for();
    w->token = rlock_token(w->l);
    if (w->rc == RLOCK_OK) {
        (void)rlock_unlock(w->l);
    }
    return NULL;
}

/* Five hand-offs between two synced cluster clients: each is a grant that the waiter confirmed
 * after its master's one replica acknowledged it; none was believed unsynced or won by a plain
 * attempt. Classic pub/sub: in sharded mode a release counts rlock's own SSUBSCRIBE of Redisson's
 * channel as a plain subscriber (SHARDNUMSUB) and grants to no cluster client, synced or not. */
static void test_grants_confirmed(void **state)
{
    (void)state;
    char name[32], grants[64];
    tc_cluster_name_on(1, "rs-grant-", name, sizeof(name));
    snprintf(grants, sizeof(grants), "rlock_lock_waiters:{%s}:grants", name);
    rlock_client *a = sync_client_mode(RLOCK_CLUSTER_PUBSUB_CLASSIC);
    rlock_client *b = sync_client_mode(RLOCK_CLUSTER_PUBSUB_CLASSIC);
    rlock *la = rlock_open(a, RLOCK_REENTRANT, name), *lb = rlock_open(b, RLOCK_REENTRANT, name);
    rlk_grant_stats s0, s1;
    rlk_grant_stats_get(&s0);
    uint64_t last = 0;
    for (int round = 0; round < 5; round++) {
        assert_int_equal(rlock_lock(la, 10000), RLOCK_OK);
        assert_true(rlock_token(la) > last);
        last = rlock_token(la);
        grant_waiter w = {.l = lb, .grants = grants};
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, grant_waiter_main, &w), 0);
        for (int64_t end = rh_now_ms() + 5000; tc_cluster_exists(grants) == 0;) {
            assert_true(rh_now_ms() < end);
            rh_sleep_ms(2);
        }
        rh_sleep_ms(100); /* asleep after the attempt its subscription's confirmation causes */
        assert_int_equal(rlock_unlock(la), RLOCK_OK);
        pthread_join(t, NULL);
        assert_int_equal(w.rc, RLOCK_OK);
        assert_int_equal(w.waited, 1);
        assert_true(w.token > last);
        last = w.token;
    }
    rlk_grant_stats_get(&s1);
    assert_int_equal(s1.confirmed - s0.confirmed, 5);
    assert_int_equal(s1.believed - s0.believed, 0);
    assert_int_equal(s1.by_attempt - s0.by_attempt, 0);
    rlock_free(la);
    rlock_free(lb);
    rlock_client_free(a);
    rlock_client_free(b);
}

static void test_wait_counts_the_serving_master(void **state)
{
    (void)state;
    rlock_client *a = sync_client();
    char name[3][32];
    for (int i = 0; i < 3; i++) {
        tc_cluster_name_on(i, "rs-", name[i], sizeof(name[i]));
        assert_int_equal(lock_once(a, name[i]), 1);
        check_sem_and_latch(a, i, 1);
    }
    rh_server *replica = stop_replica_of(0, name[0], sizeof(name[0]));

    /* a counted master 0's replica: its grants there are not on a replica and are undone. */
    assert_int_equal(lock_once(a, name[0]), RLOCK_EREPLICA);
    assert_int_equal(tc_cluster_exists(name[0]), 0);
    check_sem_and_latch(a, 0, 0);
    check_multi_refused(a);
    for (int i = 1; i < 3; i++) {
        assert_int_equal(lock_once(a, name[i]), 1);
        check_sem_and_latch(a, i, 1);
    }

    /* A client that meets master 0 without a replica waits for none there, and for one on the
     * others: the count is the serving master's, whichever node the client calls home. */
    rlock_client *b = sync_client();
    assert_int_equal(lock_once(b, name[0]), 0);
    assert_int_equal(lock_once(b, name[1]), 1);
    assert_int_equal(lock_once(b, name[2]), 1);
    assert_int_equal(lock_once(b, name[0]), 0);

    /* The replica back: the count of master 0 rises at its next refresh (about a second). */
    restart_replica(replica);
    int n = 0;
    for (int64_t end = rh_now_ms() + 10000; n != 1 && rh_now_ms() < end; rh_sleep_ms(100)) {
        n = lock_once(b, name[0]);
        assert_true(n >= 0);
    }
    assert_int_equal(n, 1);
    assert_int_equal(lock_once(b, name[1]), 1);
    rlock_client_free(a);
    rlock_client_free(b);
}

/* Calls lock_once() until the cluster stops refusing the connection (the client learns the new
 * map from the refused connection of a killed master); its last result. */
static int lock_after_switch(rlock_client *c, const char *name)
{
    int r = RLOCK_ECONN;
    for (int64_t end = rh_now_ms() + 10000; r == RLOCK_ECONN && rh_now_ms() < end;) {
        r = lock_once(c, name);
        if (r == RLOCK_ECONN) {
            rh_sleep_ms(50);
        }
    }
    return r;
}

/* kill -9 of a master: its promoted replica has no replica of its own until the old master is
 * back. A client that knew the old master's count starts the new master from it (as a Sentinel
 * client does), so a grant there fails closed with RLOCK_EREPLICA instead of passing unsynced;
 * once the old master rejoined as a replica, grants wait for it. */
static void test_new_master_starts_from_the_old_count(void **state)
{
    (void)state;
    rlock_client *c = sync_client();
    char name[32];
    tc_cluster_name_on(1, "rs-kill-", name, sizeof(name));
    assert_int_equal(lock_once(c, name), 1);
    rh_server *old = tc_cluster_owner(name);
    rh_server *promoted = rc_kill_master_only(tc_cl, old, 30000);
    assert_non_null(promoted);
    assert_int_equal(lock_after_switch(c, name), RLOCK_EREPLICA);
    assert_int_equal(tc_cluster_exists(name), 0);

    assert_int_equal(rh_restart(old), 0);
    for (int64_t end = rh_now_ms() + 30000; rc_online_replicas(promoted) != 1;) {
        assert_true(rh_now_ms() < end);
        rh_sleep_ms(50);
    }
    assert_int_equal(rc_wait_ok(tc_cl, 30000), 0);
    int n = RLOCK_EREPLICA;
    for (int64_t end = rh_now_ms() + 10000; n != 1 && rh_now_ms() < end; rh_sleep_ms(100)) {
        n = lock_once(c, name);
    }
    assert_int_equal(n, 1);
    rlock_client_free(c);
}

TC_MAIN(tc_cluster_setup, tc_cluster_teardown, cmocka_unit_test(test_grants_confirmed),
        cmocka_unit_test(test_wait_counts_the_serving_master),
        cmocka_unit_test(test_new_master_starts_from_the_old_count))
