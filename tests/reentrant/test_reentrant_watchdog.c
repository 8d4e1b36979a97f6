/*
 * The watchdog keeps holds taken without a lease alive, and only those: with
 * watchdog_timeout_ms = 1500 (renewal every 500 ms)
 *  - a holder process killed with SIGKILL stops renewing, so its lock frees itself within the
 *    1500 ms lease of its last renewal (plus a tick of slack), and not much earlier;
 *  - a hold kept for 10 s without unlock stays held with a live lease all along;
 *  - 10,000 holds in one process are all kept alive over 3 renewal rounds, renewed in batches of
 *    up to 100 keys per script call, a few pipelines (round trips) per round;
 *  - unlock unregisters a hold before it returns, and unlocking 10,000 holds while their
 *    renewals run reports none of them lost;
 *  - a sweep whose batches are all answered NOSCRIPT loads the script and resends them.
 *
 * The SIGKILL test forks, so it runs first, before any test of this program has created a
 * thread (every later test frees its client, which joins the client's threads).
 */
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "client.h"
#include "re_common.h"
#include "scripts.h"
#include "watchdog.h"

#define WD_MS     1500
#define PERIOD_MS (WD_MS / 3)
#define TICK_MS   10 /* the watchdog's wheel tick (RLK_WD_TICK_MS in src/notify/watchdog.c) */

static rh_server *g_srv;

TC_SERVER_FIXTURE(g_srv)

/* ---- SIGKILL of a holder process -------------------------------------------------------- */

static int g_pipe[2];

/* Child: takes the lock with the watchdog, reports "locked" through the pipe, then sleeps
 * until it is killed. */
static int holder_child(void *arg)
{
    (void)arg;
    close(g_pipe[0]);
    rlock_client *c = tc_client_ex(g_srv, WD_MS, 0, NULL, NULL);
    rlock *l = c != NULL ? rlock_open(c, RLOCK_REENTRANT, "re:wd:killed") : NULL;
    if (l == NULL || rlock_lock(l, -1) != RLOCK_OK) {
        return 1;
    }
    char b = 'L';
    if (write(g_pipe[1], &b, 1) != 1) {
        return 1;
    }
    for (;;) {
        pause();
    }
}

static void test_sigkill_holder_frees_lock(void **state)
{
    (void)state;
    assert_int_equal(pipe(g_pipe), 0);
    pid_t kid = rh_fork_child(holder_child, NULL);
    assert_true(kid > 0);
    close(g_pipe[1]);
    struct pollfd pfd = {.fd = g_pipe[0], .events = POLLIN};
    assert_int_equal(poll(&pfd, 1, 10000), 1);
    char b = 0;
    assert_int_equal(read(g_pipe[0], &b, 1), 1);
    close(g_pipe[0]);

    /* Held past its first lease: the child's watchdog is renewing it. */
    rh_sleep_ms(WD_MS + 700);
    const char *exists[] = {"EXISTS", "re:wd:killed", NULL};
    const char *pttl[] = {"PTTL", "re:wd:killed", NULL};
    assert_int_equal(rh_cmd_int(g_srv, exists), 1);
    long long ttl = rh_cmd_int(g_srv, pttl);
    assert_true(ttl > 0 && ttl <= WD_MS);

    assert_int_equal(kill(kid, SIGKILL), 0);
    int64_t killed_at = rh_now_ms();
    assert_int_equal(rh_wait_child(kid, 5000), 128 + SIGKILL);
    long long ttl_at_kill = rh_cmd_int(g_srv, pttl);

    /* Another client waits for it (woken by the TTL bound: nobody publishes an unlock). */
    rlock_client *c = tc_client_tuned(g_srv, WD_MS, 0, NULL, NULL);
    rlock *l = tc_open(c, RLOCK_REENTRANT, "re:wd:killed");
    assert_int_equal(rlock_is_locked(l), 1);
    assert_int_equal(rlock_try_lock(l, 5000, -1), RLOCK_OK);
    int64_t freed_after = rh_now_ms() - killed_at;
    print_message("SIGKILLed holder: lease left at kill %lld ms; lock taken by another client "
                  "%lld ms after the kill\n",
                  ttl_at_kill, (long long)freed_after);
    /* The last renewal was at most one period (+ a tick) before the kill, so at least
     * WD_MS - PERIOD_MS - TICK_MS of lease was left; at most WD_MS. */
    assert_true(freed_after >= WD_MS - PERIOD_MS - 2 * TICK_MS);
    assert_true(freed_after <= WD_MS + TICK_MS + 100);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    rlock_free(l);
    rlock_client_free(c);
}

/* ---- a long hold ------------------------------------------------------------------------ */

static void test_hold_10s_stays_held(void **state)
{
    (void)state;
    rlock_client *c = tc_client_tuned(g_srv, WD_MS, 0, NULL, NULL);
    rlock *l = tc_open(c, RLOCK_REENTRANT, "re:wd:long");
    assert_int_equal(rlock_lock(l, -1), RLOCK_OK);
    int64_t start = rh_now_ms();
    int64_t min_ttl = WD_MS;
    int samples = 0;
    while (rh_now_ms() - start < 10000) {
        assert_int_equal(rlock_is_held(l), 1);
        int64_t ttl = rlock_remaining_ttl_ms(l);
        assert_true(ttl > 0 && ttl <= WD_MS);
        min_ttl = ttl < min_ttl ? ttl : min_ttl;
        samples++;
        rh_sleep_ms(100);
    }
    rlk_wd_stats st;
    rlk_wd_get_stats(c->watchdog, &st);
    print_message("10 s hold: %d samples, lowest TTL seen %lld ms, %llu renewals, %llu lost\n",
                  samples, (long long)min_ttl, (unsigned long long)st.renewed,
                  (unsigned long long)st.lost);
    /* Renewed every 500 ms: about 20 renewals in 10 s, never lower than a period's worth of
     * lease below the full lease (plus generous scheduling slack). */
    assert_true(st.renewed >= 10000 / (PERIOD_MS + 50) - 1);
    assert_int_equal(st.lost, 0);
    assert_true(min_ttl >= WD_MS - PERIOD_MS - 300);
    assert_int_equal(rlock_unlock(l), RLOCK_OK);
    rlk_wd_get_stats(c->watchdog, &st);
    assert_int_equal(st.registered, 0);
    assert_int_equal(rlock_is_locked(l), 0);
    rlock_free(l);
    rlock_client_free(c);
}

/* ---- 10,000 holds ----------------------------------------------------------------------- */

#define MANY 10000

/* EXISTS over all MANY keys in one binary-safe command; returns how many exist. */
static long long count_existing(redisContext *ctx, char (*names)[32])
{
    const char **argv = malloc(sizeof(const char *) * (MANY + 1));
    assert_non_null(argv);
    argv[0] = "EXISTS";
    for (int i = 0; i < MANY; i++) {
        argv[i + 1] = names[i];
    }
    long long n = tc_int(ctx, MANY + 1, argv);
    free(argv);
    return n;
}

static void test_10000_holds_batched(void **state)
{
    (void)state;
    rlock_client *c = tc_client_tuned(g_srv, WD_MS, 0, NULL, NULL);
    char(*names)[32] = calloc(MANY, 32);
    rlock **locks = calloc(MANY, sizeof(rlock *));
    assert_non_null(names);
    assert_non_null(locks);
    redisContext *ctx = rh_connect(g_srv);
    assert_non_null(ctx);

    int64_t t0 = rh_now_ms();
    for (int i = 0; i < MANY; i++) {
        snprintf(names[i], 32, "re:wd:many:%d", i);
        locks[i] = tc_open(c, RLOCK_REENTRANT, names[i]);
        assert_int_equal(rlock_lock(locks[i], -1), RLOCK_OK);
    }
    int64_t span = rh_now_ms() - t0;
    rlk_wd_stats s0, s1;
    rlk_wd_get_stats(c->watchdog, &s0);
    assert_int_equal(s0.registered, MANY);
    long long evalsha0 = rh_cmdstat_calls(g_srv, "evalsha");
    int64_t w0 = rh_now_ms();

    /* Three full renewal rounds after the last lock: every hold renewed three more times. */
    int64_t deadline = rh_now_ms() + 3 * (int64_t)PERIOD_MS + 3000;
    do {
        rh_sleep_ms(50);
        rlk_wd_get_stats(c->watchdog, &s1);
    } while (s1.renewed - s0.renewed < 3 * (uint64_t)MANY && rh_now_ms() < deadline);
    int64_t window = rh_now_ms() - w0;
    long long evalsha1 = rh_cmdstat_calls(g_srv, "evalsha");
    long long alive = count_existing(ctx, names);
    uint64_t renewed = s1.renewed - s0.renewed, pipelines = s1.pipelines - s0.pipelines;
    uint64_t batches = s1.batches - s0.batches;
    double rounds = (double)renewed / MANY;
    print_message("%d holds locked in %lld ms; over the next %lld ms: %llu renewals (%.2f rounds) "
                  "in %llu batches (%.1f/round), %llu pipelines (%.1f/round), %llu EVALSHA seen "
                  "by Redis, lost %llu, failures %llu; %lld keys alive\n",
                  MANY, (long long)span, (long long)window, (unsigned long long)renewed, rounds,
                  (unsigned long long)batches, (double)batches / rounds,
                  (unsigned long long)pipelines, (double)pipelines / rounds, evalsha1 - evalsha0,
                  (unsigned long long)s1.lost, (unsigned long long)s1.failures, alive);
    assert_true(renewed >= 3 * (uint64_t)MANY);
    assert_true(s1.renewed >= 3 * (uint64_t)MANY);
    assert_int_equal(s1.lost, 0);
    assert_int_equal(s1.failures, 0);
    assert_int_equal(alive, MANY);
    /* Batching: a batch carries at most 100 keys, so a round needs at least 100 batches; a
     * pipeline cuts its due entries into chunks of 100 and at most one chunk per pipeline is
     * partial, so batches <= 100 per round + pipelines. Redis saw one EVALSHA per batch
     * (nothing else runs scripts meanwhile), up to a pipeline in flight at each end of the
     * window (run by Redis but not yet in the stats, or the reverse): at most 100 batches each.
     */
    assert_true(batches >= renewed / 100);
    assert_true(batches <= (renewed + 99) / 100 + pipelines);
    assert_true(llabs(evalsha1 - evalsha0 - (long long)batches) <= 2 * MANY / 100);
    /* Round trips: the design sends the renewals that fall due within one watchdog tick as one
     * pipeline, so the window can hold about one pipeline per 10 ms tick (10% + 5 of slack for
     * its ends and stray wake-ups), i.e. about 50 per 500 ms round whatever the number of
     * holds - far fewer round trips than holds. */
    assert_true(pipelines <= (uint64_t)(window * 11 / (10 * (int64_t)TICK_MS) + 5));
    assert_true(pipelines * 50 <= renewed);

    /* Unlock unregisters each hold before returning. */
    for (int i = 0; i < MANY; i++) {
        assert_int_equal(rlock_unlock(locks[i]), RLOCK_OK);
    }
    rlk_wd_get_stats(c->watchdog, &s1);
    assert_int_equal(s1.registered, 0);
    assert_int_equal(s1.lost, 0);
    assert_int_equal(count_existing(ctx, names), 0);
    for (int i = 0; i < MANY; i++) {
        rlock_free(locks[i]);
    }
    redisFree(ctx);
    free(locks);
    free(names);
    rlock_client_free(c);
}

/* ---- NOSCRIPT in a sweep of several batches --------------------------------------------- */

/* A minimal renew class over a plain hash field, to put two batches of the reentrant lock's
 * renewal script (renew_hash) in one sweep: entries with different leases go in different
 * batches. */
typedef struct {
    rlk_wd_entry wd;
    const char *key, *field;
} plain_entry;

static int plain_describe(rlk_wd_entry *e, rlk_buf *key, rlk_buf *field)
{
    plain_entry *p = (plain_entry *)e;
    int r = rlk_buf_appends(key, p->key);
    return r ? r : rlk_buf_appends(field, p->field);
}

static void plain_lost(rlk_wd_entry *e)
{
    (void)e;
}

static const rlk_renew_class plain_class = {
    .script = RLK_SCRIPT_RENEW_HASH,
    .describe = plain_describe,
    .lost = plain_lost,
};

/* After SCRIPT FLUSH (or on a server that never saw the script, or after a restart), every
 * batch of a sweep is answered NOSCRIPT; the watchdog must load the script and resend them all
 * in that same sweep without failing it. Two entries whose leases differ by 2 ms fall due in
 * the same millisecond (3000/3 == 3002/3) but travel in two batches. */
static void test_noscript_retry_with_two_batches(void **state)
{
    (void)state;
    rh_server *srv = rh_start(NULL); /* its own: no other client may load the script for us */
    assert_non_null(srv);
    rlock_client *c = re_client(srv);
    assert_non_null(c);
    const char *hset1[] = {"HSET", "re:wd:plain1", "f1", "1", NULL};
    const char *hset2[] = {"HSET", "re:wd:plain2", "f2", "1", NULL};
    const char *flush[] = {"SCRIPT", "FLUSH", NULL};
    assert_int_equal(rh_cmd_int(srv, hset1), 1);
    assert_int_equal(rh_cmd_int(srv, hset2), 1);
    int together = 0;
    for (int attempt = 0; attempt < 5 && !together; attempt++) {
        plain_entry a = {.key = "re:wd:plain1", .field = "f1"};
        plain_entry b = {.key = "re:wd:plain2", .field = "f2"};
        rlk_wd_entry_init(&a.wd, &plain_class);
        rlk_wd_entry_init(&b.wd, &plain_class);
        char *ok = rh_cmd_str(srv, flush);
        assert_non_null(ok);
        free(ok);
        rlk_wd_stats s0, s1;
        rlk_wd_get_stats(c->watchdog, &s0);
        int64_t t0 = rlk_now_ms();
        assert_int_equal(rlk_wd_add(c->watchdog, &a.wd, 3000), RLOCK_OK);
        assert_int_equal(rlk_wd_add(c->watchdog, &b.wd, 3002), RLOCK_OK);
        int same_ms = rlk_now_ms() == t0;
        int64_t deadline = rh_now_ms() + 2000;
        do {
            rh_sleep_ms(20);
            rlk_wd_get_stats(c->watchdog, &s1);
        } while (s1.renewed - s0.renewed < 2 && rh_now_ms() < deadline);
        rh_sleep_ms(50);
        rlk_wd_get_stats(c->watchdog, &s1);
        rlk_wd_cancel(c->watchdog, &a.wd);
        rlk_wd_cancel(c->watchdog, &b.wd);
        /* Added within one millisecond, both fall due in the same millisecond and so are
         * taken by the same sweep. */
        together = same_ms;
        if (together) {
            print_message("NOSCRIPT on 2 batches of one sweep: %llu sweep(s), %llu pipeline(s), "
                          "%llu failure(s), %llu renewed, %lld SCRIPT LOADs\n",
                          (unsigned long long)(s1.ticks - s0.ticks),
                          (unsigned long long)(s1.pipelines - s0.pipelines),
                          (unsigned long long)(s1.failures - s0.failures),
                          (unsigned long long)(s1.renewed - s0.renewed),
                          rh_cmdstat_calls(srv, "script|load"));
            assert_int_equal(s1.ticks - s0.ticks, 1);
            assert_int_equal(s1.pipelines - s0.pipelines, 1);
            assert_int_equal(s1.batches - s0.batches, 2);
            assert_int_equal(s1.failures - s0.failures, 0);
            assert_int_equal(s1.renewed - s0.renewed, 2);
            assert_int_equal(s1.lost - s0.lost, 0);
        }
    }
    assert_true(together);
    rlock_client_free(c);
    rh_free(srv);
}

TC_MAIN(setup, teardown, cmocka_unit_test(test_sigkill_holder_frees_lock),
        cmocka_unit_test(test_noscript_retry_with_two_batches),
        cmocka_unit_test(test_hold_10s_stays_held), cmocka_unit_test(test_10000_holds_batched))
