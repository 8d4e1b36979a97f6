/*
 * No thundering herd on the reentrant lock (issue 18). Redisson's unlock message wakes one waiter
 * in every client that waits, so under N waiting processes each release cost N acquire attempts.
 * rlock's release names one waiting rlock thread on that thread's client's own wake channel,
 * rlock_lock_wake:{name}:<uuid>, and publishes Redisson's "0" only when a plain subscriber (a
 * Redisson waiter) listens: rlock waiters listen on Redisson's channel through a pattern, which
 * PUBSUB NUMSUB does not count. So one release reaches one client's subscriber, not N, and
 * grants the lock to the waiter it names, which then sends no attempt at all. Each
 * waiter here is its own client, as separate processes are; attempts are counted on the server
 * (INFO commandstats: EVALSHA = attempts + releases, since these waiters have a 20 s heartbeat
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
#include "watchdog.h"

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

static void herd_start(herd_waiter *w, const char *name, int64_t waiter_timeout_ms,
                       int64_t lease_ms)
{
    memset(w, 0, sizeof(*w));
    w->c = herd_client(waiter_timeout_ms);
    w->l = tc_open(w->c, RLOCK_REENTRANT, name);
    tc_holder_start(&w->h, w->l, 30000, lease_ms, -1);
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
 * channels, one per client. Returns the deadline it used, 10 s from the call. */
static int64_t wait_listening(const char *name, long long n)
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
    return deadline;
}

/* wait_listening(), then until the waiters' post-confirmation attempts are over (no script call
 * for 300 ms), leaving the statistics reset. */
static void wait_parked(const char *name, long long n)
{
    int64_t deadline = wait_listening(name, n);
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

/* With 16 clients waiting, a release grants the lock to one of them (lua/lock_release.lua: the
 * waiters' 60 s lease is within their waiter timeout, so they registered a grant TTL): no acquire
 * attempt follows it at all, and it reaches one client's subscriber (one message read in all, not
 * 16 or 32). The granted waiter's token is the one after the holder's. The rest of the crowd
 * drains the same way, each waiter getting the lock once; two attempts in all are allowed for a
 * named waiter caught between two attempts (it gets a permit and attempts, which finds the
 * grant). */
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
        herd_start(&w[i], name, 60000, LEASE_MS);
    }
    wait_parked(name, WAITERS);
    uint64_t read0 = herd_messages(w, WAITERS);
    uint64_t token0 = rlock_token(h);
    assert_int_equal(rlock_unlock(h), RLOCK_OK);
    int first = herd_holder(w, WAITERS, done);
    assert_true(first >= 0);
    rh_sleep_ms(300); /* any other client that was woken has attempted by now */
    assert_int_equal(w[first].h.rc, RLOCK_OK);
    assert_int_equal(w[first].h.token, token0 + 1);
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
    assert_int_equal(first_attempts, 0);
    assert_int_equal(first_read, 1);
    assert_true(drain_attempts >= 0 && drain_attempts <= 2);
    assert_true(drain_read <= (uint64_t)(WAITERS - 1));
    for (int i = 0; i < WAITERS; i++) {
        herd_stop(&w[i]);
    }
    assert_int_equal(zcard_waiters(name), 0);
    tc_close_own(h, hc);
}

/* A child process that, once go_fd reads end-of-file (the holder holds the lock), waits for name
 * with waiter timeout wt_ms and lease lease_ms until it is killed. It is forked before the parent
 * starts any thread (TSan supports no fork of a multi-threaded process). */
static pid_t spawn_waiter(const char *name, int go[2], int64_t wt_ms, int64_t lease_ms)
{
    pid_t pid = fork();
    if (pid == 0) {
        char b;
        close(go[1]);
        while (read(go[0], &b, 1) > 0) {
        }
        rlock_options o;
        tc_options(&o, g_srv);
        o.waiter_timeout_ms = wt_ms;
        rlock_client *c = tc_client_try(&o);
        rlock *l = c != NULL ? rlock_open(c, RLOCK_REENTRANT, name) : NULL;
        if (l == NULL) {
            _exit(2);
        }
        _exit(rlock_try_lock(l, 60000, lease_ms) == RLOCK_OK ? 0 : 1);
    }
    close(go[0]);
    return pid;
}

/* 1 if a thread of client c holds name (its lock hash has a field "<c's uuid>:..."). */
static int held_by(const char *name, const rlock_client *c)
{
    const char *argv[] = {"HKEYS", name, NULL};
    redisReply *r = rh_cmd(g_srv, argv);
    int found = 0;
    size_t n = strlen(c->uuid);
    for (size_t i = 0; r != NULL && r->type == REDIS_REPLY_ARRAY && i < r->elements; i++) {
        const redisReply *f = r->element[i];
        found |= f->len > n && memcmp(f->str, c->uuid, n) == 0 && f->str[n] == ':';
    }
    freeReplyObject(r);
    return found;
}

/* A waiter whose process is killed while it waits keeps its zset entry until its deadline, and
 * a release may name it; the live waiters' sleeps are bounded by their waiter_timeout_ms (wt_ms),
 * so they still get the lock within a few of them, far below the holder's 60 s lease. The child
 * waits with waiter timeout child_wt_ms and lease lease_ms; < 0 (a watchdog hold, whose grant TTL
 * is child_wt_ms) lets the release GRANT the lock to the dead child. Returns how long the two live
 * waiters took to get the lock after the release; *child_granted tells whether the release granted
 * the lock to the child (the lock hash's field right after it is neither live waiter's). */
static int64_t killed_waiter_case(const char *name, int64_t wt_ms, int64_t child_wt_ms,
                                  int64_t lease_ms, int *child_granted)
{
    int go[2];
    assert_int_equal(pipe(go), 0);
    pid_t child = spawn_waiter(name, go, child_wt_ms, lease_ms);
    assert_true(child > 0);
    rlock_client *hc;
    rlock *h = herd_hold(name, wt_ms, &hc);
    close(go[1]);
    int64_t deadline = rh_now_ms() + 10000;
    while (zcard_waiters(name) != 1 && rh_now_ms() < deadline) {
        rh_sleep_ms(10);
    }
    assert_int_equal(zcard_waiters(name), 1);
    herd_waiter w[2];
    for (int i = 0; i < 2; i++) {
        herd_start(&w[i], name, wt_ms, lease_ms);
    }
    /* The child's heartbeats (every 67 ms with a 200 ms timeout) leave no quiet 300 ms: listening
     * is enough, since nothing here is counted; the waiters' first attempts are over long before
     * the 300 ms that the release waits. */
    (void)wait_listening(name, 3);
    rh_sleep_ms(300);
    assert_int_equal(kill(child, SIGKILL), 0);
    int status = 0;
    assert_int_equal(waitpid(child, &status, 0), child);
    int64_t released = rh_now_ms();
    assert_int_equal(rlock_unlock(h), RLOCK_OK);
    *child_granted = !held_by(name, w[0].c) && !held_by(name, w[1].c) && rlock_is_locked(h) == 1;
    int done[2] = {0};
    int first = herd_holder(w, 2, done);
    assert_true(first >= 0);
    done[first] = 1;
    atomic_store(&w[first].h.release, 1);
    int second = herd_holder(w, 2, done);
    assert_true(second >= 0);
    int64_t took = rh_now_ms() - released;
    for (int i = 0; i < 2; i++) {
        herd_stop(&w[i]);
    }
    tc_close_own(h, hc);
    return took;
}

static void test_killed_waiter_strands_nobody(void **state)
{
    g_srv = *state;
    int granted = 0;
    int64_t took = killed_waiter_case("re:herd:killed", 1000, 1000, LEASE_MS, &granted);
    print_message("a waiter killed while waiting (granted the lock: %d): both live waiters got "
                  "the lock within %lld ms of the release\n",
                  granted, (long long)took);
    assert_true(took < 5000);
}

/* The same with a grant: the child waits with a watchdog hold and a 200 ms waiter timeout (grant
 * TTL 200 ms), the live waiters with 1 s, so the child has the earliest deadline (at most 200 ms
 * ahead against at least 667) and the release grants it the lock. That grant holds the lock 200
 * ms at most: both live waiters are through within about 2 x 1 s (2.5 s allowed). */
static void test_grant_to_killed_waiter_is_bounded(void **state)
{
    g_srv = *state;
    int granted = 0;
    int64_t took = killed_waiter_case("re:herd:killed:grant", 1000, 200, -1, &granted);
    print_message("a waiter killed while waiting was granted the lock (%d): both live waiters got "
                  "it within %lld ms of the release (waiter timeout 1000 ms)\n",
                  granted, (long long)took);
    assert_true(granted);
    assert_true(took < 2500);
}

/* A holder's client with name locked by it and one waiting client parked on name. */
static rlock *hold_with_waiter(const char *name, rlock_client **hc, herd_waiter *w)
{
    rlock *h = herd_hold(name, 60000, hc);
    herd_start(w, name, 60000, LEASE_MS);
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

/* ---- grants whose message is not seen, and the grant's limits ------------------------------ */

/* The holder (client hc, this thread) releases name through lock_release.lua sent raw, with a wake
 * channel prefix nobody listens on: the release grants the lock as ever (its flag key is set so
 * that the script sees rlock waiters), but the grant's message reaches no subscriber. */
static void release_unheard(const rlock_client *hc, const char *name)
{
    char owner[128], wake[128], zset[128], token[128], grant[128], ch[128];
    snprintf(owner, sizeof(owner), "%s:%llu", hc->uuid, (unsigned long long)rlk_thread_id());
    snprintf(wake, sizeof(wake), "rlock_lock_unheard:{%s}", name);
    snprintf(zset, sizeof(zset), "rlock_lock_waiters:{%s}", name);
    snprintf(grant, sizeof(grant), "rlock_lock_waiters:{%s}:grants", name);
    re_token_key(name, token, sizeof(token));
    re_channel(name, ch, sizeof(ch));
    const char *set[] = {"SET", wake, "1", NULL};
    char *ok = rh_cmd_str(g_srv, set);
    assert_string_equal(ok, "OK");
    free(ok);
    const char *argv[] = {"EVALSHA", rlk_script_table[RLK_SCRIPT_LOCK_RELEASE].sha1,
                          "6",       name,
                          ch,        zset,
                          wake,      token,
                          grant,     "60000",
                          owner,     "0",
                          NULL};
    assert_int_equal(rh_cmd_int(g_srv, argv), 1);
}

/* A waiter (waiter timeout wt_ms, lease lease_ms, wait wait_ms) is granted the lock by a release
 * whose message it never hears. It still returns acquired, with the grant's token (the holder's
 * plus one) and one hold count on Redis, and it leaves no waiter entry, no grant entry and no
 * lock behind once it unlocks. Returns how long it took after the release. */
static int64_t grant_unseen_case(const char *name, int64_t wt_ms, int64_t lease_ms, int64_t wait_ms)
{
    rlock_client *hc;
    rlock *h = herd_hold(name, 60000, &hc);
    /* Loads the release script for release_unheard(). */
    assert_int_equal(rlock_unlock(h), RLOCK_OK);
    assert_int_equal(rlock_lock(h, LEASE_MS), RLOCK_OK);
    uint64_t token0 = rlock_token(h);
    herd_waiter w;
    memset(&w, 0, sizeof(w));
    w.c = herd_client(wt_ms);
    w.l = tc_open(w.c, RLOCK_REENTRANT, name);
    tc_holder_start(&w.h, w.l, wait_ms, lease_ms, -1);
    (void)wait_listening(name, 1);
    rh_sleep_ms(100); /* the waiter's attempt after its subscription is over */
    int64_t released = rh_now_ms();
    release_unheard(hc, name);
    assert_true(held_by(name, w.c));
    assert_int_equal(tc_holder_wait(&w.h, 10000), RLOCK_OK);
    int64_t took = rh_now_ms() - released;
    assert_int_equal(w.h.token, token0 + 1);
    assert_int_equal(tc_hash_only_value(g_srv, name), 1);
    herd_stop(&w);
    const char *exists[] = {"EXISTS", name, NULL};
    assert_int_equal(rh_cmd_int(g_srv, exists), 0);
    assert_int_equal(zcard_waiters(name), 0);
    char grant[128];
    snprintf(grant, sizeof(grant), "rlock_lock_waiters:{%s}:grants", name);
    const char *hlen[] = {"HLEN", grant, NULL};
    assert_int_equal(rh_cmd_int(g_srv, hlen), 0);
    tc_close_own(h, hc);
    return took;
}

/* The race of a wait that runs out as the lock is granted: the waiter (a 1 s try_lock) never hears
 * its grant, its wait ends, and its give-up (lock_waiter_leave.lua) finds it granted: the call
 * returns RLOCK_OK, as rlock.h says, and the lock is never left held by a thread that does not
 * know it holds it. */
static void test_grant_as_wait_runs_out_is_taken(void **state)
{
    g_srv = *state;
    int64_t took = grant_unseen_case("re:grant:late", 60000, LEASE_MS, 1000);
    print_message("a grant the waiter never heard, its wait running out: acquired %lld ms after "
                  "the release\n",
                  (long long)took);
}

/* A grant whose message is lost, found by the waiter's next attempt: the waiter (waiter timeout
 * and lease 2 s, so a grant TTL of 2 s) sleeps at most its waiter timeout, and its attempt finds
 * its own field in the lock hash: acquired, with no second hold count and no new token. */
static void test_grant_unheard_found_by_next_attempt(void **state)
{
    g_srv = *state;
    int64_t took = grant_unseen_case("re:grant:attempt", 2000, 2000, 30000);
    print_message("a grant the waiter never heard: its next attempt found it %lld ms after the "
                  "release\n",
                  (long long)took);
    assert_true(took < 4000);
}

/* The subscriber connection of the waiting client is killed right before the release: the grant's
 * message is lost (or read on the new connection), and the waiter still returns acquired, with the
 * grant's token and one hold count. */
static void test_grant_survives_subscriber_kill(void **state)
{
    g_srv = *state;
    const char *name = "re:grant:kill";
    rlock_client *hc;
    herd_waiter w;
    rlock *h = hold_with_waiter(name, &hc, &w);
    uint64_t token0 = rlock_token(h);
    tc_assert_grant_survives_pubsub_kill(g_srv, h, name, &w.h, token0);
    herd_stop(&w);
    tc_close_own(h, hc);
}

/* A waiter with a lease longer than its waiter timeout (1 s) registers a grant TTL of 1 s: within a
 * third of it after the grant its client extends the hold to the lease, without the lock call
 * waiting for it, so the hold outlives the grant TTL. A watchdog hold (lease_ms < 0) is renewed by
 * the watchdog from then on (30 s); an explicit lease by one renewal, after which the watchdog
 * holds nothing. */
static void grant_extended_case(const char *name, int64_t lease_ms)
{
    rlock_client *hc;
    rlock *h = herd_hold(name, 60000, &hc);
    herd_waiter w;
    herd_start(&w, name, 1000, lease_ms);
    (void)wait_listening(name, 1);
    rh_sleep_ms(100);
    assert_int_equal(rlock_unlock(h), RLOCK_OK);
    assert_int_equal(tc_holder_wait(&w.h, 5000), RLOCK_OK);
    rh_sleep_ms(700); /* the renewal is due 333 ms after the grant */
    const char *pttl[] = {"PTTL", name, NULL};
    long long left = rh_cmd_int(g_srv, pttl);
    print_message("a hold (lease %lld) granted with a 1 s grant TTL: PTTL %lld ms 700 ms later\n",
                  (long long)lease_ms, left);
    assert_true(left > 5000);
    /* An explicit lease still ends lease_ms after the grant: the renewal sets what is left. */
    assert_true(lease_ms < 0 || left <= lease_ms - 700 + 100);
    rh_sleep_ms(600); /* past the grant TTL */
    assert_true(held_by(name, w.c));
    rlk_wd_stats st;
    rlk_wd_get_stats(w.c->watchdog, &st);
    assert_int_equal(st.registered, lease_ms < 0 ? 1 : 0);
    herd_stop(&w);
    tc_close_own(h, hc);
}

static void test_grant_watchdog_hold_renewed(void **state)
{
    g_srv = *state;
    grant_extended_case("re:grant:watchdog", -1);
}

static void test_grant_long_lease_renewed_once(void **state)
{
    g_srv = *state;
    grant_extended_case("re:grant:lease", 10000);
}

/* With a Redisson-protocol waiter subscribed to the lock's channel, a release grants nothing:
 * it publishes Redisson's "0" as before, and the rlock waiter it names attempts (one EVALSHA
 * beyond the release) and gets the lock that way. */
static void test_redisson_subscriber_means_no_grant(void **state)
{
    g_srv = *state;
    const char *name = "re:grant:redisson";
    rlock_client *hc;
    herd_waiter w;
    rlock *h = hold_with_waiter(name, &hc, &w);
    char ch[128];
    re_channel(name, ch, sizeof(ch));
    redisContext *sub = rh_connect(g_srv);
    assert_non_null(sub);
    redisReply *r = redisCommand(sub, "SUBSCRIBE %s", ch);
    assert_non_null(r);
    freeReplyObject(r);
    assert_true(tc_wait_numsub(g_srv, ch, 1, 5000));
    assert_int_equal(rh_reset_stats(g_srv), 0);
    assert_int_equal(rlock_unlock(h), RLOCK_OK);
    assert_int_equal(tc_holder_wait(&w.h, 5000), RLOCK_OK);
    rh_sleep_ms(100);
    assert_true(attempts_since_reset(1) >= 1);
    r = NULL;
    assert_int_equal(redisGetReply(sub, (void **)&r), REDIS_OK);
    assert_true(r->type == REDIS_REPLY_ARRAY && r->elements == 3);
    assert_string_equal(r->element[2]->str, "0");
    freeReplyObject(r);
    redisFree(sub);
    herd_stop(&w);
    tc_close_own(h, hc);
}

TC_MAIN(tc_server_setup, tc_server_teardown, cmocka_unit_test(test_release_wakes_one_client),
        cmocka_unit_test(test_killed_waiter_strands_nobody),
        cmocka_unit_test(test_grant_to_killed_waiter_is_bounded),
        cmocka_unit_test(test_glob_name_pattern_is_literal),
        cmocka_unit_test(test_grant_as_wait_runs_out_is_taken),
        cmocka_unit_test(test_grant_unheard_found_by_next_attempt),
        cmocka_unit_test(test_grant_survives_subscriber_kill),
        cmocka_unit_test(test_grant_watchdog_hold_renewed),
        cmocka_unit_test(test_grant_long_lease_renewed_once),
        cmocka_unit_test(test_redisson_subscriber_means_no_grant),
        cmocka_unit_test(test_uncontended_release_runs_redissons_commands))
