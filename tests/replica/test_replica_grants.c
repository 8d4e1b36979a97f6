/*
 * Direct grants for replica-synced clients (issue 33): on a master with two replicas, a release
 * grants the lock to a waiting synced thread, which holds it only once the replicas acknowledged
 * the grant (each release published a grant, the token and hash are on both replicas when
 * rlock_lock() returns, and the waits ended by confirmed grants, none believed); with both
 * replicas stopped nobody is told it holds the grant, and the lock is free when the wait ends,
 * within waiter_timeout_ms.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <hiredis.h>

#include "lock.h"
#include "lock_wait.h"
#include "tc_metric.h"
#include "tc_redis.h"
#include "tc_replicas.h"

#define NREP 2
/* The WAIT bound: the default for the hand-offs (a loaded machine must not fail them), a short
 * one where the replicas are stopped. */
#define SYNC_MS       1000
#define SYNC_SHORT_MS 300
#define ROUNDS        8
/* Long enough for the waiter to be asleep with its armed attempt after its subscription's
 * confirmation made it attempt once more. */
#define SETTLE_MS 100

static rh_server *g_master;
static rh_server *g_rep[NREP];

static int setup(void **state)
{
    (void)state;
    rh_skip_if_unavailable();
    return tc_replicated_start(&g_master, g_rep, NREP);
}

static int teardown(void **state)
{
    (void)state;
    return tc_replicated_stop(&g_master, g_rep, NREP);
}

static rlock_client *synced_client(int64_t sync_ms)
{
    rlock_options o;
    tc_options(&o, g_master);
    o.replica_sync = 1;
    o.replica_sync_timeout_ms = sync_ms;
    o.waiter_timeout_ms = 3000;
    return tc_client(&o);
}

/* One waiting thread: its lock call, and what the replicas held when it returned. */
typedef struct waiter {
    rlock *l;
    int64_t wait_ms;
    const char *name;
    const char *counter; /* the fencing counter's key */
    int rc;
    int held;
    uint64_t token;
    long long rep_token[NREP];
    long long rep_exists[NREP];
} waiter;

static void *waiter_main(void *p)
{
    waiter *w = p;
    w->rc = rlock_try_lock(w->l, w->wait_ms, 10000);
    w->held = rlock_is_held(w->l);
    w->token = rlock_token(w->l);
    for (int i = 0; i < NREP && w->rc == RLOCK_OK; i++) {
        const char *get[] = {"GET", w->counter, NULL};
        char *v = rh_cmd_str(g_rep[i], get);
        w->rep_token[i] = v != NULL ? atoll(v) : -1;
        free(v);
        const char *ex[] = {"EXISTS", w->name, NULL};
        w->rep_exists[i] = rh_cmd_int(g_rep[i], ex);
    }
    if (w->rc == RLOCK_OK) {
        (void)rlock_unlock(w->l);
    }
    return NULL;
}

/* Waits until a waiter registered for grants on the master (its busy attempt ran). */
static void await_registered(const char *grants)
{
    const char *argv[] = {"HLEN", grants, NULL};
    int64_t until = rh_now_ms() + 5000;
    while (rh_cmd_int(g_master, argv) < 1) {
        assert_true(rh_now_ms() < until);
        rh_sleep_ms(2);
    }
    rh_sleep_ms(SETTLE_MS);
}

/* A raw connection listening on pattern, where releases publish their grants. */
static redisContext *grant_listener(const char *pattern)
{
    redisContext *c = rh_connect(g_master);
    assert_non_null(c);
    redisReply *r = redisCommand(c, "PSUBSCRIBE %s", pattern);
    assert_non_null(r);
    freeReplyObject(r);
    return c;
}

/* The grants ("grant <token> <wait> <owner>") published on c's pattern so far: counted up to an
 * end mark published on end (a channel of the pattern), which arrives after them. */
static int grants_published(redisContext *c, const char *end)
{
    const char *pub[] = {"PUBLISH", end, "end", NULL};
    assert_true(rh_cmd_int(g_master, pub) >= 1);
    int n = 0;
    for (;;) {
        redisReply *r = NULL;
        assert_int_equal(redisGetReply(c, (void **)&r), REDIS_OK);
        assert_true(r->type == REDIS_REPLY_ARRAY && r->elements == 4);
        const redisReply *m = r->element[3];
        int done = m->len == 3 && memcmp(m->str, "end", 3) == 0;
        n += m->len > 6 && memcmp(m->str, "grant ", 6) == 0;
        freeReplyObject(r);
        if (done) {
            return n;
        }
    }
}

/* ROUNDS hand-offs from a holder of client a to a waiting thread of client b. */
static void handoffs(rlock_kind kind, const char *name)
{
    char counter[128], grants[128], pattern[128], end[128];
    snprintf(counter, sizeof(counter), "redisson_lock_token:{%s}", name);
    snprintf(grants, sizeof(grants), "rlock_lock_waiters:{%s}:grants", name);
    /* Where a release names its grant: the waiter's client's wake channel (reentrant), the
     * waiter's own channel (fair). */
    snprintf(pattern, sizeof(pattern), "%s:{%s}:*",
             kind == RLOCK_FAIR ? "redisson_lock__channel" : "rlock_lock_wake", name);
    snprintf(end, sizeof(end), "%.*send", (int)strlen(pattern) - 1, pattern);
    redisContext *listen = grant_listener(pattern);
    rlock_client *a = synced_client(SYNC_MS), *b = synced_client(SYNC_MS);
    rlock *la = rlock_open(a, kind, name), *lb = rlock_open(b, kind, name);
    rlk_grant_stats s0, s1;
    rlk_grant_stats_get(&s0);
    uint64_t last = 0;
    for (int round = 0; round < ROUNDS; round++) {
        assert_int_equal(rlock_lock(la, 10000), RLOCK_OK);
        assert_true(rlock_token(la) > last);
        last = rlock_token(la);
        waiter w = {.l = lb, .wait_ms = 10000, .name = name, .counter = counter};
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, waiter_main, &w), 0);
        await_registered(grants);
        assert_int_equal(rlock_unlock(la), RLOCK_OK);
        pthread_join(t, NULL);
        assert_int_equal(w.rc, RLOCK_OK);
        assert_true(w.held);
        assert_true(w.token > last);
        last = w.token;
        /* Acknowledged before the waiter was told: the grant's token and hash on both. */
        for (int i = 0; i < NREP; i++) {
            assert_int_equal(w.rep_token[i], (long long)w.token);
            assert_int_equal(w.rep_exists[i], 1);
        }
    }
    rlk_grant_stats_get(&s1);
    /* Every release granted the lock to the waiter, which confirmed it (its WAIT) rather than
     * believe the message. An attempt of its own can find a grant first when the waiter was not
     * yet asleep (it is counted by attempt then): the settle time makes that rare. */
    assert_int_equal(grants_published(listen, end), ROUNDS);
    printf("%s: %llu confirmed grants, %llu by attempt\n", name,
           (unsigned long long)(s1.confirmed - s0.confirmed),
           (unsigned long long)(s1.by_attempt - s0.by_attempt));
    assert_int_equal((s1.confirmed - s0.confirmed) + (s1.by_attempt - s0.by_attempt), ROUNDS);
    assert_true(s1.confirmed - s0.confirmed >= ROUNDS / 2);
    assert_int_equal(s1.believed - s0.believed, 0);
    assert_int_equal(s1.undone - s0.undone, 0);
    redisFree(listen);
    rlock_free(la);
    rlock_free(lb);
    rlock_client_free(a);
    rlock_client_free(b);
}

static void test_reentrant_grants_confirmed(void **state)
{
    (void)state;
    handoffs(RLOCK_REENTRANT, "rg:re");
}

static void test_fair_grants_confirmed(void **state)
{
    (void)state;
    handoffs(RLOCK_FAIR, "rg:fair");
}

/* The REPLICA_SYNC_FAILED events one client's hook saw. */
typedef struct sync_log {
    pthread_mutex_t mu;
    int n;
    int kind[4], result[4];
    char name[4][32];
    const char *match; /* a name whose events are counted in matched (NULL: none) */
    int matched;
} sync_log;

static void on_sync_event(const rlock_event *ev, void *user)
{
    sync_log *g = user;
    pthread_mutex_lock(&g->mu);
    if (ev->type == RLOCK_EV_REPLICA_SYNC_FAILED && g->n < 4) {
        g->kind[g->n] = ev->kind;
        g->result[g->n] = ev->result;
        snprintf(g->name[g->n], sizeof(g->name[0]), "%s", ev->name ? ev->name : "");
    }
    if (ev->type == RLOCK_EV_REPLICA_SYNC_FAILED) {
        g->n++;
        g->matched += g->match != NULL && ev->name != NULL && strcmp(ev->name, g->match) == 0;
    }
    pthread_mutex_unlock(&g->mu);
}

/* Both replicas stopped as the holder releases: the release grants the lock to the waiter, whose
 * confirmation falls short; the waiter gives it back and is never told it holds the lock, and
 * when its wait ends the lock is free on the master. */
static void unacked(rlock_kind kind, const char *name)
{
    char grants[128];
    snprintf(grants, sizeof(grants), "rlock_lock_waiters:{%s}:grants", name);
    rlock_client *a = synced_client(SYNC_SHORT_MS), *b = synced_client(SYNC_SHORT_MS);
    sync_log g = {.n = 0, .match = name};
    pthread_mutex_init(&g.mu, NULL);
    rlock_client_on_event(b, on_sync_event, &g);
    rlock *la = rlock_open(a, kind, name), *lb = rlock_open(b, kind, name);
    assert_int_equal(rlock_lock(la, 10000), RLOCK_OK);
    waiter w = {.l = lb, .wait_ms = 1200, .name = name, .counter = ""};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, waiter_main, &w), 0);
    await_registered(grants);
    rlk_grant_stats s0, s1;
    rlk_grant_stats_get(&s0);
    for (int i = 0; i < NREP; i++) {
        assert_int_equal(rh_pause(g_rep[i]), 0);
    }
    int64_t t0 = rh_now_ms();
    (void)rlock_unlock(la); /* released on the master; its own WAIT falls short */
    pthread_join(t, NULL);
    int64_t took = rh_now_ms() - t0;
    const char *ex[] = {"EXISTS", name, NULL};
    long long exists = rh_cmd_int(g_master, ex);
    for (int i = 0; i < NREP; i++) {
        assert_int_equal(rh_resume(g_rep[i]), 0);
    }
    assert_int_equal(tc_replicas_wait(g_master, NREP, 10000), 0);
    rlk_grant_stats_get(&s1);
    assert_int_not_equal(w.rc, RLOCK_OK);
    assert_false(w.held);
    assert_int_equal(s1.confirmed - s0.confirmed, 0);
    assert_true(s1.undone - s0.undone >= 1); /* the grant was made, and given back */
    assert_int_equal(exists, 0);
    assert_true(took < 3000); /* the waiter timeout: the lock is free within it */
    /* The unlock's short WAIT is one replica sync failure of the holder's client. Each grant
     * the waiter gave back is one of the waiter's, an event naming the lock; its watchdog's
     * heartbeat pipelines fell short too, events that name nothing. */
    assert_int_equal(tc_metric(a, "rlock_replica_sync_failures_total", NULL, NULL), 1);
    pthread_mutex_lock(&g.mu);
    assert_int_equal(g.matched, (int)(s1.undone - s0.undone));
    assert_int_equal(tc_metric(b, "rlock_replica_sync_failures_total", NULL, NULL), g.n);
    pthread_mutex_unlock(&g.mu);
    /* With the replicas back, the waiter's client takes the lock normally. */
    assert_int_equal(rlock_try_lock(lb, 5000, 10000), RLOCK_OK);
    assert_int_equal(rlock_unlock(lb), RLOCK_OK);
    rlock_free(la);
    rlock_free(lb);
    rlock_client_free(a);
    rlock_client_free(b);
}

static void test_reentrant_unacked_grant(void **state)
{
    (void)state;
    unacked(RLOCK_REENTRANT, "rg:unacked");
}

static void test_fair_unacked_grant(void **state)
{
    (void)state;
    unacked(RLOCK_FAIR, "rg:unackedfair");
}

/* Both replicas stopped: a semaphore acquire is given back (RLOCK_EREPLICA) and a latch
 * count-down stands unsynced (RLOCK_EREPLICA): two replica sync failures, each an event naming
 * its object; the acquire counts as an acquire that failed. */
static void test_sync_failures_counted(void **state)
{
    (void)state;
    sync_log g = {.n = 0};
    pthread_mutex_init(&g.mu, NULL);
    rlock_client *c = synced_client(SYNC_SHORT_MS);
    rlock_client_on_event(c, on_sync_event, &g);
    rlock_semaphore *sem = rlock_semaphore_open(c, "rg:sem");
    rlock_latch *l = rlock_latch_open(c, "rg:latch");
    assert_int_equal(rlock_semaphore_try_set_permits(sem, 1), 1);
    assert_int_equal(rlock_latch_try_set_count(l, 2), 1);
    assert_int_equal(tc_metric(c, "rlock_replica_sync_failures_total", NULL, NULL), 0);
    for (int i = 0; i < NREP; i++) {
        assert_int_equal(rh_pause(g_rep[i]), 0);
    }
    int acquired = rlock_semaphore_acquire(sem, 1, 0);
    int counted = rlock_latch_count_down(l);
    for (int i = 0; i < NREP; i++) {
        assert_int_equal(rh_resume(g_rep[i]), 0);
    }
    assert_int_equal(tc_replicas_wait(g_master, NREP, 10000), 0);
    assert_int_equal(acquired, RLOCK_EREPLICA);
    assert_int_equal(counted, RLOCK_EREPLICA);
    assert_int_equal(tc_metric(c, "rlock_replica_sync_failures_total", NULL, NULL), 2);
    assert_int_equal(tc_metric(c, "rlock_acquire_total", "kind=\"semaphore\"", "result=\"error\""),
                     1);
    assert_int_equal(g.n, 2);
    assert_int_equal(g.kind[0], RLOCK_MK_SEMAPHORE);
    assert_string_equal(g.name[0], "rg:sem");
    assert_int_equal(g.kind[1], RLOCK_MK_LATCH);
    assert_string_equal(g.name[1], "rg:latch");
    assert_int_equal(g.result[0], RLOCK_EREPLICA);
    assert_int_equal(g.result[1], RLOCK_EREPLICA);
    rlock_latch_free(l);
    rlock_semaphore_free(sem);
    rlock_client_free(c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reentrant_grants_confirmed),
        cmocka_unit_test(test_fair_grants_confirmed),
        cmocka_unit_test(test_reentrant_unacked_grant),
        cmocka_unit_test(test_fair_unacked_grant),
        cmocka_unit_test(test_sync_failures_counted),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
