/*
 * A loop waiter woken while one of its attempts is on its way (tl_loop.h: libuv or libevent)
 * against a real redis-server: when the release runs on Redis right after that attempt, the
 * release's message may come before the attempt's "busy" reply, and the waiter must attempt
 * again at once instead of sleeping until the holder's TTL or its own deadline.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
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

TC_MAIN(tc_server_setup, tc_server_teardown, cmocka_unit_test(test_wake_during_attempt))
