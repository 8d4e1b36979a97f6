/*
 * Mutual exclusion on a cluster: 200 lock names spread over the three masters, 4 processes x 4
 * threads each locking a random name per iteration (watchdog and leased holds alternate), with
 * the independent shared-memory checker (one checker slot per name): 0 violations, no lost
 * update, nothing left held.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include <cmocka.h>

#include "tc_cluster.h"
#include "tc_redis.h"
#include "tc_stress.h"

#define PROCS   4
#define THREADS 4
#define NAMES   200
#define ITERS   600 /* per thread: 9,600 acquisitions in all */

static int cs_step(tc_worker *w, long i)
{
    int k = rand_r(&w->seed) % NAMES;
    rlock *l = ((tc_cluster_proc *)w->proc_ctx)->h[k];
    int r = rlock_lock(l, i % 2 ? 10000 : -1);
    if (r != RLOCK_OK) {
        return tc_step_fail(w, "lock", r);
    }
    tc_mx_enter(w->mx, k);
    tc_mx_leave(w->mx, k);
    r = rlock_unlock(l);
    return r == RLOCK_OK ? TC_STEP_OK : tc_step_fail(w, "unlock", r);
}

static void test_stress_200_names_4x4(void **state)
{
    (void)state;
    tc_cluster_names names = {.url = rc_seed_url(tc_cl), .prefix = "cs-", .n = NAMES};
    tc_stress_spec spec = {.procs = PROCS,
                           .threads = THREADS,
                           .iters = ITERS,
                           .proc_init = tc_cluster_proc_open,
                           .proc_fini = tc_cluster_proc_close,
                           .step = cs_step,
                           .arg = &names};
    tc_stress_report r;
    tc_stress_run(&spec, &r);
    long sections = 0;
    for (int k = 0; k < NAMES; k++) {
        sections += r.entries[k];
    }
    print_message("%d processes x %d threads over %d names: %ld sections in %lld ms, "
                  "violations %ld\n",
                  PROCS, THREADS, NAMES, sections, (long long)r.res.took_ms, r.violations);
    tc_assert_clean(&r);
    assert_int_equal(sections, (long)PROCS * THREADS * ITERS);
    for (int k = 0; k < NAMES; k++) {
        char name[32];
        snprintf(name, sizeof(name), "cs-%d", k);
        assert_int_equal(tc_cluster_exists(name), 0);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stress_200_names_4x4),
    };
    return cmocka_run_group_tests(tests, tc_cluster_setup, tc_cluster_teardown);
}
