/*
 * Failover under load (issue 13): redis-server x3 + Sentinel x3, 4 processes x 4 threads taking
 * two reentrant locks (replica_sync on) with the independent shared-memory checker, while the
 * parent makes the Sentinels fail over (SENTINEL FAILOVER) three times (five with RLOCK_LONG=1).
 * Checked: no mutual-exclusion violation, fencing tokens strictly increasing per lock across every
 * switch (compared inside the lock's exclusive section, in shared memory; a token 0 counts as a
 * regression), and every process keeps acquiring after the last switch without a restart. Errors
 * while a switch is under way (RLOCK_ECONN, RLOCK_EREPLICA, RLOCK_ETIMEDOUT) are retries, not
 * failures; an unlock that failed is not retried (the next lock settles it). Run with the argument
 * "kill" (test_sentinel_kill), the switches are kill -9 of the master instead (the harness restarts
 * it as a replica of the new one): three rounds (five) with replica_sync = 1 checked as above, then
 * as many with replica_sync = 0 only printed (RLOCK_LONG=1 only).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <cmocka.h>

#include "tc_redis.h"
#include "tc_replicas.h"
#include "tc_sentinel.h"
#include "tc_stress.h"

#define PROCS   4
#define THREADS 4
/* Switches a run makes: 3, or 5 with RLOCK_LONG=1 (each takes 15-20 s; CONTRIBUTING "Test
 * variants"). */
static int failovers(void)
{
    const char *long_runs = getenv("RLOCK_LONG");
    return long_runs != NULL && strcmp(long_runs, "1") == 0 ? 5 : 3;
}
#define LEASE_MS 3000
#define LOCKS    2

static const char *const lock_names[LOCKS] = {"fo:lock", "fo:lock2"};

/* Shared between the parent and the forked workers. */
typedef struct shared {
    volatile int stop;
    atomic_ullong last_token[LOCKS];
    atomic_long token_regressions;
    atomic_llong last_ok_ms[PROCS];
} shared;

static tc_deploy g_d;
static shared *g_sh;
static int g_sync = 1; /* replica_sync of the workers' clients (set before they fork) */

static void *proc_init(int proc, void *arg)
{
    (void)proc;
    (void)arg;
    tc_proc *p = calloc(1, sizeof(*p));
    rlock_options o;
    rlock_options_init(&o);
    o.url = g_d.url;
    o.pool_size = 8;
    o.connect_timeout_ms = 2000;
    o.command_timeout_ms = 2000;
    o.watchdog_timeout_ms = LEASE_MS;
    o.replica_sync_timeout_ms = 500;
    o.replica_sync = g_sync;
    p->c = p != NULL ? tc_client_try(&o) : NULL;
    for (int k = 0; k < LOCKS; k++) {
        p->h[k] = p->c != NULL ? rlock_open(p->c, RLOCK_REENTRANT, lock_names[k]) : NULL;
    }
    if (p != NULL && (p->h[0] == NULL || p->h[LOCKS - 1] == NULL)) {
        tc_proc_close(p);
        return NULL;
    }
    return p;
}

/* Inside lock k's exclusive section: the token must be above every earlier holder's of k. */
static void check_token(int k, uint64_t t)
{
    uint64_t last = atomic_load(&g_sh->last_token[k]);
    if (t <= last) {
        /* The first few are printed: a run with replica_sync = 0 may have thousands. */
        if (atomic_fetch_add(&g_sh->token_regressions, 1) < 5) {
            fprintf(stderr, "%s: token %llu after %llu\n", lock_names[k], (unsigned long long)t,
                    (unsigned long long)last);
        }
    }
    atomic_store(&g_sh->last_token[k], t);
}

static int step(tc_worker *w, long i)
{
    tc_proc *p = w->proc_ctx;
    int k = (int)((i / 2 + w->thread) % LOCKS);
    int r = rlock_try_lock(p->h[k], 2000, i % 2 ? LEASE_MS : -1);
    if (r == RLOCK_ETIMEDOUT || r == RLOCK_ECONN || r == RLOCK_EREPLICA) {
        /* A switch is under way: do not spin through the pool's fast failures. */
        rh_sleep_ms(r == RLOCK_ETIMEDOUT ? 0 : 20);
        return TC_STEP_RETRY;
    }
    if (r != RLOCK_OK) {
        fprintf(stderr, "lock: %s\n", rlock_last_error());
        return TC_STEP_ERROR;
    }
    tc_mx_enter(w->mx, k);
    check_token(k, rlock_token(p->h[k]));
    tc_mx_leave(w->mx, k);
    /* An unlock that failed in a switch leaves its release pending and the worker moves on: its
     * next lock settles that release first (lock.c), so a re-entry of a ghost hold would show
     * here as a token regression. */
    r = rlock_unlock(p->h[k]);
    if (r == RLOCK_ECONN || r == RLOCK_ETIMEDOUT || r == RLOCK_EREPLICA) {
        return TC_STEP_RETRY;
    }
    if (r != RLOCK_OK && r != RLOCK_ELOST) {
        fprintf(stderr, "unlock: %s\n", rlock_last_error());
        return TC_STEP_ERROR;
    }
    atomic_store(&g_sh->last_ok_ms[w->proc], rh_now_ms());
    return TC_STEP_OK;
}

static int setup(void **state)
{
    (void)state;
    rh_skip_if_unavailable();
    g_sh = mmap(NULL, sizeof(*g_sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (g_sh == MAP_FAILED) {
        return -1;
    }
    memset(g_sh, 0, sizeof(*g_sh));
    return tc_deploy_start(&g_d);
}

static int teardown(void **state)
{
    (void)state;
    munmap(g_sh, sizeof(*g_sh));
    return tc_deploy_stop(&g_d);
}

static tc_stress *start_workers(void)
{
    static tc_stress_spec spec;
    spec = (tc_stress_spec){.procs = PROCS,
                            .threads = THREADS,
                            .duration_ms = 200000,
                            .timeout_ms = 240000,
                            .proc_init = proc_init,
                            .proc_fini = tc_proc_close,
                            .step = step,
                            .stop = &g_sh->stop};
    g_sh->stop = 0;
    return tc_stress_start(&spec);
}

/* Stops the workers a while after the last switch and checks what they did; with strict 0 (no
 * replica sync) it only prints what happened: a crash may lose grants then. */
static void finish(tc_stress *st, int64_t switched_at, int strict)
{
    rh_sleep_ms(3000);
    g_sh->stop = 1;
    tc_stress_result res;
    tc_mx *mx = tc_stress_mx(st);
    tc_stress_wait(st, &res);
    long violations = tc_mx_violations(mx);
    printf("iterations %ld, retries %ld, errors %ld, violations %ld, token regressions %ld\n",
           res.iterations, res.retries, res.errors, violations,
           atomic_load(&g_sh->token_regressions));
    if (!strict) {
        printf("replica_sync = 0: %ld violations, %ld token regressions over %d kill -9 rounds "
               "(not asserted: grants a master acknowledged before its replicas had them are lost "
               "in a crash)\n",
               violations, atomic_load(&g_sh->token_regressions), failovers());
        tc_stress_free(st);
        return;
    }
    assert_int_equal(res.failed_procs, 0);
    assert_int_equal(violations, 0);
    assert_int_equal(atomic_load(&g_sh->token_regressions), 0);
    assert_int_equal(res.errors, 0);
    for (int p = 0; p < PROCS; p++) {
        if (atomic_load(&g_sh->last_ok_ms[p]) <= switched_at) {
            fail_msg("process %d took no lock after the last switch", p);
        }
    }
    tc_stress_free(st);
}

/* One switch; returns the new master or NULL. */
typedef rh_server *(*switch_fn)(void);

static rh_server *switch_graceful(void)
{
    return tc_deploy_failover(&g_d);
}

static rh_server *switch_kill(void)
{
    return tc_deploy_kill_master(&g_d);
}

/* failovers() switches under the stress, then the checks of finish(). */
static void run_switches(switch_fn fn, const char *what, int strict)
{
    tc_stress *st = start_workers();
    assert_non_null(st);
    int64_t switched_at = 0;
    for (int k = 0, n = failovers(); k < n; k++) {
        rh_sleep_ms(1500);
        rh_server *after = fn();
        if (after == NULL && !strict) {
            /* The run without replica sync only documents what happens; a deployment that the
             * harness could not bring back (its replicas not online in time, seen under that
             * run's higher load) ends it with what it saw so far. */
            printf("%s %d did not complete: the run stops here\n", what, k);
            break;
        }
        if (after == NULL) {
            g_sh->stop = 1;
            fail_msg("%s %d did not complete", what, k);
        }
        switched_at = rh_now_ms();
        printf("%s %d: master is now port %d\n", what, k, rh_port(after));
    }
    finish(st, switched_at, strict);
}

static void test_graceful_failovers_under_load(void **state)
{
    (void)state;
    run_switches(switch_graceful, "failover", 1);
}

/* kill -9 of the master, failovers() rounds, replica_sync = 1: every grant reached both replicas
 * before it was returned, so the promoted one has it. */
static void test_kill_master_under_load(void **state)
{
    (void)state;
    g_sync = 1;
    run_switches(switch_kill, "kill -9", 1);
}

/* The same with replica_sync = 0: a measurement, printed and not asserted, so it runs only when
 * RLOCK_LONG=1 asks for the long runs (tests/run.sh passes its environment on). */
static void test_kill_master_unsynced(void **state)
{
    (void)state;
    const char *long_runs = getenv("RLOCK_LONG");
    if (long_runs == NULL || strcmp(long_runs, "1") != 0) {
        skip();
    }
    g_sync = 0;
    memset(g_sh, 0, sizeof(*g_sh));
    run_switches(switch_kill, "kill -9 (replica_sync = 0)", 0);
}

/* No argument: the graceful failovers; "kill": the kill -9 rounds (test_sentinel_kill). */
int main(int argc, char **argv)
{
    const struct CMUnitTest graceful[] = {
        cmocka_unit_test(test_graceful_failovers_under_load),
    };
    const struct CMUnitTest kill[] = {
        cmocka_unit_test(test_kill_master_under_load),
        cmocka_unit_test(test_kill_master_unsynced),
    };
    if (argc > 1 && strcmp(argv[1], "kill") == 0) {
        return cmocka_run_group_tests(kill, setup, teardown);
    }
    return cmocka_run_group_tests(graceful, setup, teardown);
}
