/*
 * A loop waiter woken while one of its attempts is on its way (tl_loop.h: libuv or libevent)
 * against a real redis-server: when the release runs on Redis right after that attempt, the
 * release's message may come before the attempt's "busy" reply, and the waiter must attempt
 * again at once instead of sleeping until the holder's TTL or its own deadline. And the direct
 * grants between loop and threaded clients: a release grants the lock to a recorded waiter,
 * which returns with no command of its own; a grant no wait takes is given back; a waiter
 * that gave up is not granted; a Redisson subscriber still gets "0" and nobody a grant.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "tc_redis.h"
#include "tl_common.h"
#include "tl_loop.h"

/* Keeps Redis busy for about 300 ms (TIME advances inside a script since Redis 7). */
static const char *const spin_lua =
    "local t = redis.call('TIME') local s = t[1] * 1000000 + t[2] local n = 0 "
    "repeat n = n + 1 local u = redis.call('TIME') "
    "until (u[1] * 1000000 + u[2]) - s > 300000 or n > 50000000 return n";

/* Sends a command on c without reading its reply. */
static void send_only(redisContext *c, const char *cmd, const char *arg)
{
    assert_int_equal(redisAppendCommand(c, cmd, arg), REDIS_OK);
    int done = 0;
    while (!done) {
        assert_int_equal(redisBufferWrite(c, &done), REDIS_OK);
    }
}

static long long publish_wake(rh_server *s, const char *channel)
{
    const char *argv[] = {"PUBLISH", channel, "0", NULL};
    return rh_cmd_int(s, argv);
}

/* The waiter sleeps on the lock's channel; a wake-up that is not a release (a "0" published by
 * hand) makes it attempt while Redis is busy with a script; the holder's release reaches Redis
 * behind that attempt, both run in one turn of Redis' loop, and Redis writes the release's
 * message before the attempt's reply. The waiter must then take the lock within a round trip
 * or two, not after the holder's 60 s TTL or its own 20 s deadline. */
static void test_wake_during_attempt(void **state)
{
    rh_server *s = *state;
    tu_loop *l = tu_loop_new();
    assert_non_null(l);
    rlock_options o;
    tc_options(&o, s);
    rlock_client *w = NULL, *t = tc_client(&o);
    assert_int_equal(tu_client_new(l, &o, &w), RLOCK_OK);
    rlock *lw = tc_open(w, RLOCK_REENTRANT, "loop-wake"),
          *lt = tc_open(t, RLOCK_REENTRANT, "loop-wake");
    rlock_owner *ow = tl_owner(w);
    /* A first hold and release loads the release's script, so that the release below is one
     * EVALSHA, not a NOSCRIPT and a SCRIPT LOAD that would let the attempt's reply go first. */
    assert_int_equal(rlock_try_lock(lt, 0, 60000), RLOCK_OK);
    assert_int_equal(rlock_unlock(lt), RLOCK_OK);
    assert_int_equal(rlock_try_lock(lt, 0, 60000), RLOCK_OK);
    tl_done d = {0};
    rlock_lock_args a;
    rlock_lock_args_init(&a);
    a.owner = ow;
    a.wait_ms = 20000;
    a.lease_ms = 30000;
    assert_int_equal(rlock_lock_async(lw, &a, tl_lock_done, &d), RLOCK_OK);
    tl_run_for(l, 300); /* subscribed and asleep */
    assert_int_equal(d.calls, 0);
    assert_int_equal(publish_wake(s, "redisson_lock__channel:{loop-wake}"), 1);
    redisContext *busy = rh_connect(s);
    assert_non_null(busy);
    send_only(busy, "EVAL %s 0", spin_lua);
    usleep(20000);     /* the script runs */
    tl_run_for(l, 50); /* the waiter reads the wake-up and sends its attempt: it waits in Redis */
    assert_int_equal(d.calls, 0);
    assert_int_equal(rlock_unlock(lt), RLOCK_OK); /* behind the attempt */
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    assert_true(tu_run_until(l, &d.calls, 1, 3000));
    clock_gettime(CLOCK_MONOTONIC, &t1);
    assert_int_equal(d.rc, RLOCK_OK);
    assert_true(t1.tv_sec - t0.tv_sec < 3);
    redisReply *r = NULL;
    assert_int_equal(redisGetReply(busy, (void **)&r), REDIS_OK);
    assert_int_equal(r->type, REDIS_REPLY_INTEGER);
    freeReplyObject(r);
    redisFree(busy);
    assert_int_equal(rlock_try_lock(lt, 0, 30000), RLOCK_ETIMEDOUT); /* the loop owner holds */
    d.calls = 0;
    assert_int_equal(rlock_unlock_async(lw, ow, tl_lock_done, &d), RLOCK_OK);
    assert_true(tu_run_until(l, &d.calls, 1, 3000));
    assert_int_equal(d.rc, RLOCK_OK);
    rlock_owner_free(ow);
    rlock_free(lw);
    rlock_free(lt);
    rlock_client_free(w);
    rlock_client_free(t);
    assert_int_equal(tu_loop_close(l), 0);
}

/* The EVALSHA requests Redis has run. */
static long long evalsha_calls(rh_server *s)
{
    return rh_cmdstat_calls(s, "evalsha");
}

static long long counter(rh_server *s, const char *name)
{
    char key[128];
    snprintf(key, sizeof(key), "redisson_lock_token:{%s}", name);
    const char *argv[] = {"GET", key, NULL};
    char *v = rh_cmd_str(s, argv);
    long long n = v != NULL ? atoll(v) : -1;
    free(v);
    return n;
}

static long long pttl(rh_server *s, const char *key)
{
    const char *argv[] = {"PTTL", key, NULL};
    return rh_cmd_int(s, argv);
}

/* A threaded waiter on its own thread: rlock_try_lock(lock, 5 s, 4 s), then the EVALSHA count,
 * the token and the counter while it holds, then its unlock. */
typedef struct g_thread {
    rh_server *s;
    rlock *lock;
    int rc, unlock_rc;
    uint64_t token;
    long long calls, counter;
} g_thread;

static void *g_wait(void *arg)
{
    g_thread *t = arg;
    t->rc = rlock_try_lock(t->lock, 5000, 4000);
    t->calls = evalsha_calls(t->s);
    t->token = rlock_token(t->lock);
    t->counter = counter(t->s, "loop-grant");
    t->unlock_rc = rlock_unlock(t->lock);
    return NULL;
}

/* Starts a loop wait of o on lk with lease_ms and runs the loop until it is recorded. */
static void g_wait_async(tu_loop *l, rlock *lk, rlock_owner *o, int64_t lease_ms, tl_done *d)
{
    assert_int_equal(tl_lock_async(lk, o, 5000, lease_ms, NULL, d), RLOCK_OK);
    tl_run_for(l, 300);
    assert_int_equal(d->calls, 0);
}

/* Threaded holder -> loop waiter, loop holder -> loop waiter of another loop client, loop
 * holder -> threaded waiter: each waiter is granted the lock by the release (its token is the
 * counter's, and only the release ran a script: the waiter sent no attempt after it); a grant
 * whose TTL is short (waiter_timeout_ms 300) is renewed by the loop watchdog. */
static void test_grants(void **state)
{
    rh_server *s = *state;
    const char *name = "loop-grant";
    tu_loop *l = tu_loop_new();
    rlock_options o, shortw;
    tc_options(&o, s);
    tc_options(&shortw, s);
    shortw.waiter_timeout_ms = 300;
    rlock_client *t = tc_client(&o), *b = tl_client(l, &o), *c = tl_client(l, &shortw);
    rlock *lt = tc_open(t, RLOCK_REENTRANT, name), *lb = tc_open(b, RLOCK_REENTRANT, name),
          *lc = tc_open(c, RLOCK_REENTRANT, name);
    rlock_owner *ob = tl_owner(b), *oc = tl_owner(c);
    /* A hold and release first load the release's script: one EVALSHA per release below. */
    assert_int_equal(rlock_try_lock(lt, 0, 4000), RLOCK_OK);
    assert_int_equal(rlock_unlock(lt), RLOCK_OK);
    assert_int_equal(rlock_try_lock(lt, 0, 4000), RLOCK_OK);
    tl_done d = {0};
    g_wait_async(l, lb, ob, 4000, &d);
    long long calls = evalsha_calls(s);
    assert_int_equal(rlock_unlock(lt), RLOCK_OK);
    tl_wait_done(l, &d, RLOCK_OK);
    assert_int_equal(evalsha_calls(s) - calls, 1);
    assert_int_equal((long long)rlock_token_ex(lb, ob), counter(s, name));

    tl_done e = {0};
    g_wait_async(l, lc, oc, -1, &e);
    tl_unlock_now(l, lb, ob, RLOCK_OK);
    tl_wait_done(l, &e, RLOCK_OK);
    assert_int_equal((long long)rlock_token_ex(lc, oc), counter(s, name));
    tl_run_for(l, 400); /* past the grant TTL: renewed to the watchdog's 30 s */
    assert_true(pttl(s, name) > 1000);

    g_thread th = {.s = s, .lock = lt};
    pthread_t tid;
    assert_int_equal(pthread_create(&tid, NULL, g_wait, &th), 0);
    assert_true(tc_wait_listeners(s, "redisson_lock__channel:{loop-grant}", 1, 3000));
    tl_run_for(l, 200);
    calls = evalsha_calls(s);
    tl_unlock_now(l, lc, oc, RLOCK_OK);
    assert_int_equal(pthread_join(tid, NULL), 0);
    assert_int_equal(th.rc, RLOCK_OK);
    assert_int_equal(th.calls - calls, 1);
    assert_int_equal((long long)th.token, th.counter);
    assert_int_equal(th.unlock_rc, RLOCK_OK);
    rlock_owner_free(ob);
    rlock_owner_free(oc);
    rlock_free(lt);
    rlock_free(lb);
    rlock_free(lc);
    rlock_client_free(t);
    rlock_client_free(b);
    rlock_client_free(c);
    assert_int_equal(tu_loop_close(l), 0);
}

/* A grant to an owner of this client that no wait takes (made by hand, as a release makes it,
 * for an owner that waits no more) is given back: the lock passes on to the recorded waiter,
 * which is granted it. A waiter that was cancelled left the waiters: the release grants
 * nothing and the lock ends free. */
static void test_grant_given_back(void **state)
{
    rh_server *s = *state;
    const char *name = "loop-giveback";
    tu_loop *l = tu_loop_new();
    rlock_options o;
    tc_options(&o, s);
    rlock_client *a = tl_client(l, &o), *b = tl_client(l, &o);
    rlock *la = tc_open(a, RLOCK_REENTRANT, name), *lb = tc_open(b, RLOCK_REENTRANT, name);
    rlock_owner *oa = tl_owner(a), *ob = tl_owner(b), *gone = tl_owner(b);
    tl_lock_now(l, la, oa, 4000);
    tl_done d = {0};
    g_wait_async(l, lb, ob, 4000, &d);
    char wake[160], msg[160];
    const char *field = rlock_owner_id(gone);
    snprintf(wake, sizeof(wake), "rlock_lock_wake:{%s}:%.*s", name,
             (int)(strrchr(field, ':') - field), field);
    snprintf(msg, sizeof(msg), "grant 77 999999999 %s", field);
    const char *del[] = {"DEL", name, NULL};
    const char *hset[] = {"HSET", name, field, "1", NULL};
    const char *pub[] = {"PUBLISH", wake, msg, NULL};
    assert_int_equal(rh_cmd_int(s, del), 1); /* as a release that granted gone the lock */
    assert_int_equal(rh_cmd_int(s, hset), 1);
    int64_t t0 = tl_now_ms();
    assert_int_equal(rh_cmd_int(s, pub), 1);
    tl_wait_done(l, &d, RLOCK_OK);
    assert_true(d.at_ms - t0 < 1000); /* not at its deadline: the lock came by the give-back */
    tl_unlock_now(l, lb, ob, RLOCK_OK);

    tl_lock_now(l, la, oa, 4000);
    rlock_cancel *tok = NULL;
    assert_int_equal(rlock_cancel_new(&tok), RLOCK_OK);
    tl_done c = {0};
    assert_int_equal(tl_lock_async(lb, ob, 5000, 4000, tok, &c), RLOCK_OK);
    tl_run_for(l, 300);
    rlock_cancel_fire(tok);
    tl_wait_done(l, &c, RLOCK_ECANCELED);
    tl_unlock_now(l, la, oa, RLOCK_OK);
    const char *exists[] = {"EXISTS", name, NULL};
    assert_int_equal(rh_cmd_int(s, exists), 0);
    rlock_cancel_free(tok);
    rlock_owner_free(oa);
    rlock_owner_free(ob);
    rlock_owner_free(gone);
    rlock_free(la);
    rlock_free(lb);
    rlock_client_free(a);
    rlock_client_free(b);
    assert_int_equal(tu_loop_close(l), 0);
}

/* A Redisson waiter (a plain SUBSCRIBE on the channel) listens: a loop release publishes "0"
 * and grants nothing; the loop waiter takes the lock by an attempt of its own. */
static void test_redisson_listens(void **state)
{
    rh_server *s = *state;
    const char *name = "loop-grant-redisson";
    tu_loop *l = tu_loop_new();
    rlock_options o;
    tc_options(&o, s);
    rlock_client *a = tl_client(l, &o), *b = tl_client(l, &o);
    rlock *la = tc_open(a, RLOCK_REENTRANT, name), *lb = tc_open(b, RLOCK_REENTRANT, name);
    rlock_owner *oa = tl_owner(a), *ob = tl_owner(b);
    redisContext *sub = rh_connect(s);
    assert_non_null(sub);
    redisReply *r = redisCommand(sub, "SUBSCRIBE redisson_lock__channel:{%s}", name);
    assert_non_null(r);
    freeReplyObject(r);
    tl_lock_now(l, la, oa, 4000);
    tl_done d = {0};
    g_wait_async(l, lb, ob, 4000, &d);
    long long calls = evalsha_calls(s);
    tl_unlock_now(l, la, oa, RLOCK_OK);
    tl_wait_done(l, &d, RLOCK_OK);
    assert_true(evalsha_calls(s) - calls >= 2); /* the release, then the waiter's attempt */
    assert_int_equal(redisGetReply(sub, (void **)&r), REDIS_OK);
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    assert_int_equal(r->elements, 3);
    assert_string_equal(r->element[2]->str, "0");
    freeReplyObject(r);
    redisFree(sub);
    tl_unlock_now(l, lb, ob, RLOCK_OK);
    rlock_owner_free(oa);
    rlock_owner_free(ob);
    rlock_free(la);
    rlock_free(lb);
    rlock_client_free(a);
    rlock_client_free(b);
    assert_int_equal(tu_loop_close(l), 0);
}

TC_MAIN(tc_server_setup, tc_server_teardown, cmocka_unit_test(test_wake_during_attempt),
        cmocka_unit_test(test_grants), cmocka_unit_test(test_grant_given_back),
        cmocka_unit_test(test_redisson_listens))
