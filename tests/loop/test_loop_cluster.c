/*
 * A loop client on a Redis Cluster (three masters with a replica each, redis_cluster.h) through
 * an adapter (tl_loop.h): reentrant and fair locks on names that three different masters serve,
 * each key on its owner, each grant replica-synced by a WAIT on that master; a fair waiter woken by
 * a threaded holder's release on another node; exclusion with a threaded cluster client; a slot
 * migrated under a loop waiter and a loop watchdog hold (the hold renewed on the new owner, the
 * waiter granted there, each done once), in classic and in sharded pub/sub; auto mode (sharded on
 * Redis 7): SSUBSCRIBE on each name's master, exclusion with and wake-ups by a threaded sharded
 * client; a call failing with RLOCK_ECONN without a reachable seed.
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

static rlock_options mode_options(int mode)
{
    rlock_options o;
    tc_options_url(&o, rc_seed_url(tc_cl));
    o.cluster_pubsub = mode;
    o.watchdog_timeout_ms = WATCHDOG_MS;
    return o;
}

static rlock_client *loop_client_in(tu_loop *l, int mode)
{
    rlock_options o = mode_options(mode);
    return tl_client(l, &o);
}

static rlock_client *threaded_client_in(int mode)
{
    rlock_options o = mode_options(mode);
    return tc_client(&o);
}

static rlock_client *loop_client(tu_loop *l)
{
    return loop_client_in(l, RLOCK_CLUSTER_PUBSUB_CLASSIC);
}

static rlock_client *threaded_client(void)
{
    return threaded_client_in(RLOCK_CLUSTER_PUBSUB_CLASSIC);
}

/* The sharded subscribers of a lock's channel (redisson_lock__channel:{name}) on node s. */
static long long shard_subscribers(rh_server *s, const char *lock_name)
{
    char ch[128];
    int tagged = strchr(lock_name, '{') != NULL;
    snprintf(ch, sizeof(ch), "redisson_lock__channel:%s%s%s", tagged ? "" : "{", lock_name,
             tagged ? "" : "}");
    const char *argv[] = {"PUBSUB", "SHARDNUMSUB", ch, NULL};
    redisReply *r = rh_cmd(s, argv);
    long long n =
        r != NULL && r->type == REDIS_REPLY_ARRAY && r->elements == 2 ? r->element[1]->integer : -1;
    freeReplyObject(r);
    return n;
}

/* Runs the loop until lock_name's channel has a sharded subscriber on node s, at most 3 s:
 * 1 when it has. */
static int subscribed_on(tu_loop *l, rh_server *s, const char *lock_name)
{
    for (int64_t t0 = tl_now_ms(); tl_now_ms() - t0 < 3000; tl_run_for(l, 20)) {
        if (shard_subscribers(s, lock_name) == 1) {
            return 1;
        }
    }
    return 0;
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

/* Runs the loop until the PTTL of key on node s rises above from (a renewal there), at most
 * ms: 1 when it did. */
static int renewed_on(tu_loop *l, rh_server *s, const char *key, long long from, int64_t ms)
{
    const char *argv[] = {"PTTL", key, NULL};
    for (int64_t t0 = tl_now_ms(); tl_now_ms() - t0 < ms;) {
        tl_run_for(l, 50);
        if (rh_cmd_int(s, argv) > from) {
            return 1;
        }
    }
    return 0;
}

/* The slot of {tag} moves to another master under a loop watchdog hold and a loop waiter (in
 * pub/sub mode mode, with a threaded client in the same mode): the hold is renewed there (a
 * MOVED, then the new owner), the waiter is granted there when the threaded holder releases, and
 * every done runs once. In sharded mode the old owner drops the waiter's shard channel and the
 * holder releases before the loop runs again: the channel is subscribed on the new owner and
 * the waiter attempts once after the confirmation, so the release it did not hear is not lost. */
static void slot_migration(int mode, const char *tag)
{
    tu_loop *l = tu_loop_new();
    rlock_client *c = loop_client_in(l, mode);
    rlock_client *tc = threaded_client_in(mode);
    char hname[64], wname[64];
    snprintf(hname, sizeof(hname), "{%s}hold", tag);
    snprintf(wname, sizeof(wname), "{%s}wait", tag);
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
    rh_server *src = tc_cluster_owner(hname);
    rh_server *dst = tc_cluster_other_master(src);
    if (mode == RLOCK_CLUSTER_PUBSUB_SHARDED) {
        assert_true(subscribed_on(l, src, wname));
        assert_int_equal(dw.calls, 0);
    }
    rlock_latch *tlatch = rlock_latch_open(tc, tag);
    rlock_latch *latch = rlock_latch_open(c, tag);
    assert_int_equal(rlock_latch_try_set_count(tlatch, 1), 1);
    tc_cluster_move_slot(hname, dst);
    assert_true(tc_cluster_owner(hname) == dst);
    int sharded = mode == RLOCK_CLUSTER_PUBSUB_SHARDED;
    if (sharded) {
        /* Released before the loop hears of the move: the SPUBLISH on the new owner reaches
         * nobody, and the waiter, subscribed there again, attempts after the confirmation. */
        assert_int_equal(rlock_unlock(th), RLOCK_OK);
    }
    /* A plain command (the count read of latch tag, in the same slot) follows the MOVED too. */
    tl_done dl = {0};
    assert_int_equal(rlock_latch_await_async(latch, 0, NULL, tl_latch_done, &dl), RLOCK_OK);
    assert_true(tu_run_until(l, &dl.calls, 1, 5000));
    assert_int_equal(dl.rc, RLOCK_ETIMEDOUT);
    if (sharded) {
        /* Renewed on the new owner: its PTTL there rises within a renewal period (a third of
         * the lease) and a margin. */
        assert_true(renewed_on(l, dst, hname, pttl_of(hname), WATCHDOG_MS));
    } else {
        /* Renewed on the new owner: a lease later it is still there, with more than a third
         * left (without renewals there it would have expired). */
        tl_run_for(l, WATCHDOG_MS + 300);
        long long left = pttl_of(hname);
        print_message("PTTL on the new owner a lease after the move: %lld ms\n", left);
        assert_true(left > WATCHDOG_MS / 3);
    }
    /* The threaded holder releases (it follows the MOVED itself); the waiter is granted there. */
    if (!sharded) {
        assert_int_equal(dw.calls, 0);
        assert_int_equal(rlock_unlock(th), RLOCK_OK);
    }
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

static void test_slot_migration(void **state)
{
    (void)state;
    slot_migration(RLOCK_CLUSTER_PUBSUB_CLASSIC, "lc-mig");
}

static void test_slot_migration_sharded(void **state)
{
    (void)state;
    slot_migration(RLOCK_CLUSTER_PUBSUB_SHARDED, "lc-smig");
}

/* Auto mode on Redis >= 7 is sharded, as for a threaded client: a loop waiter subscribes with
 * SSUBSCRIBE on its name's own master (none classic), a threaded sharded client's hold excludes
 * loop owners on each master and the loop's excludes it, a loop release (the sharded script)
 * wakes a loop waiter, and a fair loop waiter on the third
 * master is woken by the threaded holder's release there (its SPUBLISH). */
static void test_sharded_auto(void **state)
{
    (void)state;
    tu_loop *l = tu_loop_new();
    rlock_client *c = loop_client_in(l, RLOCK_CLUSTER_PUBSUB_AUTO);
    rlock_client *tc = threaded_client_in(RLOCK_CLUSTER_PUBSUB_SHARDED);
    rlock_owner *a = tl_owner(c), *b = tl_owner(c);
    for (int i = 0; i < 3; i++) {
        char name[64];
        tc_cluster_name_on(i, "ls-re-", name, sizeof(name));
        rlock *lk = tc_open(c, RLOCK_REENTRANT, name);
        rlock *th = tc_open(tc, RLOCK_REENTRANT, name);
        assert_int_equal(rlock_try_lock(th, 0, 30000), RLOCK_OK);
        tl_done d = {0};
        assert_int_equal(tl_lock_async(lk, a, 10000, 30000, NULL, &d), RLOCK_OK);
        assert_true(subscribed_on(l, tc_cluster_owner(name), name));
        assert_int_equal(d.calls, 0);
        assert_int_equal(rlock_unlock(th), RLOCK_OK); /* its SPUBLISH wakes the loop waiter */
        assert_true(tu_run_until(l, &d.calls, 1, 3000));
        assert_int_equal(d.rc, RLOCK_OK);
        assert_int_equal(rlock_try_lock(th, 0, 30000), RLOCK_ETIMEDOUT);
        /* A loop release runs the sharded script: its SPUBLISH wakes a loop waiter. */
        tl_done db = {0};
        assert_int_equal(tl_lock_async(lk, b, 10000, 30000, NULL, &db), RLOCK_OK);
        tl_run_for(l, 100);
        assert_int_equal(db.calls, 0);
        tl_unlock_now(l, lk, a, RLOCK_OK);
        assert_true(tu_run_until(l, &db.calls, 1, 3000));
        assert_int_equal(db.rc, RLOCK_OK);
        tl_unlock_now(l, lk, b, RLOCK_OK);
        assert_int_equal(tc_cluster_exists(name), 0);
        rlock_free(th);
        rlock_free(lk);
    }
    char fname[64];
    tc_cluster_name_on(2, "ls-fair-", fname, sizeof(fname));
    rlock *fl = tc_open(c, RLOCK_FAIR, fname);
    rlock *fth = tc_open(tc, RLOCK_FAIR, fname);
    assert_int_equal(rlock_try_lock(fth, 0, 60000), RLOCK_OK);
    tl_done dw = {0};
    assert_int_equal(tl_lock_async(fl, b, 20000, 30000, NULL, &dw), RLOCK_OK);
    tl_run_for(l, 150);
    assert_int_equal(dw.calls, 0);
    assert_int_equal(rlock_unlock(fth), RLOCK_OK);
    assert_true(tu_run_until(l, &dw.calls, 1, 3000)); /* woken, not timed out */
    assert_int_equal(dw.rc, RLOCK_OK);
    tl_unlock_now(l, fl, b, RLOCK_OK);
    rlock_free(fth);
    rlock_free(fl);
    rlock_owner_free(a);
    rlock_owner_free(b);
    rlock_client_free(tc);
    rlock_client_free(c);
    assert_int_equal(tu_loop_close(l), 0);
}

/* No seed answers: the first call's done gets RLOCK_ECONN naming each seed, once. */
static void test_no_seed(void **state)
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
    assert_int_equal(tu_loop_close(l), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_seed),
        cmocka_unit_test(test_locks_on_three_masters),
        cmocka_unit_test(test_slot_migration),
        cmocka_unit_test(test_sharded_auto),
        cmocka_unit_test(test_slot_migration_sharded),
    };
    return cmocka_run_group_tests(tests, setup, tc_cluster_teardown);
}
