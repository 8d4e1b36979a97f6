/*
 * No deadlock, no livelock, no violation: 2 processes x 4 threads (each process its own client)
 * take random overlapping groups of 2-4 of 6 lock names, in random member order, 2,000
 * acquisitions each (half under ThreadSanitizer, or RLOCK_STRESS_SCALE percent), with lock() (no
 * wait limit) so that a deadlock would hang the run (ctest's TIMEOUT then fails it). The shared
 * stress driver (tests/common/tc_stress.h) runs it; inside each section every member name goes
 * through the independent shared-memory checker (tests/common/tc_checker.h, one slot a name): no
 * one else inside, and a non-atomic counter that must end equal to the number of sections that
 * included the name.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "multi_util.h"
#include "tc_redis.h"
#include "tc_stress.h"

#define NAMES   6
#define PROCS   2
#define THREADS 4

static const char *names[NAMES] = {"s0", "s1", "s2", "s3", "s4", "s5"};

typedef struct proc_ctx {
    rlock_client *c;
    rlock *locks[NAMES];
} proc_ctx;

static void proc_fini(void *ctx)
{
    proc_ctx *p = ctx;
    for (int n = 0; n < NAMES; n++) {
        rlock_free(p->locks[n]);
    }
    rlock_client_free(p->c);
    free(p);
}

static void *proc_init(int proc, void *arg)
{
    (void)proc;
    proc_ctx *p = calloc(1, sizeof(*p));
    p->c = mu_client(rh_url(arg), 0, 0);
    int ok = p->c != NULL;
    for (int n = 0; ok && n < NAMES; n++) {
        p->locks[n] = rlock_open(p->c, RLOCK_REENTRANT, names[n]);
        ok = p->locks[n] != NULL;
    }
    if (!ok) {
        proc_fini(p);
        return NULL;
    }
    return p;
}

static int step(tc_worker *w, long i)
{
    (void)i;
    proc_ctx *p = w->proc_ctx;
    int order[NAMES] = {0, 1, 2, 3, 4, 5};
    for (int n = NAMES - 1; n > 0; n--) { /* Fisher-Yates: random subset in random order */
        int j = rand_r(&w->seed) % (n + 1);
        int t = order[n];
        order[n] = order[j];
        order[j] = t;
    }
    size_t k = 2 + (size_t)(rand_r(&w->seed) % 3);
    rlock *m[4];
    for (size_t n = 0; n < k; n++) {
        m[n] = p->locks[order[n]];
    }
    rlock *g = rlock_multi_new(m, k);
    if (g == NULL) {
        return tc_step_fail(w, "rlock_multi_new", RLOCK_ENOMEM);
    }
    int rc = rlock_lock(g, 30000);
    if (rc != RLOCK_OK) {
        rlock_free(g);
        return tc_step_fail(w, "lock", rc);
    }
    for (size_t n = 0; n < k; n++) {
        tc_mx_enter(w->mx, order[n]);
    }
    for (size_t n = 0; n < k; n++) {
        tc_mx_leave(w->mx, order[n]);
    }
    rc = rlock_unlock(g);
    rlock_free(g);
    return rc == RLOCK_OK ? TC_STEP_OK : tc_step_fail(w, "unlock", rc);
}

static void test_no_deadlock(void **state)
{
    rh_server *srv = *state;
    tc_stress_spec spec = {.procs = PROCS,
                           .threads = THREADS,
                           .iters = (long)(2000 * mu_scale()),
                           .timeout_ms = 110000,
                           .proc_init = proc_init,
                           .proc_fini = proc_fini,
                           .step = step,
                           .arg = srv};
    tc_stress *st = tc_stress_start(&spec);
    assert_non_null(st);
    tc_stress_result res;
    tc_stress_wait(st, &res);
    tc_mx *mx = tc_stress_mx(st);
    long total = 0, violations = tc_mx_violations(mx);
    for (int n = 0; n < NAMES; n++) {
        assert_int_equal(tc_mx_counter(mx, n), tc_mx_entries(mx, n));
        assert_int_equal(mu_exists(srv, names[n]), 0);
        total += tc_mx_entries(mx, n);
    }
    tc_stress_free(st);
    printf("multi stress: %d processes x %d threads x %ld group acquisitions (%ld member "
           "sections) in %lld ms, %ld violations, %ld errors\n",
           PROCS, THREADS, spec.iters, total, (long long)res.took_ms, violations, res.errors);
    assert_int_equal(res.failed_procs, 0);
    assert_int_equal(res.iterations, (long)PROCS * THREADS * spec.iters);
    assert_int_equal(violations, 0);
    assert_int_equal(res.errors, 0);
}

static int bare_step(tc_worker *w, long i)
{
    (void)i;
    tc_mx_enter(w->mx, 0);
    mu_sleep_ms(1);
    tc_mx_leave(w->mx, 0);
    return TC_STEP_OK;
}

/* Control: the checker does see overlapping sections, across processes, when no lock is taken,
 * so the zero of the real run means something. */
static void test_checker_sees_overlap(void **state)
{
    (void)state;
    tc_stress_spec spec = {.procs = 2, .threads = 2, .iters = 50, .step = bare_step};
    tc_stress *st = tc_stress_start(&spec);
    assert_non_null(st);
    tc_stress_result res;
    tc_stress_wait(st, &res);
    long violations = tc_mx_violations(tc_stress_mx(st));
    long counter = tc_mx_counter(tc_stress_mx(st), 0);
    tc_stress_free(st);
    assert_int_equal(res.failed_procs, 0);
    assert_true(violations > 0);
    assert_true(counter < 200); /* overlapping sections lost updates */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_checker_sees_overlap),
        cmocka_unit_test_setup_teardown(test_no_deadlock, tc_server_setup, tc_server_teardown)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
