/*
 * Replica-synced grants (issue 13): a master with two replicas started by the harness. A grant
 * reaches the replicas before rlock_lock() returns (WAIT pipelined behind the script); with a
 * replica stopped by SIGSTOP an attempt returns RLOCK_EREPLICA within replica_sync_timeout_ms
 * plus a margin and leaves nothing held on Redis (checked on a raw connection); after SIGCONT it
 * works again; semaphore acquires and latch count-downs get the same (permits left available);
 * fencing tokens stay strictly increasing; a master without replicas (or a client
 * with replica_sync = 0) never sees WAIT (INFO commandstats); a replica that joins later is
 * waited for; renewals that the replicas miss do not lose the hold; replica_sync_aof on a
 * server older than 7.2 is RLOCK_ENOTSUP at client creation.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tc_redis.h"
#include "tc_replicas.h"

#define NREP    2
#define SYNC_MS 300
/* Scheduling noise on a shared two-core machine, on top of the WAIT timeout. */
#define MARGIN_MS 1500

static rh_server *g_master;
static rh_server *g_rep[NREP];
static atomic_int g_lost;

static int setup(void **state)
{
    (void)state;
    rh_skip_if_unavailable();
    return tc_replicated_start(&g_master, g_rep, NREP);
}

static int teardown(void **state)
{
    (void)state;
    return tc_replicated_stop(&g_master, g_rep, NREP);
}

static void on_lost(const char *name, void *user)
{
    (void)name;
    (void)user;
    atomic_fetch_add(&g_lost, 1);
}

static rlock_client *client_on(rh_server *s, int sync)
{
    rlock_options o;
    tc_options(&o, s);
    o.replica_sync = sync;
    o.replica_sync_timeout_ms = SYNC_MS;
    o.on_lost = on_lost;
    return tc_client(&o);
}

/* SIGCONT to replica i, and the master sees all NREP replicas again before the next test. */
static void resume_replica(int i)
{
    assert_int_equal(rh_resume(g_rep[i]), 0);
    assert_int_equal(tc_replicas_wait(g_master, NREP, 10000), 0);
}

static long long exists(rh_server *s, const char *key)
{
    const char *argv[] = {"EXISTS", key, NULL};
    return rh_cmd_int(s, argv);
}

static void test_grant_reaches_replicas(void **state)
{
    (void)state;
    rlock_client *c = client_on(g_master, 1);
    rlock *l = rlock_open(c, RLOCK_REENTRANT, "rs:reach");
    assert_int_equal(rh_reset_stats(g_master), 0);
    assert_int_equal(rlock_lock(l, -1), RLOCK_OK);
    /* Acknowledged by both replicas before rlock_lock() returned: visible there now. */
    for (int i = 0; i < NREP; i++) {
        assert_int_equal(exists(g_rep[i], "rs:reach"), 1);
    }
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    for (int i = 0; i < NREP; i++) {
        assert_int_equal(exists(g_rep[i], "rs:reach"), 0);
    }
    assert_true(rh_cmdstat_calls(g_master, "wait") >= 2);
    rlock_free(l);
    rlock_client_free(c);
}

/* One attempt with replica 1 stopped: EREPLICA, in time, nothing left on the master. */
static void expect_ereplica(rlock *l, int64_t wait_ms, const char *key)
{
    int64_t t0 = rh_now_ms();
    int r = wait_ms < 0 ? rlock_lock(l, -1) : rlock_try_lock(l, wait_ms, 10000);
    int64_t took = rh_now_ms() - t0;
    assert_int_equal(r, RLOCK_EREPLICA);
    assert_non_null(strstr(rlock_last_error(), "1 of 2 replicas acknowledged"));
    assert_true(took < SYNC_MS + MARGIN_MS);
    assert_int_equal(exists(g_master, key), 0);
    assert_int_equal(rlock_is_held(l), 0);
}

static void test_stopped_replica_ereplica(void **state)
{
    (void)state;
    rlock_client *c = client_on(g_master, 1);
    rlock *l = rlock_open(c, RLOCK_REENTRANT, "rs:stop");
    rlock *f = rlock_open(c, RLOCK_FAIR, "rs:stopfair");
    assert_int_equal(rh_pause(g_rep[1]), 0);
    expect_ereplica(l, 0, "rs:stop");
    expect_ereplica(l, -1, "rs:stop");
    expect_ereplica(f, 0, "rs:stopfair");
    assert_int_equal(rh_resume(g_rep[1]), 0);
    assert_int_equal(rlock_lock(l, -1), RLOCK_OK);
    assert_int_equal(rlock_lock(f, -1), RLOCK_OK);
    assert_int_equal(rlock_unlock(f), RLOCK_OK);
    /* A re-entry the replicas miss is undone: the hold count stays 1. */
    assert_int_equal(rh_pause(g_rep[1]), 0);
    assert_int_equal(rlock_try_lock(l, 0, -1), RLOCK_EREPLICA);
    assert_int_equal(rlock_hold_count(l), 1);
    /* An unlock the replicas miss still releases on the master. */
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(exists(g_master, "rs:stop"), 0);
    resume_replica(1);
    rlock_free(f);
    tc_close_own(l, c);
}

/* Semaphores and the latch with a replica stopped: an acquire (plain or leased) returns
 * EREPLICA in time and leaves every permit available; a count-down returns EREPLICA and is not
 * undone (its waiters may have gone already); all work again after SIGCONT. */
static void test_sem_latch_stopped_replica(void **state)
{
    (void)state;
    rlock_client *c = client_on(g_master, 1);
    rlock_semaphore *sem = rlock_semaphore_open(c, "rs:sem");
    rlock_latch *latch = rlock_latch_open(c, "rs:latch");
    assert_int_equal(rlock_semaphore_try_set_permits(sem, 3), 1);
    assert_int_equal(rlock_latch_try_set_count(latch, 2), 1);
    assert_int_equal(rh_pause(g_rep[1]), 0);
    int64_t t0 = rh_now_ms();
    assert_int_equal(rlock_semaphore_acquire(sem, 2, 0), RLOCK_EREPLICA);
    assert_true(rh_now_ms() - t0 < SYNC_MS + MARGIN_MS);
    assert_non_null(strstr(rlock_last_error(), "1 of 2 replicas acknowledged"));
    assert_int_equal(rlock_semaphore_available(sem), 3);
    char id[RLOCK_PERMIT_ID_LEN + 1];
    assert_int_equal(rlock_semaphore_acquire_leased(sem, 0, 10000, id), RLOCK_EREPLICA);
    assert_int_equal(rlock_semaphore_available(sem), 3);
    assert_int_equal(exists(g_master, "{rs:sem}:timeout"), 0);
    assert_int_equal(rlock_latch_count_down(latch), RLOCK_EREPLICA);
    assert_non_null(strstr(rlock_last_error(), "1 of 2 replicas acknowledged"));
    assert_int_equal(rlock_latch_count(latch), 1);
    resume_replica(1);
    assert_int_equal(rlock_semaphore_acquire(sem, 2, 0), RLOCK_OK);
    assert_int_equal(rlock_semaphore_release(sem, 2), RLOCK_OK);
    assert_int_equal(rlock_latch_count_down(latch), RLOCK_OK);
    assert_int_equal(rlock_latch_count(latch), 0);
    rlock_latch_free(latch);
    rlock_semaphore_free(sem);
    rlock_client_free(c);
}

static void test_tokens_strictly_increasing(void **state)
{
    (void)state;
    rlock_client *c = client_on(g_master, 1);
    rlock *l = rlock_open(c, RLOCK_REENTRANT, "rs:token");
    uint64_t last = 0;
    for (int i = 0; i < 30; i++) {
        if (i % 10 == 5) {
            assert_int_equal(rh_pause(g_rep[0]), 0);
            assert_int_equal(rlock_try_lock(l, 0, 5000), RLOCK_EREPLICA);
            assert_int_equal(rh_resume(g_rep[0]), 0);
        }
        assert_int_equal(rlock_lock(l, 5000), RLOCK_OK);
        uint64_t t = rlock_token(l);
        assert_true(t > last);
        last = t;
        assert_int_equal(rlock_unlock(l), RLOCK_OK);
    }
    rlock_free(l);
    rlock_client_free(c);
}

static void lock_unlock_n(rlock_client *c, const char *name, int n)
{
    rlock *l = rlock_open(c, RLOCK_REENTRANT, name);
    for (int i = 0; i < n; i++) {
        assert_int_equal(rlock_lock(l, -1), RLOCK_OK);
        assert_int_equal(rlock_unlock(l), RLOCK_OK);
    }
    rlock_free(l);
}

static void test_sync_off_sends_no_wait(void **state)
{
    (void)state;
    rlock_client *c = client_on(g_master, 0);
    assert_int_equal(rh_reset_stats(g_master), 0);
    lock_unlock_n(c, "rs:off", 20);
    assert_int_equal(rh_cmdstat_calls(g_master, "wait"), 0);
    rlock_client_free(c);
}

/* A standalone master: no WAIT at all; then a replica joins and is waited for. */
static void test_no_replicas_then_one_joins(void **state)
{
    (void)state;
    rh_server *solo = rh_start(NULL);
    assert_non_null(solo);
    rlock_client *c = client_on(solo, 1);
    assert_int_equal(rh_reset_stats(solo), 0);
    lock_unlock_n(c, "rs:solo", 20);
    assert_int_equal(rh_cmdstat_calls(solo, "wait"), 0);
    rh_server *rep = tc_replica_start(solo);
    assert_non_null(rep);
    assert_int_equal(tc_replicas_wait(solo, 1, 10000), 0);
    /* The count is refreshed at most once a second, behind a synced script. */
    rh_sleep_ms(1100);
    lock_unlock_n(c, "rs:solo", 3);
    assert_true(rh_cmdstat_calls(solo, "wait") >= 2);
    rlock_client_free(c);
    rh_free(rep);
    rh_free(solo);
}

static void test_renewal_unsynced_not_lost(void **state)
{
    (void)state;
    rlock_options o;
    tc_options(&o, g_master);
    o.replica_sync_timeout_ms = 100;
    o.watchdog_timeout_ms = 600;
    o.on_lost = on_lost;
    rlock_client *c = tc_client(&o);
    rlock *l = rlock_open(c, RLOCK_REENTRANT, "rs:renew");
    atomic_store(&g_lost, 0);
    assert_int_equal(rlock_lock(l, -1), RLOCK_OK);
    assert_int_equal(rh_pause(g_rep[0]), 0);
    rh_sleep_ms(1500); /* several renewals, each short of one replica */
    assert_int_equal(rh_resume(g_rep[0]), 0);
    assert_int_equal(rlock_is_held(l), 1);
    assert_int_equal(atomic_load(&g_lost), 0);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(tc_replicas_wait(g_master, NREP, 10000), 0);
    rlock_free(l);
    rlock_client_free(c);
}

static void test_aof_needs_72(void **state)
{
    (void)state;
    const char *argv[] = {"INFO", "server", NULL};
    char *info = rh_cmd_str(g_master, argv);
    assert_non_null(info);
    int major = 0, minor = 0;
    const char *v = strstr(info, "redis_version:");
    assert_non_null(v);
    assert_int_equal(sscanf(v + 14, "%d.%d", &major, &minor), 2);
    free(info);
    rlock_options o;
    tc_options(&o, g_master);
    o.replica_sync_aof = 1;
    rlock_client *c = NULL;
    int r = rlock_client_new(&o, &c);
    if (major * 100 + minor >= 702) {
        /* WAITAOF exists: the option is accepted (this server does not run the ENOTSUP path). */
        assert_int_equal(r, RLOCK_OK);
        rlock_client_free(c);
        return;
    }
    assert_int_equal(r, RLOCK_ENOTSUP);
    assert_null(c);
    assert_non_null(strstr(rlock_last_error(), "7.2"));
}

TC_MAIN(setup, teardown, cmocka_unit_test(test_grant_reaches_replicas),
        cmocka_unit_test(test_stopped_replica_ereplica),
        cmocka_unit_test(test_sem_latch_stopped_replica),
        cmocka_unit_test(test_tokens_strictly_increasing),
        cmocka_unit_test(test_sync_off_sends_no_wait),
        cmocka_unit_test(test_no_replicas_then_one_joins),
        cmocka_unit_test(test_renewal_unsynced_not_lost), cmocka_unit_test(test_aof_needs_72))
