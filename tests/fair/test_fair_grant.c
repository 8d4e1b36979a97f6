/*
 * Direct grants on the fair lock (issue 18). A full release whose first live waiter is an rlock
 * waiter that registered a grant TTL (rlock_lock_waiters:{name}:grants) grants it the lock inside
 * fair_release.lua and tells it on its own channel, so the waiter returns without an attempt.
 * Counted on the server (INFO commandstats: the waiters' heartbeats are 20 s apart, so every
 * EVALSHA here is an attempt or a release). A grant whose message is not seen is still taken
 * exactly once: by the waiter's give-up when its wait runs out, or after its subscriber
 * reconnects. Every lease (20 s) is within the waiter timeout (60 s), so a grant gives the whole
 * lease and no renewal follows.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "fair_common.h"
#include "lock.h"
#include "pubsub_armed.h"
#include "scripts.h"

#define WT       60000
#define LEASE_MS 20000
#define WAITERS  4

static rh_server *g_srv;

TC_SERVER_FIXTURE(g_srv)

/* One waiting client with its handle and the thread that waits (tc_holder). */
typedef struct fg_waiter {
    rlock_client *c;
    rlock *l;
    tc_holder h;
} fg_waiter;

/* The holder: a client of its own in *hc and its handle on name, holding it; the release script
 * is loaded by one lock/unlock first, so that no NOSCRIPT reply is counted. */
static rlock *fg_hold(const char *name, rlock_client **hc)
{
    *hc = fc_client(g_srv, WT);
    rlock *h = tc_open(*hc, RLOCK_FAIR, name);
    tc_lock_unlock(h, 0, LEASE_MS);
    assert_int_equal(rlock_lock(h, LEASE_MS), RLOCK_OK);
    return h;
}

/* Starts n waiting clients on name in arrival order (each visibly queued before the next), with
 * the given wait, then lets their first attempts settle. */
static void fg_start(fg_waiter *w, int n, const char *name, int64_t wait_ms)
{
    for (int i = 0; i < n; i++) {
        w[i].c = fc_client(g_srv, WT);
        w[i].l = tc_open(w[i].c, RLOCK_FAIR, name);
        tc_holder_start(&w[i].h, w[i].l, wait_ms, LEASE_MS, -1);
        assert_int_equal(fc_wait_llen(g_srv, name, i + 1, 5000), 0);
    }
    rh_sleep_ms(300);
}

static void fg_stop(fg_waiter *w)
{
    assert_int_equal(tc_holder_join(&w->h), RLOCK_OK);
    rlock_free(w->l);
    rlock_client_free(w->c);
}

/* Nothing of name is left: no lock, no queue, no grant entry. */
static void fg_assert_clean(const char *name)
{
    char grant[128];
    snprintf(grant, sizeof(grant), "rlock_lock_waiters:{%s}:grants", name);
    const char *exists[] = {"EXISTS", name, NULL};
    const char *hlen[] = {"HLEN", grant, NULL};
    assert_int_equal(rh_cmd_int(g_srv, exists), 0);
    assert_int_equal(fc_llen(g_srv, name), 0);
    assert_int_equal(rh_cmd_int(g_srv, hlen), 0);
}

/* A release to the first of 4 waiting clients grants it the lock: the only EVALSHA calls after
 * the release are the release itself and the re-arm attempt of the new first waiter (the grant
 * notifies it, as fair_acquire's grant does; that attempt finds the lock held). The granted
 * waiter's client sent no attempt (armed or not), and its token is the holder's plus one. */
static void test_release_grants_first_waiter(void **state)
{
    (void)state;
    const char *name = "fair:grant";
    rlock_client *hc;
    rlock *h = fg_hold(name, &hc);
    uint64_t token0 = rlock_token(h);
    fg_waiter w[WAITERS];
    fg_start(w, WAITERS, name, 30000);
    uint64_t armed0 = rlk_pubsub_armed_sent(w[0].c->pubsub);
    assert_int_equal(rh_reset_stats(g_srv), 0);
    assert_int_equal(rlock_unlock(h), RLOCK_OK);
    assert_int_equal(tc_holder_wait(&w[0].h, 5000), RLOCK_OK);
    rh_sleep_ms(200);
    long long evalsha = rh_cmdstat_calls(g_srv, "evalsha");
    /* The release alone: the granted waiter sends nothing, and the next waiter, an rlock waiter
     * registered for grants, is not re-armed (fair_release.lua). */
    print_message("a fair release to the first of %d waiting clients: %lld EVALSHA, armed "
                  "attempts of the granted client %llu\n",
                  WAITERS, evalsha,
                  (unsigned long long)(rlk_pubsub_armed_sent(w[0].c->pubsub) - armed0));
    assert_int_equal(evalsha, 1);
    assert_int_equal(rlk_pubsub_armed_sent(w[0].c->pubsub) - armed0, 0);
    assert_int_equal(w[0].h.token, token0 + 1);
    assert_int_equal(tc_hash_only_value(g_srv, name), 1);
    for (int i = 0; i < WAITERS; i++) {
        fg_stop(&w[i]); /* each release grants the next in line */
    }
    fg_assert_clean(name);
    tc_close_own(h, hc);
}

/* The race of a wait that runs out as the lock is granted: the holder releases through
 * fair_release.lua sent raw with a channel prefix nobody listens on, so the grant's message
 * reaches no one; the waiter's 1 s wait runs out and its give-up (fair_leave.lua) finds it
 * granted: rlock_try_lock() returns RLOCK_OK (rlock.h), with the grant's token and one hold. */
static void test_grant_as_wait_runs_out_is_taken(void **state)
{
    (void)state;
    const char *name = "fair:grant:late";
    rlock_client *hc;
    rlock *h = fg_hold(name, &hc);
    uint64_t token0 = rlock_token(h);
    fg_waiter w;
    fg_start(&w, 1, name, 1000);
    char owner[RLK_OWNER_MAX], queue[128], zset[128], unheard[128], token[128], grant[128];
    fc_owner(hc, owner);
    fc_queue_key(name, queue, sizeof(queue));
    fc_zset_key(name, zset, sizeof(zset));
    snprintf(unheard, sizeof(unheard), "rlock_unheard:{%s}", name);
    snprintf(token, sizeof(token), "redisson_lock_token:{%s}", name);
    snprintf(grant, sizeof(grant), "rlock_lock_waiters:{%s}:grants", name);
    const char *sha = rlk_script_table[RLK_SCRIPT_FAIR_RELEASE].sha1;
    const char *argv[] = {"EVALSHA", sha,   "6",     name,  queue, zset, unheard,
                          token,     grant, "20000", owner, "0",   NULL};
    assert_int_equal(rh_cmd_int(g_srv, argv), 1);
    assert_int_equal(tc_holder_wait(&w.h, 5000), RLOCK_OK);
    assert_int_equal(w.h.token, token0 + 1);
    assert_int_equal(tc_hash_only_value(g_srv, name), 1);
    fg_stop(&w);
    fg_assert_clean(name);
    tc_close_own(h, hc);
}

/* The waiting client's subscriber connection is killed right before the release: the grant's
 * message is lost (or read on the new connection), and the waiter still returns acquired, once,
 * with the grant's token. */
static void test_grant_survives_subscriber_kill(void **state)
{
    (void)state;
    const char *name = "fair:grant:kill";
    rlock_client *hc;
    rlock *h = fg_hold(name, &hc);
    uint64_t token0 = rlock_token(h);
    fg_waiter w;
    fg_start(&w, 1, name, 30000);
    tc_assert_grant_survives_pubsub_kill(g_srv, h, name, &w.h, token0);
    fg_stop(&w);
    fg_assert_clean(name);
    tc_close_own(h, hc);
}

TC_MAIN(setup, teardown, cmocka_unit_test(test_release_grants_first_waiter),
        cmocka_unit_test(test_grant_as_wait_runs_out_is_taken),
        cmocka_unit_test(test_grant_survives_subscriber_kill))
