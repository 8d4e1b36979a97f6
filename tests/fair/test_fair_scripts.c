/*
 * The fair lock's Lua scripts, run directly (through the library's script registry) against a
 * real redis-server with synthetic owners, for the edge cases the public API rarely reaches:
 *  - a queue entry without a deadline (left by some other writer) is dropped when it is first;
 *  - a give-up at the tail, in the middle and at the head keeps the others' order, and only a
 *    give-up of the first waiter notifies the next one;
 *  - a grant notifies the next waiter, a release only the first;
 *  - a release by a non-owner of a free lock still notifies the first waiter (Redisson does);
 *  - the heartbeat refreshes live waiters, wakes a waiter whose entry is gone, and sweeps dead
 *    waiters from anywhere in the queue, notifying a new first waiter;
 *  - the wait bound answered while the lock is free is capped at the waiter timeout even when
 *    the first waiter (a Redisson one) has a deadline minutes away.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/time.h>

#include <cmocka.h>

#include "fair_common.h"
#include "pool.h"
#include "scripts.h"

#define L  "fl"
#define Q  "redisson_lock_queue:{fl}"
#define Z  "redisson_lock_timeout:{fl}"
#define T  "redisson_lock_token:{fl}"
#define CH "redisson_lock__channel:{fl}"

static rh_server *g_srv;
static rlock_client *g_client;
static redisContext *g_sub; /* PSUBSCRIBEd to every waiter channel of L */

static redisReply *run(int script, int nkeys, const char **keys, int nargs, const char **args)
{
    rlk_args k, a;
    rlk_args_init(&k);
    rlk_args_init(&a);
    for (int i = 0; i < nkeys; i++) {
        rlk_args_adds(&k, keys[i]);
    }
    for (int i = 0; i < nargs; i++) {
        rlk_args_adds(&a, args[i]);
    }
    redisReply *r = NULL;
    assert_int_equal(rlk_script(g_client, script, 0, &k, &a, &r), RLOCK_OK);
    return r;
}

/* fair_acquire: returns reply element 0 (1 acquired, 0 busy); *bound gets element 1. */
static long long acquire(const char *owner, const char *wt, const char *may_queue, long long *bound)
{
    const char *keys[] = {L, Q, Z, T, CH};
    const char *args[] = {"30000", owner, wt, may_queue};
    redisReply *r = run(RLK_SCRIPT_FAIR_ACQUIRE, 5, keys, 4, args);
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    long long v = r->element[0]->integer;
    if (bound != NULL) {
        *bound = r->element[1]->integer;
    }
    freeReplyObject(r);
    return v;
}

static long long release(const char *owner)
{
    const char *keys[] = {L, Q, Z, CH};
    const char *args[] = {"30000", owner, "0"};
    redisReply *r = run(RLK_SCRIPT_FAIR_RELEASE, 4, keys, 3, args);
    long long v = r->integer;
    freeReplyObject(r);
    return v;
}

static long long leave(const char *owner)
{
    const char *keys[] = {L, Q, Z, CH};
    const char *args[] = {owner, "0"};
    redisReply *r = run(RLK_SCRIPT_FAIR_LEAVE, 4, keys, 2, args);
    long long v = r->integer;
    freeReplyObject(r);
    return v;
}

/* Heartbeat for one waiter of L; returns its 1/0. */
static long long heartbeat(const char *owner)
{
    const char *keys[] = {L};
    const char *args[] = {"200000", owner};
    redisReply *r = run(RLK_SCRIPT_FAIR_HEARTBEAT, 1, keys, 2, args);
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    long long v = r->element[0]->integer;
    freeReplyObject(r);
    return v;
}

/* Drains the notifications published so far into buf as "owner owner ..." (in order). */
static void notified(char *buf, size_t cap)
{
    struct timeval tv = {0, 100000};
    redisSetTimeout(g_sub, tv);
    buf[0] = '\0';
    redisReply *r = NULL;
    while (redisGetReply(g_sub, (void **)&r) == REDIS_OK) {
        const char *ch = r->element[2]->str;
        size_t len = strlen(buf);
        snprintf(buf + len, cap - len, "%s%s", len ? " " : "", ch + strlen(CH) + 1);
        freeReplyObject(r);
    }
    /* The read timed out: reconnect for the next step. */
    redisFree(g_sub);
    g_sub = redisConnect("127.0.0.1", rh_port(g_srv));
    r = redisCommand(g_sub, "PSUBSCRIBE " CH ":*");
    freeReplyObject(r);
}

/* The queue as one string, "a b c". */
static void queue(char *buf, size_t cap)
{
    char *v[32];
    int n = fc_lrange(g_srv, Q, v, 32);
    buf[0] = '\0';
    for (int i = 0; i < n; i++) {
        size_t len = strlen(buf);
        snprintf(buf + len, cap - len, "%s%s", i ? " " : "", v[i]);
    }
    fc_free_strings(v, n);
}

static void reset(void)
{
    const char *del[] = {"DEL", L, Q, Z, NULL};
    rh_cmd_int(g_srv, del);
    char buf[256];
    notified(buf, sizeof(buf));
}

/* Asserts what the channels were notified of since the last look ("a b": a's, then b's). */
static void expect_notified(const char *want)
{
    char buf[256];
    notified(buf, sizeof(buf));
    assert_string_equal(buf, want);
}

/* Asserts the queue ("a b c"). */
static void expect_queue(const char *want)
{
    char buf[256];
    queue(buf, sizeof(buf));
    assert_string_equal(buf, want);
}

static void set_score(const char *owner, long long score)
{
    char s[32];
    snprintf(s, sizeof(s), "%lld", score);
    const char *zadd[] = {"ZADD", Z, "XX", s, owner, NULL};
    assert_int_equal(rh_cmd_int(g_srv, zadd), 0);
}

/* From a reset: h holds the lock, a, b, c and d queue behind it in that order. */
static void held_with_four_waiters(void)
{
    reset();
    assert_int_equal(acquire("h", "100000", "1", NULL), 1);
    static const char *const w[] = {"a", "b", "c", "d"};
    for (int i = 0; i < 4; i++) {
        assert_int_equal(acquire(w[i], "100000", "1", NULL), 0);
    }
}

static void test_scoreless_head_dropped(void **state)
{
    (void)state;
    reset();
    const char *rpush[] = {"RPUSH", Q, "ghost", NULL};
    assert_int_equal(rh_cmd_int(g_srv, rpush), 1);
    assert_int_equal(acquire("a", "5000", "0", NULL), 1);
    assert_int_equal(fc_llen(g_srv, L), 0);
    assert_int_equal(release("a"), 1);
}

static void test_give_up_positions(void **state)
{
    (void)state;
    held_with_four_waiters();
    expect_queue("a b c d");
    assert_int_equal(leave("d"), 1);
    assert_int_equal(leave("b"), 1);
    assert_int_equal(leave("nobody"), 0);
    expect_queue("a c");
    expect_notified("");
    /* The first waiter gives up while the lock is held: the next one re-arms its bound. */
    assert_int_equal(leave("a"), 1);
    expect_notified("c");
    assert_int_equal(fc_zcard(g_srv, L), 1);
    /* Release notifies only the first waiter; its grant notifies nobody (no one behind). */
    assert_int_equal(release("h"), 1);
    assert_int_equal(acquire("c", "100000", "1", NULL), 1);
    expect_notified("c");
    assert_int_equal(release("c"), 1);
}

static void test_grant_and_release_notify(void **state)
{
    (void)state;
    reset();
    assert_int_equal(acquire("h", "100000", "1", NULL), 1);
    assert_int_equal(acquire("a", "100000", "1", NULL), 0);
    assert_int_equal(acquire("b", "100000", "1", NULL), 0);
    assert_int_equal(acquire("c", "100000", "1", NULL), 0);
    expect_notified("");
    assert_int_equal(release("h"), 1);
    expect_notified("a");
    /* b cannot jump the queue, even with try_lock(0) semantics. */
    assert_int_equal(acquire("b", "100000", "0", NULL), 0);
    assert_int_equal(acquire("a", "100000", "1", NULL), 1);
    expect_notified("b");
    /* A non-owner's release of a held lock changes nothing and notifies nobody. */
    assert_int_equal(release("x"), -1);
    expect_notified("");
    /* The lease ran out (simulated by deleting the hash): a late release still wakes b. */
    const char *del[] = {"DEL", L, NULL};
    assert_int_equal(rh_cmd_int(g_srv, del), 1);
    assert_int_equal(release("a"), -1);
    expect_notified("b");
}

static void test_heartbeat_refresh_wake_and_sweep(void **state)
{
    (void)state;
    held_with_four_waiters();
    int64_t now = fc_server_now(g_srv);
    /* A live waiter's deadline moves to now + the heartbeat's timeout (200000). */
    assert_int_equal(heartbeat("a"), 1);
    const char *zscore[] = {"ZSCORE", Z, "a", NULL};
    assert_true(rh_cmd_int(g_srv, zscore) >= now + 200000);
    /* A waiter that is gone is told so on its own channel. */
    assert_int_equal(heartbeat("nobody"), 0);
    expect_notified("nobody");
    /* b in the middle dies: swept from list and zset; the first waiter is unchanged. */
    set_score("b", now - 1);
    assert_int_equal(heartbeat("c"), 1);
    expect_queue("a c d");
    assert_int_equal(fc_in_zset(g_srv, L, "b"), 0);
    expect_notified("");
    /* The first waiter dies: swept, and the new first waiter is notified. */
    set_score("a", now - 1);
    assert_int_equal(heartbeat("d"), 1);
    expect_queue("c d");
    expect_notified("c");
}

static void test_free_lock_bound_capped(void **state)
{
    (void)state;
    reset();
    /* A Redisson waiter first in line with a deadline 300 s away, the lock free. */
    int64_t now = fc_server_now(g_srv);
    char s[32];
    snprintf(s, sizeof(s), "%lld", (long long)(now + 300000));
    const char *zadd[] = {"ZADD", Z, s, "redisson:1", NULL};
    const char *rpush[] = {"RPUSH", Q, "redisson:1", NULL};
    assert_int_equal(rh_cmd_int(g_srv, zadd), 1);
    assert_int_equal(rh_cmd_int(g_srv, rpush), 1);
    long long bound = 0;
    assert_int_equal(acquire("x", "5000", "1", &bound), 0);
    assert_true(bound >= 1 && bound <= 5000);
    /* While held, the bound is the holder's remaining lease. */
    assert_int_equal(acquire("redisson:1", "5000", "1", NULL), 1);
    assert_int_equal(acquire("x", "5000", "1", &bound), 0);
    assert_true(bound > 29000 && bound <= 30000);
}

static int setup(void **state)
{
    (void)state;
    if (tc_fixture_open(&g_srv, &g_client, NULL) != 0) {
        return -1;
    }
    g_sub = redisConnect("127.0.0.1", rh_port(g_srv));
    if (g_sub == NULL || g_sub->err) {
        return -1;
    }
    redisReply *r = redisCommand(g_sub, "PSUBSCRIBE " CH ":*");
    freeReplyObject(r);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    redisFree(g_sub);
    return tc_fixture_close(&g_srv, &g_client);
}

TC_MAIN(setup, teardown, cmocka_unit_test(test_scoreless_head_dropped),
        cmocka_unit_test(test_give_up_positions), cmocka_unit_test(test_grant_and_release_notify),
        cmocka_unit_test(test_heartbeat_refresh_wake_and_sweep),
        cmocka_unit_test(test_free_lock_bound_capped))
