/*
 * A subscription that fails must fail its waiters, not leave them asleep without wake-ups:
 *  - an ACL user without the SUBSCRIBE command, or without access to the lock's channel: Redis
 *    refuses the SUBSCRIBE, and a waiter on a held lock returns RLOCK_EREDIS with Redis' NOPERM
 *    text at once (not at its deadline), the refusal is logged, and the next wait is refused the
 *    same way (nothing is left behind);
 *  - a fair waiter whose SUBSCRIBE is refused leaves the queue as it returns;
 *  - a RedLock waiter whose SUBSCRIBE is refused still pauses between rounds;
 *  - a SUBSCRIBE that Redis does not confirm within subscription_timeout_ms (the server is
 *    paused with CLIENT PAUSE ALL after the subscriber connected): the wait fails with
 *    RLOCK_ECONN and a message naming the option; once Redis answers again, waits work.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "client.h"
#include "core_util.h"
#include "pubsub_conn.h"
#include "tc_redis.h"
#include "pubsub_impl.h"

#define LEASE_MS 20000

static atomic_int refusals; /* WARN lines of the subscriber about a refused SUBSCRIBE */

static void on_log(int level, const char *msg, void *user)
{
    (void)user;
    if (level == RLOCK_LOG_WARN && strstr(msg, "SUBSCRIBE") != NULL &&
        strstr(msg, "refused") != NULL && strstr(msg, "NOPERM") != NULL) {
        atomic_fetch_add(&refusals, 1);
    }
}

/* Creates the ACL user rlk_acl (password pw) with the given rules after "on >pw ~* +@all". */
static void acl_user(rh_server *s, const char *rule1, const char *rule2)
{
    const char *setuser[] = {"ACL", "SETUSER", "rlk_acl", "reset", "on", ">pw",
                             "~*",  "+@all",   rule1,     rule2,   NULL};
    char *ok = rh_cmd_str(s, setuser);
    assert_non_null(ok);
    assert_string_equal(ok, "OK");
    free(ok);
}

/* A lock held by the default user (lease LEASE_MS), and a client of user rlk_acl (made with
 * acl_user()'s rules rule1 and rule2), logging to log_fn (or not), with its handle l on the same
 * lock, that is to wait for it. */
typedef struct acl_scene {
    rlock_client *holder_c;
    rlock *h;
    rlock_client *c;
    rlock *l;
} acl_scene;

static void acl_scene_open(acl_scene *sc, rh_server *s, const char *rule1, const char *rule2,
                           rlock_kind kind, const char *name,
                           void (*log_fn)(int level, const char *msg, void *user_data))
{
    acl_user(s, rule1, rule2);
    rlock_options o;
    cu_opts(&o, s);
    sc->holder_c = tc_client(&o);
    sc->h = rlock_open(sc->holder_c, kind, name);
    assert_int_equal(rlock_try_lock(sc->h, 0, LEASE_MS), RLOCK_OK);
    o.log_fn = log_fn;
    sc->c = tc_client_as(&o, s, "rlk_acl", "pw");
    sc->l = tc_open(sc->c, kind, name);
}

static void acl_scene_close(acl_scene *sc)
{
    rlock_free(sc->l);
    rlock_free(sc->h);
    rlock_client_free(sc->c);
    rlock_client_free(sc->holder_c);
}

/* A lock held by the default user, and a waiter as rlk_acl (rules rule1 and rule2): the wait
 * must end with EREDIS long before its deadline (the holder's lease is longer still), twice. */
static void check_refused_wait(rh_server *s, const char *rule1, const char *rule2)
{
    acl_scene sc;
    atomic_store(&refusals, 0);
    acl_scene_open(&sc, s, rule1, rule2, RLOCK_REENTRANT, "acl:held", on_log);
    rlock *l = sc.l;
    for (int round = 0; round < 2; round++) {
        int64_t t0 = rh_now_ms();
        int r = rlock_try_lock(l, 8000, LEASE_MS);
        int64_t took = rh_now_ms() - t0;
        print_message("round %d: %d (%s) after %lld ms\n", round, r, rlock_last_error(),
                      (long long)took);
        assert_int_equal(r, RLOCK_EREDIS);
        assert_non_null(strstr(rlock_last_error(), "NOPERM"));
        assert_true(took < 8000);
    }
    assert_true(atomic_load(&refusals) >= 2);
    assert_int_equal(rlk_pubsub_channel_count(sc.c->pubsub), 0);

    /* A lock that is free needs no subscription: the user can still take it (its unlock is
     * not checked: publishing the release needs the channel, which one of the users lacks). */
    assert_int_equal(rlock_unlock(sc.h), RLOCK_OK);
    assert_int_equal(rlock_try_lock(l, 8000, LEASE_MS), RLOCK_OK);
    acl_scene_close(&sc);
}

static void test_user_without_subscribe(void **state)
{
    check_refused_wait(*state, "-subscribe", "&*");
}

static void test_user_without_channels(void **state)
{
    check_refused_wait(*state, "resetchannels", "&other:*");
}

/* A fair waiter joins the queue before it subscribes to its own channel; when that SUBSCRIBE
 * is refused the waiter returns RLOCK_EREDIS and has left the queue, so it does not block the
 * waiters behind it. */
static void test_fair_waiter_leaves_queue(void **state)
{
    rh_server *s = *state;
    acl_scene sc;
    acl_scene_open(&sc, s, "-subscribe", "&*", RLOCK_FAIR, "acl:fair", NULL);
    rlock *l = sc.l;
    assert_int_equal(rlock_try_lock(l, 8000, LEASE_MS), RLOCK_EREDIS);
    assert_non_null(strstr(rlock_last_error(), "NOPERM"));
    const char *llen[] = {"LLEN", "redisson_lock_queue:{acl:fair}", NULL};
    assert_int_equal(rh_cmd_int(s, llen), 0);
    acl_scene_close(&sc);
}

/* RedLock waits between rounds with a random pause, ended early by the busy server's unlock
 * message. When that channel's SUBSCRIBE is refused the pause must still be taken: a refused
 * wait returns at once, and a round loop that skipped the pause would hammer the servers. Over
 * 1.5 s with pauses of at most 2 * redlock_server_timeout_ms (100 ms) a waiter makes at least
 * ~15 rounds, never hundreds. */
static void test_redlock_pauses_on_refused_subscribe(void **state)
{
    rh_server *s = *state;
    acl_scene sc;
    acl_scene_open(&sc, s, "-subscribe", "&*", RLOCK_REENTRANT, "acl:redlock", NULL);
    rlock *m = sc.l;
    rlock *rl = rlock_redlock_new(&m, 1);
    assert_non_null(rl);
    long long calls0 = rh_cmdstat_calls(s, "evalsha");
    assert_int_equal(rlock_try_lock(rl, 1500, LEASE_MS), RLOCK_ETIMEDOUT);
    long long calls = rh_cmdstat_calls(s, "evalsha") - calls0;
    print_message("RedLock rounds' EVALSHA calls in 1.5 s: %lld\n", calls);
    assert_in_range(calls, 5, 200);
    rlock_free(rl);
    acl_scene_close(&sc);
}

static int subscriber_connected(rlk_pubsub *ps)
{
    return rlk_pubsub_connected(ps);
}

/* A client on s whose SUBSCRIBEs time out after subscription_timeout_ms, returned once its
 * subscriber has connected (it does so by itself), so that a pause holds only SUBSCRIBEs. */
static rlock_client *subscribed_client(rh_server *s, int64_t subscription_timeout_ms)
{
    rlock_options o;
    cu_opts(&o, s);
    o.subscription_timeout_ms = subscription_timeout_ms;
    rlock_client *c = tc_client(&o);
    int64_t deadline = rh_now_ms() + 5000;
    while (!subscriber_connected(c->pubsub) && rh_now_ms() < deadline) {
        rh_sleep_ms(5);
    }
    assert_true(subscriber_connected(c->pubsub));
    return c;
}

/* CLIENT PAUSE ALL holds every command, SUBSCRIBE included, until it ends: with a 300 ms
 * subscription timeout the wait fails long before the pause (or the wait's own 5 s) is over. */
static void test_unconfirmed_subscribe(void **state)
{
    rh_server *s = *state;
    rlock_client *c = subscribed_client(s, 300);
    redisContext *raw = rh_connect(s);
    assert_non_null(raw);
    redisReply *rep = redisCommand(raw, "CLIENT PAUSE 2000 ALL");
    assert_true(rep != NULL && rep->type == REDIS_REPLY_STATUS);
    freeReplyObject(rep);
    int64_t paused_at = rh_now_ms();

    const char *channel = "unconfirmed";
    rlk_sub *sub = NULL;
    assert_int_equal(rlk_sub_join(c->pubsub, channel, strlen(channel), &sub), RLOCK_OK);
    int64_t t0 = rh_now_ms();
    int r = rlk_sub_wait(c->pubsub, sub, 5000, NULL);
    int64_t took = rh_now_ms() - t0;
    print_message("wait: %d (%s) after %lld ms\n", r, rlock_last_error(), (long long)took);
    assert_int_equal(r, RLOCK_ECONN);
    assert_non_null(strstr(rlock_last_error(), "subscription_timeout_ms"));
    rlk_sub_leave(c->pubsub, sub);

    /* After the pause the subscriber works again: a new wait is confirmed (a permit). */
    rh_sleep_ms(2000 - (rh_now_ms() - paused_at) + 100);
    assert_int_equal(rlk_sub_join(c->pubsub, "confirmed", 9, &sub), RLOCK_OK);
    assert_int_equal(rlk_sub_wait(c->pubsub, sub, 5000, NULL), 1);
    rlk_sub_leave(c->pubsub, sub);
    redisFree(raw);
    rlock_client_free(c);
}

TC_MAIN(tc_require_server, NULL, TC_SERVER_TEST(test_user_without_subscribe),
        TC_SERVER_TEST(test_user_without_channels), TC_SERVER_TEST(test_fair_waiter_leaves_queue),
        TC_SERVER_TEST(test_unconfirmed_subscribe),
        TC_SERVER_TEST(test_redlock_pauses_on_refused_subscribe))
