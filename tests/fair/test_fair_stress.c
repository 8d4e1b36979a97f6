/*
 * Mutual exclusion of the fair lock under load: 4 processes x 6 threads, one shared handle per
 * process, all on one lock name; 4,800 acquisitions in total (200 per thread; 2,400 = 100 per
 * thread under ThreadSanitizer, which is several times slower; FAIR_STRESS_TOTAL overrides),
 * run by the shared stress driver (tests/common/tc_stress.h). Every release hands the lock to the
 * first waiter in the queue, so this also drives the queue through thousands of joins, grants
 * and per-waiter notifications.
 *
 * The checker (tests/common/tc_checker.h) is independent of the lock and of Redis: shared memory
 * that every process sees. Inside each critical section a thread marks itself inside (finding
 * anyone else there is a violation) and bumps a counter non-atomically, which loses updates as
 * soon as two sections overlap. Passing means zero violations, a counter exactly equal to the
 * number of acquisitions, one fencing token per acquisition, and an empty queue and zset at the
 * end.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "fair_common.h"
#include "tc_stress.h"

#define PROCS   4
#define THREADS 6
#define NAME    "fair:stress:lock"

typedef struct proc_ctx {
    rlock_client *c;
    rlock *l; /* shared by the process' threads */
} proc_ctx;

static void *proc_init(int proc, void *arg)
{
    (void)proc;
    proc_ctx *p = calloc(1, sizeof(*p));
    p->c = fc_client(arg, 0);
    p->l = p->c != NULL ? rlock_open(p->c, RLOCK_FAIR, NAME) : NULL;
    if (p->l == NULL) {
        rlock_client_free(p->c);
        free(p);
        return NULL;
    }
    return p;
}

static void proc_fini(void *ctx)
{
    proc_ctx *p = ctx;
    rlock_free(p->l);
    rlock_client_free(p->c);
    free(p);
}

static int step(tc_worker *w, long i)
{
    rlock *l = ((proc_ctx *)w->proc_ctx)->l;
    /* Alternate watchdog holds and leased holds: both paths of the grant. */
    int r = rlock_lock(l, i % 2 ? 10000 : -1);
    if (r != RLOCK_OK) {
        return tc_step_fail(w, "lock", r);
    }
    tc_mx_enter(w->mx, 0);
    tc_mx_leave(w->mx, 0);
    r = rlock_unlock(l);
    return r == RLOCK_OK ? TC_STEP_OK : tc_step_fail(w, "unlock", r);
}

static void test_mutual_exclusion(void **state)
{
    rh_server *srv = *state;
    long total = TC_TSAN ? 2400 : 4800;
    const char *env = getenv("FAIR_STRESS_TOTAL");
    if (env != NULL && atol(env) >= PROCS * THREADS) {
        total = atol(env);
    }
    tc_stress_spec spec = {.procs = PROCS,
                           .threads = THREADS,
                           .iters = total / (PROCS * THREADS),
                           .proc_init = proc_init,
                           .proc_fini = proc_fini,
                           .step = step,
                           .arg = srv};
    total = spec.iters * PROCS * THREADS;
    tc_stress *st = tc_stress_start(&spec);
    assert_non_null(st);
    tc_stress_result res;
    tc_stress_wait(st, &res);
    long counter = tc_mx_counter(tc_stress_mx(st), 0);
    long violations = tc_mx_violations(tc_stress_mx(st));
    tc_stress_free(st);
    print_message("%d processes x %d threads: %ld fair acquisitions in %lld ms (%.0f/s); "
                  "counter %ld, violations %ld\n",
                  PROCS, THREADS, total, (long long)res.took_ms,
                  total * 1000.0 / (double)(res.took_ms > 0 ? res.took_ms : 1), counter,
                  violations);
    assert_int_equal(res.failed_procs, 0);
    assert_int_equal(res.errors, 0);
    assert_int_equal(violations, 0);
    assert_int_equal(counter, total);
    const char *exists[] = {"EXISTS", NAME, NULL};
    const char *get_token[] = {"GET", "redisson_lock_token:{" NAME "}", NULL};
    assert_int_equal(rh_cmd_int(srv, exists), 0);
    assert_int_equal(rh_cmd_int(srv, get_token), total);
    assert_int_equal(fc_llen(srv, NAME), 0);
    assert_int_equal(fc_zcard(srv, NAME), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_mutual_exclusion, tc_server_setup, tc_server_teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
