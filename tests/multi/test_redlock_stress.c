/*
 * RedLock mutual exclusion across processes: 3 processes x 4 threads share one RedLock over 3
 * servers (each process has its own 3 clients; the 4 threads of a process share one group
 * handle) for 3,000 acquisitions in all (half under a sanitizer), run by the shared stress
 * driver (tests/common/tc_stress.h). Inside every section the independent shared-memory checker
 * (tests/common/tc_checker.h) finds nobody else inside and bumps a non-atomic counter, so an
 * overlap shows as a violation or a lost update; it involves no Redis at all, so the fault below
 * cannot touch it.
 *
 * Mid-run one lock server is killed and, following the restart-delay rule of redis.io, restarted
 * empty only after the longest lease has passed; the run must go on (2 of 3 is a majority) with
 * zero violations and an exact counter.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "multi_util.h"
#include "tc_stress.h"

#define PROCS    3
#define THREADS  4
#define LEASE_MS 1000
#define KEY      "rlstress"

typedef struct proc_ctx {
    rlock_client *c[3];
    rlock *m[3];
    rlock *g; /* shared by the process' threads */
} proc_ctx;

static void proc_fini(void *ctx)
{
    proc_ctx *p = ctx;
    rlock_free(p->g);
    for (int i = 0; i < 3; i++) {
        rlock_free(p->m[i]);
        rlock_client_free(p->c[i]);
    }
    free(p);
}

static void *proc_init(int proc, void *arg)
{
    (void)proc;
    rh_server **s = arg;
    proc_ctx *p = calloc(1, sizeof(*p));
    int ok = 1;
    for (int i = 0; ok && i < 3; i++) {
        p->c[i] = mu_client(rh_url(s[i]), 0, 50);
        p->m[i] = p->c[i] != NULL ? rlock_open(p->c[i], RLOCK_REENTRANT, KEY) : NULL;
        ok = p->m[i] != NULL;
    }
    p->g = ok ? rlock_redlock_new(p->m, 3) : NULL;
    if (p->g == NULL) {
        proc_fini(p);
        return NULL;
    }
    return p;
}

static int step(tc_worker *w, long i)
{
    (void)i;
    rlock *g = ((proc_ctx *)w->proc_ctx)->g;
    int rc = rlock_try_lock(g, 20000, LEASE_MS);
    if (rc != RLOCK_OK) {
        fprintf(stderr, "try_lock: %d %s\n", rc, rlock_last_error());
        return TC_STEP_RETRY;
    }
    tc_mx_enter(w->mx, 0);
    mu_sleep_ms(1); /* some work, so that the run spans the server's downtime */
    tc_mx_leave(w->mx, 0);
    rc = rlock_unlock(g);
    /* RLOCK_ELOST: the section outlived its validity. RLOCK_ECONN: the killed server was one of
     * a bare majority, so fewer than a majority could confirm the release (the hold expires
     * with its lease). Neither is a test error. */
    if (rc != RLOCK_OK && rc != RLOCK_ELOST && rc != RLOCK_ECONN) {
        return tc_step_fail(w, "unlock", rc);
    }
    return TC_STEP_OK;
}

static void test_mutual_exclusion_with_restart(void **state)
{
    (void)state;
    rh_skip_if_unavailable();
    rh_server *s[3];
    for (int i = 0; i < 3; i++) {
        s[i] = tc_start();
    }
    tc_stress_spec spec = {.procs = PROCS,
                           .threads = THREADS,
                           .iters = (long)(3000 * mu_scale()) / (PROCS * THREADS),
                           .timeout_ms = 100000,
                           .proc_init = proc_init,
                           .proc_fini = proc_fini,
                           .step = step,
                           .arg = s};
    long total = spec.iters * PROCS * THREADS;
    int64_t t0 = rh_now_ms();
    tc_stress *st = tc_stress_start(&spec);
    assert_non_null(st);
    tc_mx *mx = tc_stress_mx(st);
    /* Fault after a quarter of the run: kill server 1, keep it out for the longest lease (the
     * restart-delay rule), bring it back empty. */
    while (tc_mx_entries(mx, 0) < total / 4 && rh_now_ms() - t0 < 60000) {
        mu_sleep_ms(5);
    }
    long at_kill = tc_mx_entries(mx, 0);
    assert_int_equal(rh_stop(s[1]), 0);
    mu_sleep_ms(LEASE_MS + 50);
    long while_down = tc_mx_entries(mx, 0) - at_kill;
    assert_int_equal(rh_restart(s[1]), 0);
    long at_restart = tc_mx_entries(mx, 0);
    tc_stress_result res;
    tc_stress_wait(st, &res);
    tc_stress_report r;
    tc_stress_snapshot(st, &res, &r);
    tc_stress_free(st);
    printf("redlock stress: %d processes x %d threads, %ld sections in %lld ms (%ld while a "
           "server was down), counter %ld, violations %ld, failed tries %ld\n",
           PROCS, THREADS, total, (long long)res.took_ms, while_down, r.counter[0], r.violations,
           res.retries);
    tc_assert_clean(&r);
    assert_int_equal(r.counter[0], total);
    assert_true(while_down > 0);     /* the majority of 2 kept working */
    assert_true(at_restart < total); /* and the restarted server served the rest */
    for (int i = 0; i < 3; i++) {
        assert_int_equal(mu_exists(s[i], KEY), 0);
        rh_free(s[i]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_mutual_exclusion_with_restart)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
