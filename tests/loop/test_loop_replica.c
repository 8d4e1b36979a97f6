/*
 * Replica-synced grants on a loop client (libuv adapter): a master with one replica started by
 * the harness. A reentrant grant is on the replica when done runs with RLOCK_OK; with the replica
 * stopped (SIGSTOP) a wait-0 lock completes RLOCK_EREPLICA with nothing left on the master, a
 * waiting lock waits on and gets the lock once the replica is resumed, and an unlock completes
 * RLOCK_OK; with replica_sync = 0 the master sees no WAIT (INFO commandstats).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "tc_redis.h"
#include "tc_replicas.h"
#include "tl_common.h"
#include "tl_loop.h"

#define SYNC_MS 300

static rh_server *g_master;
static rh_server *g_rep[1];

static int setup(void **state)
{
    (void)state;
    rh_skip_if_unavailable();
    return tc_replicated_start(&g_master, g_rep, 1);
}

static int teardown(void **state)
{
    (void)state;
    return tc_replicated_stop(&g_master, g_rep, 1);
}

static rlock_client *loop_client(tu_loop *l, int sync)
{
    rlock_options o;
    tc_options(&o, g_master);
    o.replica_sync = sync;
    o.replica_sync_timeout_ms = SYNC_MS;
    return tl_client(l, &o);
}

static long long exists(rh_server *s, const char *key)
{
    const char *argv[] = {"EXISTS", key, NULL};
    return rh_cmd_int(s, argv);
}

static void resume_replica(void)
{
    assert_int_equal(rh_resume(g_rep[0]), 0);
    assert_int_equal(tc_replicas_wait(g_master, 1, 10000), 0);
}

static void resume_cb(void *arg)
{
    (void)arg;
    assert_int_equal(rh_resume(g_rep[0]), 0);
}

/* A grant is on the replica when done runs, and its release too. */
static void test_grant_on_replica(void **state)
{
    (void)state;
    tu_loop *l = tu_loop_new();
    assert_non_null(l);
    rlock_client *c = loop_client(l, 1);
    rlock_owner *o = tl_owner(c);
    rlock *lk = rlock_open(c, RLOCK_REENTRANT, "lr-grant");
    assert_non_null(lk);
    assert_int_equal(rh_reset_stats(g_master), 0);
    for (int i = 0; i < 3; i++) {
        tl_lock_now(l, lk, o, 10000);
        assert_int_equal(exists(g_rep[0], "lr-grant"), 1);
        tl_unlock_now(l, lk, o, RLOCK_OK);
        assert_int_equal(exists(g_rep[0], "lr-grant"), 0);
    }
    assert_true(rh_cmdstat_calls(g_master, "wait") >= 6);
    rlock_free(lk);
    rlock_owner_free(o);
    rlock_client_free(c);
    assert_int_equal(tu_loop_close(l), 0);
}

/* With the replica stopped: a wait-0 lock gives its grant back; an unlock still succeeds. */
static void test_replica_stopped(void **state)
{
    (void)state;
    tu_loop *l = tu_loop_new();
    assert_non_null(l);
    rlock_client *c = loop_client(l, 1);
    rlock_owner *o = tl_owner(c);
    rlock *lk = rlock_open(c, RLOCK_REENTRANT, "lr-stop"),
          *held = rlock_open(c, RLOCK_REENTRANT, "lr-held");
    assert_true(lk != NULL && held != NULL);
    tl_lock_now(l, held, o, 10000);
    assert_int_equal(rh_pause(g_rep[0]), 0);
    tl_done d = {0};
    int64_t t0 = tl_now_ms();
    assert_int_equal(tl_lock_async(lk, o, 0, 10000, NULL, &d), RLOCK_OK);
    tl_wait_done(l, &d, RLOCK_EREPLICA);
    assert_true(d.at_ms - t0 >= SYNC_MS - 50);
    assert_int_equal(exists(g_master, "lr-stop"), 0);
    tl_unlock_now(l, held, o, RLOCK_OK);
    assert_int_equal(exists(g_master, "lr-held"), 0);
    resume_replica();
    rlock_free(lk);
    rlock_free(held);
    rlock_owner_free(o);
    rlock_client_free(c);
    assert_int_equal(tu_loop_close(l), 0);
}

/* A waiting lock whose grants the stopped replica misses waits on, and gets the lock once the
 * replica is back. */
static void test_waiter_waits_on(void **state)
{
    (void)state;
    tu_loop *l = tu_loop_new();
    assert_non_null(l);
    rlock_client *c = loop_client(l, 1);
    rlock_owner *o = tl_owner(c);
    rlock *lk = rlock_open(c, RLOCK_REENTRANT, "lr-wait");
    assert_non_null(lk);
    assert_int_equal(rh_pause(g_rep[0]), 0);
    tl_done d = {0};
    int64_t t0 = tl_now_ms();
    assert_int_equal(tl_lock_async(lk, o, 4000, 10000, NULL, &d), RLOCK_OK);
    tu_after(l, 900, resume_cb, NULL);
    tl_wait_done(l, &d, RLOCK_OK);
    assert_true(d.at_ms - t0 >= 850);
    assert_int_equal(exists(g_rep[0], "lr-wait"), 1);
    assert_int_equal(tc_replicas_wait(g_master, 1, 10000), 0);
    tl_unlock_now(l, lk, o, RLOCK_OK);
    rlock_free(lk);
    rlock_owner_free(o);
    rlock_client_free(c);
    assert_int_equal(tu_loop_close(l), 0);
}

/* replica_sync = 0: no WAIT reaches the master. */
static void test_no_sync(void **state)
{
    (void)state;
    tu_loop *l = tu_loop_new();
    assert_non_null(l);
    rlock_client *c = loop_client(l, 0);
    rlock_owner *o = tl_owner(c);
    rlock *lk = rlock_open(c, RLOCK_REENTRANT, "lr-nosync");
    assert_non_null(lk);
    assert_int_equal(rh_reset_stats(g_master), 0);
    tl_lock_now(l, lk, o, 10000);
    tl_unlock_now(l, lk, o, RLOCK_OK);
    assert_int_equal(rh_cmdstat_calls(g_master, "wait"), 0);
    assert_true(rh_cmdstat_calls(g_master, "evalsha") + rh_cmdstat_calls(g_master, "eval") >= 2);
    rlock_free(lk);
    rlock_owner_free(o);
    rlock_client_free(c);
    assert_int_equal(tu_loop_close(l), 0);
}

TC_MAIN(setup, teardown, cmocka_unit_test(test_grant_on_replica),
        cmocka_unit_test(test_replica_stopped), cmocka_unit_test(test_waiter_waits_on),
        cmocka_unit_test(test_no_sync))
