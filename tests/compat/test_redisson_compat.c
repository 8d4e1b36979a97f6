/*
 * Redisson compatibility: a C service using rlock and a Java service using Redisson must exclude
 * each other on one lock. The "Redisson peer" here is a raw hiredis client that speaks Redisson's
 * RLock protocol as redisson-protocol.md §2.1 describes it (scripts written here from that
 * description): acquire returns nil when acquired and the holder's PTTL otherwise; unlock returns
 * nil for a non-owner, 0 for a partial and 1 for a full release, publishing "0" on
 * redisson_lock__channel:{name}. The tests check both directions, the exact data layout, and
 * mutual exclusion when both kinds of client contend at once.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <hiredis.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "redis_harness.h"
#include "rlock.h"
#include "redisson_peer.h"
#include "tc_redis.h"
#include "tc_thread.h"

/* Redisson's RLock unlock (without the idempotency latch): KEYS[1] name, KEYS[2] channel;
 * ARGV[1] message, ARGV[2] lease ms, ARGV[3] owner. */
static const char *const peer_release =
    "if (redis.call('hexists', KEYS[1], ARGV[3]) == 0) then return nil; end; "
    "local counter = redis.call('hincrby', KEYS[1], ARGV[3], -1); "
    "if (counter > 0) then redis.call('pexpire', KEYS[1], ARGV[2]); return 0; "
    "else redis.call('del', KEYS[1]); redis.call('publish', KEYS[2], ARGV[1]); return 1; end; "
    "return nil;";

static rh_server *g_srv;

TC_SERVER_FIXTURE(g_srv)

/* Runs the peer's acquire: returns -3 when acquired (nil), else the PTTL it answered. */
static long long peer_lock(redisContext *ctx, const char *name, const char *owner, long long ms)
{
    redisReply *r = redisCommand(ctx, "EVAL %s 1 %s %lld %s", peer_acquire, name, ms, owner);
    assert_non_null(r);
    long long v =
        r->type == REDIS_REPLY_NIL ? -3 : (r->type == REDIS_REPLY_INTEGER ? r->integer : -100);
    freeReplyObject(r);
    return v;
}

/* Runs the peer's unlock: returns -3 for nil (not owner), else 0 or 1. */
static long long peer_unlock(redisContext *ctx, const char *name, const char *owner)
{
    char channel[256];
    snprintf(channel, sizeof(channel), "redisson_lock__channel:{%s}", name);
    redisReply *r =
        redisCommand(ctx, "EVAL %s 2 %s %s 0 30000 %s", peer_release, name, channel, owner);
    assert_non_null(r);
    long long v =
        r->type == REDIS_REPLY_NIL ? -3 : (r->type == REDIS_REPLY_INTEGER ? r->integer : -100);
    freeReplyObject(r);
    return v;
}

/* rlock's data is Redisson's: one hash field "<uuid>:<thread-id>" = hold count, PEXPIRE lease. */
static void test_data_layout(void **state)
{
    (void)state;
    rlock_client *c;
    rlock *l = tc_open_own(g_srv, RLOCK_REENTRANT, "compat:layout", &c);
    assert_int_equal(rlock_lock(l, -1), RLOCK_OK);
    assert_int_equal(rlock_lock(l, -1), RLOCK_OK);
    redisContext *ctx = rh_connect(g_srv);
    redisReply *r = redisCommand(ctx, "HGETALL compat:layout");
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    assert_int_equal(r->elements, 2);
    unsigned a, b, d, e;
    unsigned long long f, tid;
    char tail[8] = "";
    int n = sscanf(r->element[0]->str, "%8x-%4x-%4x-%4x-%12llx:%llu%7s", &a, &b, &d, &e, &f, &tid,
                   tail);
    assert_int_equal(n, 6); /* uuid:thread-id and nothing after it */
    assert_string_equal(r->element[1]->str, "2");
    freeReplyObject(r);
    r = redisCommand(ctx, "PTTL compat:layout");
    assert_true(r->integer > 25000 && r->integer <= 30000);
    freeReplyObject(r);
    /* The peer sees a lock held by someone else and gets its TTL back, not nil. */
    long long ttl = peer_lock(ctx, "compat:layout", PEER_OWNER, 30000);
    assert_true(ttl > 25000 && ttl <= 30000);
    /* And cannot unlock it: Redisson's IllegalMonitorStateException case. */
    assert_int_equal(peer_unlock(ctx, "compat:layout", PEER_OWNER), -3);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(peer_lock(ctx, "compat:layout", PEER_OWNER, 30000), -3);
    assert_int_equal(peer_unlock(ctx, "compat:layout", PEER_OWNER), 1);
    redisFree(ctx);
    rlock_free(l);
    rlock_client_free(c);
}

static atomic_llong g_release_result;

/* The peer releases 700 ms from now, on its own connection. */
static void *peer_release_later(void *arg)
{
    (void)arg;
    usleep(700 * 1000);
    redisContext *cc = rh_connect(g_srv);
    atomic_store(&g_release_result, peer_unlock(cc, "compat:wake", PEER_OWNER));
    redisFree(cc);
    return NULL;
}

/* A lock held by the peer blocks rlock, and the peer's unlock message wakes rlock's waiter. */
static void test_peer_holds_rlock_waits(void **state)
{
    (void)state;
    rlock_client *c;
    rlock *l = tc_open_own(g_srv, RLOCK_REENTRANT, "compat:wake", &c);
    redisContext *ctx = rh_connect(g_srv);
    /* A long peer lease: only the published unlock can let rlock in early. */
    assert_int_equal(peer_lock(ctx, "compat:wake", PEER_OWNER, 60000), -3);
    assert_int_equal(rlock_try_lock(l, 0, 10000), RLOCK_ETIMEDOUT);
    assert_int_equal(rlock_is_locked(l), 1);
    assert_int_equal(rlock_is_held(l), 0);
    assert_int_equal(rlock_unlock(l), RLOCK_ENOTOWNER);
    pthread_t releaser;
    pthread_create(&releaser, NULL, peer_release_later, NULL);
    int64_t t0 = rh_now_ms();
    assert_int_equal(rlock_try_lock(l, 20000, -1), RLOCK_OK);
    int64_t waited = rh_now_ms() - t0;
    pthread_join(releaser, NULL);
    assert_int_equal(atomic_load(&g_release_result), 1);
    assert_true(waited >= 600 && waited < 3000);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    redisFree(ctx);
    rlock_free(l);
    rlock_client_free(c);
}

static atomic_int g_inside, g_violations, g_done_rlock, g_done_peer;

static void critical_section(void)
{
    if (atomic_fetch_add(&g_inside, 1) != 0) {
        atomic_fetch_add(&g_violations, 1);
    }
    usleep(200);
    atomic_fetch_sub(&g_inside, 1);
}

static void *rlock_worker(void *arg)
{
    rlock *l = arg;
    for (int i = 0; i < 150; i++) {
        if (rlock_lock(l, 10000) != RLOCK_OK) {
            atomic_fetch_add(&g_violations, 1000);
            return NULL;
        }
        critical_section();
        rlock_unlock(l);
        atomic_fetch_add(&g_done_rlock, 1);
    }
    return NULL;
}

static void *peer_worker(void *arg)
{
    const char *owner = arg;
    redisContext *ctx = rh_connect(g_srv);
    for (int i = 0; i < 150; i++) {
        /* The peer retries on a short sleep instead of subscribing: simpler, same exclusion. */
        while (peer_lock(ctx, "compat:mixed", owner, 10000) != -3) {
            usleep(300);
        }
        critical_section();
        if (peer_unlock(ctx, "compat:mixed", owner) != 1) {
            atomic_fetch_add(&g_violations, 1000);
        }
        atomic_fetch_add(&g_done_peer, 1);
    }
    redisFree(ctx);
    return NULL;
}

/* Two rlock threads and two peer threads take one lock 600 times in all: never two inside. */
static void test_mixed_mutual_exclusion(void **state)
{
    (void)state;
    rlock_client *c;
    rlock *l = tc_open_own(g_srv, RLOCK_REENTRANT, "compat:mixed", &c);
    pthread_t t[4];
    const char *owners[2] = {"6f1c2b1e-0000-4000-8000-00000000beef:7",
                             "6f1c2b1e-0000-4000-8000-00000000beef:8"};
    pthread_create(&t[0], NULL, rlock_worker, l);
    pthread_create(&t[1], NULL, rlock_worker, l);
    pthread_create(&t[2], NULL, peer_worker, (void *)owners[0]);
    pthread_create(&t[3], NULL, peer_worker, (void *)owners[1]);
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
    }
    assert_int_equal(atomic_load(&g_violations), 0);
    assert_int_equal(atomic_load(&g_done_rlock), 300);
    assert_int_equal(atomic_load(&g_done_peer), 300);
    assert_int_equal(rlock_is_locked(l), 0);
    rlock_free(l);
    rlock_client_free(c);
}

/* ---- rlock's named wake-ups beside Redisson's waiters (issue 18) ------------------------- */

/* An rlock thread of its own client that waits for a lock, holds it 50 ms and releases it. Its
 * heartbeat timeout is 60 s, so only a message, not the bound of its sleep, wakes it in time. */
typedef struct crowd_member {
    rlock_client *c;
    rlock *l;
    tc_holder h;
} crowd_member;

/* Starts n members on name and waits until all n are recorded as waiting rlock threads. */
static void crowd_start(crowd_member *m, int n, const char *name)
{
    for (int i = 0; i < n; i++) {
        rlock_options o;
        tc_options(&o, g_srv);
        o.waiter_timeout_ms = 60000;
        m[i].c = tc_client(&o);
        m[i].l = tc_open(m[i].c, RLOCK_REENTRANT, name);
        tc_holder_start(&m[i].h, m[i].l, 20000, 60000, 50);
    }
    char zset[128];
    snprintf(zset, sizeof(zset), "rlock_lock_waiters:{%s}", name);
    const char *zcard[] = {"ZCARD", zset, NULL};
    int64_t deadline = rh_now_ms() + 10000;
    while (rh_cmd_int(g_srv, zcard) != n && rh_now_ms() < deadline) {
        usleep(10 * 1000);
    }
    assert_int_equal(rh_cmd_int(g_srv, zcard), n);
    usleep(300 * 1000); /* their post-subscription attempts are over */
}

static void crowd_join(crowd_member *m, int n)
{
    for (int i = 0; i < n; i++) {
        assert_int_equal(tc_holder_join(&m[i].h), RLOCK_OK);
        rlock_free(m[i].l);
        rlock_client_free(m[i].c);
    }
}

/* An rlock release names its next rlock waiter on rlock's own channel and still publishes
 * Redisson's "0" on Redisson's channel: a Redisson-protocol waiter (acquire, SUBSCRIBE, wait for a
 * message, acquire again) beside two waiting rlock clients is woken by rlock's releases, sees only
 * "0" messages, and gets the lock long before the 60 s leases could let it in. */
static void test_rlock_release_wakes_redisson_waiter(void **state)
{
    (void)state;
    const char *name = "compat:named";
    rlock_client *c;
    rlock *l = tc_open_own(g_srv, RLOCK_REENTRANT, name, &c);
    assert_int_equal(rlock_lock(l, 60000), RLOCK_OK);
    crowd_member m[2];
    crowd_start(m, 2, name);
    redisContext *ctx = rh_connect(g_srv);
    redisContext *sub = rh_connect(g_srv);
    assert_true(peer_lock(ctx, name, PEER_OWNER, 60000) > 0);
    redisReply *r = redisCommand(sub, "SUBSCRIBE redisson_lock__channel:{%s}", name);
    assert_non_null(r);
    freeReplyObject(r);
    struct timeval tv = {5, 0};
    redisSetTimeout(sub, tv);
    int64_t t0 = rh_now_ms();
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    int messages = 0;
    do { /* The peer sleeps until a message, as Redisson's waiter does. */
        assert_int_equal(redisGetReply(sub, (void **)&r), REDIS_OK);
        assert_int_equal(r->type, REDIS_REPLY_ARRAY);
        assert_string_equal(r->element[0]->str, "message");
        assert_string_equal(r->element[2]->str, "0");
        freeReplyObject(r);
        messages++;
    } while (peer_lock(ctx, name, PEER_OWNER, 60000) != -3);
    int64_t waited = rh_now_ms() - t0;
    print_message("the Redisson-protocol waiter got the lock %lld ms after rlock's release, "
                  "after %d unlock message(s)\n",
                  (long long)waited, messages);
    assert_true(messages >= 1);
    assert_true(waited < 5000);
    assert_int_equal(peer_unlock(ctx, name, PEER_OWNER), 1);
    crowd_join(m, 2);
    redisFree(sub);
    redisFree(ctx);
    rlock_free(l);
    rlock_client_free(c);
}

/* A Redisson client's release publishes Redisson's "0" and names nobody: each waiting rlock client
 * lets one of its waiters attempt, and the three waiting clients then get the lock in turn
 * through rlock's named wake-ups, long before the peer's 60 s lease or their 60 s heartbeat
 * timeout could bound their sleep. */
static void test_redisson_release_wakes_rlock_waiters(void **state)
{
    (void)state;
    const char *name = "compat:unnamed";
    redisContext *ctx = rh_connect(g_srv);
    assert_int_equal(peer_lock(ctx, name, PEER_OWNER, 60000), -3);
    crowd_member m[3];
    crowd_start(m, 3, name);
    int64_t t0 = rh_now_ms();
    assert_int_equal(peer_unlock(ctx, name, PEER_OWNER), 1);
    crowd_join(m, 3);
    int64_t took = rh_now_ms() - t0;
    print_message("3 waiting rlock clients got the lock in turn within %lld ms of the Redisson "
                  "release\n",
                  (long long)took);
    assert_true(took < 5000);
    redisFree(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_data_layout),
        cmocka_unit_test(test_peer_holds_rlock_waits),
        cmocka_unit_test(test_mixed_mutual_exclusion),
        cmocka_unit_test(test_rlock_release_wakes_redisson_waiter),
        cmocka_unit_test(test_redisson_release_wakes_rlock_waiters),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
