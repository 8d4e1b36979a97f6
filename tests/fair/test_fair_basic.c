/*
 * The fair lock's basic behaviour against a real redis-server: Redisson's RedissonFairLockTest
 * basic set (lock/unlock, reentrancy, hold counts, isLocked, unlock by a non-owner, force unlock,
 * expiry, tryLock(0), tryLock wait bounds) plus what rlock adds: fencing tokens, Redisson's data
 * layout byte for byte, a per-waiter channel with only the first waiter notified, and liveness
 * heartbeats that keep a waiter queued far beyond its waiter timeout.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "fair_common.h"
#include "tc_steps.h"

static rh_server *g_srv;
static rlock_client *g_client;

/* ---- another thread's call ---------------------------------------------------------------- */

enum { OP_LOCK, OP_TRY, OP_UNLOCK, OP_IS_HELD, OP_IS_LOCKED };

typedef struct op {
    rlock *l;
    int what;
    int64_t wait_ms, lease_ms;
    int rc;
    int64_t took_ms;
    char owner[RLK_OWNER_MAX];
} op;

static void *op_main(void *arg)
{
    op *o = arg;
    int64_t t0 = rh_now_ms();
    fc_owner(g_client, o->owner);
    switch (o->what) {
    case OP_LOCK:
        o->rc = rlock_lock(o->l, o->lease_ms);
        break;
    case OP_TRY:
        o->rc = rlock_try_lock(o->l, o->wait_ms, o->lease_ms);
        break;
    case OP_UNLOCK:
        o->rc = rlock_unlock(o->l);
        break;
    case OP_IS_HELD:
        o->rc = rlock_is_held(o->l);
        break;
    default:
        o->rc = rlock_is_locked(o->l);
        break;
    }
    o->took_ms = rh_now_ms() - t0;
    return NULL;
}

static int other(rlock *l, int what, int64_t wait_ms, int64_t lease_ms)
{
    op o = {l, what, wait_ms, lease_ms, -1000, 0, {0}};
    pthread_t t;
    if (pthread_create(&t, NULL, op_main, &o) != 0) {
        return -1000;
    }
    pthread_join(t, NULL);
    return o.rc;
}

/* other() as a TC_OTHER step: only TC_TRY, a try_lock waiting 0 ms under the watchdog. */
static long long other_step(rlock *l, int call)
{
    assert_int_equal(call, TC_TRY);
    return other(l, OP_TRY, 0, -1);
}

TC_FIXTURE(g_srv, g_client, NULL)

/* ---- tests -------------------------------------------------------------------------------- */

static void test_lock_unlock_reentrancy(void **state)
{
    (void)state;
    rlock *l = tc_open(g_client, RLOCK_FAIR, "fair:basic");
    static const tc_step steps[] = {
        {TC_IS_LOCKED, 0, 0, 0}, {TC_LOCK, -1, 0, RLOCK_OK},  {TC_IS_LOCKED, 0, 0, 1},
        {TC_IS_HELD, 0, 0, 1},   {TC_UNLOCK, 0, 0, RLOCK_OK}, {TC_IS_LOCKED, 0, 0, 0},
    };
    TC_STEPS(l, steps, NULL);
    /* testReentrancy: two try_lock(0) holds; another thread fails until both are released. */
    TC_STEPS(l, tc_steps_reentrancy, other_step);
    assert_int_equal(other(l, OP_TRY, 0, 60000), RLOCK_OK);
    /* The other thread's hold is its own: this thread cannot release it... */
    assert_int_equal(rlock_unlock(l), RLOCK_ENOTOWNER);
    assert_int_equal(rlock_is_held(l), 0);
    assert_int_equal(rlock_is_locked(l), 1);
    assert_int_equal(other(l, OP_IS_LOCKED, 0, 0), 1);
    /* ...and yet another thread neither holds it nor may release it (testUnlockFail). */
    assert_int_equal(other(l, OP_IS_HELD, 0, 0), 0);
    assert_int_equal(other(l, OP_UNLOCK, 0, 0), RLOCK_ENOTOWNER);
    assert_int_equal(rlock_force_unlock(l), 1);
    assert_int_equal(rlock_is_locked(l), 0);
    rlock_free(l);
}

static void test_hold_count(void **state)
{
    (void)state;
    rlock *l = tc_open(g_client, RLOCK_FAIR, "fair:count");
    TC_STEPS(l, tc_steps_count_up, NULL);
    /* Redisson's data: the owner field holds the count. */
    char owner[RLK_OWNER_MAX];
    fc_owner(g_client, owner);
    const char *hget[] = {"HGET", "fair:count", owner, NULL};
    assert_int_equal(rh_cmd_int(g_srv, hget), 2);
    TC_STEPS(l, tc_steps_count_down, NULL);
    assert_int_equal(rlock_unlock(l), RLOCK_ENOTOWNER);
    rlock_free(l);
}

static void test_force_unlock(void **state)
{
    (void)state;
    rlock *l = tc_open(g_client, RLOCK_FAIR, "fair:force");
    static const tc_step steps[] = {
        {TC_FORCE_UNLOCK, 0, 0, 0},
        {TC_LOCK, -1, 0, RLOCK_OK},
        {TC_FORCE_UNLOCK, 0, 0, 1},
        {TC_IS_LOCKED, 0, 0, 0},
    };
    TC_STEPS(l, steps, NULL);
    rlock *fresh = rlock_open(g_client, RLOCK_FAIR, "fair:force");
    assert_int_equal(rlock_is_locked(fresh), 0);
    assert_int_equal(rlock_try_lock(fresh, 0, 5000), RLOCK_OK);
    rlock_free(fresh);
    rlock_free(l);
}

/* testExpire: a hold with a 2 s lease and no unlock; another thread's lock() gets it when the
 * lease runs out (the waiter, first in line, wakes on the holder's TTL bound). */
static void test_expire(void **state)
{
    (void)state;
    rlock *l = tc_open(g_client, RLOCK_FAIR, "fair:expire");
    assert_int_equal(rlock_lock(l, 2000), RLOCK_OK);
    int64_t t0 = rh_now_ms();
    int rc = other(l, OP_LOCK, 0, 10000);
    int64_t took = rh_now_ms() - t0;
    print_message("second lock() after a 2000 ms lease: %lld ms\n", (long long)took);
    assert_int_equal(rc, RLOCK_OK);
    assert_true(took >= 1900 && took < 2300);
    /* The late unlock finds the hold gone on Redis. */
    assert_int_equal(rlock_unlock(l), RLOCK_ELOST);
    assert_int_equal(rlock_force_unlock(l), 1);
    rlock_free(l);
}

/* Fencing tokens: taken from free -> the counter's next value; re-entry keeps the token. */
static void test_tokens(void **state)
{
    (void)state;
    rlock *l = tc_open(g_client, RLOCK_FAIR, "fair:token");
    assert_int_equal(rlock_token(l), 0);
    assert_int_equal(rlock_lock(l, -1), RLOCK_OK);
    uint64_t t1 = rlock_token(l);
    assert_true(t1 >= 1);
    assert_int_equal(rlock_lock(l, -1), RLOCK_OK);
    assert_int_equal(rlock_token(l), t1);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(rlock_token(l), t1);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(rlock_token(l), 0);
    assert_int_equal(rlock_try_lock(l, 0, 5000), RLOCK_OK);
    assert_int_equal(rlock_token(l), t1 + 1);
    const char *get[] = {"GET", "redisson_lock_token:{fair:token}", NULL};
    assert_int_equal(rh_cmd_int(g_srv, get), (long long)(t1 + 1));
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    rlock_free(l);
}

/* testTryLockNonDelayed plus the queue rule: try_lock(0) never joins the queue. */
static void test_try_lock_zero(void **state)
{
    (void)state;
    rlock *l = tc_open(g_client, RLOCK_FAIR, "fair:try0");
    assert_int_equal(rlock_try_lock(l, 0, -1), RLOCK_OK);
    op o = {l, OP_TRY, 200, -1, -1000, 0, {0}};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, op_main, &o), 0);
    pthread_join(t, NULL);
    assert_int_equal(o.rc, RLOCK_ETIMEDOUT);
    assert_true(o.took_ms >= 190);
    /* The timed waiter left the queue before returning; a try_lock(0) never entered it. */
    FC_ASSERT_NO_WAITERS(g_srv, "fair:try0");
    assert_int_equal(other(l, OP_TRY, 0, -1), RLOCK_ETIMEDOUT);
    FC_ASSERT_NO_WAITERS(g_srv, "fair:try0");
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(other(l, OP_TRY, 0, 5000), RLOCK_OK);
    assert_int_equal(rlock_force_unlock(l), 1);

    /* Fairness: a free lock is not taken by try_lock(0) while a live waiter is first in line.
     * A synthetic waiter (another client's owner) is queued by hand, as Redisson would. */
    int64_t now = fc_server_now(g_srv);
    char score[32];
    snprintf(score, sizeof(score), "%lld", (long long)(now + 60000));
    const char *zadd[] = {"ZADD", "redisson_lock_timeout:{fair:try0}", score, "other:1", NULL};
    const char *rpush[] = {"RPUSH", "redisson_lock_queue:{fair:try0}", "other:1", NULL};
    assert_int_equal(rh_cmd_int(g_srv, zadd), 1);
    assert_int_equal(rh_cmd_int(g_srv, rpush), 1);
    assert_int_equal(rlock_try_lock(l, 0, -1), RLOCK_ETIMEDOUT);
    assert_int_equal(fc_llen(g_srv, "fair:try0"), 1);
    /* Once that waiter is dead (deadline passed on the server's clock) it is purged. */
    snprintf(score, sizeof(score), "%lld", (long long)(now - 1));
    assert_int_equal(rh_cmd_int(g_srv, zadd), 0);
    assert_int_equal(rlock_try_lock(l, 0, -1), RLOCK_OK);
    FC_ASSERT_NO_WAITERS(g_srv, "fair:try0");
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    rlock_free(l);
}

/* testTryLockWait: try_lock(3 s) on a held lock returns after 3.0-3.3 s, out of the queue. */
static void test_try_lock_wait(void **state)
{
    (void)state;
    rlock *l = tc_open(g_client, RLOCK_FAIR, "fair:wait");
    assert_int_equal(rlock_lock(l, -1), RLOCK_OK);
    op o = {l, OP_TRY, 3000, -1, -1000, 0, {0}};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, op_main, &o), 0);
    pthread_join(t, NULL);
    print_message("try_lock(3000) on a held fair lock returned after %lld ms\n",
                  (long long)o.took_ms);
    assert_int_equal(o.rc, RLOCK_ETIMEDOUT);
    assert_true(o.took_ms >= 3000 && o.took_ms <= 3300);
    assert_int_equal(fc_in_queue(g_srv, "fair:wait", o.owner), 0);
    assert_int_equal(fc_in_zset(g_srv, "fair:wait", o.owner), 0);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    rlock_free(l);
}

/* A waiter thread that records its owner, then waits in rlock_lock() and holds for hold_ms. */
typedef struct holder {
    rlock *l;
    int64_t hold_ms;
    int rc;
    char owner[RLK_OWNER_MAX];
    int64_t got_at;
} holder;

static void *holder_main(void *arg)
{
    holder *h = arg;
    fc_owner(g_client, h->owner);
    h->rc = rlock_lock(h->l, -1);
    h->got_at = rh_now_ms();
    if (h->rc == RLOCK_OK) {
        rh_sleep_ms(h->hold_ms);
        h->rc = rlock_unlock(h->l);
    }
    return NULL;
}

/* Redisson's data layout while one thread holds and three wait, and the per-waiter channel:
 * a release publishes exactly one message, on the first waiter's own channel. */
static void test_data_layout_and_notify_head_only(void **state)
{
    (void)state;
    const char *name = "fair:layout";
    rlock *l = tc_hold(g_client, RLOCK_FAIR, name);
    char me[RLK_OWNER_MAX];
    fc_owner(g_client, me);
    holder h[3];
    pthread_t t[3];
    for (int i = 0; i < 3; i++) {
        h[i] = (holder){l, 500, -1000, {0}, 0};
        assert_int_equal(pthread_create(&t[i], NULL, holder_main, &h[i]), 0);
        assert_int_equal(fc_wait_llen(g_srv, name, i + 1, 5000), 0);
    }
    /* The hash: exactly the holder's field = 1, with a TTL of about the watchdog lease. */
    const char *hlen[] = {"HLEN", name, NULL};
    const char *hget[] = {"HGET", name, me, NULL};
    const char *pttl[] = {"PTTL", name, NULL};
    assert_int_equal(rh_cmd_int(g_srv, hlen), 1);
    assert_int_equal(rh_cmd_int(g_srv, hget), 1);
    long long ttl = rh_cmd_int(g_srv, pttl);
    assert_true(ttl > 25000 && ttl <= 30000);
    /* The queue in join order; each waiter has a deadline of about server now + 5 s. */
    char *q[4];
    assert_int_equal(fc_lrange(g_srv, "redisson_lock_queue:{fair:layout}", q, 4), 3);
    int64_t now = fc_server_now(g_srv);
    for (int i = 0; i < 3; i++) {
        assert_string_equal(q[i], h[i].owner);
        char z[256];
        fc_zset_key(name, z, sizeof(z));
        const char *zscore[] = {"ZSCORE", z, q[i], NULL};
        long long s = rh_cmd_int(g_srv, zscore);
        assert_true(s > now && s <= now + 5000 + 50);
        /* Each waiter listens on its own channel. */
        char ch[256];
        snprintf(ch, sizeof(ch), "redisson_lock__channel:{fair:layout}:%s", q[i]);
        const char *numsub[] = {"PUBSUB", "NUMSUB", ch, NULL};
        redisReply *r = rh_cmd(g_srv, numsub);
        assert_non_null(r);
        assert_int_equal(r->type, REDIS_REPLY_ARRAY);
        assert_int_equal(r->element[1]->integer, 1);
        freeReplyObject(r);
    }
    fc_free_strings(q, 3);

    /* Watch every channel of this lock, then release: the release grants the lock to the first
     * waiter and tells it alone (issue 18's direct grant). The next one, an rlock waiter that
     * registered for grants, is not notified (its wait bound is capped at the waiter timeout
     * instead), and the third hears nothing while the first holds. */
    redisContext *sub = redisConnect("127.0.0.1", rh_port(g_srv));
    assert_true(sub != NULL && sub->err == 0);
    redisReply *r = redisCommand(sub, "PSUBSCRIBE redisson_lock__channel:{fair:layout}*");
    assert_non_null(r);
    freeReplyObject(r);
    int64_t released = rh_now_ms();
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    struct timeval tv = {0, 300000};
    redisSetTimeout(sub, tv);
    int per_waiter[3] = {0, 0, 0};
    int messages = 0;
    char first_channel[256] = "";
    while (redisGetReply(sub, (void **)&r) == REDIS_OK) {
        /* Only the 300 ms after the release count: the first waiter holds for 500 ms. */
        if (rh_now_ms() - released < 300) {
            if (messages++ == 0) {
                snprintf(first_channel, sizeof(first_channel), "%s", r->element[2]->str);
            }
            for (int i = 0; i < 3; i++) {
                const char *ch = r->element[2]->str;
                size_t len = strlen(ch), olen = strlen(h[i].owner);
                per_waiter[i] += len > olen && strcmp(ch + len - olen, h[i].owner) == 0;
            }
        }
        freeReplyObject(r);
    }
    redisFree(sub);
    char expect[256];
    snprintf(expect, sizeof(expect), "redisson_lock__channel:{fair:layout}:%s", h[0].owner);
    assert_string_equal(first_channel, expect);
    assert_int_equal(per_waiter[0], 1);
    assert_int_equal(per_waiter[1], 0);
    assert_int_equal(per_waiter[2], 0);
    assert_int_equal(messages, 1);
    for (int i = 0; i < 3; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(h[i].rc, RLOCK_OK);
    }
    assert_true(h[0].got_at < h[1].got_at && h[1].got_at < h[2].got_at);
    FC_ASSERT_NO_WAITERS(g_srv, name);
    rlock_free(l);
}

/* A waiter with a 300 ms waiter timeout stays queued for 2 s: the watchdog's heartbeats keep
 * refreshing its deadline (for a plain and a hash-tagged name, whose derived keys differ). */
static void test_heartbeat_keeps_waiter(void **state)
{
    (void)state;
    static const char *const names[] = {"fair:hb", "{fair}:hb"};
    static const char *const queues[] = {"redisson_lock_queue:{fair:hb}",
                                         "redisson_lock_queue:{fair}:hb"};
    rlock_client *c = fc_client(g_srv, 300);
    assert_non_null(c);
    for (int k = 0; k < 2; k++) {
        rlock *l = tc_open(c, RLOCK_FAIR, names[k]);
        assert_int_equal(rlock_lock(l, -1), RLOCK_OK);
        op o = {l, OP_TRY, 2000, -1, -1000, 0, {0}};
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, op_main, &o), 0);
        const char *llen[] = {"LLEN", queues[k], NULL};
        int64_t deadline = rh_now_ms() + 2000;
        while (rh_cmd_int(g_srv, llen) != 1 && rh_now_ms() < deadline) {
            rh_sleep_ms(1);
        }
        int64_t joined = rh_now_ms();
        int present = 1;
        while (rh_now_ms() - joined < 1500) {
            present &= rh_cmd_int(g_srv, llen) == 1;
            rh_sleep_ms(50);
        }
        assert_true(present);
        /* Released before the waiter's 2 s run out: it gets the lock. */
        assert_int_equal(rlock_unlock(l), RLOCK_OK);
        pthread_join(t, NULL);
        assert_int_equal(o.rc, RLOCK_OK);
        assert_int_equal(rh_cmd_int(g_srv, llen), 0);
        rlock_free(l);
    }
    rlock_client_free(c);
}

/* testAutoExpire: a watchdog hold stays while its client renews it and disappears within about
 * one watchdog lease once the client is gone (here 1.5 s instead of 30 s). */
static void test_auto_expire(void **state)
{
    (void)state;
    rlock_options o;
    rlock_options_init(&o);
    o.url = rh_url(g_srv);
    o.watchdog_timeout_ms = 1500;
    rlock_client *c = tc_client(&o);
    rlock *l = rlock_open(c, RLOCK_FAIR, "fair:auto");
    assert_int_equal(rlock_lock(l, -1), RLOCK_OK);
    rh_sleep_ms(2500);
    const char *exists[] = {"EXISTS", "fair:auto", NULL};
    assert_int_equal(rh_cmd_int(g_srv, exists), 1);
    rlock_client_free(c);
    int64_t t0 = rh_now_ms();
    while (rh_cmd_int(g_srv, exists) == 1 && rh_now_ms() - t0 < 3000) {
        rh_sleep_ms(20);
    }
    int64_t took = rh_now_ms() - t0;
    print_message("watchdog hold gone %lld ms after its client was freed (lease 1500)\n",
                  (long long)took);
    assert_int_equal(rh_cmd_int(g_srv, exists), 0);
    assert_true(took <= 1500 + 400);
    assert_int_equal(rlock_lock(l, -1), RLOCK_ECLOSED);
    rlock_free(l);
}

static void test_bad_input(void **state)
{
    (void)state;
    assert_null(rlock_open(NULL, RLOCK_FAIR, "x"));
    assert_null(rlock_open(g_client, RLOCK_FAIR, ""));
    assert_null(rlock_open(g_client, RLOCK_FAIR, NULL));
    rlock_free(NULL);
    rlock *l = tc_open(g_client, RLOCK_FAIR, "fair:bad");
    assert_int_equal(rlock_lock(l, 0), RLOCK_EINVAL);
    assert_int_equal(rlock_try_lock(l, -5, -1), RLOCK_EINVAL);
    assert_int_equal(rlock_unlock(l), RLOCK_ENOTOWNER);
    assert_int_equal(rlock_remaining_ttl_ms(l), -2);
    rlock_free(l);
}

TC_MAIN(setup, teardown, cmocka_unit_test(test_lock_unlock_reentrancy),
        cmocka_unit_test(test_hold_count), cmocka_unit_test(test_force_unlock),
        cmocka_unit_test(test_expire), cmocka_unit_test(test_tokens),
        cmocka_unit_test(test_try_lock_zero), cmocka_unit_test(test_try_lock_wait),
        cmocka_unit_test(test_data_layout_and_notify_head_only),
        cmocka_unit_test(test_heartbeat_keeps_waiter), cmocka_unit_test(test_auto_expire),
        cmocka_unit_test(test_bad_input))
