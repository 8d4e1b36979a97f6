/*
 * No thundering herd on the reentrant lock (issue 18). Redisson's unlock message wakes one waiter
 * in every client that waits, so under N waiting processes each release cost N acquire attempts.
 * rlock's release names one waiting rlock thread on that thread's client's own wake channel,
 * rlock_lock_wake:{name}:<uuid>, and publishes Redisson's "0" only when a plain subscriber (a
 * Redisson waiter) listens: rlock waiters listen on Redisson's channel through a pattern, which
 * PUBSUB NUMSUB does not count. So one release reaches one client's subscriber, not N. Each
 * waiter here is its own client, as separate processes are; attempts are counted on the server
 * (INFO commandstats: EVALSHA = attempts + releases, since these waiters have a 60 s heartbeat
 * period and never give up), messages by the clients' subscribers. A waiter whose process is
 * killed while it waits must not strand the others.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "client.h"
#include "pubsub.h"
#include "re_common.h"
#include "scripts.h"
#include "tc_thread.h"

#define WAITERS  16
#define LEASE_MS 60000

static rh_server *g_srv; /* the group's server (tc_server_setup), set by each test */

/* One waiting client: its thread waits for the lock, then holds it until told to release. */
typedef struct herd_waiter {
    rlock_client *c;
    rlock *l;
    tc_holder h;
} herd_waiter;

static rlock_client *herd_client(int64_t waiter_timeout_ms)
{
    rlock_options o;
    tc_options(&o, g_srv);
    o.pool_size = 2;
    o.waiter_timeout_ms = waiter_timeout_ms;
    return tc_client(&o);
}

/* The holder: a client of its own in *hc (herd_client()) and its handle on name, holding it for
 * LEASE_MS. */
static rlock *herd_hold(const char *name, int64_t waiter_timeout_ms, rlock_client **hc)
{
    *hc = herd_client(waiter_timeout_ms);
    rlock *h = tc_open(*hc, RLOCK_REENTRANT, name);
    assert_int_equal(rlock_lock(h, LEASE_MS), RLOCK_OK);
    return h;
}

static void herd_start(herd_waiter *w, const char *name, int64_t waiter_timeout_ms)
{
    memset(w, 0, sizeof(*w));
    w->c = herd_client(waiter_timeout_ms);
    w->l = tc_open(w->c, RLOCK_REENTRANT, name);
    tc_holder_start(&w->h, w->l, 30000, LEASE_MS, -1);
}

static void herd_stop(herd_waiter *w)
{
    assert_int_equal(tc_holder_join(&w->h), RLOCK_OK);
    rlock_free(w->l);
    rlock_client_free(w->c);
}

static long long zcard_waiters(const char *name)
{
    char key[128];
    snprintf(key, sizeof(key), "rlock_lock_waiters:{%s}", name);
    const char *argv[] = {"ZCARD", key, NULL};
    return rh_cmd_int(g_srv, argv);
}

/* The clients' wake channels of name: PUBSUB CHANNELS rlock_lock_wake:{name}:*, with the glob
 * characters of name escaped. */
static long long wake_channels(const char *name)
{
    char esc[128];
    size_t n = 0;
    for (const char *p = name; *p != '\0' && n + 2 < sizeof(esc); p++) {
        if (strchr("*?[]\\", *p) != NULL) {
            esc[n++] = '\\';
        }
        esc[n++] = *p;
    }
    esc[n] = '\0';
    char pattern[160];
    snprintf(pattern, sizeof(pattern), "rlock_lock_wake:{%s}:*", esc);
    const char *argv[] = {"PUBSUB", "CHANNELS", pattern, NULL};
    return tc_array_len(g_srv, argv);
}

/* Waits until n threads wait on name: recorded in the zset, n clients listening on Redisson's
 * channel, none of them counted by NUMSUB (they listen through its pattern), and n wake
 * channels, one per client; then until their post-confirmation attempts are over (no script call
 * for 300 ms), leaving the statistics reset. */
static void wait_parked(const char *name, long long n)
{
    char ch[128];
    re_channel(name, ch, sizeof(ch));
    int64_t deadline = rh_now_ms() + 10000;
    while ((zcard_waiters(name) != n || tc_listeners(g_srv, ch) != n || wake_channels(name) != n) &&
           rh_now_ms() < deadline) {
        rh_sleep_ms(10);
    }
    assert_int_equal(zcard_waiters(name), n);
    assert_int_equal(tc_listeners(g_srv, ch), n);
    assert_int_equal(tc_numsub(g_srv, ch), 0);
    assert_int_equal(wake_channels(name), n);
    do {
        assert_int_equal(rh_reset_stats(g_srv), 0);
        rh_sleep_ms(300);
    } while (rh_cmdstat_calls(g_srv, "evalsha") != 0 && rh_now_ms() < deadline);
    assert_int_equal(rh_reset_stats(g_srv), 0);
}

/* Index of the one waiter that holds the lock, waiting up to 5 s for it; -1 if none. */
static int herd_holder(herd_waiter *w, int n, const int *done)
{
    int64_t deadline = rh_now_ms() + 5000;
    while (rh_now_ms() < deadline) {
        for (int i = 0; i < n; i++) {
            if (!done[i] && atomic_load(&w[i].h.got)) {
                return i;
            }
        }
        rh_sleep_ms(1);
    }
    return -1;
}

/* Acquire attempts since the last stats reset, given the releases made meanwhile. */
static long long attempts_since_reset(long long releases)
{
    return rh_cmdstat_calls(g_srv, "evalsha") - releases;
}

/* Messages the subscribers of the n waiting clients w have read so far. */
static uint64_t herd_messages(const herd_waiter *w, int n)
{
    uint64_t sum = 0;
    for (int i = 0; i < n; i++) {
        sum += rlk_pubsub_messages(w[i].c->pubsub);
    }
    return sum;
}

/* With 16 clients waiting, a release causes one acquire attempt (the named waiter's; two are
 * allowed for a stray wake-up on a loaded machine), not one per waiting client, and reaches one
 * client's subscriber (one message read in all, not 16 or 32); the rest of the crowd drains at
 * most two attempts per release (a named waiter between two attempts gets a permit instead, and
 * may meet a stray one) and one message per release, each waiter getting the lock once. */
static void test_release_wakes_one_client(void **state)
{
    g_srv = *state;
    const char *name = "re:herd";
    rlock_client *hc;
    rlock *h = herd_hold(name, 60000, &hc);
    /* This release loads the release script, so that no NOSCRIPT reply is counted as a call. */
    assert_int_equal(rlock_unlock(h), RLOCK_OK);
    assert_int_equal(rlock_lock(h, LEASE_MS), RLOCK_OK);
    herd_waiter w[WAITERS];
    int done[WAITERS] = {0};
    for (int i = 0; i < WAITERS; i++) {
        herd_start(&w[i], name, 60000);
    }
    wait_parked(name, WAITERS);
    uint64_t read0 = herd_messages(w, WAITERS);
    assert_int_equal(rlock_unlock(h), RLOCK_OK);
    int first = herd_holder(w, WAITERS, done);
    assert_true(first >= 0);
    rh_sleep_ms(300); /* any other client that was woken has attempted by now */
    long long first_attempts = attempts_since_reset(1);
    long long messages = rh_cmdstat_calls(g_srv, "publish");
    uint64_t first_read = herd_messages(w, WAITERS) - read0;

    /* The rest of the crowd: each holder releases in turn and exactly one other gets in. */
    assert_int_equal(rh_reset_stats(g_srv), 0);
    read0 = herd_messages(w, WAITERS);
    int cur = first;
    for (int k = 1; k < WAITERS; k++) {
        done[cur] = 1;
        atomic_store(&w[cur].h.release, 1);
        cur = herd_holder(w, WAITERS, done);
        assert_true(cur >= 0);
    }
    /* Read before the last release, which nobody waits for: its "0" goes to Redisson's channel,
     * where the clients whose wait just ended may still listen (lingering). */
    uint64_t drain_read = herd_messages(w, WAITERS) - read0;
    done[cur] = 1;
    atomic_store(&w[cur].h.release, 1);
    rh_sleep_ms(100);
    long long drain_attempts = attempts_since_reset(WAITERS);
    print_message("%d waiting clients: the first release caused %lld acquire attempt(s) (%lld "
                  "published, %llu read by subscribers); the next %d releases %lld attempts "
                  "(%llu read)\n",
                  WAITERS, first_attempts, messages, (unsigned long long)first_read, WAITERS - 1,
                  drain_attempts, (unsigned long long)drain_read);
    assert_true(first_attempts >= 1 && first_attempts <= 2);
    assert_int_equal(first_read, 1);
    assert_true(drain_attempts >= WAITERS - 1 && drain_attempts <= 2 * (WAITERS - 1));
    assert_true(drain_read <= (uint64_t)(WAITERS - 1));
    for (int i = 0; i < WAITERS; i++) {
        herd_stop(&w[i]);
    }
    assert_int_equal(zcard_waiters(name), 0);
    tc_close_own(h, hc);
}

/* A child process that, once go_fd reads end-of-file (the holder holds the lock), waits for name
 * with a 1 s waiter timeout until it is killed. It is forked before the parent starts any thread
 * (TSan supports no fork of a multi-threaded process). */
static pid_t spawn_waiter(const char *name, int go[2])
{
    pid_t pid = fork();
    if (pid == 0) {
        char b;
        close(go[1]);
        while (read(go[0], &b, 1) > 0) {
        }
        rlock_options o;
        tc_options(&o, g_srv);
        o.waiter_timeout_ms = 1000;
        rlock_client *c = tc_client_try(&o);
        rlock *l = c != NULL ? rlock_open(c, RLOCK_REENTRANT, name) : NULL;
        if (l == NULL) {
            _exit(2);
        }
        _exit(rlock_try_lock(l, 60000, LEASE_MS) == RLOCK_OK ? 0 : 1);
    }
    close(go[0]);
    return pid;
}

/* A waiter whose process is killed while it waits keeps its zset entry until its deadline, and
 * a release may name it; the live waiters' sleeps are bounded by waiter_timeout_ms (1 s here), so
 * they still get the lock within a few seconds, far below the holder's 60 s lease. */
static void test_killed_waiter_strands_nobody(void **state)
{
    g_srv = *state;
    const char *name = "re:herd:killed";
    int go[2];
    assert_int_equal(pipe(go), 0);
    pid_t child = spawn_waiter(name, go);
    assert_true(child > 0);
    rlock_client *hc;
    rlock *h = herd_hold(name, 1000, &hc);
    close(go[1]);
    int64_t deadline = rh_now_ms() + 10000;
    while (zcard_waiters(name) != 1 && rh_now_ms() < deadline) {
        rh_sleep_ms(10);
    }
    assert_int_equal(zcard_waiters(name), 1);
    herd_waiter w[2];
    for (int i = 0; i < 2; i++) {
        herd_start(&w[i], name, 1000);
    }
    wait_parked(name, 3);
    assert_int_equal(kill(child, SIGKILL), 0);
    int status = 0;
    assert_int_equal(waitpid(child, &status, 0), child);
    int64_t released = rh_now_ms();
    assert_int_equal(rlock_unlock(h), RLOCK_OK);
    int done[2] = {0};
    int first = herd_holder(w, 2, done);
    assert_true(first >= 0);
    done[first] = 1;
    atomic_store(&w[first].h.release, 1);
    int second = herd_holder(w, 2, done);
    assert_true(second >= 0);
    int64_t took = rh_now_ms() - released;
    print_message("a waiter killed while waiting: both live waiters got the lock within %lld ms "
                  "of the release\n",
                  (long long)took);
    assert_true(took < 5000);
    for (int i = 0; i < 2; i++) {
        herd_stop(&w[i]);
    }
    tc_close_own(h, hc);
}

/* A holder's client with name locked by it and one waiting client parked on name. */
static rlock *hold_with_waiter(const char *name, rlock_client **hc, herd_waiter *w)
{
    rlock *h = herd_hold(name, 60000, hc);
    herd_start(w, name, 60000);
    wait_parked(name, 1);
    return h;
}

/* The commands scripts may run on an uncontended pair, counted by INFO commandstats (which counts
 * the commands scripts call as well as EVALSHA). */
static const char *const g_pair_cmds[] = {
    "evalsha", "exists", "hexists", "hincrby", "del",  "publish",       "pexpire",      "pttl",
    "incr",    "set",    "get",     "time",    "zadd", "zrangebyscore", "pubsub|numsub"};
#define PAIR_CMDS (sizeof(g_pair_cmds) / sizeof(g_pair_cmds[0]))
#define PAIRS     20

static void pair_stats(long long *calls)
{
    for (size_t i = 0; i < PAIR_CMDS; i++) {
        calls[i] = rh_cmdstat_calls(g_srv, g_pair_cmds[i]);
    }
}

/* Redisson's pair, sent raw: lock_acquire and lock_release with Redisson's keys only. */
static void redisson_pairs(const char *name, const char *owner)
{
    redisContext *ctx = rh_connect(g_srv);
    assert_non_null(ctx);
    for (int i = 0; i < PAIRS; i++) {
        redisReply *r =
            redisCommand(ctx, "EVALSHA %s 2 %s redisson_lock_token:{%s} 30000 %s",
                         rlk_script_table[RLK_SCRIPT_LOCK_ACQUIRE].sha1, name, name, owner);
        assert_true(r != NULL && r->type == REDIS_REPLY_ARRAY);
        freeReplyObject(r);
        r = redisCommand(ctx, "EVALSHA %s 2 %s redisson_lock__channel:{%s} 30000 %s 0",
                         rlk_script_table[RLK_SCRIPT_LOCK_RELEASE].sha1, name, name, owner);
        assert_true(r != NULL && r->type == REDIS_REPLY_INTEGER && r->integer == 1);
        freeReplyObject(r);
    }
    redisFree(ctx);
}

/* A release nobody waits for runs the commands Redisson's does and no more: rlock's pair costs
 * Redis what Redisson's own pair costs, command for command (it used to run one EXISTS of the
 * waiters zset more per release). A lock that had waiters once still does, after they left. */
static void test_uncontended_release_runs_redissons_commands(void **state)
{
    g_srv = *state;
    const char *name = "re:herd:quiet";
    rlock_client *c;
    herd_waiter w;
    /* Loads both scripts, so that no NOSCRIPT reply is counted, and leaves a waiter's traces. */
    rlock *l = hold_with_waiter(name, &c, &w);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    herd_stop(&w);
    rh_sleep_ms(150); /* the wait's channels linger 100 ms */
    long long raw[PAIR_CMDS], lib[PAIR_CMDS];
    assert_int_equal(rh_reset_stats(g_srv), 0);
    redisson_pairs("re:herd:raw", "0b7e6a52-3f0c-4d8e-9a51-6c2f1e8d4b00:1");
    pair_stats(raw);
    assert_int_equal(rh_reset_stats(g_srv), 0);
    for (int i = 0; i < PAIRS; i++) {
        assert_int_equal(rlock_lock(l, 30000), RLOCK_OK);
        assert_int_equal(rlock_unlock(l), RLOCK_OK);
    }
    pair_stats(lib);
    for (size_t i = 0; i < PAIR_CMDS; i++) {
        print_message("%-14s Redisson's pairs %3lld, rlock's %3lld\n", g_pair_cmds[i], raw[i],
                      lib[i]);
    }
    for (size_t i = 0; i < PAIR_CMDS; i++) {
        assert_int_equal(lib[i], raw[i]);
    }
    assert_int_equal(lib[0], 2 * PAIRS);
    tc_close_own(l, c);
}

/* PUBLISH message on channel: the number of subscribers (plain or pattern) that received it. */
static long long publish(const char *channel)
{
    const char *argv[] = {"PUBLISH", channel, "0", NULL};
    return rh_cmd_int(g_srv, argv);
}

/* A lock name with glob characters: its waiter's pattern matches Redisson's channel of that name
 * and nothing else (the characters are escaped), and the waiter still gets the lock. */
static void test_glob_name_pattern_is_literal(void **state)
{
    g_srv = *state;
    const char *name = "re:glob*?[ab]";
    rlock_client *hc;
    herd_waiter w;
    rlock *h = hold_with_waiter(name, &hc, &w);
    /* What the pattern would match if "*", "?" and "[ab]" were left unescaped. */
    assert_int_equal(publish("redisson_lock__channel:{re:globXYa}"), 0);
    char ch[128];
    re_channel(name, ch, sizeof(ch));
    assert_int_equal(publish(ch), 1);
    assert_int_equal(rlock_unlock(h), RLOCK_OK);
    int done = 0;
    assert_int_equal(herd_holder(&w, 1, &done), 0);
    herd_stop(&w);
    tc_close_own(h, hc);
}

TC_MAIN(tc_server_setup, tc_server_teardown, cmocka_unit_test(test_release_wakes_one_client),
        cmocka_unit_test(test_killed_waiter_strands_nobody),
        cmocka_unit_test(test_glob_name_pattern_is_literal),
        cmocka_unit_test(test_uncontended_release_runs_redissons_commands))
