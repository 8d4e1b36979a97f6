/*
 * A loop client on a Redis Cluster (three masters with a replica each, redis_cluster.h) through
 * an adapter (tl_loop.h): reentrant and fair locks on names that three different masters serve,
 * each key on its owner, each grant replica-synced by a WAIT on that master; a fair waiter woken by
 * a threaded holder's release on another node; exclusion with a threaded cluster client; a slot
 * migrated under a loop waiter and a loop watchdog hold (the hold renewed on the new owner, the
 * waiter granted there, each done once); a call failing with RLOCK_ECONN without a reachable seed;
 * the creation refused in the pub/sub modes not served.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "tc_cluster.h"
#include "tc_redis.h"
#include "tl_common.h"
#include "tl_loop.h"

/* The loop holds' watchdog lease: renewed every second. */
#define WATCHDOG_MS 3000

static int setup(void **state)
{
    (void)state;
    rh_skip_if_unavailable();
    tc_cl = rc_start(3, 1);
    return tc_cl != NULL ? 0 : -1;
}

static rlock_options cluster_options(void)
{
    rlock_options o;
    tc_options_url(&o, rc_seed_url(tc_cl));
    o.cluster_pubsub = RLOCK_CLUSTER_PUBSUB_CLASSIC;
    o.watchdog_timeout_ms = WATCHDOG_MS;
    return o;
}

static rlock_client *loop_client(tu_loop *l)
{
    rlock_options o = cluster_options();
    return tl_client(l, &o);
}

static rlock_client *threaded_client(void)
{
    rlock_options o = cluster_options();
    return tc_client(&o);
}

static long long pttl_of(const char *key)
{
    const char *argv[] = {"PTTL", key, NULL};
    return rh_cmd_int(tc_cluster_owner(key), argv);
}

/* Reentrant and fair locks on a name per master: each key lands on its owner; a threaded
 * client's hold excludes the loop owner, and its release wakes a fair loop waiter. */
static void test_locks_on_three_masters(void **state)
{
    (void)state;
    tu_loop *l = tu_loop_new();
    rlock_client *c = loop_client(l);
    rlock_client *tc = threaded_client();
    rlock_owner *a = tl_owner(c), *b = tl_owner(c);
    for (int i = 0; i < 3; i++) {
        char name[64];
        tc_cluster_name_on(i, "lc-re-", name, sizeof(name));
        rlock *lk = tc_open(c, RLOCK_REENTRANT, name);
        rh_server *owner = tc_cluster_owner(name);
        assert_int_equal(rc_online_replicas(owner), 1);
        long long waits = rh_cmdstat_calls(owner, "wait");
        tl_lock_now(l, lk, a, 30000);
        assert_int_equal(tc_cluster_exists(name), 1);
        assert_true(rh_cmdstat_calls(owner, "wait") > waits); /* synced on its own master */
        /* Exclusion both ways with a threaded cluster client on the same name. */
        rlock *th = tc_open(tc, RLOCK_REENTRANT, name);
        assert_int_equal(rlock_try_lock(th, 0, 30000), RLOCK_ETIMEDOUT);
        tl_unlock_now(l, lk, a, RLOCK_OK);
        assert_int_equal(tc_cluster_exists(name), 0);
        assert_int_equal(rlock_try_lock(th, 0, 30000), RLOCK_OK);
        assert_int_equal(tl_lock_once(l, lk, b, 0, NULL), RLOCK_ETIMEDOUT);
        assert_int_equal(rlock_unlock(th), RLOCK_OK);
        rlock_free(th);
        rlock_free(lk);
    }
    /* Fair: a threaded holder on the third master, a loop waiter woken by its release. */
    char fname[64];
    tc_cluster_name_on(2, "lc-fair-", fname, sizeof(fname));
    rlock *fl = tc_open(c, RLOCK_FAIR, fname);
    rlock *fth = tc_open(tc, RLOCK_FAIR, fname);
    assert_int_equal(rlock_try_lock(fth, 0, 60000), RLOCK_OK);
    tl_done dw = {0};
    int64_t t0 = tl_now_ms();
    assert_int_equal(tl_lock_async(fl, b, 20000, 30000, NULL, &dw), RLOCK_OK);
    tl_run_for(l, 300);
    assert_int_equal(dw.calls, 0);
    assert_int_equal(rlock_unlock(fth), RLOCK_OK);
    assert_true(tu_run_until(l, &dw.calls, 1, 5000));
    assert_int_equal(dw.rc, RLOCK_OK);
    assert_true(tl_now_ms() - t0 < 5000); /* woken, not timed out */
    tl_unlock_now(l, fl, b, RLOCK_OK);
    rlock_free(fth);
    rlock_free(fl);
    rlock_owner_free(a);
    rlock_owner_free(b);
    rlock_client_free(tc);
    rlock_client_free(c);
    assert_int_equal(tu_loop_close(l), 0);
}

/* The slot of {lc-mig} moves to another master under a loop watchdog hold and a loop waiter:
 * the hold is renewed there (a MOVED, then the new owner), the waiter is granted there when the
 * threaded holder releases, and every done runs once. */
static void test_slot_migration(void **state)
{
    (void)state;
    tu_loop *l = tu_loop_new();
    rlock_client *c = loop_client(l);
    rlock_client *tc = threaded_client();
    const char *hname = "{lc-mig}hold", *wname = "{lc-mig}wait";
    rlock *hold = tc_open(c, RLOCK_REENTRANT, hname);
    rlock *wait = tc_open(c, RLOCK_REENTRANT, wname);
    rlock *th = tc_open(tc, RLOCK_REENTRANT, wname);
    rlock_owner *a = tl_owner(c), *b = tl_owner(c);
    tl_done dh = {0}, dw = {0};
    assert_int_equal(tl_lock_async(hold, a, 0, -1, NULL, &dh), RLOCK_OK);
    assert_true(tu_run_until(l, &dh.calls, 1, 5000));
    assert_int_equal(dh.rc, RLOCK_OK);
    assert_int_equal(rlock_try_lock(th, 0, 60000), RLOCK_OK);
    assert_int_equal(tl_lock_async(wait, b, 30000, 30000, NULL, &dw), RLOCK_OK);
    tl_run_for(l, 300);
    assert_int_equal(dw.calls, 0);
    rlock_latch *tlatch = rlock_latch_open(tc, "lc-mig");
    rlock_latch *latch = rlock_latch_open(c, "lc-mig");
    assert_int_equal(rlock_latch_try_set_count(tlatch, 1), 1);
    rh_server *src = tc_cluster_owner(hname);
    rh_server *dst = tc_cluster_other_master(src);
    tc_cluster_move_slot(hname, dst);
    assert_true(tc_cluster_owner(hname) == dst);
    /* A plain command (the count read of latch lc-mig, in the same slot) follows the MOVED too. */
    tl_done dl = {0};
    assert_int_equal(rlock_latch_await_async(latch, 0, NULL, tl_latch_done, &dl), RLOCK_OK);
    assert_true(tu_run_until(l, &dl.calls, 1, 5000));
    assert_int_equal(dl.rc, RLOCK_ETIMEDOUT);
    /* Renewed on the new owner: a lease later it is still there, with more than a third left
     * (without renewals there it would have expired). */
    tl_run_for(l, WATCHDOG_MS + 300);
    long long left = pttl_of(hname);
    print_message("PTTL on the new owner a lease after the move: %lld ms\n", left);
    assert_true(left > WATCHDOG_MS / 3);
    /* The threaded holder releases (it follows the MOVED itself); the waiter is granted there. */
    assert_int_equal(dw.calls, 0);
    assert_int_equal(rlock_unlock(th), RLOCK_OK);
    assert_true(tu_run_until(l, &dw.calls, 1, 5000));
    assert_int_equal(dw.rc, RLOCK_OK);
    const char *argv[] = {"EXISTS", wname, NULL};
    assert_int_equal(rh_cmd_int(dst, argv), 1);
    tl_unlock_now(l, wait, b, RLOCK_OK);
    tl_unlock_now(l, hold, a, RLOCK_OK);
    assert_int_equal(tc_cluster_exists(hname), 0);
    tl_run_for(l, 100);
    assert_int_equal(dh.calls + dw.calls, 2);
    rlock_latch_free(latch);
    rlock_latch_free(tlatch);
    rlock_free(th);
    rlock_free(hold);
    rlock_free(wait);
    rlock_owner_free(a);
    rlock_owner_free(b);
    rlock_client_free(tc);
    rlock_client_free(c);
    assert_int_equal(tu_loop_close(l), 0);
}

/* No seed answers: the first call's done gets RLOCK_ECONN naming each seed, once. The pub/sub
 * mode a loop client does not serve on a cluster is RLOCK_EINVAL. */
static void test_creation_refused(void **state)
{
    (void)state;
    tu_loop *l = tu_loop_new();
    rlock_options o;
    rlock_client *c = NULL;
    tc_options_url(&o, "redis-cluster://127.0.0.1:1,127.0.0.1:2");
    o.cluster_pubsub = RLOCK_CLUSTER_PUBSUB_CLASSIC;
    c = tl_client(l, &o);
    rlock *lk = tc_open(c, RLOCK_REENTRANT, "lc-nowhere");
    rlock_owner *a = tl_owner(c);
    tl_done d = {0};
    assert_int_equal(tl_lock_async(lk, a, 0, 10000, NULL, &d), RLOCK_OK);
    assert_true(tu_run_until(l, &d.calls, 1, 5000));
    tl_run_for(l, 100);
    assert_int_equal(d.calls, 1);
    assert_int_equal(d.rc, RLOCK_ECONN);
    assert_non_null(strstr(d.msg, "127.0.0.1:1"));
    assert_non_null(strstr(d.msg, "127.0.0.1:2"));
    rlock_owner_free(a);
    rlock_free(lk);
    rlock_client_free(c);
    c = NULL;
    o = cluster_options();
    o.cluster_pubsub = RLOCK_CLUSTER_PUBSUB_AUTO;
    assert_int_equal(tu_client_new(l, &o, &c), RLOCK_EINVAL);
    assert_null(c);
    assert_int_equal(tu_loop_close(l), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_creation_refused),
        cmocka_unit_test(test_locks_on_three_masters),
        cmocka_unit_test(test_slot_migration),
    };
    return cmocka_run_group_tests(tests, setup, tc_cluster_teardown);
}
