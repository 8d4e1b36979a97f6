/*
 * Waiters across a failover (issue 13), on redis-server x3 + Sentinel x3:
 *  - threads blocked in rlock_lock() (no wait limit) on a held reentrant lock while the master is
 *    killed (kill -9; Sentinel promotes a replica): their re-attempts meet connection errors during
 *    the switch, and every one of them must still acquire after it once the holder unlocks. Before
 *    the wait loop retried, a re-attempt that met RLOCK_ECONN ended its rlock_lock() with it;
 *  - a fair queue across SENTINEL FAILOVER: the queue on the new master is the one replicated from
 *    the old, in its order (the switch takes less than waiter_timeout_ms: waiters whose deadline
 *    passed leave the queue and join again at its end); one waiter is then taken out of it (as if
 *    its join had not been replicated) and must join again by itself, at the end; every waiter
 *    acquires, in the new queue's order.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "client.h"
#include "util.h"
#include "tc_redis.h"
#include "tc_replicas.h"
#include "tc_sentinel.h"
#include "tc_thread.h"
#include "watchdog.h"

#define WAITERS  6
#define LEASE_MS 3000

static tc_deploy g_d;

typedef struct waiter {
    rlock_client *c;
    rlock *l;
    int idx;
    tc_bg bg;
} waiter;

/* The order in which waiters acquired. */
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static int g_order[WAITERS];
static char g_owner[WAITERS][96]; /* the owner field of each turn, "<client id>:<thread id>" */
static int g_n;

TC_DEPLOY_FIXTURE(g_d)

/* The clients' log, at INFO, on stderr with a time: a failure in CI then tells what the waits met
 * during the switch. */
static void log_stderr(int level, const char *msg, void *user)
{
    (void)user;
    fprintf(stderr, "[%lld ms] rlock log %d: %s\n", (long long)(rh_now_ms() % 100000), level, msg);
}

static rlock_client *deploy_client(int64_t waiter_timeout_ms)
{
    rlock_options o;
    tc_options_url(&o, g_d.url);
    o.connect_timeout_ms = 1000;
    o.command_timeout_ms = 1000;
    o.watchdog_timeout_ms = LEASE_MS;
    o.waiter_timeout_ms = waiter_timeout_ms;
    o.log_fn = log_stderr;
    o.log_level = RLOCK_LOG_INFO;
    return tc_client(&o);
}

/* A waiter: waits without limit, records its turn inside the lock, and unlocks. */
static int waiter_main(void *arg)
{
    waiter *w = arg;
    int r = rlock_lock(w->l, -1);
    if (r != RLOCK_OK) {
        fprintf(stderr, "[%lld ms] waiter %d: %s\n", (long long)(rh_now_ms() % 100000), w->idx,
                rlock_last_error());
        return r;
    }
    pthread_mutex_lock(&g_mu);
    snprintf(g_owner[g_n], sizeof(g_owner[g_n]), "%s:%llu", rlock_client_id(w->c),
             (unsigned long long)rlk_thread_id());
    g_order[g_n++] = w->idx;
    pthread_mutex_unlock(&g_mu);
    rh_sleep_ms(20);
    return rlock_unlock(w->l);
}

static void start_waiter(waiter *w, rlock_client *c, rlock_kind kind, const char *name, int idx)
{
    w->c = c;
    w->l = rlock_open(c, kind, name);
    assert_non_null(w->l);
    w->idx = idx;
    tc_bg_start(&w->bg, waiter_main, w);
}

/* Polls an integer command on the current master until it answers want (15 s). */
static void wait_int(const char *const *argv, long long want)
{
    int64_t deadline = rh_now_ms() + 15000;
    long long v = -1;
    while (rh_now_ms() < deadline) {
        rh_server *m = tc_deploy_master(&g_d);
        if (m != NULL && (v = rh_cmd_int(m, argv)) == want) {
            return;
        }
        rh_sleep_ms(20);
    }
    fail_msg("%s %s: %lld, expected %lld", argv[0], argv[1], v, want);
}

/* Waits until every waiter of client c read the reply of its first attempt and waits: each one
 * registers its heartbeat then (15 s). The queue on Redis shows the first attempt ran, not that
 * its reply arrived, and rlock.h returns an error of the first attempt at once: a switch between
 * the two is not the situation under test. */
static void wait_waiting(rlock_client *c, size_t n)
{
    int64_t deadline = rh_now_ms() + 15000;
    rlk_wd_stats st;
    rlk_wd_get_stats(c->watchdog, &st);
    while (st.registered < n && rh_now_ms() < deadline) {
        rh_sleep_ms(10);
        rlk_wd_get_stats(c->watchdog, &st);
    }
    assert_int_equal(st.registered, n);
}

/* Unlocks the holder's lock, retrying while the switch is under way (an unlock that failed
 * leaves its release pending: the retry settles it). */
static void holder_unlock(rlock *h)
{
    int64_t deadline = rh_now_ms() + 20000;
    int r;
    while ((r = rlock_unlock(h)) != RLOCK_OK && r != RLOCK_ELOST && rh_now_ms() < deadline) {
        rh_sleep_ms(100);
    }
    print_message("holder unlock: %d\n", r);
    assert_true(r == RLOCK_OK || r == RLOCK_ELOST);
}

/* Every waiter returns RLOCK_OK within 30 s; a stranded one is reported, then interrupted. */
static void join_waiters(waiter *w, int n, rlock_client *c)
{
    int64_t deadline = rh_now_ms() + 30000;
    for (int i = 0; i < n; i++) {
        while (atomic_load(&w[i].bg.result) == TC_BG_RUNNING && rh_now_ms() < deadline) {
            rh_sleep_ms(20);
        }
    }
    int stranded = 0;
    for (int i = 0; i < n; i++) {
        stranded += atomic_load(&w[i].bg.result) == TC_BG_RUNNING;
    }
    rlock_client_interrupt(c);
    for (int i = 0; i < n; i++) {
        int r = tc_bg_join(&w[i].bg);
        print_message("waiter %d: %d\n", i, r);
        assert_int_equal(r, RLOCK_OK);
        rlock_free(w[i].l);
    }
    assert_int_equal(stranded, 0);
}

static void test_waiters_across_kill(void **state)
{
    (void)state;
    const char *name = "fo:waiters";
    rlock_client *hc = deploy_client(5000);
    rlock_client *wc = deploy_client(5000);
    rlock *h = rlock_open(hc, RLOCK_REENTRANT, name);
    assert_non_null(h);
    assert_int_equal(rlock_lock(h, -1), RLOCK_OK);
    g_n = 0;
    waiter w[WAITERS];
    for (int i = 0; i < WAITERS; i++) {
        start_waiter(&w[i], wc, RLOCK_REENTRANT, name, i);
    }
    const char *zcard[] = {"ZCARD", "rlock_lock_waiters:{fo:waiters}", NULL};
    wait_int(zcard, WAITERS);
    wait_waiting(wc, WAITERS);

    rh_server *m = tc_deploy_kill_master(&g_d);
    assert_non_null(m);
    print_message("[%lld ms] master is now port %d\n", (long long)(rh_now_ms() % 100000),
                  rh_port(m));
    holder_unlock(h);
    join_waiters(w, WAITERS, wc);
    assert_int_equal(g_n, WAITERS);
    rlock_free(h);
    rlock_client_free(wc);
    rlock_client_free(hc);
}

/* The queue list on the current master, as one comma-separated string of owners. */
static void queue_of(const char *qkey, char *out, size_t cap)
{
    rh_server *m = tc_deploy_master(&g_d);
    assert_non_null(m);
    const char *argv[] = {"LRANGE", qkey, "0", "-1", NULL};
    redisReply *r = rh_cmd(m, argv);
    assert_non_null(r);
    size_t len = 0;
    out[0] = '\0';
    for (size_t i = 0; i < r->elements && len < cap; i++) {
        len += (size_t)snprintf(out + len, cap - len, "%s%s", i ? "," : "", r->element[i]->str);
    }
    freeReplyObject(r);
}

/* 1 when the comma-separated lists a and b hold the same owners, each once. */
static int same_members(const char *a, const char *b)
{
    if (strlen(a) != strlen(b)) {
        return 0;
    }
    char copy[2048];
    snprintf(copy, sizeof(copy), "%s", a);
    int n = 0;
    for (char *save = NULL, *t = strtok_r(copy, ",", &save); t != NULL;
         t = strtok_r(NULL, ",", &save), n++) {
        const char *hit = strstr(b, t);
        size_t tl = strlen(t);
        if (hit == NULL || (hit[tl] != ',' && hit[tl] != '\0') || strstr(hit + tl, t) != NULL) {
            return 0;
        }
    }
    return n == WAITERS;
}

static void test_fair_queue_across_failover(void **state)
{
    (void)state;
    const char *name = "fo:fair";
    const char *qkey = "redisson_lock_queue:{fo:fair}";
    /* A waiter whose deadline passed on the new master is dropped from the queue there and joins
     * again at its end (docs/deployments.md). The deadline the new master knows is the last one
     * replicated to it, and a SENTINEL FAILOVER here took up to 16 s from the request to the
     * switch, with replicas not acknowledging for part of it: with 10 s the whole queue came back
     * reordered. So the waiter timeout is longer than that. */
    rlock_client *hc = deploy_client(30000);
    rlock_client *wc = deploy_client(30000);
    rlock *h = rlock_open(hc, RLOCK_FAIR, name);
    assert_non_null(h);
    /* A lease no switch outlasts: the waiters must wait for the unlock, not for a lost hold. */
    assert_int_equal(rlock_lock(h, 60000), RLOCK_OK);
    g_n = 0;
    waiter w[WAITERS];
    const char *llen[] = {"LLEN", qkey, NULL};
    for (int i = 0; i < WAITERS; i++) {
        start_waiter(&w[i], wc, RLOCK_FAIR, name, i);
        wait_int(llen, i + 1); /* joined in index order */
    }
    wait_waiting(wc, WAITERS);
    char before[2048], after[2048];
    queue_of(qkey, before, sizeof(before));

    rh_server *m = tc_deploy_failover(&g_d);
    assert_non_null(m);
    queue_of(qkey, after, sizeof(after));
    print_message("queue before: %s\nqueue after:  %s (%s)\n", before, after,
                  strcmp(before, after) == 0 ? "the same" : "reordered");
    assert_true(same_members(before, after)); /* nobody lost, nobody twice */
    assert_string_equal(before, after);       /* and in the replicated order */

    /* One waiter's join "was not replicated": it must join again by itself, at the end. */
    const char *lindex[] = {"LINDEX", qkey, "2", NULL};
    char *missing = rh_cmd_str(m, lindex);
    assert_non_null(missing);
    const char *lrem[] = {"LREM", qkey, "0", missing, NULL};
    const char *zrem[] = {"ZREM", "redisson_lock_timeout:{fo:fair}", missing, NULL};
    assert_int_equal(rh_cmd_int(m, lrem), 1);
    assert_int_equal(rh_cmd_int(m, zrem), 1);
    wait_int(llen, WAITERS);
    const char *last[] = {"LINDEX", qkey, "-1", NULL};
    char *tail = rh_cmd_str(m, last);
    assert_non_null(tail);
    assert_string_equal(tail, missing);
    free(tail);
    free(missing);
    char served[2048];
    queue_of(qkey, served, sizeof(served));

    /* The queue on the new master is served in its order. */
    holder_unlock(h);
    join_waiters(w, WAITERS, wc);
    assert_int_equal(g_n, WAITERS);
    char got[2048];
    size_t len = 0;
    for (int i = 0; i < WAITERS; i++) {
        len += (size_t)snprintf(got + len, sizeof(got) - len, "%s%s", i ? "," : "", g_owner[i]);
    }
    print_message("served in:    %s\n", got);
    assert_string_equal(got, served);
    rlock_free(h);
    rlock_client_free(wc);
    rlock_client_free(hc);
}

TC_MAIN(setup, teardown,
        /* The graceful switch first: Sentinel refuses another failover of the same master for
         * twice failover-timeout after one. */
        cmocka_unit_test(test_fair_queue_across_failover),
        cmocka_unit_test(test_waiters_across_kill))
