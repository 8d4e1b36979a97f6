/*
 * Failover inside the cluster (issue 14, point 6). The client learns of a new master from the
 * cluster's own answers: a write to the old master is answered MOVED once it became a replica
 * (CLUSTER FAILOVER), or its connection is refused (kill -9), and either refreshes the slot map.
 *
 * - Under stress: 4 processes x 4 threads lock names spread over the three masters with
 *   replica_sync = 1 and the independent shared-memory checker, while the parent runs CLUSTER
 *   FAILOVER on the replica of one master and then kills another master with kill -9 (the
 *   cluster promotes its replica; the old master is started again and rejoins as a replica).
 *   Checked: 0 violations, fencing tokens strictly increasing per name (compared inside the
 *   exclusive section), no error, every process keeps acquiring after the last switch. Errors
 *   while a switch is under way (RLOCK_ECONN, RLOCK_EREPLICA, RLOCK_ETIMEDOUT) are retries.
 * - Waiters: a hold under the watchdog on one master, three waiters on another client, CLUSTER
 *   FAILOVER of that master: the hold is still renewed on the new master past its lease, and
 *   after the unlock every waiter acquires (none is stranded on the old master).
 * - A refused master: until the cluster promotes the replica of a killed master, every map still
 *   names the dead one and every request to it fails at once. Four threads retrying without a
 *   pause must not make their client read the map more than once per
 *   RLK_CLUSTER_FAILURE_REFRESH_GAP_MS (before the gap: one refresh per failed request, hundreds
 *   a second), and once the replica is promoted the client finds it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include <sys/mman.h>

#include <cmocka.h>

#include "cluster.h"
#include "tc_cluster.h"
#include "tc_metric.h"
#include "tc_redis.h"
#include "tc_stress.h"
#include "tc_thread.h"

#define PROCS    4
#define THREADS  4
#define NAMES    30
#define LEASE_MS 5000
#define WAITERS  3

/* Shared between the parent and the forked workers. */
typedef struct shared {
    volatile int stop;
    atomic_ullong last_token[NAMES];
    atomic_int last_by[NAMES]; /* the worker that checked last_token */
    atomic_long token_regressions;
    atomic_llong last_ok_ms[PROCS];
    atomic_long moved, refreshes; /* the workers' clients' counters (cluster.h), summed */
} shared;

static shared *g_sh;

/* The workers' and the waiters' options: replica sync on, timeouts that ride out a switch. */
static void failover_tune(rlock_options *o)
{
    o->pool_size = 8;
    o->connect_timeout_ms = 2000;
    o->command_timeout_ms = 2000;
    o->watchdog_timeout_ms = LEASE_MS;
    o->replica_sync = 1;
    o->replica_sync_timeout_ms = 1000;
}

/* The workers' processes: tc_cluster's, counting their clients' redirections when they end. */
static void proc_close(void *ctx)
{
    tc_cluster_proc *p = ctx;
    if (p != NULL && p->c != NULL) {
        rlk_cluster_stats cs;
        rlk_cluster_get_stats(p->c->cluster, &cs);
        atomic_fetch_add(&g_sh->moved, (long)cs.moved);
        atomic_fetch_add(&g_sh->refreshes, (long)cs.refreshes);
    }
    tc_cluster_proc_close(p);
}

/* Inside the exclusive section of name k: its token must be above every earlier holder's. A
 * regression is printed with who held the earlier token and the holder's count, so that a failure
 * says whether a token was handed out twice or a thread's own hold came back. */
static void check_token(tc_worker *w, int k, rlock *l, uint64_t t)
{
    uint64_t last = atomic_load(&g_sh->last_token[k]);
    int by = atomic_load(&g_sh->last_by[k]);
    int me = w->proc * THREADS + w->thread;
    if (t <= last && atomic_fetch_add(&g_sh->token_regressions, 1) < 5) {
        fprintf(stderr, "fo-%d: token %llu after %llu (worker %d after worker %d, count %d)\n", k,
                (unsigned long long)t, (unsigned long long)last, me, by, rlock_hold_count(l));
    }
    atomic_store(&g_sh->last_token[k], t);
    atomic_store(&g_sh->last_by[k], me);
}

static int step(tc_worker *w, long i)
{
    int k = rand_r(&w->seed) % NAMES;
    rlock *l = ((tc_cluster_proc *)w->proc_ctx)->h[k];
    int r = rlock_try_lock(l, 2000, i % 2 ? LEASE_MS : -1);
    if (r == RLOCK_ETIMEDOUT || r == RLOCK_ECONN || r == RLOCK_EREPLICA) {
        /* A switch is under way: do not spin through the pool's fast failures. */
        rh_sleep_ms(r == RLOCK_ETIMEDOUT ? 0 : 20);
        return TC_STEP_RETRY;
    }
    if (r != RLOCK_OK) {
        return tc_step_fail(w, "lock", r);
    }
    tc_mx_enter(w->mx, k);
    check_token(w, k, l, rlock_token(l));
    tc_mx_leave(w->mx, k);
    /* An unlock that failed in a switch leaves its release pending: the thread's next lock of
     * that name settles it first (lock.c). So does one that a node with no replica acknowledging
     * answered "not held" (RLOCK_EREPLICA): the killed master, restarted empty, serves its old
     * slots until the cluster tells it it was replaced. A hold whose renewals could not reach the
     * cluster for a whole lease is lost, which the unlock reports. */
    r = rlock_unlock(l);
    if (r == RLOCK_ECONN || r == RLOCK_ETIMEDOUT || r == RLOCK_EREPLICA) {
        return TC_STEP_RETRY;
    }
    if (r != RLOCK_OK && r != RLOCK_ELOST) {
        return tc_step_fail(w, "unlock", r);
    }
    atomic_store(&g_sh->last_ok_ms[w->proc], rh_now_ms());
    return TC_STEP_OK;
}

static int setup(void **state)
{
    g_sh = mmap(NULL, sizeof(*g_sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (g_sh == MAP_FAILED) {
        return -1;
    }
    memset(g_sh, 0, sizeof(*g_sh));
    return tc_cluster_setup(state);
}

static int teardown(void **state)
{
    munmap(g_sh, sizeof(*g_sh));
    return tc_cluster_teardown(state);
}

/* The master that serves the i-th slot range now. */
static rh_server *master_of(int i)
{
    char name[32];
    tc_cluster_name_on(i, "fo-m-", name, sizeof(name));
    return tc_cluster_owner(name);
}

static void test_switches_under_stress(void **state)
{
    (void)state;
    tc_cluster_names names = {
        .url = rc_seed_url(tc_cl), .prefix = "fo-", .n = NAMES, .tune = failover_tune};
    tc_stress_spec spec = {.procs = PROCS,
                           .threads = THREADS,
                           .duration_ms = 120000,
                           .timeout_ms = 150000,
                           .proc_init = tc_cluster_proc_open,
                           .proc_fini = proc_close,
                           .step = step,
                           .arg = &names,
                           .stop = &g_sh->stop};
    tc_stress *st = tc_stress_start(&spec);
    assert_non_null(st);
    rh_sleep_ms(1500);
    rh_server *replica = rc_replica_of(tc_cl, master_of(0));
    int64_t t0 = rh_now_ms();
    int failed_over = replica != NULL && rc_failover(tc_cl, replica, 30000) == 0;
    printf("CLUSTER FAILOVER: %s in %lld ms\n", failed_over ? "done" : "FAILED",
           (long long)(rh_now_ms() - t0));
    rh_sleep_ms(1500);
    t0 = rh_now_ms();
    rh_server *promoted = failed_over ? rc_kill_master(tc_cl, master_of(1), 30000) : NULL;
    printf("kill -9: %s in %lld ms\n", promoted != NULL ? "replica promoted" : "FAILED",
           (long long)(rh_now_ms() - t0));
    int64_t switched_at = rh_now_ms();
    rh_sleep_ms(3000);
    g_sh->stop = 1;
    tc_stress_result res;
    tc_mx *mx = tc_stress_mx(st);
    tc_stress_wait(st, &res);
    long violations = tc_mx_violations(mx);
    printf("iterations %ld, retries %ld, errors %ld, violations %ld, token regressions %ld, "
           "MOVED %ld, map refreshes %ld\n",
           res.iterations, res.retries, res.errors, violations,
           atomic_load(&g_sh->token_regressions), atomic_load(&g_sh->moved),
           atomic_load(&g_sh->refreshes));
    tc_stress_free(st);
    assert_true(failed_over);
    assert_non_null(promoted);
    assert_int_equal(res.failed_procs, 0);
    assert_int_equal(violations, 0);
    assert_int_equal(atomic_load(&g_sh->token_regressions), 0);
    assert_int_equal(res.errors, 0);
    /* The switches were learnt from the cluster's answers: MOVED from the master that became a
     * replica, a refresh after each (and after the refused connections of the killed one). */
    assert_true(atomic_load(&g_sh->moved) > 0);
    assert_true(atomic_load(&g_sh->refreshes) >= PROCS * 2);
    for (int p = 0; p < PROCS; p++) {
        if (atomic_load(&g_sh->last_ok_ms[p]) <= switched_at) {
            fail_msg("process %d took no lock after the last switch", p);
        }
    }
}

static void test_waiters_across_cluster_failover(void **state)
{
    (void)state;
    rlock_options o;
    tc_options_url(&o, rc_seed_url(tc_cl));
    failover_tune(&o);
    o.watchdog_timeout_ms = 3000;
    rlock_client *a = tc_client(&o);
    rlock_client *b = tc_client(&o);
    char name[32];
    tc_cluster_name_on(2, "fo-wait-", name, sizeof(name));
    assert_int_equal(tc_metric(a, "rlock_failovers_total", NULL, NULL), 0);
    tc_failovers f = {.n = 0};
    rlock_client_on_event(a, tc_failover_hook, &f);
    rlock *la = rlock_open(a, RLOCK_REENTRANT, name);
    rlock *lb = rlock_open(b, RLOCK_REENTRANT, name);
    assert_int_equal(rlock_try_lock(la, 0, -1), RLOCK_OK);
    tc_holder w[WAITERS];
    for (int i = 0; i < WAITERS; i++) {
        tc_holder_start(&w[i], lb, 30000, 10000, 0);
    }
    rh_sleep_ms(300);
    rh_server *replica = rc_replica_of(tc_cl, tc_cluster_owner(name));
    assert_non_null(replica);
    assert_int_equal(rc_failover(tc_cl, replica, 30000), 0);
    /* Every node learns the new owner by gossip, the one asked maybe a moment later. */
    for (int64_t end = rh_now_ms() + 5000; tc_cluster_owner(name) != replica;) {
        assert_true(rh_now_ms() < end);
        rh_sleep_ms(20);
    }
    /* Past the 3 s lease: the hold lives on the new master only if renewals went there. */
    rh_sleep_ms(4000);
    assert_int_equal(tc_cluster_exists(name), 1);
    assert_int_equal(rlock_is_held(la), 1);
    /* The holder's client read a map with the promoted replica among the masters: a failover
     * counted (rlock_failovers_total), one event per count, the last naming the promoted
     * replica. At least once, not exactly: a node asked during the gossip can still name the
     * old master, and the next map naming the replica again is rightly another switch. */
    long long n = tc_metric(a, "rlock_failovers_total", NULL, NULL);
    assert_true(n >= 1);
    assert_int_equal(atomic_load(&f.n), n);
    assert_true(tc_failover_port_is(&f, rh_port(replica)));
    for (int i = 0; i < WAITERS; i++) {
        assert_int_equal(tc_holder_wait(&w[i], 0), TC_BG_RUNNING);
    }
    assert_int_equal(rlock_unlock(la), RLOCK_OK);
    for (int i = 0; i < WAITERS; i++) {
        assert_int_equal(tc_holder_join(&w[i]), RLOCK_OK);
    }
    assert_int_equal(tc_cluster_exists(name), 0);
    rlock_free(la);
    rlock_free(lb);
    rlock_client_free(a);
    rlock_client_free(b);
}

/* A thread of the refused-master case: lock attempts without a pause until told to stop. */
typedef struct spinner {
    rlock *l;
    atomic_int *stop;
    long attempts, refused;
} spinner;

static void *spin(void *arg)
{
    spinner *s = arg;
    while (!atomic_load(s->stop)) {
        int r = rlock_try_lock(s->l, 0, 10000);
        s->attempts++;
        s->refused += r == RLOCK_ECONN;
        if (r == RLOCK_OK) {
            (void)rlock_unlock(s->l);
        }
    }
    return NULL;
}

static void test_refused_master_refresh_gap(void **state)
{
    (void)state;
    rlock_options o;
    tc_options_url(&o, rc_seed_url(tc_cl));
    failover_tune(&o);
    o.replica_sync = 0; /* the promoted master has no replica until the old one rejoins */
    rlock_client *c = tc_client(&o);
    char name[32];
    tc_cluster_name_on(2, "fo-gap-", name, sizeof(name));
    rh_server *master = tc_cluster_owner(name);
    atomic_int stop = 0;
    spinner sp[4];
    pthread_t th[4];
    for (int i = 0; i < 4; i++) {
        sp[i] = (spinner){.l = rlock_open(c, RLOCK_REENTRANT, name), .stop = &stop};
        assert_non_null(sp[i].l);
        assert_int_equal(pthread_create(&th[i], NULL, spin, &sp[i]), 0);
    }
    rh_sleep_ms(200);
    rlk_cluster_stats before, after;
    rlk_cluster_get_stats(c->cluster, &before);
    int64_t t0 = rh_now_ms();
    rh_server *promoted = rc_kill_master_only(tc_cl, master, 30000);
    rh_sleep_ms(500);
    atomic_store(&stop, 1);
    long attempts = 0, refused = 0;
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        attempts += sp[i].attempts;
        refused += sp[i].refused;
    }
    int64_t elapsed = rh_now_ms() - t0;
    rlk_cluster_get_stats(c->cluster, &after);
    uint64_t refreshes = after.refreshes - before.refreshes;
    uint64_t moved = after.moved - before.moved;
    printf("refused master: %lld ms, %ld attempts, %ld refused, %llu map refreshes, %llu MOVED\n",
           (long long)elapsed, attempts, refused, (unsigned long long)refreshes,
           (unsigned long long)moved);
    assert_non_null(promoted);
    assert_true(refused > 0);
    assert_true(refreshes <= (uint64_t)(elapsed / RLK_CLUSTER_FAILURE_REFRESH_GAP_MS) + 3 + moved);
    /* The promoted replica serves the name now, and the client found it. */
    assert_int_equal(rlock_try_lock(sp[0].l, 0, 10000), RLOCK_OK);
    assert_int_equal(rlock_unlock(sp[0].l), RLOCK_OK);
    for (int i = 0; i < 4; i++) {
        rlock_free(sp[i].l);
    }
    rlock_client_free(c);
}

TC_MAIN(setup, teardown, cmocka_unit_test(test_switches_under_stress),
        cmocka_unit_test(test_waiters_across_cluster_failover),
        cmocka_unit_test(test_refused_master_refresh_gap))
