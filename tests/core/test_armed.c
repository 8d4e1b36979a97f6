/*
 * Armed attempts (pubsub.h): a waiter formats its next attempt before it sleeps, and when a "0"
 * message arrives the subscriber thread sends it on an idle pool connection while it wakes that
 * waiter alone. Checked against a real redis-server, counting what reaches the server:
 *  - a reentrant release with several local waiters hands off through a direct grant (issue 18):
 *    no attempt at all, so no armed attempt is sent either;
 *  - an armed attempt answered NOSCRIPT (the scripts were flushed while the waiter slept) is
 *    made again by the waiter, which loads the script, and the hand-off still happens;
 *  - with no idle connection the subscriber thread does not wait for the pool: the waiter gets a
 *    permit and attempts itself;
 *  - the connection of an armed attempt breaks before Redis runs it: the waiter's call returns
 *    RLOCK_ECONN, as a failed attempt of its own would;
 *  - fair waiters (one channel each) hand off in order through grants, not attempts;
 *  - a grant kept for a wait is not taken once the wait has a new grant identity (the one it
 *    takes before every give-back), and a grant of the new identity is.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "client.h"
#include "core_util.h"
#include "tc_redis.h"
#include "pool.h"
#include "pubsub.h"
#include "pubsub_armed.h"

#define LEASE_MS 20000
#define WAIT_MS  10000
#define HOLD_MS  50

typedef struct waiter {
    rlock *lock;
    atomic_int started;
    atomic_int result; /* 1 while waiting */
    int64_t acquired_at;
} waiter;

static void *waiter_main(void *arg)
{
    waiter *w = arg;
    atomic_store(&w->started, 1);
    int r = rlock_try_lock(w->lock, WAIT_MS, LEASE_MS);
    if (r == RLOCK_OK) {
        w->acquired_at = rh_now_ms();
        rh_sleep_ms(HOLD_MS);
        r = rlock_unlock(w->lock);
    }
    atomic_store(&w->result, r);
    return NULL;
}

/* Starts w's thread waiting on lock. */
static void waiter_start(waiter *w, pthread_t *t, rlock *lock)
{
    w->lock = lock;
    atomic_init(&w->started, 0);
    atomic_init(&w->result, 1);
    w->acquired_at = 0;
    assert_int_equal(pthread_create(t, NULL, waiter_main, w), 0);
}

/* Starts n waiters on lock and returns once every one is asleep on its channel: subscribed, and
 * (a generous pause) past its first attempt and the re-attempt a join may cause. */
static void start_waiters(rh_server *s, const char *channel, waiter *w, pthread_t *t, int n,
                          rlock *lock)
{
    for (int i = 0; i < n; i++) {
        waiter_start(&w[i], &t[i], lock);
        while (!atomic_load(&w[i].started)) {
            rh_sleep_ms(1);
        }
        rh_sleep_ms(20); /* arrival order: the first to sleep is the first chosen */
    }
    int64_t deadline = rh_now_ms() + 5000;
    while (tc_listeners(s, channel) != 1 && rh_now_ms() < deadline) {
        rh_sleep_ms(5);
    }
    assert_int_equal(tc_listeners(s, channel), 1);
    rh_sleep_ms(300);
}

static void join_waiters(waiter *w, pthread_t *t, int n)
{
    for (int i = 0; i < n; i++) {
        pthread_join(t[i], NULL);
        assert_int_equal(atomic_load(&w[i].result), RLOCK_OK);
    }
}

static rlock_client *client(rh_server *s, int pool_size)
{
    rlock_options o;
    cu_opts(&o, s);
    o.pool_size = pool_size;
    o.command_timeout_ms = 3000;
    /* Grants give a waiter its whole lease (LEASE_MS), so no renewal follows a hand-off. */
    o.waiter_timeout_ms = LEASE_MS;
    rlock_client *c = tc_client(&o);
    return c;
}

/* Dials n pooled connections up front. The pool dials on demand, so how many connections exist
 * otherwise depends on how the test's threads happened to overlap; with only one, a release
 * published by a script whose connection is not back in the pool yet finds no idle connection
 * for the armed attempt (a permit instead, correctly, but not what a test counting armed
 * attempts expects). */
static void fill_pool(rlock_client *c, int n)
{
    rlk_conn *conns[8];
    assert_true(n <= 8);
    for (int i = 0; i < n; i++) {
        assert_int_equal(rlk_pool_borrow(c->pool, &conns[i]), RLOCK_OK);
    }
    for (int i = 0; i < n; i++) {
        rlk_pool_return(c->pool, conns[i], 0);
    }
}

/* A client of 8 connections (4 of them dialled) in *c and its handle on name, held by this
 * thread. */
static rlock *armed_open(rh_server *s, rlock_kind kind, const char *name, rlock_client **c)
{
    *c = client(s, 8);
    rlock *l = tc_open(*c, kind, name);
    fill_pool(*c, 4);
    assert_int_equal(rlock_try_lock(l, 0, LEASE_MS), RLOCK_OK);
    return l;
}

/* A waiting client c (pool_size connections) and a holder on its own client, holding name; one
 * waiter w on c's handle l, asleep on the lock's channel. */
typedef struct two_clients {
    rlock_client *c, *holder_c;
    rlock *l, *h;
    waiter w[1];
    pthread_t t[1];
} two_clients;

static void two_clients_open(rh_server *s, two_clients *t, int pool_size, const char *name)
{
    char channel[128];
    snprintf(channel, sizeof(channel), "redisson_lock__channel:{%s}", name);
    t->c = client(s, pool_size);
    t->holder_c = client(s, 2);
    if (pool_size >= 4) {
        fill_pool(t->c, 4);
    }
    t->l = rlock_open(t->c, RLOCK_REENTRANT, name);
    t->h = rlock_open(t->holder_c, RLOCK_REENTRANT, name);
    assert_true(t->l != NULL && t->h != NULL);
    assert_int_equal(rlock_try_lock(t->h, 0, LEASE_MS), RLOCK_OK);
    start_waiters(s, channel, t->w, t->t, 1, t->l);
}

static void two_clients_close(two_clients *t)
{
    rlock_free(t->h);
    rlock_free(t->l);
    rlock_client_free(t->holder_c);
    rlock_client_free(t->c);
}

/* Three waiters of one process share the reentrant lock's channel. Each release grants the lock
 * to one of them (lua/lock_release.lua), which returns without an attempt: 1 EVALSHA per
 * release, nothing else, and no armed attempt is sent. */
static void test_handoff_by_grant(void **state)
{
    rh_server *s = *state;
    rlock_client *c = NULL;
    /* One lock/unlock first, so that the counts below include no NOSCRIPT reload. */
    rlock *l = armed_open(s, RLOCK_REENTRANT, "armed:re", &c);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(rlock_try_lock(l, 0, LEASE_MS), RLOCK_OK);
    enum { N = 3 };
    waiter w[N];
    pthread_t t[N];
    start_waiters(s, "redisson_lock__channel:{armed:re}", w, t, N, l);
    uint64_t armed0 = rlk_pubsub_armed_sent(c->pubsub);
    long long evalsha0 = rh_cmdstat_calls(s, "evalsha");
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    join_waiters(w, t, N);
    /* The unlock, then per waiter its unlock. */
    assert_int_equal(rh_cmdstat_calls(s, "evalsha") - evalsha0, 1 + N);
    assert_int_equal(rlk_pubsub_armed_sent(c->pubsub) - armed0, 0);
    rlock_free(l);
    rlock_client_free(c);
}

/* The scripts are flushed while the waiter sleeps; the holder's hash is deleted and the release
 * message published by hand (so nothing reloads the script first). The armed attempt gets
 * NOSCRIPT; the waiter attempts again, loading the script, and gets the lock. */
static void test_noscript_reattempts(void **state)
{
    rh_server *s = *state;
    rlock_client *c = NULL;
    rlock *l = armed_open(s, RLOCK_REENTRANT, "armed:noscript", &c);
    waiter w[1];
    pthread_t t[1];
    start_waiters(s, "redisson_lock__channel:{armed:noscript}", w, t, 1, l);
    uint64_t armed0 = rlk_pubsub_armed_sent(c->pubsub);
    const char *flush[] = {"SCRIPT", "FLUSH", NULL};
    const char *del[] = {"DEL", "armed:noscript", NULL};
    const char *pub[] = {"PUBLISH", "redisson_lock__channel:{armed:noscript}", "0", NULL};
    long long loads0 = rh_cmdstat_calls(s, "script|load");
    char *ok = rh_cmd_str(s, flush);
    assert_non_null(ok);
    assert_string_equal(ok, "OK");
    free(ok);
    assert_int_equal(rh_cmd_int(s, del), 1);
    assert_int_equal(rh_cmd_int(s, pub), 1);
    join_waiters(w, t, 1);
    assert_int_equal(rlk_pubsub_armed_sent(c->pubsub) - armed0, 1);
    assert_true(rh_cmdstat_calls(s, "script|load") > loads0);
    /* This thread's hold was deleted under it. */
    assert_int_equal(rlock_unlock(l), RLOCK_ELOST);
    rlock_free(l);
    rlock_client_free(c);
}

/* A pool of one connection, borrowed by the test while the release arrives: the subscriber
 * thread cannot get an idle connection and must not wait for one, so no armed attempt is sent;
 * the waiter attempts itself once the connection comes back. */
static void test_no_idle_connection(void **state)
{
    rh_server *s = *state;
    two_clients tc;
    two_clients_open(s, &tc, 1, "armed:pool");
    rlock_client *c = tc.c;
    uint64_t armed0 = rlk_pubsub_armed_sent(c->pubsub);
    uint64_t msgs0 = rlk_pubsub_messages(c->pubsub);
    rlk_conn *conn = NULL;
    assert_int_equal(rlk_pool_borrow(c->pool, &conn), RLOCK_OK);
    assert_int_equal(rlock_unlock(tc.h), RLOCK_OK);
    int64_t deadline = rh_now_ms() + 5000;
    while (rlk_pubsub_messages(c->pubsub) == msgs0 && rh_now_ms() < deadline) {
        rh_sleep_ms(1);
    }
    assert_true(rlk_pubsub_messages(c->pubsub) > msgs0);
    rh_sleep_ms(50);
    assert_int_equal(atomic_load(&tc.w[0].result), 1); /* still waiting: for the connection */
    rlk_pool_return(c->pool, conn, 0);
    join_waiters(tc.w, tc.t, 1);
    assert_int_equal(rlk_pubsub_armed_sent(c->pubsub), armed0);
    two_clients_close(&tc);
}

/* The connection breaks while an armed attempt waits in Redis: the release message and a
 * CLIENT PAUSE WRITE arrive in one pipeline, so the attempt the subscriber thread sends stays
 * queued in Redis, and CLIENT KILL closes the connection it waits on. The waiter's read fails
 * (the attempt never ran, but a waiter cannot know that): with wait time left it keeps waiting
 * (issue 13, waiters across a failover), gives back whatever that attempt may have been granted
 * and attempts again once Redis takes writes again; it acquires, and nothing stays held. */
static void test_connection_lost_in_flight(void **state)
{
    rh_server *s = *state;
    two_clients tc;
    two_clients_open(s, &tc, 8, "armed:lost");
    rlock_client *c = tc.c;
    waiter *w = tc.w;
    uint64_t armed0 = rlk_pubsub_armed_sent(c->pubsub);
    /* Free the lock without a message (rlock_force_unlock would publish one, whose armed
     * attempt would run before the pause): only the PUBLISH below wakes the waiter. */
    const char *del[] = {"DEL", "armed:lost", NULL};
    assert_int_equal(rh_cmd_int(s, del), 1);
    redisContext *raw = rh_connect(s);
    assert_non_null(raw);
    redisAppendCommand(raw, "PUBLISH redisson_lock__channel:{armed:lost} 0");
    redisAppendCommand(raw, "CLIENT PAUSE 5000 WRITE");
    for (int i = 0; i < 2; i++) {
        redisReply *r = NULL;
        assert_int_equal(redisGetReply(raw, (void **)&r), REDIS_OK);
        assert_true(r->type != REDIS_REPLY_ERROR);
        freeReplyObject(r);
    }
    int64_t deadline = rh_now_ms() + 5000;
    while (rlk_pubsub_armed_sent(c->pubsub) == armed0 && rh_now_ms() < deadline) {
        rh_sleep_ms(1);
    }
    assert_int_equal(rlk_pubsub_armed_sent(c->pubsub) - armed0, 1);
    rh_sleep_ms(50); /* the attempt reaches Redis and waits there */
    redisReply *r = redisCommand(raw, "CLIENT KILL TYPE normal SKIPME yes");
    assert_true(r != NULL && r->type == REDIS_REPLY_INTEGER && r->integer >= 1);
    freeReplyObject(r);
    rh_sleep_ms(200); /* the waiter meets the failure and retries against the paused server */
    assert_int_equal(atomic_load(&w[0].result), 1); /* still waiting */
    const char *exists[] = {"EXISTS", "armed:lost", NULL};
    assert_int_equal(rh_cmd_int(s, exists), 0); /* the killed attempt never ran */
    r = redisCommand(raw, "CLIENT UNPAUSE");
    assert_non_null(r);
    freeReplyObject(r);
    redisFree(raw);
    pthread_join(tc.t[0], NULL);
    assert_int_equal(atomic_load(&w[0].result), RLOCK_OK);
    assert_true(w[0].acquired_at > 0);
    assert_int_equal(rh_cmd_int(s, exists), 0); /* released, nothing left held */
    int64_t took = 0;
    assert_int_equal(cu_lock_works_within(tc.l, 3000, &took), RLOCK_OK);
    assert_int_equal(rlock_unlock(tc.l), RLOCK_OK);
    two_clients_close(&tc);
}

/* Fair waiters listen on their own channels: each release grants the lock to the first in line
 * (issue 18), in arrival order, with no attempt; the only armed attempts are those of the next in
 * line, whom each grant notifies so that it re-arms its wait bound (they find the lock held). */
static void test_fair_in_order(void **state)
{
    rh_server *s = *state;
    rlock_client *c = NULL;
    rlock *l = armed_open(s, RLOCK_FAIR, "armed:fair", &c);
    enum { N = 4 };
    waiter w[N];
    pthread_t t[N];
    for (int i = 0; i < N; i++) {
        waiter_start(&w[i], &t[i], l);
        const char *llen[] = {"LLEN", "redisson_lock_queue:{armed:fair}", NULL};
        int64_t deadline = rh_now_ms() + 5000;
        while (rh_cmd_int(s, llen) != i + 1 && rh_now_ms() < deadline) {
            rh_sleep_ms(2);
        }
        assert_int_equal(rh_cmd_int(s, llen), i + 1);
    }
    rh_sleep_ms(300);
    uint64_t armed0 = rlk_pubsub_armed_sent(c->pubsub);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    join_waiters(w, t, N);
    for (int i = 1; i < N; i++) {
        assert_true(w[i - 1].acquired_at <= w[i].acquired_at);
    }
    /* No hand-off needed an attempt: at most the N - 1 re-arm attempts. */
    assert_true(rlk_pubsub_armed_sent(c->pubsub) - armed0 <= N - 1);
    rlock_free(l);
    rlock_client_free(c);
}

/* Publishes "grant <token> <wait> <tag>" on wake, as a release that grants the lock does, and
 * waits until the subscriber thread has read it. */
static void publish_grant(rh_server *s, rlock_client *c, const char *wake, int token, uint64_t wait,
                          const char *tag)
{
    char msg[256];
    snprintf(msg, sizeof(msg), "grant %d %llu %s", token, (unsigned long long)wait, tag);
    const char *pub[] = {"PUBLISH", wake, msg, NULL};
    uint64_t seen = rlk_pubsub_messages(c->pubsub);
    assert_int_equal(rh_cmd_int(s, pub), 1);
    int64_t deadline = rh_now_ms() + 5000;
    while (rlk_pubsub_messages(c->pubsub) == seen && rh_now_ms() < deadline) {
        rh_sleep_ms(1);
    }
    assert_true(rlk_pubsub_messages(c->pubsub) > seen);
}

/* A grant read while its waiter is between two attempts is kept for that wait; once the wait has
 * a new grant identity (rlk_armed_rewait, taken before every give-back), a grant for the old one
 * is never returned as a hold: the give-back may have released it. A grant naming the new
 * identity is. */
static void test_stale_grant_not_taken(void **state)
{
    rh_server *s = *state;
    rlock_client *c = cu_client(s);
    rlk_pubsub *ps = c->pubsub;
    const char *twin = "redisson_lock__channel:{armed:stale}";
    char wake[128], tag[128];
    snprintf(wake, sizeof(wake), "rlock_lock_wake:{armed:stale}:%s", c->uuid);
    snprintf(tag, sizeof(tag), "%s:77", c->uuid);
    rlk_sub *sub = NULL, *named = NULL;
    assert_int_equal(rlk_sub_join_pattern(ps, twin, strlen(twin), &sub), RLOCK_OK);
    assert_int_equal(rlk_sub_wait(ps, sub, 5000, NULL), RLK_WAIT_WOKEN); /* confirmed */
    assert_int_equal(rlk_sub_join_named(ps, wake, strlen(wake), twin, strlen(twin), &named),
                     RLOCK_OK);
    assert_true(tc_wait_numsub(s, wake, 1, 5000));
    rlk_armed *armed = NULL;
    char *cmd = strdup("PING");
    assert_int_equal(rlk_armed_new(cmd, 4, &armed), RLOCK_OK);
    rlk_armed_set_tag(armed, tag, strlen(tag), 41);

    /* Kept for the wait it names, and taken by its next wait. */
    publish_grant(s, c, wake, 7, 41, tag);
    assert_int_equal(rlk_sub_wait(ps, sub, 2000, armed), RLK_WAIT_GRANTED);
    assert_int_equal(rlk_armed_token(armed), 7);
    while (rlk_sub_wait(ps, sub, 100, NULL) == RLK_WAIT_WOKEN) {
        /* the permit each grant also gives */
    }

    /* Kept for 41, but the wait moved on to 42 before it slept again: not a hold. */
    publish_grant(s, c, wake, 8, 41, tag);
    rlk_armed_rewait(ps, sub, armed, strdup("PING"), 4, 0, 42);
    assert_int_not_equal(rlk_sub_wait(ps, sub, 300, armed), RLK_WAIT_GRANTED);
    assert_int_not_equal(rlk_sub_wait(ps, sub, 300, armed), RLK_WAIT_GRANTED);

    /* A grant of the new identity is. */
    publish_grant(s, c, wake, 9, 42, tag);
    assert_int_equal(rlk_sub_wait(ps, sub, 2000, armed), RLK_WAIT_GRANTED);
    assert_int_equal(rlk_armed_token(armed), 9);
    rlk_armed_end_wait(ps, sub, armed);
    rlk_armed_free(armed);
    rlk_sub_leave(ps, named);
    rlk_sub_leave(ps, sub);
    rlock_client_free(c);
}

TC_MAIN(tc_require_server, NULL, TC_SERVER_TEST(test_handoff_by_grant),
        TC_SERVER_TEST(test_noscript_reattempts), TC_SERVER_TEST(test_no_idle_connection),
        TC_SERVER_TEST(test_connection_lost_in_flight), TC_SERVER_TEST(test_fair_in_order),
        TC_SERVER_TEST(test_stale_grant_not_taken))
