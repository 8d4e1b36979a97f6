/*
 * Waiting through pub/sub. Waiters join the lock's channel and re-attempt only when woken: by
 * their subscription's confirmation, by an unlock message, or when the holder's TTL (the bound
 * of every wait) runs out. These tests count what the waiters send, from the server's side
 * (INFO commandstats), and check that no subscription is leaked and that a killed subscriber
 * connection strands nobody.
 *
 * Every hold here has an explicit lease (20 s), so the watchdog sends nothing, and every test is
 * over long before a lease could run out: no wait here ever ends by its TTL bound.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "re_common.h"
#include "tc_thread.h"

#define LEASE_MS 20000
#define THREADS  8

static rh_server *g_srv;
static rlock_client *g_c;

/* Waiters record their liveness with a heartbeat every waiter_timeout_ms / 3 (a script call):
 * at 60 s, none falls into a test, so every EVALSHA counted here is an attempt or a release. */
static void tune(rlock_options *o)
{
    o->waiter_timeout_ms = 60000;
}

TC_FIXTURE(g_srv, g_c, tune)

/* ---- hand-over among 8 contending threads ----------------------------------------------- */

typedef struct {
    rlock *l;
    int rounds;
    int errors;
    atomic_int *inside; /* in-process overlap check, besides the Redis-side lock */
    int overlaps;
} contender;

static void *contender_main(void *arg)
{
    contender *w = arg;
    for (int i = 0; i < w->rounds; i++) {
        if (rlock_lock(w->l, LEASE_MS) != RLOCK_OK) {
            w->errors++;
            continue;
        }
        if (atomic_fetch_add(w->inside, 1) != 0) {
            w->overlaps++;
        }
        rh_sleep_ms(1);
        atomic_fetch_sub(w->inside, 1);
        if (rlock_unlock(w->l) != RLOCK_OK) {
            w->errors++;
        }
    }
    return NULL;
}

/*
 * 8 threads x ROUNDS lock/hold 1 ms/unlock on one handle. Upper bound on acquire attempts
 * (EVALSHA of lock_acquire), derived from the wait loop (src/locks/lock.c) and the subscriber
 * (src/notify/pubsub.c):
 *   - each lock() call makes one first attempt:                               calls
 *   - a call that finds the lock busy joins the channel once; joining gives that waiter at most
 *     one wake-up: either the SUBSCRIBE confirmation (which grants one permit per waiter
 *     present, each of whom joined in that subscription's lifetime) or, when the channel is
 *     already live, one permit at join time:                                   <= calls
 *   - each unlock publishes one "0" message, which this client's one subscriber connection
 *     turns into at most one permit, and, while threads wait, names one of them on rlock's
 *     wake channel first, which gives at most one more:                       <= PUBLISH count
 *   - a wait that ends by its TTL bound re-attempts once: none here (leases of 20 s, the test
 *     takes a few seconds; asserted below).
 * Every attempt consumes exactly one of these, so
 *   attempts <= 2 * calls + publishes.
 * EVALSHA also counts the releases: exactly one per unlock (= calls), so
 *   attempts = EVALSHA - calls.
 * A waiter that polled would exceed the bound by orders of magnitude.
 */
static void test_handoff_attempts_bounded(void **state)
{
    (void)state;
    const int rounds = 100;
    rlock *l = tc_open(g_c, RLOCK_REENTRANT, "re:wait:handoff");
    /* Load the scripts first so that no NOSCRIPT retry is counted. */
    assert_int_equal(rlock_lock(l, LEASE_MS), RLOCK_OK);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    assert_int_equal(rh_reset_stats(g_srv), 0);

    atomic_int inside;
    atomic_init(&inside, 0);
    contender w[THREADS];
    pthread_t t[THREADS];
    int64_t t0 = rh_now_ms();
    for (int i = 0; i < THREADS; i++) {
        w[i] = (contender){.l = l, .rounds = rounds, .inside = &inside};
        assert_int_equal(pthread_create(&t[i], NULL, contender_main, &w[i]), 0);
    }
    int errors = 0, overlaps = 0;
    for (int i = 0; i < THREADS; i++) {
        pthread_join(t[i], NULL);
        errors += w[i].errors;
        overlaps += w[i].overlaps;
    }
    int64_t took = rh_now_ms() - t0;
    long long calls = (long long)THREADS * rounds;
    long long evalsha = rh_cmdstat_calls(g_srv, "evalsha");
    long long publishes = rh_cmdstat_calls(g_srv, "publish");
    long long subscribes = rh_cmdstat_calls(g_srv, "subscribe");
    long long attempts = evalsha - calls;
    long long bound = 2 * calls + publishes;
    print_message("%d threads x %d: %lld acquisitions in %lld ms; %lld acquire attempts "
                  "(%.2f per acquisition, %lld beyond the first attempts), %lld unlock "
                  "messages, %lld SUBSCRIBEs; bound %lld\n",
                  THREADS, rounds, calls, (long long)took, attempts,
                  (double)attempts / (double)calls, attempts - calls, publishes, subscribes, bound);
    assert_int_equal(errors, 0);
    assert_int_equal(overlaps, 0);
    assert_true(publishes >= calls && publishes <= 2 * calls);
    assert_true(attempts >= calls);
    assert_true(attempts <= bound);
    /* No wait can have ended by its TTL bound: the whole run is shorter than any lease left. */
    assert_true(took < LEASE_MS / 2);
    /* After everyone left, the channel is gone from the server. */
    assert_int_equal(re_wait_no_channels(g_srv, 1000), 0);
    rlock_free(l);
}

/* ---- no traffic while waiting ----------------------------------------------------------- */

/* Four waiters on l, each of which takes it for 20 ms when it gets it. */
static void waiters_start(tc_holder w[4], rlock *l)
{
    for (int i = 0; i < 4; i++) {
        tc_holder_start(&w[i], l, 10000, LEASE_MS, 20);
    }
}

/* Joins the four waiters, asserts each got and released the lock and returns the last time one
 * of them got it (released if earlier). */
static int64_t waiters_join(tc_holder w[4], int64_t released)
{
    int64_t last = released;
    for (int i = 0; i < 4; i++) {
        assert_int_equal(tc_holder_join(&w[i]), RLOCK_OK);
        last = w[i].got_at > last ? w[i].got_at : last;
    }
    return last;
}

/* The lock name's handle on the group's client, and its channel in ch. */
static rlock *open_with_channel(const char *name, char *ch, size_t cap)
{
    re_channel(name, ch, cap);
    rlock *l = tc_open(g_c, RLOCK_REENTRANT, name);
    return l;
}

/* Waiters parked on a held lock send Redis nothing until they are woken. */
static void test_no_polling_while_waiting(void **state)
{
    (void)state;
    const char *name = "re:wait:idle";
    char ch[128];
    rlock *l = open_with_channel(name, ch, sizeof(ch));
    assert_int_equal(rlock_lock(l, LEASE_MS), RLOCK_OK);
    tc_holder w[4];
    waiters_start(w, l);
    assert_true(tc_wait_listeners(g_srv, ch, 1, 2000));
    rh_sleep_ms(200); /* let every waiter finish its post-confirmation attempt */
    assert_int_equal(rh_reset_stats(g_srv), 0);
    rh_sleep_ms(1500);
    long long sent = rh_cmdstat_calls(g_srv, "evalsha");
    print_message("4 parked waiters sent %lld scripts in 1.5 s\n", sent);
    assert_int_equal(sent, 0);
    int64_t released = rh_now_ms();
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    int64_t last = waiters_join(w, released);
    assert_true(last - released < 2000);
    assert_int_equal(re_wait_no_channels(g_srv, 1000), 0);
    rlock_free(l);
}

/* ---- the subscriber connection is killed while threads wait ----------------------------- */

static void kill_pubsub_round(rlock *l, const char *ch, int unlock_before_resubscribe)
{
    assert_int_equal(rlock_lock(l, LEASE_MS), RLOCK_OK);
    tc_holder w[4];
    waiters_start(w, l);
    assert_true(tc_wait_listeners(g_srv, ch, 1, 2000));
    rh_sleep_ms(100);
    const char *kill_cmd[] = {"CLIENT", "KILL", "TYPE", "pubsub", NULL};
    assert_true(rh_cmd_int(g_srv, kill_cmd) >= 1);
    if (!unlock_before_resubscribe) {
        assert_true(tc_wait_listeners(g_srv, ch, 1, 3000));
    }
    int64_t released = rh_now_ms();
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    int64_t last = waiters_join(w, released);
    print_message("subscriber killed (%s): all 4 waiters acquired within %lld ms of the unlock\n",
                  unlock_before_resubscribe ? "unlock published while it was down"
                                            : "unlock after it resubscribed",
                  (long long)(last - released));
    /* Far below the 20 s lease that bounds each wait: they were woken, not timed out. */
    assert_true(last - released < 3000);
}

static void test_client_kill_pubsub_strands_nobody(void **state)
{
    (void)state;
    const char *name = "re:wait:kill";
    char ch[128];
    rlock *l = open_with_channel(name, ch, sizeof(ch));
    kill_pubsub_round(l, ch, 1);
    kill_pubsub_round(l, ch, 0);
    assert_int_equal(re_wait_no_channels(g_srv, 1000), 0);
    rlock_free(l);
}

TC_MAIN(setup, teardown, cmocka_unit_test(test_handoff_attempts_bounded),
        cmocka_unit_test(test_no_polling_while_waiting),
        cmocka_unit_test(test_client_kill_pubsub_strands_nobody))
