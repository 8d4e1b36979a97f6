/*
 * The client-wide counters (issue 31), exact after known work on a fresh server each:
 * rlock_redis_commands_total against the server's own count of the scripts and subscriptions it
 * ran for the client (also an armed attempt, written by the subscriber thread),
 * rlock_reconnects_total after CLIENT KILL of the pooled and the subscriber connection,
 * rlock_pubsub_messages_total against the messages published to a waiter's channel, and
 * rlock_renewals_total ok and failed around a watchdog hold whose key was deleted, and around a
 * server paused for longer than a command's timeout (the renewal that times out counts failed,
 * and the hold survives the pause).
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "client.h"
#include "pubsub_armed.h"
#include "pubsub_conn.h"
#include "redis_harness.h"
#include "tc_metric.h"
#include "tc_redis.h"
#include "tc_thread.h"
#include "watchdog.h"

/* A client-wide counter (a sample without labels, or one label such as result="ok"). */
static long long counter(rlock_client *c, const char *name, const char *label)
{
    return tc_metric(c, name, label, NULL);
}

/* Polls counter(c, name, label) until it is at least want, at most 5 s; the last value read. */
static long long await_counter(rlock_client *c, const char *name, const char *label, long long want)
{
    long long v = counter(c, name, label);
    for (int64_t until = rh_now_ms() + 5000; v < want && rh_now_ms() < until;) {
        usleep(2000);
        v = counter(c, name, label);
    }
    return v;
}

/* The top-level commands the server ran for rlock clients: scripts (EVALSHA, EVAL, SCRIPT) and
 * subscriptions, which no script calls itself (INFO's total_commands_processed also counts a
 * script's redis.call()s). */
static long long server_script_calls(rh_server *s)
{
    long long n = 0;
    const char *cmds[] = {"evalsha",    "eval",        "script|load", "subscribe",
                          "psubscribe", "unsubscribe", "punsubscribe"};
    for (size_t i = 0; i < sizeof(cmds) / sizeof(cmds[0]); i++) {
        long long k = rh_cmdstat_calls(s, cmds[i]);
        assert_true(k >= 0);
        n += k;
    }
    return n;
}

/* Lock and unlock pairs send their scripts and nothing else: the client counts as many commands
 * as the server ran for it. */
static void test_commands_match_server(void **state)
{
    rh_server *s = *state;
    rlock_client *c = tc_client_tuned(s, 0, 0, NULL, NULL);
    rlock *l = tc_open(c, RLOCK_REENTRANT, "mc:cmd");
    tc_lock_unlock(l, 0, 10000); /* scripts loaded, a pooled connection open */
    long long m0 = counter(c, "rlock_redis_commands_total", NULL);
    long long s0 = server_script_calls(s);
    for (int i = 0; i < 10; i++) {
        assert_int_equal(rlock_try_lock(l, 0, 10000), RLOCK_OK);
        assert_int_equal(rlock_unlock(l), RLOCK_OK);
    }
    long long s1 = server_script_calls(s);
    long long m1 = counter(c, "rlock_redis_commands_total", NULL);
    assert_int_equal(s1 - s0, 20);
    assert_int_equal(m1 - m0, s1 - s0);
    rlock_free(l);
    rlock_client_free(c);
}

typedef struct handoff {
    rlock *l;
} handoff;

static int lock_then_unlock(void *arg)
{
    rlock *l = ((handoff *)arg)->l;
    int r = rlock_try_lock(l, 5000, 10000);
    return r != RLOCK_OK ? r : rlock_unlock(l);
}

/* A waiter of another client woken by a release message (the holder's hash deleted and "0"
 * published by hand, so that no grant names it): its subscriptions, its heartbeats and the
 * attempt its subscriber thread writes for it (armed) are commands too. The two clients count
 * together what the server ran for them. */
static void test_commands_in_handoff(void **state)
{
    rh_server *s = *state;
    rlock_client *a = tc_client_tuned(s, 0, 0, NULL, NULL);
    rlock_client *b = tc_client_tuned(s, 0, 0, NULL, NULL);
    rlock *la = tc_open(a, RLOCK_REENTRANT, "mc:hand");
    handoff w = {tc_open(b, RLOCK_REENTRANT, "mc:hand")};
    tc_lock_unlock(la, 0, 10000);
    tc_lock_unlock(w.l, 0, 10000);
    long long m0 = counter(a, "rlock_redis_commands_total", NULL) +
                   counter(b, "rlock_redis_commands_total", NULL);
    long long s0 = server_script_calls(s);
    uint64_t armed0 = rlk_pubsub_armed_sent(b->pubsub);
    assert_int_equal(rlock_try_lock(la, 0, 10000), RLOCK_OK);
    tc_bg bg;
    tc_bg_start(&bg, lock_then_unlock, &w);
    assert_true(tc_wait_listeners(s, "redisson_lock__channel:{mc:hand}", 1, 5000));
    rh_sleep_ms(100); /* asleep with its armed attempt */
    const char *del[] = {"DEL", "mc:hand", NULL};
    const char *pub[] = {"PUBLISH", "redisson_lock__channel:{mc:hand}", "0", NULL};
    assert_int_equal(rh_cmd_int(s, del), 1);
    assert_int_equal(rh_cmd_int(s, pub), 1);
    assert_int_equal(tc_bg_join(&bg), RLOCK_OK);
    assert_int_equal(rlk_pubsub_armed_sent(b->pubsub) - armed0, 1);
    assert_int_equal(rlock_unlock(la), RLOCK_ELOST); /* its hash was deleted under it */
    /* The waiter's channels are left after their linger: poll until those commands ran. */
    long long m1 = 0, s1 = 0;
    for (int64_t until = rh_now_ms() + 3000; rh_now_ms() < until;) {
        rh_sleep_ms(50);
        m1 = counter(a, "rlock_redis_commands_total", NULL) +
             counter(b, "rlock_redis_commands_total", NULL);
        s1 = server_script_calls(s);
        if (m1 - m0 == s1 - s0 && tc_listeners(s, "redisson_lock__channel:{mc:hand}") == 0) {
            break;
        }
    }
    assert_int_equal(m1 - m0, s1 - s0);
    rlock_free(la);
    rlock_free(w.l);
    rlock_client_free(a);
    rlock_client_free(b);
}

/* CLIENT KILL of every client connection (the pool's one and the idle subscriber's): the
 * subscriber dials again by itself, the pool when it is next used; two reconnects, no more. */
static void test_reconnects_after_kill(void **state)
{
    rh_server *s = *state;
    rlock_options o;
    tc_options(&o, s);
    o.pool_size = 1;
    rlock_client *c = tc_client(&o);
    rlock *l = tc_open(c, RLOCK_REENTRANT, "mc:kill");
    tc_lock_unlock(l, 0, 10000);
    for (int64_t until = rh_now_ms() + 5000; !rlk_pubsub_connected(c->pubsub);) {
        assert_true(rh_now_ms() < until);
        usleep(2000);
    }
    assert_int_equal(counter(c, "rlock_reconnects_total", NULL), 0);
    const char *kill[] = {"CLIENT", "KILL", "TYPE", "normal", NULL};
    assert_int_equal(rh_cmd_int(s, kill), 2);
    assert_int_equal(await_counter(c, "rlock_reconnects_total", NULL, 1), 1);
    /* A read, which is resent on a new connection when the idle one turns out closed. */
    assert_int_equal(rlock_is_locked(l), 0);
    assert_int_equal(await_counter(c, "rlock_reconnects_total", NULL, 2), 2);
    rh_sleep_ms(100);
    tc_lock_unlock(l, 0, 10000);
    assert_int_equal(counter(c, "rlock_reconnects_total", NULL), 2);
    rlock_free(l);
    rlock_client_free(c);
}

typedef struct awaiting {
    rlock_latch *l;
} awaiting;

static int await_call(void *arg)
{
    return rlock_latch_await(((awaiting *)arg)->l, 10000);
}

/* A latch waiter's channel gets three "1" (which wake nobody) and the count-down's "0": its
 * client received four messages; the counting-down client, subscribed to nothing, none. */
static void test_pubsub_messages(void **state)
{
    rh_server *s = *state;
    rlock_client *c = tc_client_tuned(s, 0, 0, NULL, NULL);
    rlock_client *d = tc_client_tuned(s, 0, 0, NULL, NULL);
    awaiting w = {rlock_latch_open(c, "mc:latch")};
    rlock_latch *down = rlock_latch_open(d, "mc:latch");
    assert_int_equal(rlock_latch_try_set_count(down, 1), 1);
    tc_bg bg;
    tc_bg_start(&bg, await_call, &w);
    const char *channel = "redisson_countdownlatch__channel__{mc:latch}";
    assert_true(tc_wait_numsub(s, channel, 1, 5000));
    const char *publish[] = {"PUBLISH", channel, "1", NULL};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(rh_cmd_int(s, publish), 1);
    }
    assert_int_equal(rlock_latch_count_down(down), RLOCK_OK);
    assert_int_equal(tc_bg_join(&bg), RLOCK_OK);
    assert_int_equal(await_counter(c, "rlock_pubsub_messages_total", NULL, 4), 4);
    assert_int_equal(counter(d, "rlock_pubsub_messages_total", NULL), 0);
    rlock_latch_free(w.l);
    rlock_latch_free(down);
    rlock_client_free(c);
    rlock_client_free(d);
}

static atomic_int g_lost;

static void on_lost(const char *name, void *user)
{
    (void)name;
    (void)user;
    atomic_fetch_add(&g_lost, 1);
}

/* A watchdog hold renewed every 100 ms, then its key deleted: every renewal before counts ok
 * (as many as the watchdog's own count), the one that finds the key gone counts failed. */
static void test_renewals(void **state)
{
    rh_server *s = *state;
    atomic_store(&g_lost, 0);
    rlock_client *c = tc_client_tuned(s, 300, 0, on_lost, NULL);
    rlock *l = tc_open(c, RLOCK_REENTRANT, "mc:renew");
    assert_int_equal(rlock_lock(l, -1), RLOCK_OK);
    assert_true(await_counter(c, "rlock_renewals_total", "result=\"ok\"", 2) >= 2);
    assert_int_equal(counter(c, "rlock_renewals_total", "result=\"failed\""), 0);
    const char *del[] = {"DEL", "mc:renew", NULL};
    assert_int_equal(rh_cmd_int(s, del), 1);
    for (int64_t until = rh_now_ms() + 5000; atomic_load(&g_lost) == 0;) {
        assert_true(rh_now_ms() < until);
        usleep(2000);
    }
    rlk_wd_stats st;
    rlk_wd_get_stats(c->watchdog, &st);
    assert_int_equal(counter(c, "rlock_renewals_total", "result=\"failed\""), 1);
    assert_int_equal(counter(c, "rlock_renewals_total", "result=\"ok\""), (long long)st.renewed);
    assert_int_equal(rlock_unlock(l), RLOCK_ELOST);
    rlock_free(l);
    rlock_client_free(c);
}

/* A watchdog hold (lease 4.5 s, renewed every 1.5 s, retried 500 ms after a failure) while the
 * server is paused for 1.8 s with a command timeout of 200 ms: a renewal falls due in the pause's
 * first 1.5 s and times out before it ends, so it counts failed; the renewals after the pause count
 * ok again, and the hold outlives the pause (its lease ends at least 1.2 s after the first retry
 * that can succeed): no loss, unlock OK. */
static void test_renewal_timed_out(void **state)
{
    rh_server *s = *state;
    atomic_store(&g_lost, 0);
    rlock_client *c = tc_client_tuned(s, 4500, 200, on_lost, NULL);
    rlock *l = tc_open(c, RLOCK_REENTRANT, "mc:renew-paused");
    assert_int_equal(rlock_lock(l, -1), RLOCK_OK);
    assert_true(await_counter(c, "rlock_renewals_total", "result=\"ok\"", 1) >= 1);
    assert_int_equal(rh_pause(s), 0);
    usleep(1800 * 1000);
    assert_int_equal(rh_resume(s), 0);
    assert_true(await_counter(c, "rlock_renewals_total", "result=\"failed\"", 1) >= 1);
    long long ok = counter(c, "rlock_renewals_total", "result=\"ok\"");
    assert_true(await_counter(c, "rlock_renewals_total", "result=\"ok\"", ok + 1) > ok);
    rlk_wd_stats st;
    rlk_wd_get_stats(c->watchdog, &st);
    print_message("renewals: %llu ok, %llu failed pipelines, lost %d\n",
                  (unsigned long long)st.renewed, (unsigned long long)st.failures,
                  atomic_load(&g_lost));
    assert_true(st.failures >= 1);
    assert_int_equal(atomic_load(&g_lost), 0);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    rlock_free(l);
    rlock_client_free(c);
}

TC_MAIN(tc_require_server, NULL, TC_SERVER_TEST(test_commands_match_server),
        TC_SERVER_TEST(test_commands_in_handoff), TC_SERVER_TEST(test_reconnects_after_kill),
        TC_SERVER_TEST(test_pubsub_messages), TC_SERVER_TEST(test_renewals),
        TC_SERVER_TEST(test_renewal_timed_out))
