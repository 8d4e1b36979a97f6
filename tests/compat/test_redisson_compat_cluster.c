/*
 * Redisson compatibility on a Redis 7 cluster with sharded pub/sub: the "Redisson peer" is a raw
 * hiredis client on the master that owns the lock's slot, speaking Redisson's RLock protocol as
 * redisson-protocol.md §2.1 describes it, with the publish command passed in ARGV as Redisson
 * 3.22+ does (SPUBLISH on such a cluster) and its waiter listening with SSUBSCRIBE there. Its
 * release wakes waiting rlock clients in sharded mode, and an rlock release wakes it. Leases and
 * waiter timeouts are 60 s and waits 20 s, so no sleep ends by its bound: a lock taken within the
 * wait was handed over by a message.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/time.h>

#include <cmocka.h>
#include <hiredis.h>

#include "tc_cluster.h"
#include "redisson_peer.h"
#include "tc_redis.h"
#include "tc_thread.h"

/* Redisson's RLock unlock since 3.22 (without the idempotency latch): KEYS[1] name, KEYS[2]
 * channel; ARGV[1] message, ARGV[2] lease ms, ARGV[3] owner, ARGV[4] the publish command. */
static const char *const peer_release =
    "if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil; end; "
    "local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); "
    "if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); return 0; "
    "else redis.call('del', KEYS[1]); redis.call(ARGV[4], KEYS[2], ARGV[1]); return 1; end; "
    "return nil;";

/* A raw connection to the master of name's slot, with a 10 s reply timeout. */
static redisContext *peer_connect(const char *name)
{
    redisContext *ctx = rh_connect(tc_cluster_owner(name));
    assert_non_null(ctx);
    struct timeval tv = {10, 0};
    redisSetTimeout(ctx, tv);
    return ctx;
}

/* The peer's acquire: 1 when acquired (nil), 0 when busy (the holder's PTTL). */
static int peer_lock(redisContext *ctx, const char *name)
{
    redisReply *r = redisCommand(ctx, "EVAL %s 1 %s 60000 %s", peer_acquire, name, PEER_OWNER);
    assert_non_null(r);
    assert_true(r->type == REDIS_REPLY_NIL || r->type == REDIS_REPLY_INTEGER);
    int got = r->type == REDIS_REPLY_NIL;
    freeReplyObject(r);
    return got;
}

/* The peer's full release, publishing "0" with SPUBLISH. */
static void peer_unlock(redisContext *ctx, const char *name)
{
    redisReply *r =
        redisCommand(ctx, "EVAL %s 2 %s redisson_lock__channel:{%s} 0 60000 %s SPUBLISH",
                     peer_release, name, name, PEER_OWNER);
    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_INTEGER);
    assert_int_equal(r->integer, 1);
    freeReplyObject(r);
}

/* A sharded rlock client whose waiters' sleep only a message can end within a 20 s wait. */
static rlock_client *sharded_client(void)
{
    rlock_options o;
    tc_options_url(&o, rc_seed_url(tc_cl));
    o.cluster_pubsub = RLOCK_CLUSTER_PUBSUB_SHARDED;
    o.waiter_timeout_ms = 60000;
    return tc_client(&o);
}

/* Waits until n rlock threads are recorded as waiting on name, and their first attempts after
 * subscribing are over. */
static void wait_waiters(const char *name, long long n)
{
    char zset[128];
    snprintf(zset, sizeof(zset), "rlock_lock_waiters:{%s}", name);
    const char *zcard[] = {"ZCARD", zset, NULL};
    int64_t until = rh_now_ms() + 10000;
    while (rh_cmd_int(tc_cluster_owner(name), zcard) != n && rh_now_ms() < until) {
        rh_sleep_ms(10);
    }
    assert_int_equal(rh_cmd_int(tc_cluster_owner(name), zcard), n);
    rh_sleep_ms(300);
}

/* The peer's SPUBLISH release wakes the waiting rlock clients of each master, which then get the
 * lock in turn. */
static void test_redisson_release_wakes_rlock_waiters(void **state)
{
    (void)state;
    for (int i = 0; i < 3; i++) {
        char name[64];
        tc_cluster_name_on(i, "compat-unnamed-", name, sizeof(name));
        redisContext *ctx = peer_connect(name);
        assert_int_equal(peer_lock(ctx, name), 1);
        rlock_client *c[2];
        rlock *l[2];
        tc_holder h[2];
        for (int k = 0; k < 2; k++) {
            c[k] = sharded_client();
            l[k] = tc_open(c[k], RLOCK_REENTRANT, name);
            tc_holder_start(&h[k], l[k], 20000, 60000, 50);
        }
        wait_waiters(name, 2);
        peer_unlock(ctx, name);
        for (int k = 0; k < 2; k++) {
            assert_int_equal(tc_holder_join(&h[k]), RLOCK_OK);
            rlock_free(l[k]);
            rlock_client_free(c[k]);
        }
        redisFree(ctx);
    }
}

/* An rlock release, with an rlock thread waiting too, still SPUBLISHes Redisson's "0": the peer,
 * SSUBSCRIBEd on the lock's master, sees only "0" messages ("smessage") and gets the lock. */
static void test_rlock_release_wakes_redisson_waiter(void **state)
{
    (void)state;
    for (int i = 0; i < 3; i++) {
        char name[64];
        tc_cluster_name_on(i, "compat-named-", name, sizeof(name));
        rlock_client *c = sharded_client();
        rlock *l = tc_open(c, RLOCK_REENTRANT, name);
        assert_int_equal(rlock_try_lock(l, 0, 60000), RLOCK_OK);
        rlock_client *wc = sharded_client();
        rlock *wl = tc_open(wc, RLOCK_REENTRANT, name);
        tc_holder wh;
        tc_holder_start(&wh, wl, 20000, 60000, 50);
        wait_waiters(name, 1);
        redisContext *ctx = peer_connect(name);
        redisContext *sub = peer_connect(name);
        assert_int_equal(peer_lock(ctx, name), 0);
        redisReply *r = redisCommand(sub, "SSUBSCRIBE redisson_lock__channel:{%s}", name);
        assert_non_null(r);
        freeReplyObject(r);
        assert_int_equal(rlock_unlock(l), RLOCK_OK);
        int messages = 0;
        do { /* The peer sleeps until a message, as Redisson's waiter does. */
            assert_int_equal(redisGetReply(sub, (void **)&r), REDIS_OK);
            assert_int_equal(r->type, REDIS_REPLY_ARRAY);
            assert_string_equal(r->element[0]->str, "smessage");
            assert_string_equal(r->element[2]->str, "0");
            freeReplyObject(r);
            messages++;
        } while (!peer_lock(ctx, name));
        print_message("the Redisson-protocol waiter got the lock after %d message(s)\n", messages);
        peer_unlock(ctx, name);
        assert_int_equal(tc_holder_join(&wh), RLOCK_OK);
        redisFree(sub);
        redisFree(ctx);
        rlock_free(wl);
        rlock_client_free(wc);
        rlock_free(l);
        rlock_client_free(c);
    }
}

TC_MAIN(tc_cluster_setup, tc_cluster_teardown,
        cmocka_unit_test(test_redisson_release_wakes_rlock_waiters),
        cmocka_unit_test(test_rlock_release_wakes_redisson_waiter))
