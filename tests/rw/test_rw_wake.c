/*
 * Who a read-write lock wakes among its waiting writers (issue 17 item 7): a release that may let
 * a writer in sends "0" to ONE waiting writer's private channel, the live one with the earliest
 * deadline (waking all of them cost each release N messages and N - 1 failed attempts); a writer
 * that gives up passes that wake-up on to another waiting writer, since it may have been the one
 * woken. Fake waiting writers are zset entries written through the admin connection; a raw
 * subscriber counts the messages on every writer channel.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <hiredis.h>

#include "rw_util.h"

static rh_server *g_srv;
static rlock_client *g_cli;

TC_FIXTURE(g_srv, g_cli, rw_pool)

/* The server's clock in ms (the writers' deadlines are on it). */
static long long server_now_ms(void)
{
    const char *argv[] = {"TIME", NULL};
    redisReply *r = rh_cmd(g_srv, argv);
    long long now;

    assert_non_null(r);
    assert_int_equal(r->type, REDIS_REPLY_ARRAY);
    now = atoll(r->element[0]->str) * 1000 + atoll(r->element[1]->str) / 1000;
    freeReplyObject(r);
    return now;
}

/* Records fake waiting writer `member` of lock `name` with a deadline `ahead_ms` from now. */
static void fake_writer(const char *name, const char *member, long long ahead_ms)
{
    char zset[128];
    char score[32];
    const char *argv[] = {"ZADD", zset, score, member, NULL};

    snprintf(zset, sizeof(zset), "rlock_rwlock_writers:{%s}", name);
    snprintf(score, sizeof(score), "%lld", server_now_ms() + ahead_ms);
    assert_int_equal(rh_cmd_int(g_srv, argv), 1);
}

/* A raw connection subscribed to every waiting writer's channel of `name`. */
static redisContext *watch_writers(const char *name)
{
    redisContext *c = rh_connect(g_srv);
    redisReply *r;

    assert_non_null(c);
    r = redisCommand(c, "PSUBSCRIBE rlock_rwlock_writer:{%s}:*", name);
    assert_non_null(r);
    freeReplyObject(r);
    return c;
}

/* Counts the messages that arrive within wait_ms; the channel of the last one goes to last. */
static int count_messages(redisContext *c, int64_t wait_ms, char *last, size_t last_size)
{
    struct timeval tv = {0, 50000};
    int64_t until = rh_now_ms() + wait_ms;
    int n = 0;

    redisSetTimeout(c, tv);
    while (rh_now_ms() < until) {
        redisReply *r = NULL;
        if (redisGetReply(c, (void **)&r) != REDIS_OK) {
            /* A read timeout leaves the context in error: reconnecting would lose the
             * subscription, so the caller's window is simply over. */
            break;
        }
        assert_int_equal(r->type, REDIS_REPLY_ARRAY);
        assert_int_equal(r->elements, 4); /* pmessage, pattern, channel, payload */
        assert_string_equal(r->element[3]->str, "0");
        snprintf(last, last_size, "%s", r->element[2]->str);
        n++;
        freeReplyObject(r);
    }
    return n;
}

/* Unlocks l (held) and asserts that the release sent exactly one wake-up, to the waiting writer
 * whose owner is writer. */
static void unlock_wakes(rlock *l, const char *name, const char *writer)
{
    char last[256] = "";
    char want[256];
    redisContext *sub = watch_writers(name);
    snprintf(want, sizeof(want), "rlock_rwlock_writer:{%s}:%s", name, writer);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(count_messages(sub, 500, last, sizeof(last)), 1);
    assert_string_equal(last, want);
    redisFree(sub);
}

/* A write release and a read release that frees the lock each wake one writer: the live one
 * with the earliest deadline, never a dead one (deadline passed) nor a later one. */
static void test_release_wakes_one_writer(void **state)
{
    const char *name = "rw:wake:one";
    rlock *w = rlock_open(g_cli, RLOCK_WRITE, name);
    rlock *r = rlock_open(g_cli, RLOCK_READ, name);
    (void)state;
    assert_non_null(w);
    assert_non_null(r);
    assert_int_equal(rlock_lock(w, 30000), RLOCK_OK);
    fake_writer(name, "dead:1:write", -1000);
    fake_writer(name, "first:1:write", 60000);
    fake_writer(name, "second:1:write", 70000);
    fake_writer(name, "third:1:write", 80000);
    unlock_wakes(w, name, "first:1:write");

    /* The fake writers keep new readers out: they leave, the read hold is taken, and two come
     * back behind it. */
    const char *del[] = {"DEL", "rlock_rwlock_writers:{rw:wake:one}", NULL};
    rh_cmd_int(g_srv, del);
    assert_int_equal(rlock_lock(r, 30000), RLOCK_OK);
    fake_writer(name, "later:1:write", 90000);
    fake_writer(name, "earlier:1:write", 50000);
    unlock_wakes(r, name, "earlier:1:write");
    rh_cmd_int(g_srv, del);
    rlock_free(w);
    rlock_free(r);
}

/* A waiting writer that gives up wakes one other waiting writer, which may have to take the
 * hand-off the leaver was sent. */
static void test_leaving_writer_passes_wake_on(void **state)
{
    const char *name = "rw:wake:leave";
    rlock *w = rlock_open(g_cli, RLOCK_WRITE, name);
    char last[256] = "";
    char want[256];
    rw_worker other;
    redisContext *sub;

    (void)state;
    assert_non_null(w);
    rw_worker_start(&other);
    assert_int_equal(rlock_lock(w, 30000), RLOCK_OK);
    fake_writer(name, "next:1:write", 60000);
    /* The worker thread waits as a writer and gives up after 300 ms. */
    rw_worker_post(&other, RW_OP_TRY, w, 300, 30000);
    rh_sleep_ms(100);
    sub = watch_writers(name);
    snprintf(want, sizeof(want), "rlock_rwlock_writer:{%s}:next:1:write", name);
    assert_int_equal(rw_worker_result(&other), RLOCK_ETIMEDOUT);
    assert_int_equal(count_messages(sub, 300, last, sizeof(last)), 1);
    assert_string_equal(last, want);
    redisFree(sub);
    assert_int_equal(rlock_unlock(w), RLOCK_OK);
    rw_worker_stop(&other);
    rlock_free(w);
}

TC_MAIN(setup, teardown, cmocka_unit_test(test_release_wakes_one_writer),
        cmocka_unit_test(test_leaving_writer_passes_wake_on))
