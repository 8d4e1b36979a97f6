/*
 * No deadlock, no livelock, no violation: 2 processes x 4 threads (each process its own client)
 * take random overlapping groups of 2-4 of 6 lock names, in random member order, 2,000
 * acquisitions each (half under a sanitizer, or RLOCK_STRESS_SCALE percent), with lock() (no
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

/* Small timeouts, so that a failure shows up fast. */
static void tune(rlock_options *o)
{
    o->connect_timeout_ms = 1000;
    o->command_timeout_ms = 2000;
}

static int step(tc_worker *w, long i)
{
    (void)i;
    tc_proc *p = w->proc_ctx;
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
        m[n] = p->h[order[n]];
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
    tc_handles hs = {.srv = srv, .tune = tune, .n = NAMES};
    for (int n = 0; n < NAMES; n++) {
        hs.type[n] = RLOCK_REENTRANT;
        hs.name[n] = names[n];
    }
    tc_stress_spec spec = {.procs = PROCS,
                           .threads = THREADS,
                           .iters = (long)(2000 * mu_scale()),
                           .timeout_ms = 110000,
                           .step = step};
    tc_stress_report r;
    tc_stress_run_handles(&spec, &hs, &r);
    long total = 0;
    for (int n = 0; n < NAMES; n++) {
        assert_int_equal(mu_exists(srv, names[n]), 0);
        total += r.entries[n];
    }
    printf("multi stress: %d processes x %d threads x %ld group acquisitions (%ld member "
           "sections) in %lld ms, %ld violations, %ld errors\n",
           PROCS, THREADS, spec.iters, total, (long long)r.res.took_ms, r.violations, r.res.errors);
    tc_assert_clean(&r); /* every name's counter == the sections that included it */
    assert_int_equal(r.res.iterations, (long)PROCS * THREADS * spec.iters);
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
    tc_stress_report r;
    tc_stress_run(&spec, &r);
    assert_int_equal(r.res.failed_procs, 0);
    assert_true(r.violations > 0);
    assert_true(r.counter[0] < r.entries[0]); /* overlapping sections lost updates */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_checker_sees_overlap),
        cmocka_unit_test_setup_teardown(test_no_deadlock, tc_server_setup, tc_server_teardown)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
